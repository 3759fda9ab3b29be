/* swiglu: the oracle against values derived by hand (sigma(1) = 1 / (1 + 1/e) = 0.7310585786300049,
 * Python's math.exp for the rest), PyTorch's own silu bits, the tail where e^-a overflows fp32, the
 * faults and the contract over generated cases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/hazard.h"
#include "core/runner.h"
#include "tests/case_values.h"
#include "tests/contract_check.h"

static pf_verdict run_swiglu(pf_run *r, const char *variant, pf_dtype t, const double *a, const double *b, size_t n,
                             const char *fault) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "swiglu", variant, 1), PF_OK);
  c.dtype = t;
  c.shape[0] = 1, c.shape[1] = n;
  set_values(&c.inputs[0], a, n);
  set_values(&c.inputs[1], b, n);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_swiglu_by_hand(void **state) {
  /* silu(1) 1 = sigma(1) = 0.7310585786300049; silu(2) 3 = 6 / (1 + e^-2) = 5.284782467867294;
   * silu(-1) 1 = -0.2689414213699951; silu(-10) 0.5 = -5 / (1 + e^10) = -0.00022698934351217195;
   * 0 where a or b is: in fp32 0x1.764d5p-1, 0x1.5239ep+2, -0x1.136562p-2, -0x1.dc07fap-13, 0 */
  const double a[6] = {1, 2, -1, -10, 0, 5}, b[6] = {1, 3, 1, 0.5, 7, 0};
  const double want[6] = {0x1.764d5p-1, 0x1.5239ep+2, -0x1.136562p-2, -0x1.dc07fap-13, 0, 0};
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++) {
    pf_run r;
    assert_int_equal(run_swiglu(&r, variants[v], PF_FP32, a, b, 6, NULL), PF_V_OK);
    for (int j = 0; j < 6; j++) assert_true(r.oracle.rounded[j] == want[j]);
    pf_run_free(&r);
  }
}

static void test_swiglu_matches_pytorch(void **state) {
  /* PyTorch 2.15, F.silu on the CPU, one thread, fp32 x = (-3.5, -1.25, 0.3, 2.7) nine times (32
   * in the vector body, 4 on the tail): -0x1.a4385cp-4, -0x1.1d0e62p-2, 0x1.60fp-3, 0x1.43d61ep+1
   * in both; times b = 1 */
  const double v4[4] = {-3.5, -1.25, 0.3, 2.7}, silu[4] = {-0x1.a4385cp-4, -0x1.1d0e62p-2, 0x1.60fp-3, 0x1.43d61ep+1};
  double a[36], b[36];
  for (int i = 0; i < 36; i++) a[i] = (float)v4[i % 4], b[i] = 1;
  pf_run r;
  assert_int_equal(run_swiglu(&r, "torch", PF_FP32, a, b, 36, NULL), PF_V_OK);
  for (int i = 0; i < 36; i++) assert_true(r.out[i] == silu[i % 4]);
  pf_run_free(&r);
}

static void test_swiglu_negative_tail(void **state) {
  /* a = -89: e^89 = 4.5e38 overflows fp32, silu is a / inf = -0 where the exact -89 e^-89 =
   * -1.99e-37 is a normal fp32 number: inside the contract (the bound is silu itself), imprecise.
   * At -88 e^88 = 1.65e38 fits, and silu keeps its digits */
  const double a1[1] = {-89}, a2[1] = {-88}, b[1] = {1};
  pf_run r;
  assert_int_equal(run_swiglu(&r, "torch", PF_FP32, a1, b, 1, NULL), PF_V_OK);
  assert_true(r.out[0] == 0 && r.oracle.rounded[0] < 0);
  assert_true(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
  assert_int_equal(run_swiglu(&r, "torch", PF_FP32, a2, b, 1, NULL), PF_V_OK);
  assert_false(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
}

static void test_swiglu_faults(void **state) {
  /* halves swapped: silu(3) 1 = 2.857722 where silu(1) 3 = 2.193176 is due */
  const double a[1] = {1}, b[1] = {3};
  pf_run r;
  assert_int_equal(run_swiglu(&r, "torch", PF_FP32, a, b, 1, "swiglu-halves-swapped"), PF_V_INACCURATE);
  pf_run_free(&r);
  /* silu as a * sigmoid(a) rounded to bf16 before a fused kernel's fp32 product: one more
   * rounding than the fused contract allows, found on generated bf16 rows */
  pf_case c;
  assert_int_equal(pf_case_init(&c, "swiglu", "fused", 5), PF_OK);
  c.dtype = PF_BF16;
  c.shape[0] = 4, c.shape[1] = 64;
  snprintf(c.fault, sizeof c.fault, "swiglu-silu-in-storage");
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
  assert_int_equal(r.cmp.verdict, PF_V_INACCURATE);
  pf_run_free(&r);
  pf_case_free(&c);
}

static void test_swiglu_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"torch", "fused"};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int s = 0; s < 8; s++) {
        pf_case c;
        assert_int_equal(pf_case_init(&c, "swiglu", variants[v], 500 + (uint64_t)cases), PF_OK);
        c.dtype = (pf_dtype)t;
        c.shape[0] = 2, c.shape[1] = 100;
        c.inputs[0].dist = c.inputs[1].dist = (pf_dist)(s % 4);
        c.inputs[0].scale = c.inputs[1].scale = ldexp(1, 2 * s - 6);
        in_domain += pf_check_contract(&c, "swiglu");
        cases++;
      }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_swiglu_by_hand),
      cmocka_unit_test(test_swiglu_matches_pytorch),
      cmocka_unit_test(test_swiglu_negative_tail),
      cmocka_unit_test(test_swiglu_faults),
      cmocka_unit_test(test_swiglu_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
