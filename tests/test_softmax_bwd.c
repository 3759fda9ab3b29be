/* softmax_bwd: the oracle and both variants against values derived by hand (rows whose
 * gradients are known in closed form), the faults, and the contract over generated cases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/runner.h"
#include "tests/contract_check.h"
#include "tests/case_values.h"

/* one case of rows x cols with the given x and dy */
static pf_verdict run_bwd(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, size_t rows, size_t cols,
                          const double *x, const double *dy, const char *fault) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "softmax_bwd", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = rows;
  c.shape[1] = cols;
  set_values(&c.inputs[0], x, rows * cols);
  set_values(&c.inputs[1], dy, rows * cols);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static const char *const variants[] = {"stored", "recompute"};
static const pf_dtype dtypes[] = {PF_FP32, PF_FP16, PF_BF16};

/* x = (0, 0): s = (1/2, 1/2); dy = (1, 0): S = 1/2, dx = (1/2 (1 - 1/2), 1/2 (0 - 1/2)) = (1/4, -1/4),
 * exact in every dtype, and every variant computes exactly that (no rounding on the way). */
static void test_two_equal_logits(void **state) {
  const double x[2] = {0, 0}, dy[2] = {1, 0};
  for (int v = 0; v < 2; v++)
    for (int d = 0; d < 3; d++)
      for (int st = 0; st < 2; st++) {
        pf_run r;
        const pf_dtype acc = st ? dtypes[d] : PF_FP32;
        assert_int_equal(run_bwd(&r, variants[v], dtypes[d], acc, 1, 2, x, dy, NULL), PF_V_OK);
        assert_true(r.oracle.rounded[0] == 0.25 && r.oracle.rounded[1] == -0.25);
        assert_true(r.out[0] == 0.25 && r.out[1] == -0.25);
        pf_run_free(&r);
      }
}

/* x = (0, 1): s = (1/(1+e), e/(1+e)); dy = (1, 0): dx = (s1 s2, -s1 s2), s1 s2 = e/(1+e)^2 =
 * 0.196611933241481852... (closed form, evaluated in binary64; its fp32 rounding is far from
 * a tie). The oracle's correctly rounded values are fl32 of it; the variants are within their
 * contracts. */
static void test_closed_form_row(void **state) {
  const double x[2] = {0, 1}, dy[2] = {1, 0};
  const double q = exp(1.0) / ((1 + exp(1.0)) * (1 + exp(1.0)));
  assert_true(fabs(q - 0.19661193324148185) < 1e-16);
  for (int v = 0; v < 2; v++) {
    pf_run r;
    assert_int_equal(run_bwd(&r, variants[v], PF_FP32, PF_FP32, 1, 2, x, dy, NULL), PF_V_OK);
    assert_true(r.oracle.rounded[0] == (double)(float)q && r.oracle.rounded[1] == -(double)(float)q);
    assert_true(fabs(r.oracle.exact[0] - q) <= 0x1p-52 * q);
    pf_run_free(&r);
  }
}

/* A uniform row of 4 and a one-hot dy at k = 2: s = 1/4, S = 1/4, dx_k = 1/4 (1 - 1/4) = 3/16,
 * the others 1/4 (0 - 1/4) = -1/16: exact in every dtype. */
static void test_uniform_row_one_hot(void **state) {
  const double x[4] = {0.5, 0.5, 0.5, 0.5}, dy[4] = {0, 0, 1, 0};
  for (int d = 0; d < 3; d++) {
    pf_run r;
    assert_int_equal(run_bwd(&r, "stored", dtypes[d], PF_FP32, 1, 4, x, dy, NULL), PF_V_OK);
    for (int j = 0; j < 4; j++) assert_true(r.oracle.rounded[j] == (j == 2 ? 0.1875 : -0.0625));
    pf_run_free(&r);
  }
}

/* A constant dy: dx = s (c - c sum s) = 0 exactly, which the oracle proves (status NUMBER,
 * exact 0, not a tie) whatever the logits. */
static void test_constant_dy_is_exactly_zero(void **state) {
  const double x[5] = {0x1.8p+1, -0x1p-3, 0x1.2p+2, 7, -2}, dy[5] = {3, 3, 3, 3, 3};
  pf_run r;
  assert_int_equal(run_bwd(&r, "recompute", PF_BF16, PF_FP32, 1, 5, x, dy, NULL), PF_V_OK);
  for (int j = 0; j < 5; j++) {
    assert_int_equal(r.oracle.status[j], PF_ORACLE_NUMBER);
    assert_true(r.oracle.exact[j] == 0 && r.oracle.rounded[j] == 0);
  }
  pf_run_free(&r);
}

/* The faults: forgetting the sum gives (1/2, 0) instead of (1/4, -1/4); a sum accumulated in fp16
 * stops absorbing the small terms of a long row. */
static void test_faults(void **state) {
  const double x[2] = {0, 0}, dy[2] = {1, 0};
  pf_run r;
  /* dx_1 = 0 where -1/4 is due: a normal number lost to 0, the verdict underflow */
  assert_int_equal(run_bwd(&r, "stored", PF_FP16, PF_FP32, 1, 2, x, dy, "softmax-bwd-no-sum"), PF_V_UNDERFLOW);
  assert_true(r.out[0] == 0.5 && r.out[1] == 0);
  assert_int_equal(r.cmp.elem[0], PF_V_INACCURATE);
  pf_run_free(&r);
  /* x all 0 over 4096 columns (s = 2^-12 each) and dy = 1: S = 1 and dx = 0 exactly. In fp16
   * the running sum reaches 1/2, where adding 2^-12 is a tie (half of fp16's spacing 2^-11 there)
   * that rounds back to 1/2 (even): S = 1/2, and every dx_j = 2^-12 (1 - 1/2) = 2^-13. */
  enum { N = 4096 };
  double *xs = calloc(N, sizeof *xs), *g = malloc(N * sizeof *g);
  for (int j = 0; j < N; j++) g[j] = 1;
  for (int v = 0; v < 2; v++) {
    assert_int_equal(run_bwd(&r, variants[v], PF_FP16, PF_FP32, 1, N, xs, g, NULL), PF_V_OK);
    assert_true(r.out[0] == 0 && r.oracle.rounded[0] == 0);
    pf_run_free(&r);
    assert_int_equal(run_bwd(&r, variants[v], PF_FP16, PF_FP32, 1, N, xs, g, "softmax-bwd-sum-in-storage"),
                     PF_V_INACCURATE);
    assert_true(r.out[0] == 0x1p-13);
    pf_run_free(&r);
  }
  free(xs);
  free(g);
}

/* Every variant keeps its contract on generated cases, every dtype and accumulation, with
 * special values; most of them inside the domain. */
static void test_contract_generated(void **state) {
  size_t in = 0, total = 0;
  for (int v = 0; v < 2; v++)
    for (int d = 0; d < 3; d++)
      for (int st = 0; st < 2; st++)
        for (uint64_t seed = 1; seed <= 12; seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "softmax_bwd", variants[v], seed), PF_OK);
          c.dtype = dtypes[d];
          c.accum = st ? dtypes[d] : PF_FP32;
          c.shape[0] = 3;
          c.shape[1] = 1 + (size_t)(seed * 37 % 300);
          c.inputs[0].scale = ldexp(1.0, (int)(seed % 7));
          c.inputs[1].scale = ldexp(1.0, (int)(seed % 11) - 5);
          c.inputs[1].special_rate = seed % 4 == 0 ? 0.02 : 0;
          in += (size_t)pf_check_contract(&c, "generated");
          total++;
        }
  assert_true(in > total / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_equal_logits),     cmocka_unit_test(test_closed_form_row),
      cmocka_unit_test(test_uniform_row_one_hot),  cmocka_unit_test(test_constant_dy_is_exactly_zero),
      cmocka_unit_test(test_faults),               cmocka_unit_test(test_contract_generated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
