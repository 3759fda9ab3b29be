/* dtype: conversions, neighbours, ulps. Expected values are written out by hand from the
 * IEEE 754 encodings, or come from MPFR (precision p, the dtype's emin/emax,
 * mpfr_subnormalize), never from the code under test. */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/dtype.h"
#include "core/rng.h"

static uint32_t enc(pf_dtype t, double x) { return pf_encode(t, x, PF_RN, 0); }

static void test_dtype_roundtrip_all_16bit_patterns(void **state) {
  const pf_dtype ts[] = {PF_FP16, PF_BF16};
  for (int k = 0; k < 2; k++) {
    for (uint32_t b = 0; b < 65536; b++) {
      const double d = pf_decode(ts[k], b);
      if (isnan(d)) {
        assert_true(isnan(pf_decode(ts[k], enc(ts[k], d))));
        continue;
      }
      assert_int_equal(enc(ts[k], d), b);
      /* and through binary32, as a kernel holds them */
      assert_int_equal(enc(ts[k], (double)(float)d), b);
    }
  }
}

static void test_dtype_fp16_special_values(void **state) {
  assert_int_equal(enc(PF_FP16, 0.0), 0x0000);
  assert_int_equal(enc(PF_FP16, -0.0), 0x8000);
  assert_int_equal(enc(PF_FP16, 1.0), 0x3c00);
  assert_int_equal(enc(PF_FP16, -2.0), 0xc000);
  assert_int_equal(enc(PF_FP16, 65504.0), 0x7bff);        /* max finite */
  assert_int_equal(enc(PF_FP16, 65519.99), 0x7bff);       /* below the overflow threshold */
  assert_int_equal(enc(PF_FP16, 65520.0), 0x7c00);        /* the midpoint 65520 ties to even: inf */
  assert_int_equal(enc(PF_FP16, INFINITY), 0x7c00);
  assert_int_equal(enc(PF_FP16, -INFINITY), 0xfc00);
  assert_int_equal(enc(PF_FP16, 0x1p-14), 0x0400);        /* min normal */
  assert_int_equal(enc(PF_FP16, 0x1p-24), 0x0001);        /* min subnormal */
  assert_int_equal(enc(PF_FP16, 0x1p-25), 0x0000);        /* half of it: tie to even, zero */
  assert_int_equal(enc(PF_FP16, -0x1p-25), 0x8000);
  assert_int_equal(enc(PF_FP16, 0x1.000002p-25), 0x0001); /* just above half */
  assert_int_equal(enc(PF_FP16, 0x3p-25), 0x0002);        /* 1.5 quanta: tie to even, 2 */
  assert_int_equal(enc(PF_FP16, 0x1.ff8p-15), 0x03ff);    /* largest subnormal, 1023 * 2^-24 */
  assert_int_equal(enc(PF_FP16, 0x1.ffbp-15), 0x03ff);    /* below the midpoint to 2^-14 */
  assert_int_equal(enc(PF_FP16, 0x1.ffcp-15), 0x0400);    /* the midpoint: ties to even, 2^-14 */
  assert_int_equal(enc(PF_FP16, 1.0 + 0x1p-11), 0x3c00);  /* tie, to even */
  assert_int_equal(enc(PF_FP16, 1.0 + 0x3p-11), 0x3c02);  /* tie, to even (up) */
  assert_int_equal(enc(PF_FP16, 1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  assert_true(isnan(pf_decode(PF_FP16, enc(PF_FP16, NAN))));
  assert_int_equal(enc(PF_FP16, NAN) & 0x7e00, 0x7e00);   /* quiet */
  assert_true(pf_decode(PF_FP16, 0x7bff) == 65504.0);
  assert_true(pf_decode(PF_FP16, 0x0001) == 0x1p-24);
  assert_true(pf_decode(PF_FP16, 0x03ff) == 0x1.ff8p-15);
  assert_true(pf_decode(PF_FP16, 0x3555) == 0x1.554p-2);
}

static void test_dtype_bf16_special_values(void **state) {
  assert_int_equal(enc(PF_BF16, 1.0), 0x3f80);
  assert_int_equal(enc(PF_BF16, 1.0 + 0x1p-8), 0x3f80);   /* tie to even */
  assert_int_equal(enc(PF_BF16, 1.0 + 0x3p-8), 0x3f82);
  assert_int_equal(enc(PF_BF16, 0x1.fep127), 0x7f7f);     /* max finite */
  assert_int_equal(enc(PF_BF16, 0x1.ffp127), 0x7f80);     /* the overflow threshold ties to inf */
  assert_int_equal(enc(PF_BF16, 0x1.feffffp127), 0x7f7f);
  assert_int_equal(enc(PF_BF16, FLT_MAX), 0x7f80);
  assert_int_equal(enc(PF_BF16, 0x1p-133), 0x0001);       /* min subnormal */
  assert_int_equal(enc(PF_BF16, 0x1p-134), 0x0000);       /* half: tie to zero */
  assert_int_equal(enc(PF_BF16, 0x1p-126), 0x0080);       /* min normal */
  assert_int_equal(enc(PF_BF16, 10000.0), 0x461c);        /* 10000 rounds to 9984 */
  assert_true(pf_decode(PF_BF16, 0x461c) == 9984.0);
  assert_int_equal(enc(PF_BF16, -INFINITY), 0xff80);
}

static void test_dtype_fp32_special_values(void **state) {
  assert_int_equal(enc(PF_FP32, 1.0), 0x3f800000u);
  assert_int_equal(enc(PF_FP32, FLT_MAX), 0x7f7fffffu);
  assert_int_equal(enc(PF_FP32, 0x1.ffffffp127), 0x7f800000u); /* threshold ties to inf */
  assert_int_equal(enc(PF_FP32, 0x1p-149), 0x00000001u);
  assert_int_equal(enc(PF_FP32, 0x1p-150), 0x00000000u);
  assert_int_equal(enc(PF_FP32, 0x1.8p-149), 0x00000002u);
  assert_int_equal(enc(PF_FP32, 0x1p-1074), 0x00000000u);      /* a double subnormal */
  assert_int_equal(enc(PF_FP32, 1.0 / 3.0), 0x3eaaaaabu);
}

static void test_dtype_round_toward_zero(void **state) {
  assert_int_equal(pf_encode(PF_FP16, 65535.0, PF_RZ, 0), 0x7bff);
  assert_int_equal(pf_encode(PF_FP16, 1e9, PF_RZ, 0), 0x7bff);
  assert_int_equal(pf_encode(PF_FP16, INFINITY, PF_RZ, 0), 0x7c00);
  assert_int_equal(pf_encode(PF_FP16, 1.0 + 0x1.ffp-11, PF_RZ, 0), 0x3c00);
  assert_int_equal(pf_encode(PF_FP16, -(1.0 + 0x1.ffp-10), PF_RZ, 0), 0xbc01);
  assert_int_equal(pf_encode(PF_BF16, 0x1.ffp-134, PF_RZ, 0), 0x0000);
}

static void test_dtype_stochastic_rounding(void **state) {
  /* 1 + 3/4 ulp of fp16: up iff the random word is below 0.75 * 2^32 */
  const double x = 1.0 + 0x3p-12;
  assert_int_equal(pf_encode(PF_FP16, x, PF_RS, 0xbfffffffu), 0x3c01);
  assert_int_equal(pf_encode(PF_FP16, x, PF_RS, 0xc0000000u), 0x3c00);
  /* a representable value never moves */
  assert_int_equal(pf_encode(PF_FP16, 1.5, PF_RS, 0), 0x3e00);
  assert_int_equal(pf_encode(PF_BF16, 1.5, PF_RS, 0), 0x3fc0);
  /* over all 2^16 evenly spaced words, the mean is exact: 1/2^16 of an ulp resolution */
  const double y = 1.0 + 12345 * 0x1p-26; /* 12345/65536 of an fp16 ulp above 1 */
  uint32_t ups = 0;
  for (uint32_t r = 0; r < 65536; r++) ups += pf_encode(PF_FP16, y, PF_RS, r << 16) == 0x3c01;
  assert_int_equal(ups, 12345);
  /* sign symmetric, subnormals too */
  assert_int_equal(pf_encode(PF_FP16, -0x3p-26, PF_RS, 0x3fffffffu), 0x8001);
  assert_int_equal(pf_encode(PF_FP16, -0x3p-26, PF_RS, 0xc0000000u), 0x8000);
}

static void test_dtype_ulp_and_neighbours(void **state) {
  assert_true(pf_ulp(PF_FP16, 1.0) == 0x1p-10);
  assert_true(pf_ulp(PF_FP16, 1.9) == 0x1p-10);
  assert_true(pf_ulp(PF_FP16, 65504.0) == 32.0);
  assert_true(pf_ulp(PF_FP16, 0x1p-20) == 0x1p-24);
  assert_true(pf_ulp(PF_FP16, 0.0) == 0x1p-24);
  assert_true(pf_ulp(PF_BF16, 1.0) == 0x1p-7);
  assert_true(pf_ulp(PF_FP32, 1.0) == 0x1p-23);
  assert_true(pf_next_up(PF_FP16, 1.0) == 1.0 + 0x1p-10);
  assert_true(pf_next_down(PF_FP16, 1.0) == 1.0 - 0x1p-11);
  assert_true(pf_next_up(PF_FP16, 65504.0) == INFINITY);
  assert_true(pf_next_up(PF_FP16, -0.0) == 0x1p-24);
  assert_true(pf_next_down(PF_FP16, 0.0) == -0x1p-24);
  assert_true(pf_next_down(PF_BF16, -INFINITY) == -INFINITY);
  assert_int_equal(pf_ulp_distance(PF_FP16, 1.0, 1.0 + 0x1p-10), 1);
  assert_int_equal(pf_ulp_distance(PF_FP16, 0.0, -0.0), 0);
  assert_int_equal(pf_ulp_distance(PF_FP16, -0x1p-24, 0x1p-24), 2);
  assert_int_equal(pf_ulp_distance(PF_FP16, 65504.0, INFINITY), 1);
  assert_int_equal(pf_ulp_distance(PF_FP16, 1.0, 2.0), 1024);
  assert_int_equal(pf_ulp_distance(PF_FP16, 0x1p-14, 0.0), 1024); /* 1023 subnormals below min normal */
  assert_true(pf_ulp_distance(PF_FP16, NAN, 1.0) == INT64_MAX);
  assert_int_equal(pf_classify(PF_FP16, 0x1p-15), PF_CLASS_SUBNORMAL);
  assert_int_equal(pf_classify(PF_BF16, 0x1p-15), PF_CLASS_NORMAL);
  assert_int_equal(pf_classify(PF_FP16, -0.0), PF_CLASS_ZERO);
  assert_int_equal(pf_classify(PF_FP16, NAN), PF_CLASS_NAN);
  assert_true(pf_max_finite(PF_FP16) == 65504.0);
  assert_true(pf_max_finite(PF_BF16) == 0x1.fep127);
  assert_true(pf_max_finite(PF_FP32) == FLT_MAX);
  assert_true(pf_min_subnormal(PF_BF16) == 0x1p-133);
  pf_dtype t;
  assert_int_equal(pf_dtype_parse("bf16", &t), PF_OK);
  assert_int_equal(t, PF_BF16);
  assert_int_equal(pf_dtype_parse("float16", &t), PF_ERR_UNKNOWN);
  assert_int_equal(pf_dtype_parse(NULL, &t), PF_ERR_UNKNOWN);
}

/* MPFR's rounding of a double to dtype t with t's exponent range and subnormals. */
static double mpfr_reference(pf_dtype t, double x, mpfr_rnd_t rnd) {
  const pf_format f = pf_format_of(t);
  const mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(f.emin - f.prec + 2); /* MPFR exponents: x = 0.1b... * 2^e */
  mpfr_set_emax(f.emax + 1);
  mpfr_t r;
  mpfr_init2(r, f.prec);
  int inex = mpfr_set_d(r, x, rnd);
  inex = mpfr_subnormalize(r, inex, rnd);
  const double d = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clear(r);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  return d;
}

static void check_against_mpfr(pf_dtype t, double x) {
  const double want = mpfr_reference(t, x, MPFR_RNDN);
  const double got = pf_decode(t, pf_encode(t, x, PF_RN, 0));
  if (!(got == want && signbit(got) == signbit(want))) fail_msg("%s(%a): got %a, MPFR %a", pf_dtype_name(t), x, got, want);
  /* pf_round's own path (an add and a subtract of a constant, not the bit encoding) too */
  const double fast = pf_round(t, x);
  if (!(fast == want && signbit(fast) == signbit(want)))
    fail_msg("pf_round %s(%a): got %a, MPFR %a", pf_dtype_name(t), x, fast, want);
  const double want_z = mpfr_reference(t, x, MPFR_RNDZ);
  const double got_z = pf_decode(t, pf_encode(t, x, PF_RZ, 0));
  if (!(got_z == want_z && signbit(got_z) == signbit(want_z)))
    fail_msg("%s(%a) toward zero: got %a, MPFR %a", pf_dtype_name(t), x, got_z, want_z);
}

static void test_dtype_agrees_with_mpfr_random(void **state) {
  pf_rng r;
  assert_int_equal(pf_rng_init(&r, 20261122), PF_OK);
  for (int i = 0; i < 1000000; i++) {
    const uint32_t w = pf_rng_u32(&r);
    float f;
    memcpy(&f, &w, 4);
    const uint64_t w64 = ((uint64_t)pf_rng_u32(&r) << 32) | pf_rng_u32(&r);
    double d;
    memcpy(&d, &w64, 8);
    if (isnan(f) || isnan(d)) continue;
    for (int t = 0; t < PF_NDTYPES; t++) {
      check_against_mpfr((pf_dtype)t, (double)f);
      check_against_mpfr((pf_dtype)t, d);
      /* doubles near the dtype's own range matter most */
      check_against_mpfr((pf_dtype)t, ldexp(d - trunc(d), (int)(w % 300) - 150));
    }
  }
  pf_rng_free(&r);
}

static void test_dtype_agrees_with_mpfr_edges(void **state) {
  /* Every midpoint between neighbours of fp16 and bf16, and a hair either side of it; then
   * the overflow threshold, max finite, half the smallest subnormal for every dtype. */
  const pf_dtype ts[] = {PF_FP16, PF_BF16};
  for (int k = 0; k < 2; k++) {
    for (uint32_t b = 0; b < 0x7c00u + (ts[k] == PF_BF16 ? 0x0380u : 0); b++) {
      const double a = pf_decode(ts[k], b), c = pf_decode(ts[k], b + 1);
      const double mid = a + (c - a) / 2; /* exact in binary64 */
      check_against_mpfr(ts[k], mid);
      check_against_mpfr(ts[k], -mid);
      check_against_mpfr(ts[k], nextafter(mid, 0));
      check_against_mpfr(ts[k], nextafter(mid, INFINITY));
      check_against_mpfr(ts[k], (double)nextafterf((float)mid, 0));
      check_against_mpfr(ts[k], (double)nextafterf((float)mid, INFINITY));
    }
  }
  for (int t = 0; t < PF_NDTYPES; t++) {
    const double mx = pf_max_finite((pf_dtype)t), thr = mx + pf_ulp((pf_dtype)t, mx) / 2;
    const double half_sub = pf_min_subnormal((pf_dtype)t) / 2;
    const double xs[] = {mx, thr, nextafter(thr, 0), nextafter(thr, INFINITY), half_sub,
                         nextafter(half_sub, 0), nextafter(half_sub, 1), pf_min_normal((pf_dtype)t),
                         DBL_MAX, DBL_MIN, 0x1p-1074, 0.0, -0.0, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
      check_against_mpfr((pf_dtype)t, xs[i]);
      check_against_mpfr((pf_dtype)t, -xs[i]);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_roundtrip_all_16bit_patterns),
      cmocka_unit_test(test_dtype_fp16_special_values),
      cmocka_unit_test(test_dtype_bf16_special_values),
      cmocka_unit_test(test_dtype_fp32_special_values),
      cmocka_unit_test(test_dtype_round_toward_zero),
      cmocka_unit_test(test_dtype_stochastic_rounding),
      cmocka_unit_test(test_dtype_ulp_and_neighbours),
      cmocka_unit_test(test_dtype_agrees_with_mpfr_random),
      cmocka_unit_test(test_dtype_agrees_with_mpfr_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
