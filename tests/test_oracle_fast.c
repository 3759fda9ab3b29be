/* The oracles' fast path against MPFR (--oracle mpfr, the reference): on generated cases of
 * every dtype, scale and mask, the two give bit for bit the same exact (binary64) and
 * correctly rounded values and statuses, and the comparison the same verdict for every
 * element; the rows the fast path cannot decide go to MPFR; the double word's rounding to a
 * dtype breaks ties by its low part as MPFR's rounding of the same value does.
 * PF_ORACLE_FAST_CASES sets how many cases per configuration (CI: the default). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/parallel.h"
#include "core/runner.h"
#include "oracles/attention_fast.h"
#include "oracles/dd_avx2.h"
#include "oracles/oracle_util.h"
#include "oracles/softmax_fast.h"
#include "tests/case_values.h"

static size_t compared, fast_rows, mpfr_rows;

static int same_value(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 || (a == 0 && b == 0); }

/* Runs c twice, MPFR only and fast first, and asserts that every element agrees: the same
 * status, correctly rounded values and verdict, and exact values equal (exact_tol 0) or within
 * exact_tol of each other, relative (the attention fast path's exact value is the binary64
 * nearest a value within 2^-56 of the exact result, MPFR's the nearest its enclosure's
 * midpoint: near a binary64 midpoint they may differ by one binary64 ulp, 2^-52 relative). */
static void agree_within(pf_case *c, double exact_tol) {
  pf_oracle_opts ref, fast;
  pf_oracle_opts_default(&ref);
  pf_oracle_opts_default(&fast);
  ref.mpfr_only = 1;
  pf_run a, b;
  if (pf_run_case(c, &ref, &a) || pf_run_case(c, &fast, &b)) fail_msg("run: %s", pf_error_message());
  assert_int_equal(a.nout, b.nout);
  for (size_t i = 0; i < a.nout; i++) {
    const pf_oracle_result *x = &a.oracle, *y = &b.oracle;
    const int exact_ok = exact_tol == 0 ? memcmp(&x->exact[i], &y->exact[i], sizeof(double)) == 0
                                        : (isnan(x->exact[i]) && isnan(y->exact[i])) || x->exact[i] == y->exact[i] ||
                                              fabs(x->exact[i] - y->exact[i]) <= exact_tol * fabs(x->exact[i]);
    /* (zeros of either sign are one value: the comparison reads them alike) */
    const int same = x->status[i] == y->status[i] && exact_ok && same_value(x->rounded[i], y->rounded[i]) &&
                     same_value(x->rounded_alt[i], y->rounded_alt[i]) &&
                     a.cmp.elem[i] == b.cmp.elem[i];
    if (!same)
      fail_msg("%s %s %s/%s shape %zux%zux%zux%zux%zu input seed %llu element %zu: mpfr status %d exact %a rounded %a "
               "verdict %s; fast status %d exact %a rounded %a verdict %s",
               c->kernel, c->variant, pf_dtype_name(c->dtype), pf_dtype_name(c->accum), c->shape[0], c->shape[1],
               c->shape[2], c->shape[3], c->shape[4], (unsigned long long)c->inputs[0].seed, i,
               x->status[i], x->exact[i], x->rounded[i], pf_verdict_name(a.cmp.elem[i]), y->status[i], y->exact[i],
               y->rounded[i], pf_verdict_name(b.cmp.elem[i]));
  }
  assert_int_equal(a.cmp.verdict, b.cmp.verdict);
  assert_int_equal(a.oracle.fast_units, 0);
  compared += a.nout;
  fast_rows += b.oracle.fast_units;
  mpfr_rows += b.oracle.mpfr_units;
  pf_run_free(&a);
  pf_run_free(&b);
}
static void agree(pf_case *c) { agree_within(c, 0); }

static unsigned cases_per_config(void) {
  const char *s = getenv("PF_ORACLE_FAST_CASES");
  return s && atoi(s) > 0 ? (unsigned)atoi(s) : 6;
}

static void test_softmax_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const double scales[] = {0x1p-30, 0x1p-8, 1, 4, 16, 64, 1024};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (size_t k = 0; k < sizeof scales / sizeof *scales; k++)
      for (int mk = 0; mk < 3; mk++)
        for (int mv = 0; mv < 3; mv++)
          for (unsigned s = 0; s < n; s++, seed++) {
            pf_case c;
            assert_int_equal(pf_case_init(&c, "softmax", "safe", seed), PF_OK);
            c.dtype = (pf_dtype)t;
            c.shape[0] = 3;
            c.shape[1] = 1 + seed % 97;
            c.inputs[0].scale = scales[k];
            c.inputs[0].dist = s % 3 == 0 ? PF_DIST_LOGUNIFORM : PF_DIST_NORMAL;
            c.inputs[0].special_rate = s % 4 == 1 ? 0.05 : 0; /* zeros, subnormals, max, inf, NaN */
            assert_int_equal(pf_case_set_param(&c, "mask", mk), PF_OK);
            assert_int_equal(pf_case_set_param(&c, "mask_value", mv), PF_OK);
            if (s % 5 == 2) assert_int_equal(pf_case_set_param(&c, "alpha", 0x1.6a09e667f3bcdp-4), PF_OK); /* 1/sqrt(128) */
            agree(&c);
            pf_case_free(&c);
          }
  print_message("softmax: %zu elements agree; rows: %zu by the fast path, %zu by MPFR\n", compared, fast_rows,
                mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

/* A row whose scores span 600..746 below the maximum is MPFR's (the double words' low parts
 * would leave the normal range); one beyond 746 is the fast path's, its small outputs 0. */
static void test_softmax_fast_hands_spread_rows_to_mpfr(void **state) {
  (void)state;
  static const double spreads[] = {650, 745, 800, 20000};
  for (int k = 0; k < 4; k++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "softmax", "safe", 1), PF_OK);
    c.dtype = PF_FP32;
    c.shape[0] = 1;
    c.shape[1] = 3;
    pf_gen_free(&c.inputs[0]);
    c.inputs[0].dist = PF_DIST_VALUES;
    c.inputs[0].values = malloc(3 * sizeof(double));
    c.inputs[0].values[0] = 0, c.inputs[0].values[1] = -1, c.inputs[0].values[2] = -spreads[k];
    c.inputs[0].nvalues = 3;
    const size_t before = mpfr_rows;
    agree(&c);
    assert_int_equal(mpfr_rows - before, k < 2 ? 1 : 0);
    pf_case_free(&c);
  }
}

/* Double words on a dtype's midpoint: the low part's sign breaks the tie, as MPFR's rounding of
 * the exact sum does; off a midpoint the hi part decides. */
static void test_dd_round_breaks_ties_by_the_low_part(void **state) {
  (void)state;
  mpfr_t v;
  mpfr_init2(v, 200);
  for (int t = 0; t < PF_NDTYPES; t++) {
    const double ones[] = {1.0, 0x1.8p-3, 0x1.4p-10, -0x1.cp+5};
    for (int k = 0; k < 8; k++) { /* the midpoint above each value, then below (below 1.0: the smaller spacing) */
      const double r = pf_round((pf_dtype)t, ones[k % 4]);
      const double mid = (r + (k < 4 ? pf_next_up((pf_dtype)t, r) : pf_next_down((pf_dtype)t, r))) / 2; /* exact */
      const double los[] = {0x1p-80 * fabs(mid), -0x1p-80 * fabs(mid), 0, 0x1p-60 * fabs(mid)};
      for (int j = 0; j < 4; j++)
        for (int off = 0; off < 2; off++) {
          const double hi = off ? nextafter(mid, INFINITY) : mid;
          const pf_dd x = {hi, los[j] * (off ? 0x1p-10 : 1)};
          mpfr_set_d(v, x.hi, MPFR_RNDN);
          mpfr_add_d(v, v, x.lo, MPFR_RNDN); /* exact at 200 bits */
          const double want = pf_mpfr_round_dtype(v, (pf_dtype)t), got = pf_dd_round_dtype(x, (pf_dtype)t);
          if (memcmp(&want, &got, sizeof want) != 0)
            fail_msg("%s: %a + %a: MPFR %a, double word %a", pf_dtype_name((pf_dtype)t), x.hi, x.lo, want, got);
        }
    }
  }
  mpfr_clear(v);
}

/* |(r.hi + r.lo - want) / want|, in MPFR (d: scratch) */
static double dd_rel_error(pf_dd r, mpfr_srcptr want, mpfr_t d) {
  mpfr_set_d(d, r.hi, MPFR_RNDN);
  mpfr_add_d(d, d, r.lo, MPFR_RNDN);
  mpfr_sub(d, d, want, MPFR_RNDN);
  mpfr_div(d, d, want, MPFR_RNDN);
  return fabs(mpfr_get_d(d, MPFR_RNDN));
}

/* The double-word square root against MPFR: within the 2^-102 its users budget. */
static void test_dd_sqrt_within_its_bound(void **state) {
  (void)state;
  mpfr_t x, r, d;
  mpfr_inits2(300, x, r, d, (mpfr_ptr)0);
  uint64_t s = 0x853c49e6748fea9bull;
  double worst = 0;
  for (int i = 0; i < 200000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const double u = (double)(s >> 11) * 0x1p-53;
    const pf_dd a = pf_two_sum(ldexp(1 + u, (int)(s % 1200) - 600), ldexp(u - 0.5, (int)(s % 1200) - 655));
    const pf_dd q = pf_dd_sqrt(a);
    mpfr_set_d(x, a.hi, MPFR_RNDN);
    mpfr_add_d(x, x, a.lo, MPFR_RNDN);
    mpfr_sqrt(r, x, MPFR_RNDN);
    worst = fmax(worst, dd_rel_error(q, r, d));
  }
  mpfr_clears(x, r, d, (mpfr_ptr)0);
  print_message("sqrt: largest relative error 2^%.1f over 200000 arguments (bound 2^-102)\n", log2(worst));
  assert_true(worst < 0x1p-102);
}

/* The cheap test never says "decided" wrongly: where it does, MPFR rounds both ends of the
 * interval to its value of t and to y.hi in binary64; around values of t, powers of two (where
 * the spacing halves) among them, on t's rounding boundaries and a few binary64 steps from
 * them, with widths from far below to above the spacing. */
#ifdef PF_DD_AVX2
/* pf4_settle on four intervals: the lanes it settles (bits) and their values in r */
PF_AVX2_TARGET static int settle4(const pf_dd *y, const double *w, pf_dtype t, double *r) {
  const pf_dd4 x = {_mm256_set_pd(y[3].hi, y[2].hi, y[1].hi, y[0].hi), _mm256_set_pd(y[3].lo, y[2].lo, y[1].lo, y[0].lo)};
  __m256d rv;
  const int mask = _mm256_movemask_pd(pf4_settle(x, _mm256_loadu_pd(w), t, &rv));
  _mm256_storeu_pd(r, rv);
  return mask;
}
#endif

/* The vector settle test (dd_avx2.h) decides exactly as pf_fast_settle's checks and
 * pf_dd_decided do, lane for lane, with the same value: intervals within 2^-56 of their
 * centre (the width the fast paths settle), centres on or a few binary64 steps from t's
 * rounding boundaries and spread around its values. */
static void test_dd_decided_avx2_same_as_scalar(void **state) {
  (void)state;
#ifdef PF_DD_AVX2
  unsetenv("PRECFUZZ_SIMD");
  pf_avx2_reprobe();
  if (!pf_avx2()) skip();
  uint64_t s = 0x853c49e6748fea9bull;
  size_t decided = 0, tried = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int i = 0; i < 50000; i++) {
      pf_dd y[4];
      double w[4], r[4];
      for (int l = 0; l < 4; l++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const double u = (double)(s >> 11) * 0x1p-53;
        const int e = (int)(s % 300) - 150;
        const double b = pf_round((pf_dtype)t, ldexp(1 + u, e)), q = pf_ulp((pf_dtype)t, b);
        double c = (s >> 8) % 3 ? b + q / 2 : b + q * (u - 0.5);
        for (int k = (int)(s >> 40) % 9 - 4; k; k += k > 0 ? -1 : 1) c = nextafter(c, k > 0 ? INFINITY : -INFINITY);
        if ((s >> 30) % 2) c = -c;
        if ((s >> 31) % 16 == 0) c = 0;
        y[l] = pf_two_sum(c, c * ldexp(u - 0.5, -53 - (int)((s >> 33) % 8)));
        w[l] = fabs(y[l].hi) * ldexp(u, -56 - (int)((s >> 36) % 8));
      }
      const int mask = settle4(y, w, (pf_dtype)t, r);
      for (int l = 0; l < 4; l++) {
        const double a = fabs(y[l].hi);
        double want;
        const int pre = w[l] <= 0x1p-56 * a && a >= 0x1p-900 && a * (1 + 0x1p-59) < pf_max_finite((pf_dtype)t);
        const int dec = pre && pf_dd_decided(y[l], w[l], (pf_dtype)t, &want);
        tried++;
        if (dec != (mask >> l & 1))
          fail_msg("%s: y %a + %a, w %a: scalar %d (%a), vector %d (%a)", pf_dtype_name((pf_dtype)t), y[l].hi, y[l].lo,
                   w[l], dec, dec ? want : 0.0, mask >> l & 1, r[l]);
        if (dec) assert_memory_equal(&want, &r[l], sizeof want); /* the sign of 0 too */
        decided += (size_t)dec;
      }
    }
  print_message("vector settle test: %zu of %zu intervals decided, as the scalar test decides them\n", decided, tried);
  assert_true(decided > tried / 4 && decided < tried);
#else
  skip();
#endif
}

static void test_dd_decided_is_sound(void **state) {
  (void)state;
  mpfr_t v;
  mpfr_init2(v, 300);
  uint64_t s = 0x2545f4914f6cdd1dull;
  size_t decided = 0, tried = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int i = 0; i < 200000; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      const double u = (double)(s >> 11) * 0x1p-53;
      const int e = (int)(s % 40) - 20;
      double r = pf_round((pf_dtype)t, i % 4 == 0 ? ldexp(1.0, e) : ldexp(1 + u, e)); /* a value of t */
      if (i % 8 == 1) r = -r;
      const double q = pf_ulp((pf_dtype)t, r);
      const double off = q * ((double)((s >> 3) % 2001) / 2000.0 - 0.5) * 1.02; /* around r, a hair past its region */
      double c = r + off;
      if (i % 3 == 2) { /* on a rounding boundary of t, or a few binary64 steps from it */
        c = r + (i % 2 ? q : -q) / 2;
        for (int k = (int)(s >> 40) % 7 - 3; k; k += k > 0 ? -1 : 1) c = nextafter(c, k > 0 ? INFINITY : -INFINITY);
      }
      const pf_dd y = pf_two_sum(c, c * 0x1p-60 * (u - 0.5));
      if (y.hi == 0) continue;
      const double w = q * ldexp(u, -(int)((s >> 20) % 60));
      double got;
      tried++;
      if (!pf_dd_decided(y, w, (pf_dtype)t, &got)) continue;
      decided++;
      for (int end = -1; end <= 1; end += 2) {
        mpfr_set_d(v, y.hi, MPFR_RNDN);
        mpfr_add_d(v, v, y.lo, MPFR_RNDN);
        mpfr_add_d(v, v, end * w, MPFR_RNDN); /* exact at 300 bits */
        const double want = pf_mpfr_round_dtype(v, (pf_dtype)t), b64 = mpfr_get_d(v, MPFR_RNDN);
        if (want != got || b64 != y.hi)
          fail_msg("%s: y %a + %a, w %a: decided %a, but the end %+d rounds to %a (binary64 %a)",
                   pf_dtype_name((pf_dtype)t), y.hi, y.lo, w, got, end, want, b64);
      }
    }
  mpfr_clear(v);
  print_message("cheap test: %zu of %zu intervals decided, every one as MPFR rounds them\n", decided, tried);
  assert_true(decided > tried / 10);
}

/* The double-word exp against MPFR on z in [-600, 0] (and its low part): within the 2^-87 the
 * fast path's budget takes for it. */
static void test_dd_exp_within_its_bound(void **state) {
  (void)state;
  mpfr_t z, e, d;
  mpfr_inits2(300, z, e, d, (mpfr_ptr)0);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  double worst = 0;
  for (int i = 0; i < 200000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const double u = (double)(s >> 11) * 0x1p-53;
    const double zh = i % 3 ? -600 * u : -2 * u, zl = zh * 0x1p-54 * (u - 0.5);
    const pf_dd r = pf_dd_exp(pf_two_sum(zh, zl));
    mpfr_set_d(z, zh, MPFR_RNDN);
    mpfr_add_d(z, z, zl, MPFR_RNDN);
    mpfr_exp(e, z, MPFR_RNDN);
    worst = fmax(worst, dd_rel_error(r, e, d));
  }
  mpfr_clears(z, e, d, (mpfr_ptr)0);
  print_message("exp: largest relative error 2^%.1f over 200000 arguments (bound 2^-87)\n", log2(worst));
  assert_true(worst < 0x1p-87);
}

static void test_attention_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const char *variants[] = {"post-scale", "layer-scaled", "flash", "inward"};
  static const double scales[] = {0x1p-20, 0.5, 1, 4, 24};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int v = 0; v < 4; v++)
      for (int mk = 0; mk < 3; mk++)
        for (int mv = 0; mv < 3; mv++)
          for (unsigned s = 0; s < n; s++, seed++) {
            pf_case c;
            assert_int_equal(pf_case_init(&c, "attention", variants[v], seed), PF_OK);
            c.dtype = (pf_dtype)t;
            c.shape[0] = 1, c.shape[1] = 2;
            c.shape[2] = 1 + seed % 13, c.shape[3] = 1 + seed * 7 % 23, c.shape[4] = 1 + seed * 5 % 37;
            for (int k = 0; k < 3; k++) {
              c.inputs[k].scale = scales[(seed + (unsigned)k) % 5];
              c.inputs[k].dist = s % 3 == 0 ? PF_DIST_LOGUNIFORM : PF_DIST_NORMAL;
              c.inputs[k].special_rate = s % 4 == 1 ? 0.02 : 0; /* zeros, subnormals, max, inf, NaN */
            }
            assert_int_equal(pf_case_set_param(&c, "mask", mk), PF_OK);
            assert_int_equal(pf_case_set_param(&c, "mask_value", mv), PF_OK);
            if (v == 1) assert_int_equal(pf_case_set_param(&c, "layer", 1 + seed % 8), PF_OK);
            agree_within(&c, 0x1p-51);
            pf_case_free(&c);
          }
  print_message("attention: %zu elements agree; rows: %zu by the fast path, %zu by MPFR\n", compared, fast_rows,
                mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

/* The AVX2 loops and the plain C ones give the same bits (lane for lane the same operations),
 * on shapes with tails in both (keys not a multiple of 16, columns not of 4). */
static void test_attention_fast_paths_same_bits(void **state) {
  (void)state;
  pf_case c;
  assert_int_equal(pf_case_init(&c, "attention", "post-scale", 7), PF_OK);
  c.dtype = PF_BF16;
  c.shape[0] = 1, c.shape[1] = 2, c.shape[2] = 5, c.shape[3] = 37, c.shape[4] = 19;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
  pf_oracle_result x[2];
  size_t settled[2] = {0, 0};
  for (int simd = 0; simd < 2; simd++) {
    assert_int_equal(pf_oracle_result_alloc(&x[simd], r.nout, 0), PF_OK);
    pf_attn_fast f;
    pf_attn_fast_work w;
    assert_int_equal(pf_attn_fast_init(&f, &c, r.in, 1, 0, -INFINITY, 1), PF_OK);
    if (simd == 0) f.avx2 = 0;
    else if (!f.avx2) skip(); /* no AVX2 here: nothing to compare */
    assert_int_equal(pf_attn_fast_work_init(&w, &f), PF_OK);
    for (size_t h = 0; h < 2; h++)
      for (size_t i = 0; i < 5; i++) settled[simd] += (size_t)pf_attn_fast_row(&f, h, i, &x[simd], &w);
    pf_attn_fast_work_free(&w);
    pf_attn_fast_free(&f);
  }
  assert_int_equal(settled[0], 10);
  assert_int_equal(settled[1], 10);
  assert_memory_equal(x[0].exact, x[1].exact, r.nout * sizeof(double));
  assert_memory_equal(x[0].rounded, x[1].rounded, r.nout * sizeof(double));
  pf_oracle_result_free(&x[0]);
  pf_oracle_result_free(&x[1]);
  pf_run_free(&r);
  pf_case_free(&c);
}

/* The attention contract's bound and the fast oracles give the same bits with PRECFUZZ_SIMD=off
 * (plain C loops) as with the AVX2 ones: attention on every variant and a shape with tails;
 * Adam on every variant with special values and tiny numbers mixed in, so that blocks of four
 * are partly settled by the vector test and partly left to the scalar path; clipping with and
 * without a factor, zeros and a tail among the gradients; softmax rows with masks, -inf scores
 * and terms below the cut-off in blocks of four. */
static void test_simd_off_same_bits(void **state) {
  (void)state;
  unsetenv("PRECFUZZ_SIMD");
  pf_avx2_reprobe();
  if (!pf_avx2()) skip(); /* nothing to compare */
  static const struct {
    const char *kernel, *variant;
  } cases[] = {{"attention", "post-scale"}, {"attention", "layer-scaled"}, {"attention", "flash"},
               {"attention", "inward"},     {"adam", "fused"},            {"adam", "torch"},
               {"adam", "no-master"},       {"adam", "eps-inside"},       {"adam", "no-bias-correction"},
               {"clip", "megatron"},        {"clip", "torch"},            {"clip", "inf"},
               {"softmax", "safe"},         {"softmax", "online"},        {"layernorm", "welford"},
               {"rmsnorm", "fused"}};
  for (size_t v = 0; v < sizeof cases / sizeof cases[0]; v++)
    for (int t = 0; t < PF_NDTYPES; t++) {
      pf_case c;
      assert_int_equal(pf_case_init(&c, cases[v].kernel, cases[v].variant, 11 + (uint64_t)v), PF_OK);
      c.dtype = (pf_dtype)t;
      if (strcmp(cases[v].kernel, "attention") == 0) {
        c.shape[0] = 1, c.shape[1] = 2, c.shape[2] = 7, c.shape[3] = 21, c.shape[4] = 13;
      } else if (strcmp(cases[v].kernel, "softmax") == 0) {
        static const double scales[] = {1, 1024, 16}; /* 1024: terms taken as 0 */
        c.shape[0] = 9, c.shape[1] = 203;              /* a tail of three */
        c.inputs[0].scale = scales[t];
        c.inputs[0].special_rate = 0.002;
        assert_int_equal(pf_case_set_param(&c, "mask", t), PF_OK);       /* none, causal, top-left */
        assert_int_equal(pf_case_set_param(&c, "mask_value", t), PF_OK); /* -inf among them */
      } else if (strcmp(cases[v].kernel, "layernorm") == 0) {
        c.shape[0] = 5, c.shape[1] = 203; /* a tail of three */
        c.inputs[0].offset = t == 1 ? 100 : 0;
        c.inputs[0].special_rate = 0.001; /* a row or two left to MPFR */
        assert_int_equal(pf_case_set_param(&c, "zero_centered_gamma", t == 2), PF_OK);
      } else if (strcmp(cases[v].kernel, "rmsnorm") == 0) {
        c.shape[0] = 5, c.shape[1] = 203; /* a tail of three */
        c.inputs[0].special_rate = 0.001; /* a row or two left to MPFR */
        assert_int_equal(pf_case_set_param(&c, "zero_centered_gamma", t == 2), PF_OK);
      } else if (strcmp(cases[v].kernel, "clip") == 0) {
        c.shape[0] = 7, c.shape[1] = 503; /* a tail of three */
        c.inputs[0].dist = PF_DIST_LOGUNIFORM; /* in fp16, zeros among them: the scalar path's */
        c.inputs[0].exp_min = -40, c.inputs[0].exp_max = 3;
        assert_int_equal(pf_case_set_param(&c, "max_norm", t == 0 ? 1e6 : 1e-3), PF_OK); /* f = 1, f < 1 */
      } else {
        c.shape[0] = 4001;
        for (int x = 0; x < c.ninputs; x++) {
          c.inputs[x].dist = x % 2 ? PF_DIST_LOGUNIFORM : PF_DIST_NORMAL;
          c.inputs[x].special_rate = 0.01;
        }
        assert_int_equal(pf_case_set_param(&c, "eps", t == 1 ? 0 : 1e-8), PF_OK);
        assert_int_equal(pf_case_set_param(&c, "wd", 0.1), PF_OK);
        if (v == 4 && t == 2) assert_int_equal(pf_case_set_param(&c, "mode", 1), PF_OK); /* l2 */
      }
      pf_oracle_opts o;
      pf_oracle_opts_default(&o);
      pf_run r[2];
      for (int off = 0; off < 2; off++) {
        if (off) setenv("PRECFUZZ_SIMD", "off", 1);
        pf_avx2_reprobe();
        assert_int_equal(pf_avx2(), !off);
        assert_int_equal(pf_run_case(&c, &o, &r[off]), PF_OK);
      }
      unsetenv("PRECFUZZ_SIMD");
      pf_avx2_reprobe();
      assert_memory_equal(r[0].bound, r[1].bound, r[0].nout * sizeof(pf_bound));
      assert_memory_equal(r[0].oracle.exact, r[1].oracle.exact, r[0].nout * sizeof(double));
      assert_memory_equal(r[0].oracle.rounded, r[1].oracle.rounded, r[0].nout * sizeof(double));
      assert_memory_equal(r[0].oracle.rounded_alt, r[1].oracle.rounded_alt, r[0].nout * sizeof(double));
      assert_memory_equal(r[0].oracle.status, r[1].oracle.status, r[0].nout);
      assert_memory_equal(r[0].oracle.dtype, r[1].oracle.dtype, r[0].nout);
      assert_int_equal(r[0].oracle.fast_units, r[1].oracle.fast_units);
      assert_true(r[0].oracle.fast_units > 0);
      assert_int_equal(r[0].oracle.mpfr_units, r[1].oracle.mpfr_units);
      pf_run_free(&r[0]);
      pf_run_free(&r[1]);
      pf_case_free(&c);
    }
}

static void test_clip_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const char *variants[] = {"megatron", "torch", "inf"};
  static const double scales[] = {0x1p-20, 1e-3, 0.05, 1, 30, 1000};
  static const double max_norms[] = {1, 0.5, 1e-3, 1e4};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int v = 0; v < 3; v++)
      for (size_t k = 0; k < sizeof scales / sizeof *scales; k++)
        for (unsigned s = 0; s < n; s++, seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "clip", variants[v], seed), PF_OK);
          c.dtype = (pf_dtype)t;
          c.shape[0] = 1 + seed % 4, c.shape[1] = 1 + seed * 13 % 300;
          c.inputs[0].scale = scales[k];
          c.inputs[0].dist = s % 3 == 0 ? PF_DIST_LOGUNIFORM : PF_DIST_NORMAL;
          c.inputs[0].special_rate = s % 5 == 1 ? 0.01 : 0;
          assert_int_equal(pf_case_set_param(&c, "max_norm", max_norms[seed % 4]), PF_OK);
          agree_within(&c, 0x1p-51);
          pf_case_free(&c);
        }
  print_message("clip: %zu elements agree; cases: %zu by the fast path, %zu by MPFR\n", compared, fast_rows, mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

/* The norms (layernorm/welford, rmsnorm/fused): every dtype, rows from 1 to 700 long, inputs
 * moved by offset and scaled by scale (the family's axis: the mean-to-spread ratio, the size),
 * gamma zero-centred or not, fp32 weights, eps 0 among them (constant rows and rows of zeros:
 * MPFR's), special values; layernorm's eps inside and outside the root */
static void norm_fast_agrees(const char *kernel, const char *variant, const double (*axis)[2], size_t naxis) {
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (size_t k = 0; k < naxis; k++)
      for (unsigned s = 0; s < 2 * n; s++, seed++) {
        pf_case c;
        assert_int_equal(pf_case_init(&c, kernel, variant, seed), PF_OK);
        c.dtype = (pf_dtype)t;
        c.shape[0] = 1 + seed % 4, c.shape[1] = 1 + seed * 37 % 700;
        c.inputs[0].offset = axis[k][0];
        c.inputs[0].scale = axis[k][1];
        c.inputs[0].dist = s % 3 == 0 ? PF_DIST_HEAVY : PF_DIST_NORMAL;
        c.inputs[0].special_rate = s % 7 == 1 ? 0.01 : 0;
        assert_int_equal(pf_case_set_param(&c, "weights", (double)(seed % 2)), PF_OK);
        assert_int_equal(pf_case_set_param(&c, "zero_centered_gamma", (double)(seed / 2 % 2)), PF_OK);
        if (strcmp(kernel, "layernorm") == 0)
          assert_int_equal(pf_case_set_param(&c, "eps_place", (double)(seed / 4 % 2)), PF_OK);
        assert_int_equal(pf_case_set_param(&c, "eps", seed % 5 == 0 ? 0 : pf_round(PF_FP32, 1e-5)), PF_OK);
        agree_within(&c, 0x1p-51);
        pf_case_free(&c);
      }
  print_message("%s: %zu elements agree; rows: %zu by the fast path, %zu by MPFR\n", kernel, compared, fast_rows,
                mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

/* layernorm: means from 0 to 10^4 times the spread */
static void test_layernorm_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const double axis[][2] = {{0, 1}, {1, 1}, {100, 1}, {10000, 1}};
  norm_fast_agrees("layernorm", "welford", axis, 4);
}

/* layernorm_bwd: dx by rows, dgamma and dbeta by columns; means from 0 to 10^4 times the spread */
static void test_layernorm_bwd_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const double axis[][2] = {{0, 1}, {1, 1}, {100, 1}, {10000, 1}};
  norm_fast_agrees("layernorm_bwd", "fused", axis, 4);
}

/* rmsnorm_bwd: the same path without the mean; scales from 2^-20 to 2^10 */
static void test_rmsnorm_bwd_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const double axis[][2] = {{0, 0x1p-20}, {0, 1}, {0, 1024}, {100, 1}};
  norm_fast_agrees("rmsnorm_bwd", "fused", axis, 4);
}

/* rmsnorm: scales from 2^-20 to 2^10 */
static void test_rmsnorm_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const double axis[][2] = {{0, 0x1p-20}, {0, 1}, {0, 1024}};
  norm_fast_agrees("rmsnorm", "fused", axis, 3);
}

/* cross-entropy: every variant, dtype and accumulation, label smoothing, z-loss, the three
 * reductions, ignored rows, logits from tiny to past the 600/746 thresholds (rows spread wider
 * than 600 go to MPFR), confident rows whose target gradient is tiny */
static void test_cross_entropy_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const char *variants[] = {"logsoftmax", "logsoftmax-cpu", "fused", "chunked"};
  static const double scales[] = {0x1p-20, 0.5, 4, 60, 400, 2000};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int v = 0; v < 4; v++)
      for (size_t k = 0; k < sizeof scales / sizeof *scales; k++)
        for (unsigned s = 0; s < n; s++, seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "cross_entropy", variants[v], seed), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = s % 4 == 3 && v >= 2 ? c.dtype : PF_FP32;
          c.shape[0] = 1 + seed % 5, c.shape[1] = 1 + seed * 13 % 400;
          c.inputs[0].scale = scales[k];
          c.inputs[0].dist = s % 3 == 0 ? PF_DIST_HEAVY : PF_DIST_NORMAL;
          c.inputs[0].special_rate = s % 5 == 1 ? 0.01 : 0;
          assert_int_equal(pf_case_set_param(&c, "label_smoothing", seed % 3 == 0 ? 0.125 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "z_loss", v >= 2 && seed % 2 ? 0x1p-10 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "reduction", (double)(seed % 3)), PF_OK);
          agree_within(&c, 0x1p-51);
          pf_case_free(&c);
        }
  print_message("cross_entropy: %zu elements agree; rows: %zu by the fast path, %zu by MPFR\n", compared, fast_rows,
                mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

/* softmax_bwd on generated rows of every dtype and scale (dy's scale apart from x's), with
 * special values, plus rows whose dy is constant (dx exactly 0: MPFR proves it, the fast path
 * must give the same), whose x spreads past 600 below the maximum (MPFR's) and past 746 (the
 * fast path's, those outputs 0). */
static void test_softmax_bwd_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const double scales[] = {0x1p-20, 0.5, 4, 60, 400};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int v = 0; v < 2; v++)
      for (size_t k = 0; k < sizeof scales / sizeof *scales; k++)
        for (unsigned s = 0; s < n; s++, seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "softmax_bwd", v ? "recompute" : "stored", seed), PF_OK);
          c.dtype = (pf_dtype)t;
          c.shape[0] = 1 + seed % 4, c.shape[1] = 1 + seed * 13 % 300;
          c.inputs[0].scale = scales[k];
          c.inputs[1].scale = ldexp(1.0, (int)(seed % 13) - 6);
          c.inputs[s % 2].dist = s % 3 == 0 ? PF_DIST_HEAVY : PF_DIST_NORMAL;
          c.inputs[s % 2].special_rate = s % 5 == 1 ? 0.01 : 0;
          agree_within(&c, 0x1p-51);
          pf_case_free(&c);
        }
  const size_t generated_fast = fast_rows, generated_mpfr = mpfr_rows;
  static const double xs[][4] = {{0, -1, -2, -3}, {0, -1, -648, 2}, {0, -1, -800, -20480}, {3, 3, 3, 3}};
  static const double dys[][4] = {{0.5, 0.5, 0.5, 0.5}, {1, -2, 3, 0.25}, {1, -2, 3, 0.25}, {1, 0, -1, 0.5}};
  static const int mpfr_want[] = {0, 1, 0, 0};
  for (int k = 0; k < 4; k++)
    for (int t = 0; t < PF_NDTYPES; t++) {
      pf_case c;
      assert_int_equal(pf_case_init(&c, "softmax_bwd", "stored", 1), PF_OK);
      c.dtype = (pf_dtype)t;
      c.shape[0] = 1, c.shape[1] = 4;
      set_values(&c.inputs[0], xs[k], 4);
      set_values(&c.inputs[1], dys[k], 4);
      const size_t before = mpfr_rows;
      agree_within(&c, 0x1p-51);
      assert_int_equal(mpfr_rows - before, mpfr_want[k]);
      pf_case_free(&c);
    }
  /* a term so far below the maximum (2^100) that its gradient's share is below MPFR's exponent
   * range: dx_0 = s_0 (0 - 0.25 s_1) is MPFR's TINY, and the fast path, which drops that term,
   * must not take the 0 it computes for an exact one (fp32 and bf16 hold -2^100) */
  static const double xt[] = {0, -0x1p100, -1, 0}, dyt[] = {0.25, 0.5, 0.25, 0.25};
  for (int t = 0; t < 2; t++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "softmax_bwd", "stored", 1), PF_OK);
    c.dtype = t ? PF_BF16 : PF_FP32;
    c.shape[0] = 1, c.shape[1] = 4;
    set_values(&c.inputs[0], xt, 4);
    set_values(&c.inputs[1], dyt, 4);
    agree_within(&c, 0x1p-51);
    pf_case_free(&c);
  }
  print_message("softmax_bwd: %zu elements agree; generated rows: %zu by the fast path, %zu by MPFR\n", compared,
                generated_fast, generated_mpfr);
  /* MPFR's rows: those with an x 600 to 746 below the maximum (common at scale 400, where a
   * row spreads over thousands) and those with a non-finite input */
  assert_true(generated_fast > 2 * generated_mpfr);
}

/* attention_bwd on generated heads of every variant (standard's dP and dS too), dtype, mask and
 * scale, with special values, plus heads whose exact gradients are 0 (equal values of v: dQ and
 * dK; equal keys: dQ), which both paths must prove. */
static void test_attention_bwd_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const char *variants[] = {"standard", "flash", "flash-pdp"};
  static const double scales[] = {0x1p-20, 0.5, 1, 4, 24};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int v = 0; v < 3; v++)
      for (int mk = 0; mk < 3; mk++)
        for (unsigned s = 0; s < n; s++, seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "attention_bwd", variants[v], seed), PF_OK);
          c.dtype = (pf_dtype)t;
          c.shape[0] = 1, c.shape[1] = 1 + seed % 2;
          c.shape[2] = 1 + seed % 11, c.shape[3] = 1 + seed * 7 % 19, c.shape[4] = 1 + seed * 5 % 17;
          for (int k = 0; k < 4; k++) {
            c.inputs[k].scale = scales[(seed + (unsigned)k) % 5];
            c.inputs[k].dist = s % 3 == 0 ? PF_DIST_LOGUNIFORM : PF_DIST_NORMAL;
            c.inputs[k].special_rate = s % 4 == 1 ? 0.02 : 0;
          }
          assert_int_equal(pf_case_set_param(&c, "mask", mk), PF_OK);
          agree_within(&c, 0x1p-51);
          pf_case_free(&c);
        }
  const size_t generated_fast = fast_rows, generated_mpfr = mpfr_rows;
  /* 1 head of 2 queries, 3 keys, head_dim 2: equal values of v, then equal keys */
  const double qv[] = {0.5, -1, 2, 0.25}, kv[] = {1, 0.5, -0.75, 2, 0.125, -1}, ones[] = {1, 1, 1, 1, 1, 1},
               dov[] = {1, -2, 0.5, 3}, vv[] = {0.5, 1, -1, 0.25, 2, -0.5};
  for (int k = 0; k < 2; k++)
    for (int t = 0; t < PF_NDTYPES; t++) {
      pf_case c;
      assert_int_equal(pf_case_init(&c, "attention_bwd", "standard", 1), PF_OK);
      c.dtype = (pf_dtype)t;
      c.shape[0] = 1, c.shape[1] = 1, c.shape[2] = 2, c.shape[3] = 3, c.shape[4] = 2;
      set_values(&c.inputs[0], qv, 4);
      set_values(&c.inputs[1], k ? ones : kv, 6);
      set_values(&c.inputs[2], k ? vv : ones, 6);
      set_values(&c.inputs[3], dov, 4);
      const size_t before = fast_rows;
      agree_within(&c, 0x1p-51);
      assert_int_equal(fast_rows - before, 1); /* the fast path proved the zeros itself */
      pf_case_free(&c);
    }
  /* a key 2^100 below (fp32 and bf16): its P is below MPFR's exponent range, and so is every
   * gradient it alone makes nonzero (v_0 = v_1, so w_0 = w_1 = 0 and D' = P_2 w_2): MPFR's
   * TINY. The fast path drops that P and must not take the zeros it computes for exact ones. */
  const double q3[] = {1, 0.5}, k3[] = {0.5, 0.25, 0.25, 0.5, -0x1p100, 0}, v3[] = {1, 2, 1, 2, 0.25, -1},
               do3[] = {0x1p-4, 0x1p-4};
  for (int t = 0; t < 2; t++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "attention_bwd", "standard", 1), PF_OK);
    c.dtype = t ? PF_BF16 : PF_FP32;
    c.shape[0] = 1, c.shape[1] = 1, c.shape[2] = 1, c.shape[3] = 3, c.shape[4] = 2;
    set_values(&c.inputs[0], q3, 2);
    set_values(&c.inputs[1], k3, 6);
    set_values(&c.inputs[2], v3, 6);
    set_values(&c.inputs[3], do3, 2);
    agree_within(&c, 0x1p-51);
    pf_case_free(&c);
  }
  print_message("attention_bwd: %zu elements agree; generated heads: %zu by the fast path, %zu by MPFR\n", compared,
                generated_fast, generated_mpfr);
  /* MPFR's heads: those with a non-finite input (about 40 here), rows spread past 600, keys
   * no query attends to at scale 24 (dV and dK 0 within a bound that is not 0), dot products on
   * a rounding boundary of the dtype */
  assert_true(generated_fast > generated_mpfr);
}

/* dP = dO . v on a rounding boundary of bf16: dO_i = (1, 1), v_j = (1, 2^-8), so dP = 1 + 2^-8,
 * the midpoint of 1 and 1 + 2^-7, which ties to the even 1. The fast path sums it exactly (an
 * integer at a common scale) and rounds it as MPFR does, instead of leaving the head to MPFR. */
static void test_attention_bwd_fast_exact_dot_on_a_tie(void **state) {
  (void)state;
  const double qv[] = {0.5, -1, 2, 0.25}, kv[] = {1, 0.5, -0.75, 2, 0.125, -1}, vv[] = {1, 0x1p-8, 1, 0x1p-8, 1, 0x1p-8},
               dov[] = {1, 1, 1, 1};
  pf_case c;
  assert_int_equal(pf_case_init(&c, "attention_bwd", "standard", 1), PF_OK);
  c.dtype = PF_BF16;
  c.shape[0] = 1, c.shape[1] = 1, c.shape[2] = 2, c.shape[3] = 3, c.shape[4] = 2;
  set_values(&c.inputs[0], qv, 4);
  set_values(&c.inputs[1], kv, 6);
  set_values(&c.inputs[2], vv, 6);
  set_values(&c.inputs[3], dov, 4);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
  assert_int_equal(r.oracle.fast_units, 1);
  const size_t dp = 2 * 2 + 2 * 3 * 2; /* dP after dQ (2x2), dK and dV (3x2 each) */
  for (size_t j = 0; j < 6; j++) {
    assert_int_equal(r.oracle.status[dp + j], PF_ORACLE_NUMBER);
    assert_true(r.oracle.exact[dp + j] == 1 + 0x1p-8 && r.oracle.rounded[dp + j] == 1.0);
  }
  pf_run_free(&r);
  agree_within(&c, 0x1p-51);
  pf_case_free(&c);
}

static void test_adam_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const char *variants[] = {"fused", "torch", "torch-foreach", "torch-fused", "no-master", "state-lowp",
                                   "eps-inside", "no-bias-correction", "torch-fused-cuda"};
  static const double lrs[] = {1e-3, 0.1, 3e-5}, b2s[] = {0.999, 0.95, 0.5}, epss[] = {1e-8, 0, 1e-3};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int v = 0; v < 9; v++)
      for (int k = 0; k < 3; k++)
        for (unsigned s = 0; s < n; s++, seed++) {
          pf_case c;
          if (pf_case_init(&c, "adam", variants[v], seed) != PF_OK) fail_msg("adam variant %s", variants[v]);
          c.dtype = (pf_dtype)t;
          c.shape[0] = 1 + seed * 37 % 400;
          for (int x = 0; x < c.ninputs; x++) {
            c.inputs[x].dist = s % 3 == 0 ? PF_DIST_LOGUNIFORM : PF_DIST_NORMAL;
            c.inputs[x].special_rate = s % 4 == 1 ? 0.02 : 0;
          }
          assert_int_equal(pf_case_set_param(&c, "lr", lrs[k]), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "beta2", b2s[(k + s) % 3]), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "eps", epss[(seed + (uint64_t)k) % 3]), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "wd", s % 2 ? 0.1 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "step", (double)(1 + seed % 5 * 997)), PF_OK);
          if (v == 0 && s % 2) assert_int_equal(pf_case_set_param(&c, "mode", 1), PF_OK); /* l2 */
          agree_within(&c, 0x1p-51);
          pf_case_free(&c);
        }
  print_message("adam: %zu elements agree; elements: %zu by the fast path, %zu by MPFR\n", compared, fast_rows,
                mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

/* The TP differential's oracle with the squared norm's fast path against the all-MPFR one: the
 * same sets, bit for bit, on both dtypes, every fault, clipping certain, absent and in between
 * (the norm near max_norm), zero gradients (a step whose norm is 0) and tiny ones. */
static void test_tp_fast_agrees_with_mpfr(void **state) {
  (void)state;
  static const char *faults[] = {"", "tp-replicated-unclipped", "norm-no-dedup", "norm-not-allreduced",
                                 "tied-grad-unreduced"};
  static const double max_norms[] = {1, 1e-3, 1e3, 0x1p-60};
  const unsigned n = cases_per_config();
  uint64_t seed = 1;
  compared = fast_rows = mpfr_rows = 0;
  for (int t = 1; t < PF_NDTYPES; t++) /* fp16, bf16 */
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++)
      for (int k = 0; k < 4; k++)
        for (unsigned s = 0; s < n; s++, seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "tp_diff", "megatron", seed), PF_OK);
          c.dtype = (pf_dtype)t;
          snprintf(c.fault, sizeof c.fault, "%s", faults[f]);
          assert_int_equal(pf_case_set_param(&c, "max_norm", max_norms[k]), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "spread", s % 3 ? 3 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "tied", (double)(s % 2)), PF_OK);
          if (s % 4 == 3) c.inputs[1].scale = 0;       /* every gradient 0 */
          if (k == 3 && s % 2) c.inputs[1].scale = 0x1p-74; /* squares near the underflow allowance */
          agree(&c);
          pf_case_free(&c);
        }
  print_message("tp_diff: %zu elements agree; steps: %zu by the fast path, %zu by MPFR\n", compared, fast_rows,
                mpfr_rows);
  assert_true(fast_rows > mpfr_rows);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dd_round_breaks_ties_by_the_low_part),
      cmocka_unit_test(test_dd_exp_within_its_bound),
      cmocka_unit_test(test_dd_decided_is_sound),
      cmocka_unit_test(test_dd_decided_avx2_same_as_scalar),
      cmocka_unit_test(test_dd_sqrt_within_its_bound),
      cmocka_unit_test(test_softmax_fast_hands_spread_rows_to_mpfr),
      cmocka_unit_test(test_softmax_fast_agrees_with_mpfr),
      cmocka_unit_test(test_attention_fast_paths_same_bits),
      cmocka_unit_test(test_simd_off_same_bits),
      cmocka_unit_test(test_attention_fast_agrees_with_mpfr),
      cmocka_unit_test(test_clip_fast_agrees_with_mpfr),
      cmocka_unit_test(test_layernorm_fast_agrees_with_mpfr),
      cmocka_unit_test(test_layernorm_bwd_fast_agrees_with_mpfr),
      cmocka_unit_test(test_rmsnorm_fast_agrees_with_mpfr),
      cmocka_unit_test(test_rmsnorm_bwd_fast_agrees_with_mpfr),
      cmocka_unit_test(test_adam_fast_agrees_with_mpfr), cmocka_unit_test(test_cross_entropy_fast_agrees_with_mpfr),
      cmocka_unit_test(test_softmax_bwd_fast_agrees_with_mpfr),
      cmocka_unit_test(test_attention_bwd_fast_agrees_with_mpfr),
      cmocka_unit_test(test_attention_bwd_fast_exact_dot_on_a_tie),
      cmocka_unit_test(test_tp_fast_agrees_with_mpfr),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
