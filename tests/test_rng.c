/* rng: the built-in Philox4x32-10 against the published known-answer vectors (Random123,
 * kat_vectors) and, wherever the CUDA toolkit is present, against cuRAND's host generator
 * word for word; distributions' basic laws; determinism. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#ifdef PF_HAVE_CURAND
#include <curand.h>
#endif

#include "core/rng.h"
#include "core/tensor.h"

static void test_rng_philox_known_answers(void **state) {
  /* Random123 kat_vectors, philox4x32 10 rounds */
  struct { uint32_t ctr[4], key[2], out[4]; } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
    uint32_t out[4];
    pf_philox4x32_10(kat[i].key, kat[i].ctr, out);
    for (int j = 0; j < 4; j++) assert_int_equal(out[j], kat[i].out[j]);
  }
}

static void test_rng_stream_block_order(void **state) {
  /* word 4b + k of the stream is word k of block b, counter (b / 65536, 0, b % 65536, 0) */
  pf_rng r;
  const uint64_t seed = 0x0123456789abcdefull;
  assert_int_equal(pf_rng_init(&r, seed), PF_OK);
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  for (uint64_t w = 0; w < 4 * 70000; w++) {
    const uint32_t got = pf_rng_u32(&r);
    if (w % 997 && w != 4 * 65536 && w != 4 * 65535 + 3) continue;
    const uint64_t b = w / 4;
    const uint32_t ctr[4] = {(uint32_t)(b / 65536), 0, (uint32_t)(b % 65536), 0};
    uint32_t out[4];
    pf_philox4x32_10(key, ctr, out);
    assert_int_equal(got, out[w % 4]);
  }
  pf_rng_free(&r);
}

static void test_rng_matches_curand_host_generator(void **state) {
#ifdef PF_HAVE_CURAND
  const uint64_t seeds[] = {0, 1, 42, 0xffffffffffffffffull, 0x9e3779b97f4a7c15ull};
  for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
    curandGenerator_t g;
    assert_int_equal(curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10), CURAND_STATUS_SUCCESS);
    assert_int_equal(curandSetPseudoRandomGeneratorSeed(g, seeds[s]), CURAND_STATUS_SUCCESS);
    enum { N = 1 << 20 };
    static uint32_t want[N];
    /* uneven request sizes: the stream must not depend on how it is asked for */
    size_t n = 0;
    const size_t sizes[] = {1, 3, 4, 1000, 4097, 65536, N};
    for (size_t k = 0; n < N; k++) {
      size_t m = sizes[k % 7];
      if (m > N - n) m = N - n;
      assert_int_equal(curandGenerate(g, want + n, m), CURAND_STATUS_SUCCESS);
      n += m;
    }
    curandDestroyGenerator(g);
    pf_rng mine;
    assert_int_equal(pf_rng_init(&mine, seeds[s]), PF_OK);
    for (size_t i = 0; i < N; i++) {
      const uint32_t a = pf_rng_u32(&mine);
      if (a != want[i]) fail_msg("seed %zu word %zu: builtin %08x, cuRAND %08x", s, i, a, want[i]);
    }
    pf_rng_free(&mine);
  }
#else
  skip();
#endif
}

static void test_rng_det_log(void **state) {
  /* against binary64 log within 1 ulp, and exact at 1 */
  assert_true(pf_det_log(1.0) == 0.0);
  const double xs[] = {0x1p-1074, 1e-300, 0.1, 0.5, 0.70710678118654752440, 0.999999, 1.000001, 2.0, 10.0, 1e300};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    const double a = pf_det_log(xs[i]), b = log(xs[i]);
    assert_true(fabs(a - b) <= 2 * fabs(nextafter(b, INFINITY) - b));
  }
}

static void test_rng_normal_moments(void **state) {
  pf_rng r;
  assert_int_equal(pf_rng_init(&r, 7), PF_OK);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    const double z = pf_rng_normal(&r);
    s += z;
    s2 += z * z;
  }
  /* mean within 5 sigma (5 / sqrt(n)), variance within 5 sigma (5 sqrt(2/n)) */
  assert_true(fabs(s / n) < 5 / sqrt(n));
  assert_true(fabs(s2 / n - 1) < 5 * sqrt(2.0 / n));
  pf_rng_free(&r);
}

static void test_rng_below_is_in_range_and_unbiased(void **state) {
  pf_rng r;
  assert_int_equal(pf_rng_init(&r, 3), PF_OK);
  int hist[3] = {0};
  for (int i = 0; i < 30000; i++) hist[pf_rng_below(&r, 3)]++;
  for (int k = 0; k < 3; k++) assert_true(abs(hist[k] - 10000) < 500);
  assert_int_equal(pf_rng_below(&r, 1), 0);
  pf_rng_free(&r);
}

/* The block-at-a-time stream is pf_rng's, word for word and draw for draw. */
static void test_rng_small_is_the_same_stream(void **state) {
  (void)state;
  for (uint64_t seed = 0; seed < 5; seed++) {
    pf_rng a;
    pf_rng_small b;
    assert_int_equal(pf_rng_init(&a, seed * 0x9e3779b97f4a7c15ull), PF_OK);
    pf_rng_small_init(&b, seed * 0x9e3779b97f4a7c15ull);
    for (int i = 0; i < 5000; i++) assert_int_equal(pf_rng_u32(&a), pf_rng_small_u32(&b)); /* past 4096: a refill */
    for (uint64_t n = 1; n < 2000; n += 7) assert_true(pf_rng_below(&a, n) == pf_rng_small_below(&b, n));
    pf_rng_free(&a);
  }
}

static void test_tensor_same_seed_same_bits(void **state) {
  pf_gen g;
  pf_gen_default(&g);
  g.seed = 99;
  g.scale = 3;
  g.outliers = 2;
  g.outlier_mag = 1e5;
  g.special_rate = 0.1;
  pf_tensor a, b;
  for (int d = 0; d < PF_NDISTS - 1; d++) {
    g.dist = (pf_dist)d;
    assert_int_equal(pf_tensor_alloc(&a, PF_FP16, 1000), PF_OK);
    assert_int_equal(pf_tensor_alloc(&b, PF_FP16, 1000), PF_OK);
    assert_int_equal(pf_tensor_generate(&a, &g), PF_OK);
    assert_int_equal(pf_tensor_generate(&b, &g), PF_OK);
    assert_memory_equal(a.data, b.data, 1000 * sizeof(double));
    int outliers = 0, specials = 0;
    for (size_t i = 0; i < a.n; i++) {
      assert_true(pf_dtype_holds(PF_FP16, a.data[i]));
      outliers += fabs(a.data[i]) == 100000.0 || fabs(a.data[i]) == 99968.0; /* 1e5 overflows fp16 */
      specials += !isfinite(a.data[i]) || a.data[i] == 0;
    }
    assert_true(specials > 20 && specials < 120); /* rate 0.1 of 1000, 4/7 of them inf/NaN/0 */
    pf_tensor_free(&a);
    pf_tensor_free(&b);
  }
}

static void test_tensor_explicit_values_checked(void **state) {
  pf_gen g;
  pf_gen_default(&g);
  double v[2] = {1.0, 0.1};
  g.dist = PF_DIST_VALUES;
  g.values = v;
  g.nvalues = 2;
  pf_tensor t;
  assert_int_equal(pf_tensor_alloc(&t, PF_FP16, 2), PF_OK);
  assert_int_equal(pf_tensor_generate(&t, &g), PF_ERR_ARG); /* 0.1 is not an fp16 value */
  v[1] = 0x1.998p-4;
  assert_int_equal(pf_tensor_generate(&t, &g), PF_OK);
  g.nvalues = 1;
  assert_int_equal(pf_tensor_generate(&t, &g), PF_ERR_ARG);
  pf_tensor_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rng_philox_known_answers),
      cmocka_unit_test(test_rng_stream_block_order),
      cmocka_unit_test(test_rng_small_is_the_same_stream),
      cmocka_unit_test(test_rng_matches_curand_host_generator),
      cmocka_unit_test(test_rng_det_log),
      cmocka_unit_test(test_rng_normal_moments),
      cmocka_unit_test(test_rng_below_is_in_range_and_unbiased),
      cmocka_unit_test(test_tensor_same_seed_same_bits),
      cmocka_unit_test(test_tensor_explicit_values_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
