/* rmsnorm_bwd: the oracle and the variants against gradients derived by hand and values PyTorch
 * 2.15 computed (autograd through F.rms_norm on the CPU), the faults, a token reduction in bf16
 * that stops absorbing, the contract's tightness and its soundness over generated cases. */
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
#include "kernels/rmsnorm_bwd/rmsnorm_bwd.h"
#include "tests/case_values.h"
#include "tests/contract_check.h"

/* rows x n values x and dy, gamma g (the same for every column) */
static pf_verdict run_bwd(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, int fp32_weights, size_t rows,
                          size_t n, const double *x, const double *dy, double g, double eps, const char *fault, int zc) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "rmsnorm_bwd", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = rows;
  c.shape[1] = n;
  set_values(&c.inputs[0], x, rows * n);
  set_values(&c.inputs[1], dy, rows * n);
  set_constant(&c.inputs[2], g, n);
  pf_case_set_param(&c, "eps", eps);
  pf_case_set_param(&c, "weights", fp32_weights);
  pf_case_set_param(&c, "zero_centered_gamma", zc);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

/* Two rows, eps 0, gamma 1:
 *   x = (1, 1, 1, 1): mean square 1, rstd 1, xhat = x; dy = (1, 0, 0, 0): mean(a xhat) = 1/4,
 *     dx = a - xhat/4 = (3/4, -1/4, -1/4, -1/4)
 *   x = (2, 0, 0, 0): mean square 1, rstd 1, xhat = x; dy = (1, 1, 0, 0): mean(a xhat) = 1/2,
 *     dx = a - xhat/2 = (0, 1, 0, 0)
 *   dgamma = sum dy xhat = (1 + 2, 0, 0, 0) */
static const double X2[8] = {1, 1, 1, 1, 2, 0, 0, 0}, DY2[8] = {1, 0, 0, 0, 1, 1, 0, 0};
static const double DX2[8] = {0.75, -0.25, -0.25, -0.25, 0, 1, 0, 0}, DG2[4] = {3, 0, 0, 0};

static void test_rmsnorm_bwd_by_hand(void **state) {
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++)
    for (int zc = 0; zc <= v; zc++) { /* a zero-centred gamma of 0 scales by 1 + 0 (fused only) */
      pf_run r;
      assert_int_equal(run_bwd(&r, variants[v], PF_FP32, PF_FP32, 0, 2, 4, X2, DY2, zc ? 0 : 1, 0, NULL, zc), PF_V_OK);
      for (int k = 0; k < 8; k++) assert_true(r.oracle.rounded[k] == DX2[k] && r.out[k] == DX2[k]); /* exact here */
      for (int j = 0; j < 4; j++) assert_true(r.oracle.rounded[8 + j] == DG2[j] && r.out[8 + j] == DG2[j]);
      pf_run_free(&r);
    }
}

static void test_rmsnorm_bwd_matches_pytorch(void **state) {
  /* torch 2.15, F.rms_norm's autograd on the CPU, eps 1e-5, fp32 gamma 1, three equal rows:
   * x_i = fl(i + 0.1), dy_i = (i mod 3) - 1, i < 20 (two 8-lane vectors and a tail of 4):
   *   fp32: dx_0 = -0x1.6dab46p-4, dx_1 = 0x1.f4fbfcp-13, dx_19 = 0x1.0fd746p-8,
   *         dgamma_0 = -0x1.b6e8dcp-6, dgamma_19 = 0
   *   bf16 (fp32 weights): dx_0 = -0x1.6ep-4, dx_1 = 0x1.f4p-13, dx_19 = 0x1.0ep-8,
   *         dgamma_0 = -0x1.b6a788p-6 */
  double x[60], dy[60];
  for (int i = 0; i < 60; i++) x[i] = pf_round(PF_FP32, i % 20 + 0.1), dy[i] = (i % 20) % 3 - 1;
  const double eps = pf_round(PF_FP32, 1e-5);
  pf_run r;
  assert_int_equal(run_bwd(&r, "torch", PF_FP32, PF_FP32, 0, 3, 20, x, dy, 1, eps, NULL, 0), PF_V_OK);
  assert_true(r.out[0] == -0x1.6dab46p-4 && r.out[1] == 0x1.f4fbfcp-13 && r.out[19] == 0x1.0fd746p-8);
  assert_true(r.out[60] == -0x1.b6e8dcp-6 && r.out[79] == 0);
  pf_run_free(&r);
  for (int i = 0; i < 60; i++) x[i] = pf_round(PF_BF16, x[i]);
  assert_int_equal(run_bwd(&r, "torch", PF_BF16, PF_FP32, 1, 3, 20, x, dy, 1, eps, NULL, 0), PF_V_OK);
  assert_true(r.out[0] == -0x1.6ep-4 && r.out[1] == 0x1.f4p-13 && r.out[19] == 0x1.0ep-8);
  assert_true(r.out[60] == -0x1.b6a788p-6);
  pf_run_free(&r);
}

static void test_rmsnorm_bwd_faults(void **state) {
  /* row 0 of the hand case: var term dropped, dx = a = (1, 0, 0, 0) where it is (3/4, ...);
   * 1 + gamma ignored (gamma stored as 0): dx = 0 */
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++) {
    pf_run r;
    assert_true(pf_verdict_is_finding(
        run_bwd(&r, variants[v], PF_FP32, PF_FP32, 0, 2, 4, X2, DY2, 1, 0, "rmsb-var-term-dropped", 0)));
    assert_true(r.out[0] == 1 && r.out[1] == 0);
    pf_run_free(&r);
  }
  pf_run r;
  assert_true(
      pf_verdict_is_finding(run_bwd(&r, "fused", PF_FP32, PF_FP32, 0, 2, 4, X2, DY2, 0, 0, "rmsb-1p-ignored", 1)));
  assert_true(r.out[0] == 0);
  pf_run_free(&r);
}

static void test_rmsnorm_bwd_partials_saturate(void **state) {
  /* dgamma over 4096 tokens of x = 1, dy = 1 (xhat = 1 with eps 0): partial sums in bf16 stop at
   * 256 (256 + 1 rounds back to 256), where dgamma is 4096. Accumulating in bf16 (-a bf16) that is
   * the variant's own contract: ok, with the hazard saturated; planted under fp32 accumulation
   * (the fault partials-in-storage) it is a finding. fp32 partials reach 4096. */
  const size_t rows = 4096, n = 4;
  double *x = malloc(rows * n * sizeof(double)), *dy = malloc(rows * n * sizeof(double));
  for (size_t k = 0; k < rows * n; k++) x[k] = 1, dy[k] = 1;
  pf_run r;
  assert_int_equal(run_bwd(&r, "fused", PF_BF16, PF_BF16, 1, rows, n, x, dy, 1, 0, NULL, 0), PF_V_OK);
  assert_true(r.out[rows * n] == 256 && r.oracle.rounded[rows * n] == 4096);
  assert_true(r.hazards & (1u << PF_H_SATURATED));
  pf_run_free(&r);
  assert_true(pf_verdict_is_finding(
      run_bwd(&r, "fused", PF_BF16, PF_FP32, 1, rows, n, x, dy, 1, 0, "rmsb-partials-in-storage", 0)));
  pf_run_free(&r);
  assert_int_equal(run_bwd(&r, "fused", PF_BF16, PF_FP32, 1, rows, n, x, dy, 1, 0, NULL, 0), PF_V_OK);
  assert_true(r.out[rows * n] == 4096);
  pf_run_free(&r);
  free(x);
  free(dy);
}

static void test_rmsnorm_bwd_bound_is_tight(void **state) {
  /* the contract is no blanket: on normal rows of 256 in fp32 nine in ten dx bounds are under 2n =
   * 512 ulps of the row's largest |dx| */
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "rmsnorm_bwd", variants[v], 5), PF_OK);
    c.dtype = PF_FP32;
    c.shape[0] = 4;
    c.shape[1] = 256;
    pf_oracle_opts o;
    pf_oracle_opts_default(&o);
    pf_run r;
    assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
    assert_int_equal(r.cmp.verdict, PF_V_OK);
    pf_bound *b = malloc(r.nout * sizeof *b);
    pf_case_kernel(&c)->bound(&c, r.in, b);
    size_t tight = 0;
    for (size_t i = 0; i < 4; i++) {
      double big = 0;
      for (size_t j = 0; j < 256; j++) big = fmax(big, fabs(r.out[i * 256 + j]));
      for (size_t j = 0; j < 256; j++) tight += b[i * 256 + j].abs < 512 * ldexp(1.0, ilogb(big) - 23);
    }
    printf("%s: %zu of 1024 dx bounded within 512 ulps of the row's largest\n", variants[v], tight);
    assert_true(tight > 1024 * 9 / 10);
    pf_run_free(&r);
    free(b);
    pf_case_free(&c);
  }
}

static void test_rmsnorm_bwd_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"torch", "fused"};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < 4; s++) {
          if (a && v == 0) continue; /* torch: fp32 arithmetic only */
          pf_case c;
          assert_int_equal(pf_case_init(&c, "rmsnorm_bwd", variants[v], 900 + (uint64_t)cases), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = s == 3 ? 300 : 9;
          c.shape[1] = s == 3 ? 41 : 37;
          c.inputs[0].dist = (pf_dist)s;
          c.inputs[0].scale = ldexp(1, 2 * s - 4);
          pf_case_set_param(&c, "weights", s % 2);
          if (v) pf_case_set_param(&c, "blocks", 1 + s * 3), pf_case_set_param(&c, "zero_centered_gamma", s == 1);
          in_domain += pf_check_contract(&c, "rmsnorm_bwd");
          cases++;
        }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm_bwd_by_hand),
      cmocka_unit_test(test_rmsnorm_bwd_matches_pytorch),
      cmocka_unit_test(test_rmsnorm_bwd_faults),
      cmocka_unit_test(test_rmsnorm_bwd_partials_saturate),
      cmocka_unit_test(test_rmsnorm_bwd_bound_is_tight),
      cmocka_unit_test(test_rmsnorm_bwd_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
