/* The clipping oracle's fast path: the same definition as clip_mpfr.c, the norm
 * N = sqrt(sum g^2) (or max |g|), f = min(1, max_norm / (N + 1e-6)) and every g f, computed
 * with a proven error bound and trusted only where it decides every output (dd.c's
 * pf_fast_settle); otherwise the case is MPFR's.
 *
 * Error budget (u = 2^-53):
 *   sum g^2      the squares are exact in binary64 (values of at most 24 bits) and positive; a
 *                compensated sum (Sum2, Ogita, Rump and Oishi 2005, Prop. 4.5, kept as a double
 *                word) is within gamma_{n-1}^2 of the sum, relative (gamma_n = n u / (1 - n u));
 *                the squares are multiples of 2^-298, far from binary64's underflow
 *   N            pf_dd_sqrt (2^-102) halves the sum's error: eN = gamma^2 / 2 + 2^-102; the inf
 *                norm is exact
 *   N + 1e-6     one DWPlusFP (2^-104 of the sum, N >= 0): eD = eN + 2^-103
 *   max_norm / D a double-word division (2^-100): ef = eD + 2^-99; f is 1 only where the whole
 *                enclosure of max_norm / D is >= 1 (then g f = g exactly), and the case is MPFR's
 *                where it straddles 1
 *   g f          one product (2^-101): ey = ef + 2^-100 */
#include "oracles/clip_fast.h"

#include <math.h>

#include "core/parallel.h"
#include "oracles/dd.h"
#include "oracles/dd_avx2.h"

#ifdef PF_DD_AVX2
/* g[0..3] f (or g where f is 1) as outputs i..i+3: the lanes the cheap test settles are written,
 * and returned as a bit mask; the scalar loop takes the others (it computes the same values) */
PF_AVX2_TARGET static int pf_clip_scale4(const double *g, int one, pf_dd f, double ey, pf_dtype t,
                                        pf_oracle_result *out, size_t i) {
  const pf_dd4 gx = pf4_d(_mm256_loadu_pd(g));
  const pf_dd4 y = one ? gx : pf4_mul(gx, pf4_bcast(f));
  const __m256d err = one ? _mm256_setzero_pd() : _mm256_mul_pd(pf4_c(ey), pf4_abs(y.hi));
  __m256d r;
  const int mask = _mm256_movemask_pd(pf4_settle(y, err, t, &r));
  if (mask) pf4_store_settled(out, i, mask, y, r, t);
  return mask;
}
#endif

PF_DD_CLONES int pf_clip_fast(const double *g, size_t kn, int inf_norm, pf_dtype norm_t, pf_dtype t,
                              double max_norm, pf_oracle_result *out) {
  pf_dd N;
  double eN;
  if (inf_norm) {
    double m = 0;
    for (size_t x = 0; x < kn; x++) m = fabs(g[x]) > m ? fabs(g[x]) : m;
    N = (pf_dd){m, 0}, eN = 0;
  } else {
    double rel;
    const pf_dd S = pf_dd_sum_squares(g, kn, &rel);
    if (S.hi == 0) N = S, eN = 0;
    else {
      N = pf_dd_sqrt(S);
      eN = (rel / 2 + 0x1p-102) * (1 + 0x1p-40);
    }
  }
  if (!pf_fast_settle(out, 0, N, eN * N.hi, norm_t)) return 0;
  /* f = max_norm / (N + 1e-6), the constant the definition adds as a binary64 number */
  const pf_dd D = pf_dd_add_d(N, 1e-6), f = pf_dd_div((pf_dd){max_norm, 0}, D);
  const double ef = (eN + 0x1p-103 + 0x1p-99) * (1 + 0x1p-40);
  int one;
  if (f.hi * (1 - 2 * ef) >= 1) one = 1;
  else if (f.hi * (1 + 2 * ef) < 1 && (f.hi == 0 || f.hi >= 0x1p-900)) one = 0;
  else return 0; /* f's enclosure straddles 1, or f near binary64's underflow */
  const double ey = (ef + 0x1p-100) * (1 + 0x1p-40);
  int lanes = 0; /* the current block of four: the outputs the vector test settled */
#ifdef PF_DD_AVX2
  const int avx2 = pf_avx2();
#endif
  for (size_t x = 0; x < kn; x++) {
#ifdef PF_DD_AVX2
    if (x % 4 == 0) lanes = avx2 && x + 4 <= kn ? pf_clip_scale4(g + x, one, f, ey, t, out, 1 + x) : 0;
#endif
    if (lanes >> (x % 4) & 1) continue;
    if (one) {
      if (!pf_fast_settle(out, 1 + x, (pf_dd){g[x], 0}, 0, t)) return 0;
      continue;
    }
    const pf_dd y = pf_dd_mul((pf_dd){g[x], 0}, f);
    if (!pf_fast_settle(out, 1 + x, y, ey * fabs(y.hi), t)) return 0;
  }
  return 1;
}
