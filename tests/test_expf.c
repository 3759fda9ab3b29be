/* pf_expf (core/expf.h), the binary32 exp the emulations share with their GPU builds,
 * against the correctly rounded exp from MPFR (precision 24, binary32's exponent range,
 * subnormalized): every special case, the overflow and underflow thresholds, a dense scan of
 * the subnormal results and a million operands drawn by bits and by value. None may differ. */
#include <math.h>
#include <mpfr.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/expf.h"

/* exp(x) correctly rounded to binary32 */
static float exp_reference(float x) {
  const mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(-148); /* MPFR's x = 0.1b... 2^e: binary32's least subnormal is 0.1 2^-148 */
  mpfr_set_emax(128);
  mpfr_t a, y;
  mpfr_init2(a, 24);
  mpfr_init2(y, 24);
  mpfr_set_flt(a, x, MPFR_RNDN);
  const int inex = mpfr_exp(y, a, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  const float r = mpfr_get_flt(y, MPFR_RNDN);
  mpfr_clears(a, y, (mpfr_ptr)0);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  return r;
}

static float flt_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int same(float a, float b) { return memcmp(&a, &b, 4) == 0 || (a != a && b != b); }

static size_t misrounded;
static void check(float x) {
  const float got = pf_expf(x), want = exp_reference(x);
  if (!same(got, want) && misrounded++ < 10) printf("pf_expf(%a) = %a, correctly rounded %a\n", x, got, want);
}

static void test_expf_special_values(void **state) {
  (void)state;
  assert_true(pf_expf(0.0f) == 1.0f && pf_expf(-0.0f) == 1.0f);
  assert_true(isnan(pf_expf(NAN)));
  assert_true(pf_expf(INFINITY) == INFINITY);
  assert_true(pf_expf(-INFINITY) == 0.0f && !signbit(pf_expf(-INFINITY)));
  /* 0x1.62e42ep+6 = 88.7228317 is the largest operand whose exp is finite (below 2^128 (1 - 2^-25)) */
  assert_true(pf_expf(0x1.62e42ep+6f) == 0x1.ffff08p+127f); /* mpmath: 3.40279854e38 */
  assert_true(pf_expf(0x1.62e430p+6f) == INFINITY);
  /* mpmath: exp(-0x1.9fe36ap+6) = 0.999993 2^-150 rounds to 0, exp(-0x1.9fe368p+6) = 1.0000007 2^-150
   * to the least subnormal */
  assert_true(pf_expf(-0x1.9fe36ap+6f) == 0.0f);
  assert_true(pf_expf(-0x1.9fe368p+6f) == 0x1p-149f);
  assert_true(pf_expf(1.0f) == 0x1.5bf0a8p+1f); /* e */
}

static void test_expf_correctly_rounded(void **state) {
  (void)state;
  misrounded = 0;
  size_t n = 0;
  /* every operand with a subnormal or smallest-normal result, and around the overflow */
  for (float x = -104.0f; x < -86.0f; x = nextafterf(x, 0)) check(x), n++;
  for (float x = 88.0f; x < 89.5f; x = nextafterf(x, 100)) check(x), n++;
  /* around 0: where exp(x) - 1 is small and every binary32 near 1 is hit */
  for (float x = -0x1p-20f; x < 0x1p-20f; x += 0x1p-40f) check(x), n++;
  /* a million operands: by bits (every exponent) and by value, from a fixed generator */
  uint64_t s = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 1000000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const float xb = flt_of_bits((uint32_t)(s >> 32));
    if (xb == xb && fabsf(xb) < 120.0f) check(xb), n++;
    check((float)(-104.0 + 193.0 * (double)(uint32_t)s / 4294967296.0)), n++;
  }
  printf("%zu operands, %zu misrounded\n", n, misrounded);
  assert_int_equal(misrounded, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expf_special_values),
      cmocka_unit_test(test_expf_correctly_rounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
