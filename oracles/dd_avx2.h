/* dd.h's double-word functions and its cheap settle test four lanes at a time, with AVX2 and
 * FMA: lane for lane the same operations in the same order as the scalar functions, so the same
 * bits (test_oracle_fast compares them with PRECFUZZ_SIMD=off). x86-64 with GCC or Clang only;
 * the caller checks pf_avx2() before calling, and its own function carries PF_AVX2_TARGET. */
#ifndef PF_DD_AVX2_H
#define PF_DD_AVX2_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PF_DD_AVX2 1
#include <immintrin.h>

#include "core/dtype.h"
#include "oracles/dd.h"

#define PF_AVX2_TARGET __attribute__((target("avx2,fma")))
#define PF_AVX2_INLINE __attribute__((target("avx2,fma"))) static inline

typedef struct {
  __m256d hi, lo;
} pf_dd4;

PF_AVX2_INLINE __m256d pf4_abs(__m256d x) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x); }
PF_AVX2_INLINE __m256d pf4_c(double x) { return _mm256_set1_pd(x); }
PF_AVX2_INLINE pf_dd4 pf4_d(__m256d x) { return (pf_dd4){x, _mm256_setzero_pd()}; }
PF_AVX2_INLINE pf_dd4 pf4_bcast(pf_dd x) { return (pf_dd4){_mm256_set1_pd(x.hi), _mm256_set1_pd(x.lo)}; }

PF_AVX2_INLINE pf_dd4 pf4_two_sum(__m256d a, __m256d b) {
  const __m256d s = _mm256_add_pd(a, b), bp = _mm256_sub_pd(s, a), ap = _mm256_sub_pd(s, bp);
  return (pf_dd4){s, _mm256_add_pd(_mm256_sub_pd(a, ap), _mm256_sub_pd(b, bp))};
}
PF_AVX2_INLINE pf_dd4 pf4_fast_two_sum(__m256d a, __m256d b) {
  const __m256d s = _mm256_add_pd(a, b);
  return (pf_dd4){s, _mm256_sub_pd(b, _mm256_sub_pd(s, a))};
}
PF_AVX2_INLINE pf_dd4 pf4_two_prod(__m256d a, __m256d b) {
  const __m256d p = _mm256_mul_pd(a, b);
  return (pf_dd4){p, _mm256_fmsub_pd(a, b, p)}; /* fma(a, b, -p): one rounding of the same value */
}
PF_AVX2_INLINE pf_dd4 pf4_add(pf_dd4 x, pf_dd4 y) {
  const pf_dd4 s = pf4_two_sum(x.hi, y.hi), t = pf4_two_sum(x.lo, y.lo);
  const pf_dd4 v = pf4_fast_two_sum(s.hi, _mm256_add_pd(s.lo, t.hi));
  return pf4_fast_two_sum(v.hi, _mm256_add_pd(t.lo, v.lo));
}
PF_AVX2_INLINE pf_dd4 pf4_add_d(pf_dd4 x, __m256d y) {
  const pf_dd4 s = pf4_two_sum(x.hi, y);
  return pf4_fast_two_sum(s.hi, _mm256_add_pd(x.lo, s.lo));
}
PF_AVX2_INLINE pf_dd4 pf4_neg(pf_dd4 x) {
  const __m256d m = _mm256_set1_pd(-0.0);
  return (pf_dd4){_mm256_xor_pd(x.hi, m), _mm256_xor_pd(x.lo, m)};
}
PF_AVX2_INLINE pf_dd4 pf4_mul(pf_dd4 x, pf_dd4 y) {
  const pf_dd4 c = pf4_two_prod(x.hi, y.hi);
  const __m256d tl0 = _mm256_mul_pd(x.lo, y.lo), tl1 = _mm256_fmadd_pd(x.hi, y.lo, tl0),
                cl2 = _mm256_fmadd_pd(x.lo, y.hi, tl1), cl3 = _mm256_add_pd(c.lo, cl2);
  return pf4_fast_two_sum(c.hi, cl3);
}
PF_AVX2_INLINE pf_dd4 pf4_div(pf_dd4 x, pf_dd4 y) {
  const __m256d th = _mm256_div_pd(pf4_c(1.0), y.hi);
  const __m256d rh = _mm256_fnmadd_pd(y.hi, th, pf4_c(1.0)); /* fma(-y.hi, th, 1) */
  const __m256d rl = _mm256_mul_pd(_mm256_xor_pd(y.lo, pf4_c(-0.0)), th);
  const pf_dd4 e = pf4_fast_two_sum(rh, rl), d = pf4_mul(pf4_d(th), e);
  return pf4_mul(x, pf4_add(pf4_d(th), d));
}
PF_AVX2_INLINE pf_dd4 pf4_sqrt(pf_dd4 x) {
  const __m256d r = _mm256_sqrt_pd(x.hi);
  const pf_dd4 p = pf4_two_prod(r, r);
  const __m256d d = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(x.hi, p.hi), p.lo), x.lo);
  return pf4_fast_two_sum(r, _mm256_div_pd(d, _mm256_mul_pd(pf4_c(2.0), r)));
}
/* pf_dd_exp four lanes at a time: the same operations (the table read by a gather) */
PF_AVX2_INLINE pf_dd4 pf4_exp(pf_dd4 z, const double *l256, const pf_dd *tab, pf_dd sixth) {
  const __m256d N = _mm256_round_pd(_mm256_mul_pd(z.hi, pf4_c(0x1.71547652b82fep8)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256d mN = _mm256_xor_pd(N, pf4_c(-0.0));
  pf_dd4 r = pf4_add_d(z, _mm256_mul_pd(mN, pf4_c(l256[0])));
  r = pf4_add(r, pf4_neg(pf4_two_prod(N, pf4_c(l256[1]))));
  r = pf4_add_d(r, _mm256_mul_pd(mN, pf4_c(l256[2])));
  const __m256d x = r.hi;
  const __m256d q = _mm256_add_pd(
      pf4_c(1.0 / 24),
      _mm256_mul_pd(x, _mm256_add_pd(pf4_c(1.0 / 120),
                                     _mm256_mul_pd(x, _mm256_add_pd(pf4_c(1.0 / 720),
                                                                    _mm256_mul_pd(x, _mm256_add_pd(pf4_c(1.0 / 5040),
                                                                                                   _mm256_mul_pd(x, pf4_c(1.0 / 40320)))))))));
  pf_dd4 p = pf4_add(pf4_bcast(sixth), pf4_two_prod(x, q));
  p = pf4_add_d(pf4_mul(r, p), pf4_c(0.5));
  p = pf4_add_d(pf4_mul(r, p), pf4_c(1));
  p = pf4_add_d(pf4_mul(r, p), pf4_c(1));
  const __m128i n = _mm256_cvtpd_epi32(N), j = _mm_and_si128(n, _mm_set1_epi32(255));
  const __m128i k = _mm_srai_epi32(_mm_sub_epi32(n, j), 8), j2 = _mm_slli_epi32(j, 1);
  const pf_dd4 T = {_mm256_i32gather_pd(&tab[0].hi, j2, 8), _mm256_i32gather_pd(&tab[0].lo, j2, 8)};
  const __m256d sc = _mm256_castsi256_pd(
      _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k), _mm256_set1_epi64x(1023)), 52));
  const pf_dd4 y = pf4_mul(T, p);
  return (pf_dd4){_mm256_mul_pd(y.hi, sc), _mm256_mul_pd(y.lo, sc)};
}

/* four double words from memory (a[0..3]) into lanes, and back */
PF_AVX2_INLINE pf_dd4 pf4_load(const pf_dd *a) {
  const __m256d A = _mm256_loadu_pd(&a[0].hi), B = _mm256_loadu_pd(&a[2].hi); /* h0 l0 h1 l1, h2 l2 h3 l3 */
  return (pf_dd4){_mm256_permute4x64_pd(_mm256_unpacklo_pd(A, B), 0xd8),
                  _mm256_permute4x64_pd(_mm256_unpackhi_pd(A, B), 0xd8)};
}
PF_AVX2_INLINE void pf4_store(pf_dd *a, pf_dd4 x) {
  const __m256d L = _mm256_unpacklo_pd(x.hi, x.lo), H = _mm256_unpackhi_pd(x.hi, x.lo); /* h0 l0 h2 l2, h1 l1 h3 l3 */
  _mm256_storeu_pd(&a[0].hi, _mm256_permute2f128_pd(L, H, 0x20));
  _mm256_storeu_pd(&a[2].hi, _mm256_permute2f128_pd(L, H, 0x31));
}

/* lanes where x is nonzero and below 2^-900 (dd.h: a low part could be subnormal) */
PF_AVX2_INLINE __m256d pf4_tiny(pf_dd4 x) {
  return _mm256_and_pd(_mm256_cmp_pd(x.hi, _mm256_setzero_pd(), _CMP_NEQ_UQ),
                       _mm256_cmp_pd(pf4_abs(x.hi), pf4_c(0x1p-900), _CMP_LT_OQ));
}

/* pf_fast_settle's checks and pf_dd_decided's test, four lanes: all ones in a lane whose output
 * the cheap test settles, *r then its value of t (zero lanes, and lanes near binary64's
 * underflow, are left to the scalar path, as pf_dd_decided leaves them to the ends). */
PF_AVX2_INLINE __m256d pf4_settle(pf_dd4 x, __m256d err, pf_dtype t, __m256d *r) {
  const pf_format f = pf_format_of(t);
  const __m256d a = pf4_abs(x.hi);
  __m256d ok = _mm256_cmp_pd(err, _mm256_mul_pd(pf4_c(0x1p-56), a), _CMP_LE_OQ);
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(a, pf4_c(0x1p-900), _CMP_GE_OQ));
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(_mm256_mul_pd(a, pf4_c(1 + 0x1p-59)), pf4_c(pf_max_finite(t)), _CMP_LT_OQ));
  /* binary64's half spacing at a (a quarter below a power of two): a >= 2^-900, so normal */
  const __m256d reach = _mm256_mul_pd(_mm256_add_pd(pf4_abs(x.lo), err), pf4_c(1 + 0x1p-50));
  const __m256i ab = _mm256_castpd_si256(a), E = _mm256_srli_epi64(ab, 52);
  const __m256i mant0 = _mm256_cmpeq_epi64(_mm256_and_si256(ab, _mm256_set1_epi64x(0xfffffffffffffll)),
                                           _mm256_setzero_si256()); /* all ones: mantissa 0 */
  const __m256i he = _mm256_add_epi64(_mm256_sub_epi64(E, _mm256_set1_epi64x(53)), mant0); /* -53, or -54 */
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(reach, _mm256_castsi256_pd(_mm256_slli_epi64(he, 52)), _CMP_LT_OQ));
  /* pf_round: (a + C) - C with C = 1.5 2^(q + 52), q = max(e, emin) - (prec - 1); t's spacing 2^q */
  const __m256i Ec = _mm256_max_epi32(E, _mm256_set1_epi64x(f.emin + 1023)); /* small, nonnegative lanes */
  const __m256i cexp = _mm256_add_epi64(Ec, _mm256_set1_epi64x(53 - f.prec));
  const __m256d C = _mm256_castsi256_pd(_mm256_or_si256(_mm256_slli_epi64(cexp, 52), _mm256_set1_epi64x(1ll << 51)));
  const __m256d u = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_sub_epi64(cexp, _mm256_set1_epi64x(52)), 52));
  const __m256d ra = _mm256_sub_pd(_mm256_add_pd(a, C), C), d = pf4_abs(_mm256_sub_pd(a, ra));
  const __m256d margin = _mm256_min_pd(_mm256_sub_pd(_mm256_mul_pd(u, pf4_c(0.5)), d),
                                       _mm256_add_pd(_mm256_mul_pd(u, pf4_c(0.25)), d));
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(margin, _mm256_add_pd(reach, _mm256_mul_pd(a, pf4_c(0x1p-100))), _CMP_GT_OQ));
  *r = _mm256_or_pd(ra, _mm256_and_pd(x.hi, pf4_c(-0.0)));
  return ok;
}

/* Writes the lanes of mask (bits) of output k's block at i: as pf_fast_settle does */
PF_AVX2_INLINE void pf4_store_settled(pf_oracle_result *out, size_t i, int mask, pf_dd4 x, __m256d r, pf_dtype t) {
  const __m256i m = _mm256_set_epi64x(mask & 8 ? -1 : 0, mask & 4 ? -1 : 0, mask & 2 ? -1 : 0, mask & 1 ? -1 : 0);
  _mm256_maskstore_pd(out->exact + i, m, x.hi);
  _mm256_maskstore_pd(out->rounded + i, m, r);
  _mm256_maskstore_pd(out->rounded_alt + i, m, r);
  for (int l = 0; l < 4; l++)
    if (mask >> l & 1) {
      out->dtype[i + (size_t)l] = (unsigned char)t;
      out->status[i + (size_t)l] = PF_ORACLE_NUMBER;
    }
}
#endif

#endif
