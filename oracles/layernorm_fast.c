/* The LayerNorm oracle's fast path: the same definition as layernorm_mpfr.c (mean = S / n,
 * var = (1/n) sum (x - mean)^2, rstd = 1 / sqrt(var + eps) or 1 / (sqrt(var) + eps),
 * y = (x - mean) rstd g' + beta), in double-word arithmetic (dd.h) with a proven error bound,
 * trusted only where the bound decides every output of the row (pf_fast_settle).
 *
 * Error budget (u = 2^-53; relative bounds of dd.h's operations):
 *   S            Sum2 (Ogita, Rump and Oishi 2005, Prop. 4.5) kept as a double word: within
 *                gamma_{n-1}^2 sum |x| of the exact sum
 *   mean         S / n (DWDivDW3, 9.8u^2): em = eS / n + 9.8u^2 |mean|
 *   d_j          x_j - mean (DWPlusFP, 2u^2 |d_j|): against x_j - m~ for the computed m~
 *   V            sum d_j^2 as Dot2 does (Ogita, Rump and Oishi 2005): d.hi^2 split exactly (TwoProduct),
 *                added by TwoSum into four interleaved sums (lanes j mod 4, the same order with AVX2 and
 *                without), whose errors, the products' low parts and 2 d.hi d.lo (2u^2 d^2 off, and
 *                d.lo^2 dropped: u^2 d^2) gather in a second sum, rounded within 3n u of its terms'
 *                magnitude (at most 3n u^2 V each): within (3n^2 + 3n + 7) u^2 V of sum (x - m~)^2
 *                (with the 4.1u^2 V of the d_j's own error), which is the exact n var + n (m~ - m)^2
 *                (the mean's error enters squared: sum (x - m) = 0)
 *   var, w, den  V / n (9.8u^2), + eps (2u^2), sqrt (2^-102; a relative error e of its operand
 *                moves the root by at most 0.51 e for e <= 2^-40)
 *   rstd         1 / den (9.8u^2)
 *   y_j          (d_j rstd) g' (5u^2 each), + beta (2u^2), d_j off x_j - m by em + 2u^2 |d_j|
 * Every operand stays far from binary64's underflow and overflow (checked). */
#include "oracles/layernorm_fast.h"

#include <math.h>

#include "core/parallel.h"
#include "oracles/dd.h"
#include "oracles/dd_avx2.h"

#define PF_U2 0x1p-106 /* u^2 */

/* What y_j's enclosure needs beyond the row: its mean (negated), rstd and their bounds. */
typedef struct {
  pf_dd nm, r;
  double em, rr;
  int zc;
  pf_dtype t;
} pf_ln_fast_y;

/* y_j = (d_j r) g' + beta with its bound: 1 when settled into output i */
static inline int pf_ln_fast_y1(const pf_ln_fast_y *k, double x, double g, double b, pf_oracle_result *out, size_t i) {
  const pf_dd d = pf_dd_add_d(k->nm, x);
  const double eta = k->em + 2.02 * PF_U2 * fabs(d.hi); /* |d - (x - m)| */
  const pf_dd pr = pf_dd_mul(d, k->r);
  const double ep = fabs(pr.hi) * (k->rr + 5.1 * PF_U2) * (1 + 2 * k->rr) + k->r.hi * (1 + k->rr) * eta;
  const pf_dd gg = k->zc ? pf_two_sum(1.0, g) : (pf_dd){g, 0};
  const pf_dd q = pf_dd_mul(pr, gg);
  const double eq = fabs(gg.hi) * (1 + 0x1p-52) * ep + 5.1 * PF_U2 * fabs(q.hi) * (1 + 0x1p-40);
  const pf_dd y = pf_dd_add_d(q, b);
  const double ey = (eq + 2.02 * PF_U2 * fabs(y.hi)) * (1 + 0x1p-40);
  return pf_fast_settle(out, i, y, ey, k->t);
}

#ifdef PF_DD_AVX2
/* the same, four lanes: the lanes the cheap test settles are written and returned as a mask;
 * the scalar path takes the others (it computes the same values) */
PF_AVX2_TARGET static int pf_ln_fast_y4(const pf_ln_fast_y *k, const double *x, const double *g, const double *b,
                                        pf_oracle_result *out, size_t i) {
  const pf_dd4 d = pf4_add_d(pf4_bcast(k->nm), _mm256_loadu_pd(x));
  const __m256d eta = _mm256_add_pd(pf4_c(k->em), _mm256_mul_pd(pf4_c(2.02 * PF_U2), pf4_abs(d.hi)));
  const pf_dd4 pr = pf4_mul(d, pf4_bcast(k->r));
  const __m256d ep = _mm256_add_pd(_mm256_mul_pd(pf4_abs(pr.hi), pf4_c((k->rr + 5.1 * PF_U2) * (1 + 2 * k->rr))),
                                   _mm256_mul_pd(pf4_c(k->r.hi * (1 + k->rr)), eta));
  const __m256d gv = _mm256_loadu_pd(g);
  const pf_dd4 gg = k->zc ? pf4_two_sum(pf4_c(1.0), gv) : pf4_d(gv);
  const pf_dd4 q = pf4_mul(pr, gg);
  const __m256d eq = _mm256_add_pd(_mm256_mul_pd(_mm256_mul_pd(pf4_abs(gg.hi), pf4_c(1 + 0x1p-52)), ep),
                                   _mm256_mul_pd(pf4_c(5.1 * PF_U2 * (1 + 0x1p-40)), pf4_abs(q.hi)));
  const pf_dd4 y = pf4_add_d(q, _mm256_loadu_pd(b));
  const __m256d ey = _mm256_mul_pd(_mm256_add_pd(eq, _mm256_mul_pd(pf4_c(2.02 * PF_U2), pf4_abs(y.hi))), pf4_c(1 + 0x1p-40));
  __m256d r;
  const int mask = _mm256_movemask_pd(pf4_settle(y, ey, k->t, &r));
  if (mask) pf4_store_settled(out, i, mask, y, r, k->t);
  return mask;
}

/* V's four interleaved sums over j < n4 (a multiple of 4), as the scalar loop adds them */
PF_AVX2_TARGET static void pf_ln_fast_v4(pf_dd nm, const double *x, size_t n4, double *acc, double *cor) {
  __m256d a = _mm256_setzero_pd(), c = _mm256_setzero_pd();
  const pf_dd4 m = pf4_bcast(nm);
  for (size_t j = 0; j < n4; j += 4) {
    const pf_dd4 d = pf4_add_d(m, _mm256_loadu_pd(x + j));
    const pf_dd4 p = pf4_two_prod(d.hi, d.hi), t = pf4_two_sum(a, p.hi);
    a = t.hi;
    c = _mm256_add_pd(c, _mm256_add_pd(_mm256_add_pd(t.lo, p.lo), _mm256_mul_pd(pf4_c(2.0), _mm256_mul_pd(d.hi, d.lo))));
  }
  _mm256_storeu_pd(acc, a);
  _mm256_storeu_pd(cor, c);
}
#endif

PF_DD_CLONES int pf_ln_fast_stats(const pf_ln_fast_params *p, const double *x, pf_dd *nm_out, double *em_out,
                                  pf_dd *r_out, double *rr_out) {
  const size_t n = p->cols;
  const double dn = (double)n;
  if (n == 0 || n >= ((size_t)1 << 26)) return 0;
  /* Sum2, and sum |x| (rounded up by its own gamma_n) */
  double s = 0, cs = 0, a1 = 0;
  for (size_t j = 0; j < n; j++) {
    if (!(fabs(x[j]) <= 0x1p300)) return 0; /* non-finite or huge: MPFR's */
    const pf_dd t = pf_two_sum(s, x[j]);
    s = t.hi;
    cs += t.lo;
    a1 += fabs(x[j]);
  }
  const double gam = dn * 0x1p-53 / (1 - dn * 0x1p-53);
  a1 *= 1 + gam;
  const pf_dd S = pf_two_sum(s, cs);
  const double eS = gam * gam * a1 * (1 + 0x1p-40);
  const pf_dd mean = pf_dd_div(S, (pf_dd){dn, 0});
  const double em = (eS / dn + 9.9 * PF_U2 * fabs(mean.hi)) * (1 + 0x1p-40);
  if (mean.hi != 0 && fabs(mean.hi) < 0x1p-900) return 0;
  /* V = sum (x - m~)^2, in four interleaved sums (lane j mod 4) and their corrections */
  const pf_dd nm = pf_dd_neg(mean);
  double acc[4] = {0, 0, 0, 0}, cor[4] = {0, 0, 0, 0};
  size_t j0 = 0;
#ifdef PF_DD_AVX2
  if (pf_avx2()) pf_ln_fast_v4(nm, x, j0 = n / 4 * 4, acc, cor);
#endif
  for (size_t j = j0; j < n; j++) {
    const pf_dd d = pf_dd_add_d(nm, x[j]);
    const pf_dd pq = pf_two_prod(d.hi, d.hi), t = pf_two_sum(acc[j % 4], pq.hi);
    acc[j % 4] = t.hi;
    cor[j % 4] += (t.lo + pq.lo) + 2.0 * (d.hi * d.lo);
  }
  pf_dd V = pf_two_sum(acc[0], acc[1]);
  V = pf_dd_add(V, pf_two_sum(acc[2], acc[3]));
  V = pf_dd_add_d(V, (cor[0] + cor[1]) + (cor[2] + cor[3]));
  if (!(V.hi >= 0x1p-900 && V.hi <= 0x1p900)) return 0; /* a constant row (V = 0) among them: MPFR's */
  const double eV = (dn * em * em + (3 * dn * dn + 3 * dn + 16) * PF_U2 * V.hi) * (1 + 0x1p-40);
  /* the denominator of rstd, den, and its relative error rd */
  pf_dd den;
  double rd;
  if (p->eps_outside) {
    const double rv = eV / V.hi; /* V's, and var's before the division */
    if (!(rv <= 0x1p-40)) return 0;
    const pf_dd sd = pf_dd_sqrt(pf_dd_div(V, (pf_dd){dn, 0})); /* sqrt(var), var = V / n */
    const double es = fabs(sd.hi) * (0.51 * (rv + 9.9 * PF_U2) + 0x1p-102);
    den = pf_dd_add_d(sd, p->eps);
    rd = (es + 2.02 * PF_U2 * fabs(den.hi)) / fabs(den.hi);
  } else {
    const pf_dd var = pf_dd_div(V, (pf_dd){dn, 0});
    const double ev = eV / dn + 9.9 * PF_U2 * var.hi;
    const pf_dd w = pf_dd_add_d(var, p->eps);
    if (!(w.hi >= 0x1p-900)) return 0;
    const double rw = (ev + 2.02 * PF_U2 * w.hi) / w.hi;
    if (!(rw <= 0x1p-40)) return 0;
    den = pf_dd_sqrt(w);
    rd = 0.51 * rw + 0x1p-102;
  }
  if (!(rd <= 0x1p-40) || !(den.hi >= 0x1p-900 && den.hi <= 0x1p900)) return 0;
  *r_out = pf_dd_div((pf_dd){1, 0}, den);
  *rr_out = (rd * (1 + 2 * rd) + 9.9 * PF_U2) * (1 + 0x1p-40);
  *nm_out = nm;
  *em_out = em;
  return 1;
}

PF_DD_CLONES int pf_ln_fast_row(const pf_ln_fast_params *p, const double *x, const double *g, const double *b,
                                size_t i, pf_oracle_result *out) {
  const size_t n = p->cols;
  pf_dd nm, r;
  double em, rr;
  if (!pf_ln_fast_stats(p, x, &nm, &em, &r, &rr)) return 0;
  if (!pf_fast_settle(out, i, pf_dd_neg(nm), em, p->stats)) return 0;
  if (!pf_fast_settle(out, p->rows + i, r, rr * r.hi, p->stats)) return 0;
  /* y_j = (d_j r) g' + beta */
  const size_t y0 = p->y_at + i * n;
  for (size_t j = 0; j < n; j++)
    if (!isfinite(g[j]) || !isfinite(b[j]) || fabs(g[j]) > 0x1p300 || fabs(b[j]) > 0x1p300) return 0;
  const pf_ln_fast_y k = {nm, r, em, rr, p->zero_centered, p->dtype};
  int lanes = 0; /* the current block of four: the outputs the vector test settled */
#ifdef PF_DD_AVX2
  const int avx2 = pf_avx2();
#endif
  for (size_t j = 0; j < n; j++) {
#ifdef PF_DD_AVX2
    if (j % 4 == 0) lanes = avx2 && j + 4 <= n ? pf_ln_fast_y4(&k, x + j, g + j, b + j, out, y0 + j) : 0;
#endif
    if (lanes >> (j % 4) & 1) continue;
    if (!pf_ln_fast_y1(&k, x[j], g[j], b[j], out, y0 + j)) return 0;
  }
  return 1;
}
