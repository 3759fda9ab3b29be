/* gelu: the oracle against values derived by hand (Phi(1) = 0.8413447460685429 from the normal
 * table, Python's math.erfc for the rest), ATen's vectorized body and scalar tail as PyTorch 2.15 ran them,
 * the cancelled negative tail, the faults and the contract over generated cases. */
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
#include "kernels/gelu/gelu_math.h"
#include "tests/case_values.h"
#include "tests/contract_check.h"

static pf_verdict run_gelu(pf_run *r, const char *variant, pf_dtype t, const double *x, size_t n, int tanh_form,
                           const char *fault) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "gelu", variant, 1), PF_OK);
  c.dtype = t;
  c.shape[0] = 1, c.shape[1] = n;
  set_values(&c.inputs[0], x, n);
  pf_case_set_param(&c, "approximate", tanh_form);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_gelu_by_hand(void **state) {
  /* erf form: GELU(1) = Phi(1) = 0.8413447460685429, GELU(-1) = Phi(1) - 1, GELU(2) =
   * 2 Phi(2) = 1.9544997361036416, GELU(-3) = -3 Phi(-3) = -0.004049694094890287; in fp32
   * 0x1.aec4bep-1, -0x1.44ed0cp-3, 0x1.f45a18p+0, -0x1.096698p-8. tanh form: 0.8411919906082768 =
   * 0x1.aeb0b8p-1 at 1, -0.15880800939172324 = -0x1.453d22p-3 at -1; 0 at 0 in both */
  const double x[5] = {1, -1, 2, -3, 0};
  const double erf_form[5] = {0x1.aec4bep-1, -0x1.44ed0cp-3, 0x1.f45a18p+0, -0x1.096698p-8, 0};
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++) {
    pf_run r;
    assert_int_equal(run_gelu(&r, variants[v], PF_FP32, x, 5, 0, NULL), PF_V_OK);
    for (int j = 0; j < 5; j++) assert_true(r.oracle.rounded[j] == erf_form[j]);
    pf_run_free(&r);
    assert_int_equal(run_gelu(&r, variants[v], PF_FP32, x, 5, 1, NULL), PF_V_OK);
    assert_true(r.oracle.rounded[0] == 0x1.aeb0b8p-1 && r.oracle.rounded[1] == -0x1.453d22p-3 &&
                r.oracle.rounded[4] == 0);
    pf_run_free(&r);
  }
}

static void test_gelu_aten_erf(void **state) {
  /* PyTorch 2.15, F.gelu on the CPU with oneDNN off, one thread, fp32: x = (-3.5, -1.25, 0.3, 2.7)
   * repeated 8 times then once more, 36 elements: the first 32 are ATen's vectorized body
   * (Abramowitz-Stegun erf with SLEEF's expf), the last 4 its scalar tail (erff), and they differ:
   * body -0x1.aaf2p-11, -0x1.0e76bp-3, 0x1.7ba51p-3, 0x1.5866dcp+1; tail -0x1.aae4p-11,
   * -0x1.0e76a2p-3, 0x1.7ba51p-3, 0x1.5866dep+1 */
  const double v4[4] = {-3.5, -1.25, 0.3, 2.7};
  const double body[4] = {-0x1.aaf2p-11, -0x1.0e76bp-3, 0x1.7ba51p-3, 0x1.5866dcp+1};
  const double tail[4] = {-0x1.aae4p-11, -0x1.0e76a2p-3, 0x1.7ba51p-3, 0x1.5866dep+1};
  double x[36];
  for (int i = 0; i < 36; i++) x[i] = (float)v4[i % 4]; /* torch.tensor(..., dtype=torch.float32) */
  pf_run r;
  assert_int_equal(run_gelu(&r, "torch", PF_FP32, x, 36, 0, NULL), PF_V_OK);
  for (int i = 0; i < 4; i++) assert_true(r.out[i] == body[i] && r.out[32 + i] == tail[i]);
  pf_run_free(&r);
  /* SLEEF's expf: 0 below -104, inf above 100; ATen's erf is odd (the sign put back by an
   * exclusive or) and within Abramowitz and Stegun's 1.5e-7 of erf, plus fp32's roundings, on
   * [0, 6] */
  assert_true(pf_sleef_expf(-105.0f) == 0 && isinf(pf_sleef_expf(101.0f)));
  assert_true(pf_aten_erf(-0.75f) == -pf_aten_erf(0.75f));
  for (int i = 0; i <= 600; i++) {
    const float v = (float)i / 100;
    assert_true(fabs((double)pf_aten_erf(v) - erf((double)v)) < 1.5e-7 + 3e-7);
  }
}

static void test_gelu_negative_tail(void **state) {
  /* x = -13: the exact y = -13 Phi(-13) = -1.6e-38 (a normal fp32 number); 1 + erf(-9.19) in
   * fp32 cancels to 0, y = 0: inside the contract (an absolute error of 13/2 2^-24 is allowed),
   * and imprecise */
  const double x[1] = {-13};
  pf_run r;
  assert_int_equal(run_gelu(&r, "torch", PF_FP32, x, 1, 0, NULL), PF_V_OK);
  assert_true(r.out[0] == 0 && r.oracle.rounded[0] < 0);
  assert_true(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
}

static void test_gelu_faults(void **state) {
  /* the tanh form where erf was asked: at x = -2 -0.04540 for -0.04550, far beyond fp32's bound */
  const double x2[1] = {-2};
  pf_run r;
  assert_int_equal(run_gelu(&r, "torch", PF_FP32, x2, 1, 0, "gelu-tanh-for-erf"), PF_V_INACCURATE);
  pf_run_free(&r);
  /* erf and each step rounded to bf16: x = -0x1.dp-5 gives -0x1.bap-6 for the exact
   * -0x1.bb0ab3...p-6 (the sweep's find) */
  const double x3[1] = {-0x1.dp-5};
  assert_int_equal(run_gelu(&r, "fused", PF_BF16, x3, 1, 0, "gelu-erf-in-storage"), PF_V_INACCURATE);
  assert_true(r.out[0] == -0x1.bap-6);
  pf_run_free(&r);
}

static void test_gelu_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"torch", "fused"};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int s = 0; s < 8; s++) {
        pf_case c;
        assert_int_equal(pf_case_init(&c, "gelu", variants[v], 300 + (uint64_t)cases), PF_OK);
        c.dtype = (pf_dtype)t;
        c.shape[0] = 2, c.shape[1] = 100;
        c.inputs[0].dist = (pf_dist)(s % 4);
        c.inputs[0].scale = ldexp(1, s - 3);
        pf_case_set_param(&c, "approximate", s % 2);
        in_domain += pf_check_contract(&c, "gelu");
        cases++;
      }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_by_hand),
      cmocka_unit_test(test_gelu_aten_erf),
      cmocka_unit_test(test_gelu_negative_tail),
      cmocka_unit_test(test_gelu_faults),
      cmocka_unit_test(test_gelu_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
