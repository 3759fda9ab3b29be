/* The RMSNorm oracle's fast path: the same definition as rmsnorm_mpfr.c (rstd = 1 / sqrt(Q / n
 * + eps), Q = sum x^2, y = x rstd g'), in double-word arithmetic (dd.h) with a proven error
 * bound, trusted only where the bound decides every output of the row (pf_fast_settle).
 *
 * Error budget (u = 2^-53):
 *   Q            the squares are exact in binary64 (x has at most 24 bits) and positive: Sum2 kept
 *                as a double word (pf_dd_sum_squares) is within gamma_n^2 Q
 *   w            Q / n (DWDivDW3, 9.8u^2) + eps (DWPlusFP, 2u^2 |w|)
 *   den, rstd    sqrt (2^-102; a relative error e of its operand moves the root by at most
 *                0.51 e for e <= 2^-40), 1 / den (9.8u^2)
 *   y_j          x_j rstd (x_j exact: 5u^2), times g' (5u^2; 1 + g exact as a double word)
 * Every operand stays far from binary64's underflow and overflow (checked). */
#include "oracles/rmsnorm_fast.h"

#include <math.h>

#include "core/parallel.h"
#include "oracles/dd.h"
#include "oracles/dd_avx2.h"

#define PF_U2 0x1p-106 /* u^2 */

#ifdef PF_DD_AVX2
/* y for four columns: the lanes the cheap test settles are written and returned as a mask; the
 * scalar path takes the others (it computes the same values) */
PF_AVX2_TARGET static int pf_rms_fast_y4(pf_dd r, double rr, int zc, pf_dtype t, const double *x, const double *g,
                                         pf_oracle_result *out, size_t i) {
  const pf_dd4 p = pf4_mul(pf4_d(_mm256_loadu_pd(x)), pf4_bcast(r));
  const __m256d gv = _mm256_loadu_pd(g);
  const pf_dd4 gg = zc ? pf4_two_sum(pf4_c(1.0), gv) : pf4_d(gv);
  const pf_dd4 y = pf4_mul(p, gg);
  const __m256d ey = _mm256_mul_pd(pf4_abs(y.hi), pf4_c((rr + 10.3 * PF_U2) * (1 + 0x1p-40)));
  __m256d v;
  const int mask = _mm256_movemask_pd(pf4_settle(y, ey, t, &v));
  if (mask) pf4_store_settled(out, i, mask, y, v, t);
  return mask;
}
#endif

PF_DD_CLONES int pf_rms_fast_stats(const pf_rms_fast_params *p, const double *x, pf_dd *r_out, double *rr_out) {
  const size_t n = p->cols;
  const double dn = (double)n;
  if (n == 0 || n >= ((size_t)1 << 26)) return 0;
  for (size_t j = 0; j < n; j++)
    if (!(fabs(x[j]) <= 0x1p300)) return 0; /* non-finite or huge: MPFR's */
  double rq;
  const pf_dd Q = pf_dd_sum_squares(x, n, &rq);
  const pf_dd ms = pf_dd_div(Q, (pf_dd){dn, 0});
  const pf_dd w = pf_dd_add_d(ms, p->eps);
  if (!(w.hi >= 0x1p-900 && w.hi <= 0x1p900)) return 0; /* a row of zeros with eps 0 among them */
  /* w's relative error: Q's, the division's, the add's (both terms positive) */
  const double rw = (rq + 9.9 * PF_U2 + 2.02 * PF_U2) * (1 + 0x1p-40);
  if (!(rw <= 0x1p-40)) return 0;
  const pf_dd den = pf_dd_sqrt(w);
  *r_out = pf_dd_div((pf_dd){1, 0}, den);
  const double rd = 0.51 * rw + 0x1p-102;
  *rr_out = (rd * (1 + 2 * rd) + 9.9 * PF_U2) * (1 + 0x1p-40);
  return 1;
}

PF_DD_CLONES int pf_rms_fast_row(const pf_rms_fast_params *p, const double *x, const double *g, size_t i,
                                 pf_oracle_result *out) {
  const size_t n = p->cols;
  for (size_t j = 0; j < n; j++)
    if (!(fabs(g[j]) <= 0x1p300)) return 0; /* non-finite or huge: MPFR's */
  pf_dd r;
  double rr;
  if (!pf_rms_fast_stats(p, x, &r, &rr)) return 0;
  if (!pf_fast_settle(out, i, r, rr * r.hi, p->stats)) return 0;
  const size_t y0 = p->y_at + i * n;
  int lanes = 0;
#ifdef PF_DD_AVX2
  const int avx2 = pf_avx2();
#endif
  for (size_t j = 0; j < n; j++) {
#ifdef PF_DD_AVX2
    if (j % 4 == 0) lanes = avx2 && j + 4 <= n ? pf_rms_fast_y4(r, rr, p->zero_centered, p->dtype, x + j, g + j, out, y0 + j) : 0;
#endif
    if (lanes >> (j % 4) & 1) continue;
    const pf_dd pr = pf_dd_mul((pf_dd){x[j], 0}, r);
    const pf_dd gg = p->zero_centered ? pf_two_sum(1.0, g[j]) : (pf_dd){g[j], 0};
    const pf_dd y = pf_dd_mul(pr, gg);
    if (!pf_fast_settle(out, y0 + j, y, fabs(y.hi) * (rr + 10.3 * PF_U2) * (1 + 0x1p-40), p->dtype)) return 0;
  }
  return 1;
}
