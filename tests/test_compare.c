/* compare: allowed intervals and element verdicts on hand-made values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/compare.h"
#include "core/oracle.h"

static void test_compare_interval_exact_contract(void **state) {
  double lo, hi;
  pf_allowed_interval(PF_FP16, 1.0, 1.0, 1.0, (pf_bound){0, 0}, &lo, &hi);
  assert_true(lo == 1.0 && hi == 1.0);
  /* rel 2^-10 around 1: the neighbours 1 - 2^-10 (spacing 2^-11 below 1) and 1 + 2^-10 */
  pf_allowed_interval(PF_FP16, 1.0, 1.0, 1.0, (pf_bound){0x1p-10, 0}, &lo, &hi);
  assert_true(lo == 1.0 - 0x1p-10 && hi == 1.0 + 0x1p-10);
  /* a tie: both neighbours are correct roundings */
  pf_allowed_interval(PF_FP16, 1.0 + 0x1p-11, 1.0, 1.0 + 0x1p-10, (pf_bound){0, 0}, &lo, &hi);
  assert_true(lo == 1.0 && hi == 1.0 + 0x1p-10);
  /* an absolute term in the subnormal range: 3 quanta of fp16 */
  pf_allowed_interval(PF_FP16, 0x1p-22, 0x1p-22, 0x1p-22, (pf_bound){0, 0x3p-24}, &lo, &hi);
  assert_true(lo == 0x1p-24 && hi == 0x7p-24);
  pf_allowed_interval(PF_FP16, 0.5, 0.5, 0.5, (pf_bound){INFINITY, 0}, &lo, &hi);
  assert_true(lo == -INFINITY && hi == INFINITY);
}

static void test_compare_element_verdicts(void **state) {
  const double lo = 1.0, hi = 1.0 + 0x1p-10;
  assert_int_equal(pf_element_verdict(PF_FP16, 1.0, PF_ORACLE_NUMBER, 1.0, lo, hi, 0), PF_V_OK);
  assert_int_equal(pf_element_verdict(PF_FP16, 1.0 + 0x1p-9, PF_ORACLE_NUMBER, 1.0, lo, hi, 0), PF_V_INACCURATE);
  assert_int_equal(pf_element_verdict(PF_FP16, 1.0 + 0x1p-9, PF_ORACLE_NUMBER, 1.0, lo, hi, PF_FE_OVERFLOW), PF_V_OVERFLOW);
  assert_int_equal(pf_element_verdict(PF_FP16, NAN, PF_ORACLE_NUMBER, 1.0, lo, hi, 0), PF_V_NAN);
  assert_int_equal(pf_element_verdict(PF_FP16, NAN, PF_ORACLE_NUMBER, 1.0, lo, hi, PF_FE_OVERFLOW | PF_FE_INVALID), PF_V_OVERFLOW);
  assert_int_equal(pf_element_verdict(PF_FP16, NAN, PF_ORACLE_NUMBER, 1.0, lo, hi, PF_FE_UNDERFLOW | PF_FE_INVALID), PF_V_UNDERFLOW);
  assert_int_equal(pf_element_verdict(PF_FP16, INFINITY, PF_ORACLE_NUMBER, 1.0, lo, hi, 0), PF_V_OVERFLOW);
  /* the exact result itself out of range, or undefined: the input's fault */
  assert_int_equal(pf_element_verdict(PF_FP16, INFINITY, PF_ORACLE_NUMBER, INFINITY, lo, hi, 0), PF_V_RANGE);
  assert_int_equal(pf_element_verdict(PF_FP16, 3.0, PF_ORACLE_UNDEFINED, NAN, lo, hi, 0), PF_V_RANGE);
  /* a normal number lost entirely, or to subnormals */
  assert_int_equal(pf_element_verdict(PF_FP16, 0.0, PF_ORACLE_NUMBER, 0x1p-10, 0x1p-11, 0x1p-10, 0), PF_V_UNDERFLOW);
  /* ... unless the contract's bound admits it */
  assert_int_equal(pf_element_verdict(PF_FP16, 0.0, PF_ORACLE_NUMBER, 0x1p-10, -INFINITY, INFINITY, 0), PF_V_OK);
  assert_int_equal(pf_element_verdict(PF_FP16, 0x1p-20, PF_ORACLE_NUMBER, 0x1p-10, 0x1p-10, 0x1p-10, 0), PF_V_UNDERFLOW);
  /* zero where the exact result is subnormal, within bound: fine */
  assert_int_equal(pf_element_verdict(PF_FP16, 0.0, PF_ORACLE_NUMBER, 0x1p-24, 0.0, 0x1p-23, 0), PF_V_OK);
  assert_true(pf_verdict_is_finding(PF_V_INACCURATE));
  assert_false(pf_verdict_is_finding(PF_V_RANGE));
  assert_false(pf_verdict_is_finding(PF_V_OK));
}

/* An interval that crosses zero on one side: exact 0.146 (fp16), an absolute bound of 0.4, so
 * [0.146 - 0.4, 0.146 + 0.4] = [-0.254, 0.546]. Below, every fp16 value from 0.146 down to
 * -0.254 counts (tens of thousands of ulps); above, to 0.546 only 2^-13 and 2^-12 steps. An
 * output above it is a finding whose allowed count must be the upper side's, not the lower. */
static void test_compare_allowed_is_the_outputs_side(void **state) {
  (void)state;
  pf_oracle_result o;
  assert_int_equal(pf_oracle_result_alloc(&o, 2, 0), PF_OK);
  const double E = 0x1.2bcp-3; /* 0.146..., exact in fp16 */
  for (int i = 0; i < 2; i++) o.exact[i] = o.rounded[i] = o.rounded_alt[i] = E;
  const pf_bound b[2] = {{0, 0.4}, {0, 0.4}};
  const double y[2] = {0x1.88p-1 /* 0.765625, above the interval */, -0x1p-2 /* -0.25, inside below */};
  pf_comparison c;
  assert_int_equal(pf_compare(PF_FP16, y, 2, &o, b, 0, &c), PF_OK);
  assert_int_equal(c.elem[0], PF_V_INACCURATE);
  assert_int_equal(c.elem[1], PF_V_OK);
  /* hand count: E = 1199 * 2^-13; to 0.25 = 2048 * 2^-13: 849 steps of 2^-13; to 0.5: 1024
   * steps of 2^-12; hi = fp16(E + 0.4 = 0.546362...) = 1119 * 2^-11 (1118.95 rounded), 95 steps
   * of 2^-11 above 0.5 = 1024 * 2^-11: 1968 in all */
  assert_int_equal(c.allowed[0], 849 + 1024 + 95);
  assert_true(c.ulps[0] > c.allowed[0]);
  assert_true(c.ulps[1] <= c.allowed[1]);
  assert_true(c.allowed[1] > 10000); /* the lower side, through zero */
  pf_comparison_free(&c);
  pf_oracle_result_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare_interval_exact_contract),
      cmocka_unit_test(test_compare_element_verdicts),
      cmocka_unit_test(test_compare_allowed_is_the_outputs_side),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
