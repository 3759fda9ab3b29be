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
 *   V            sum d_j^2 (DWTimesDW3 5u^2 each, AccurateDWPlusDW 3u^2/(1-4u) per partial sum, all
 *                positive): within (9.1 + 3.01 n) u^2 V of sum (x - m~)^2, which is the exact
 *                n var + n (m~ - m)^2 (the mean's error enters squared: sum (x - m) = 0)
 *   var, w, den  V / n (9.8u^2), + eps (2u^2), sqrt (2^-102; a relative error e of its operand
 *                moves the root by at most 0.51 e for e <= 2^-40)
 *   rstd         1 / den (9.8u^2)
 *   y_j          (d_j rstd) g' (5u^2 each), + beta (2u^2), d_j off x_j - m by em + 2u^2 |d_j|
 * Every operand stays far from binary64's underflow and overflow (checked). */
#include "oracles/layernorm_fast.h"

#include <math.h>

#include "oracles/dd.h"

#define PF_U2 0x1p-106 /* u^2 */

PF_DD_CLONES int pf_ln_fast_row(const pf_ln_fast_params *p, const double *x, const double *g, const double *b,
                                size_t i, pf_oracle_result *out) {
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
  if (!pf_fast_settle(out, i, mean, em, p->stats)) return 0;
  /* V = sum (x - m~)^2 */
  pf_dd V = {0, 0};
  const pf_dd nm = pf_dd_neg(mean);
  for (size_t j = 0; j < n; j++) {
    const pf_dd d = pf_dd_add_d(nm, x[j]);
    V = pf_dd_add(V, pf_dd_mul(d, d));
  }
  if (!(V.hi >= 0x1p-900 && V.hi <= 0x1p900)) return 0; /* a constant row (V = 0) among them: MPFR's */
  const double eV = (dn * em * em + (3.02 * dn + 9.2) * PF_U2 * V.hi) * (1 + 0x1p-40);
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
  const pf_dd r = pf_dd_div((pf_dd){1, 0}, den);
  const double rr = (rd * (1 + 2 * rd) + 9.9 * PF_U2) * (1 + 0x1p-40);
  if (!pf_fast_settle(out, p->rows + i, r, rr * r.hi, p->stats)) return 0;
  /* y_j = (d_j r) g' + beta */
  const size_t y0 = p->y_at + i * n;
  for (size_t j = 0; j < n; j++) {
    if (!isfinite(g[j]) || !isfinite(b[j]) || fabs(g[j]) > 0x1p300 || fabs(b[j]) > 0x1p300) return 0;
    const pf_dd d = pf_dd_add_d(nm, x[j]);
    const double eta = em + 2.02 * PF_U2 * fabs(d.hi); /* |d - (x - m)| */
    const pf_dd pr = pf_dd_mul(d, r);
    const double ep = fabs(pr.hi) * (rr + 5.1 * PF_U2) * (1 + 2 * rr) + r.hi * (1 + rr) * eta;
    const pf_dd gg = p->zero_centered ? pf_two_sum(1.0, g[j]) : (pf_dd){g[j], 0};
    const pf_dd q = pf_dd_mul(pr, gg);
    const double eq = fabs(gg.hi) * (1 + 0x1p-52) * ep + 5.1 * PF_U2 * fabs(q.hi) * (1 + 0x1p-40);
    const pf_dd y = pf_dd_add_d(q, b[j]);
    const double ey = (eq + 2.02 * PF_U2 * fabs(y.hi)) * (1 + 0x1p-40);
    if (!pf_fast_settle(out, y0 + j, y, ey, p->dtype)) return 0;
  }
  return 1;
}
