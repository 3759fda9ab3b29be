/* rmsnorm: the oracle and the variants against values derived by hand and values PyTorch 2.15
 * computed (F.rms_norm on the CPU), a bf16 sum of squares that stops absorbing, the faults and the
 * contract over generated cases. */
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
#include "tests/case_values.h"
#include "tests/contract_check.h"

/* one row of n values, gamma = gv everywhere */
static pf_verdict run_row(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, size_t n, const double *x, double gv,
                          double eps, const char *fault, int zero_centered, int fp32_weights) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "rmsnorm", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = 1;
  c.shape[1] = n;
  set_values(&c.inputs[0], x, n);
  set_constant(&c.inputs[1], gv, n);
  pf_case_set_param(&c, "eps", eps);
  pf_case_set_param(&c, "zero_centered_gamma", zero_centered);
  pf_case_set_param(&c, "weights", fp32_weights);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_rmsnorm_three_four(void **state) {
  /* x = (3, 4): mean square 25/2, rstd = 1/sqrt(12.5) = sqrt(2)/5 = 0.28284271 (fp32
   * 0x1.21a186p-2), y = 3 rstd = 0.84852814 (0x1.b27248p-1), 4 rstd = 1.13137085 (0x1.21a186p+0) */
  const double x[2] = {3, 4};
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++) {
    pf_run r;
    assert_int_equal(run_row(&r, variants[v], PF_FP32, PF_FP32, 2, x, 1, 0, NULL, 0, 0), PF_V_OK);
    assert_true(r.oracle.rounded[0] == 0x1.21a186p-2);
    assert_true(r.oracle.rounded[1] == 0x1.b27248p-1 && r.oracle.rounded[2] == 0x1.21a186p+0);
    assert_true(r.out[0] == 0x1.21a186p-2 && r.out[1] == 0x1.b27248p-1);
    pf_run_free(&r);
  }
  /* a zero-centred gamma of 0 scales by 1 + 0: the same y */
  pf_run r;
  assert_int_equal(run_row(&r, "fused", PF_FP32, PF_FP32, 2, x, 0, 0, NULL, 1, 0), PF_V_OK);
  assert_true(r.oracle.rounded[2] == 0x1.21a186p+0);
  pf_run_free(&r);
}

static void test_rmsnorm_matches_pytorch(void **state) {
  /* torch 2.15, F.rms_norm on the CPU, eps 1e-6 in fp32, gamma 1 (rstd by the composite's ops):
   * fp32 x_i = fl32(i + 0.1), i < 20 (two 8-lane vectors and a tail of 4): rstd 0x1.6dc20ep-4,
   * y_0 = 0x1.249b3ep-7, y_19 = 0x1.b49fa8p+0;
   * bf16 x_i = fl_bf16(3 + 0.01 i), i < 40: rstd 0x1.404ceep-2, y_0 = 0x1.ep-1, y_39 = 0x1.1p+0 */
  double x[40];
  for (int i = 0; i < 20; i++) x[i] = pf_round(PF_FP32, i + 0.1);
  const double eps = pf_round(PF_FP32, 1e-6);
  pf_run r;
  assert_int_equal(run_row(&r, "torch", PF_FP32, PF_FP32, 20, x, 1, eps, NULL, 0, 0), PF_V_OK);
  assert_true(r.out[0] == 0x1.6dc20ep-4);
  assert_true(r.out[1] == 0x1.249b3ep-7 && r.out[1 + 19] == 0x1.b49fa8p+0);
  pf_run_free(&r);
  for (int i = 0; i < 40; i++) x[i] = pf_round(PF_BF16, 3 + 0.01 * i);
  assert_int_equal(run_row(&r, "torch", PF_BF16, PF_FP32, 40, x, 1, eps, NULL, 0, 0), PF_V_OK);
  assert_true(r.out[0] == 0x1.404ceep-2);
  assert_true(r.out[1] == 0x1.ep-1 && r.out[1 + 39] == 0x1.1p+0);
  pf_run_free(&r);
}

static void test_rmsnorm_bf16_sum_stops_absorbing(void **state) {
  /* 1024 ones, squares summed in bf16: 256 + 1 = 257 is a tie between 256 and 258 and goes to
   * the even 256, so the sum stays at 256 where it is 1024: the mean square 1/4, rstd 2 where it
   * is 1 (eps 0), every y 2 instead of 1. No bound holds for such a sum: outside the domain, the
   * verdict is ok (nothing to judge it by) and the hazard saturated names what happened. In fp32
   * the sum is exact. */
  double x[1024];
  for (int i = 0; i < 1024; i++) x[i] = 1;
  pf_run r;
  assert_int_equal(run_row(&r, "fused", PF_BF16, PF_BF16, 1024, x, 1, 0, NULL, 0, 0), PF_V_OK);
  assert_true(r.out[0] == 2 && r.oracle.rounded[0] == 1);
  assert_false(r.in_domain);
  assert_true(r.hazards & (1u << PF_H_SATURATED));
  pf_run_free(&r);
  assert_int_equal(run_row(&r, "fused", PF_BF16, PF_FP32, 1024, x, 1, 0, NULL, 0, 0), PF_V_OK);
  assert_true(r.out[0] == 1);
  pf_run_free(&r);
  /* the fault rms-sum-in-storage sums in bf16 whatever -a says: the same 2 */
  assert_int_equal(run_row(&r, "fused", PF_BF16, PF_FP32, 1024, x, 1, 0, "rms-sum-in-storage", 0, 0), PF_V_INACCURATE);
  assert_true(r.in_domain); /* the domain is the fp32 sum's: the fault breaks the contract */
  assert_true(r.out[0] == 2);
  pf_run_free(&r);
}

static void test_rmsnorm_1p_in_storage(void **state) {
  /* x = (1, 2), bf16, fp32 weights, a zero-centred gamma of 2^-8, eps 0: mean square 5/2,
   * rstd = sqrt(2/5) = 0.6324555, y_0 = rstd (1 + 2^-8) = 0.6349261, 162.54 bf16 steps of 2^-8:
   * 163/256 = 0x1.46p-1. With 1 + 2^-8 formed in bf16 (a tie between 1 and 1 + 2^-7, to the even
   * 1) y_0 = 0.6324555, 161.91 steps: 162/256 = 0x1.44p-1, one ulp low */
  const double x[2] = {1, 2};
  pf_run r;
  assert_int_equal(run_row(&r, "fused", PF_BF16, PF_FP32, 2, x, 0x1p-8, 0, NULL, 1, 1), PF_V_OK);
  assert_true(r.out[1] == 0x1.46p-1 && r.oracle.rounded[1] == 0x1.46p-1);
  pf_run_free(&r);
  assert_int_equal(run_row(&r, "fused", PF_BF16, PF_FP32, 2, x, 0x1p-8, 0, "rms-1p-in-storage", 1, 1), PF_V_INACCURATE);
  assert_true(r.out[1] == 0x1.44p-1);
  pf_run_free(&r);
}

static void test_rmsnorm_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"torch", "fused"};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < 4; s++) {
          if (a && v == 0) continue; /* torch: fp32 only */
          pf_case c;
          assert_int_equal(pf_case_init(&c, "rmsnorm", variants[v], 700 + (uint64_t)cases), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 3;
          c.shape[1] = s == 3 ? 700 : 40;
          c.inputs[0].dist = (pf_dist)s;
          c.inputs[0].scale = ldexp(1, 2 * s - 4);
          pf_case_set_param(&c, "weights", s % 2);
          if (v) pf_case_set_param(&c, "zero_centered_gamma", s == 1);
          in_domain += pf_check_contract(&c, "rmsnorm");
          cases++;
        }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm_three_four),
      cmocka_unit_test(test_rmsnorm_matches_pytorch),
      cmocka_unit_test(test_rmsnorm_bf16_sum_stops_absorbing),
      cmocka_unit_test(test_rmsnorm_1p_in_storage),
      cmocka_unit_test(test_rmsnorm_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
