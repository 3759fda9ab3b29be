/* The cross-entropy oracle's fast path: the definition of cross_entropy_mpfr.c for one row,
 *
 *   lse = m + log Z,  Z = sum_j e_j,  e_j = exp(x_j - m),  Z_t = Z - e_t,
 *   loss = lse - (1 - eps) x_t - (eps / C) sum_j x_j + z lse^2,
 *   dx_j = g (e_j zf / Z - eps / C) (j != t),  dx_t = g ((e_t (zf - (1 - eps)) - (1 - eps) Z_t) / Z - eps / C),
 *   zf = 1 + 2 z lse,
 *
 * in double-word arithmetic (dd.h) with a proven error bound, trusted only where the enclosure
 * decides every output of the row (Ziv's strategy); a row it cannot decide is MPFR's.
 *
 * Error budget (u = 2^-53; each double-word operation taken at 2^-100 relative, twice what
 * dd.h proves, EOP below; pf_dd_exp within 2^-87, EEXP):
 *   x_j - m                   exact (a two-sum)
 *   e_j                       EEXP relative; terms more than 746 below the maximum are below
 *                             2^-1074 and taken as 0 with that absolute error; a row with a term
 *                             between 600 and 746 below goes to MPFR (a low part could leave
 *                             binary64's normal range there, where dd.h's bounds end)
 *   Z, Z_t (positive terms)   EEXP + n EOP relative, any order, plus the zeros. 2^-1074 each
 *   log Z                     y0 = log(Z.hi) in binary64, r = Z exp(-y0) - 1 (|r| < 2^-40),
 *                             log Z = y0 + r - r^2 / 2 + theta r^3: the error of Z (relative,
 *                             so absolute in log Z) + r's (EEXP + 3 EOP) + |r|^3 + the adds
 *   then every product, quotient and sum adds its EOP (twice for a quotient, as the inputs'
 *   relative errors combine), carried as an absolute bound per quantity. */
#include "oracles/cross_entropy_fast.h"

#include <math.h>

#define EOP 0x1p-100
#define EEXP 0x1p-87

/* |a + b|'s rounding in a double-word add: EOP of the operands' magnitudes (the result's is
 * smaller where they cancel) */
static double pf_cef_add_err(pf_dd a, pf_dd b) { return 2 * EOP * (fabs(a.hi) + fabs(b.hi)); }

int pf_ce_fast_row(const double *x, size_t cols, size_t t, double eps, double z, double nc, pf_oracle_result *out,
                   size_t i, pf_dtype lt, size_t base, pf_dtype dt, pf_dd *e, pf_dd *loss_out, double *err_out) {
  const double n = (double)cols;
  double m = -INFINITY;
  for (size_t j = 0; j < cols; j++) m = x[j] > m ? x[j] : m;
  pf_dd Z = {0, 0}, Zt = {0, 0};
  double k = 0;
  for (size_t j = 0; j < cols; j++) {
    const pf_dd zz = pf_two_sum(x[j], -m);
    if (zz.hi < -746) {
      e[j] = (pf_dd){0, zz.hi}; /* negligible; z kept for pf_fast_negligible */
      k += 1;
      continue;
    }
    if (zz.hi < -600) return 0;
    e[j] = pf_dd_exp(zz);
    Z = pf_dd_add(Z, e[j]);
    if (j != t) Zt = pf_dd_add(Zt, e[j]);
  }
  if (!(Zt.hi > 0x1p-900)) return 0; /* the target's gradient p_t - 1 = -Z_t / Z too small to carry */
  const double dZ = EEXP + n * EOP + k * 0x1p-1074, dZt = EEXP + n * EOP + k * 0x1p-1074 / Zt.hi;
  /* log Z (Z >= 1: the maximum's term is exp(0)) */
  const double y0 = log(Z.hi);
  const pf_dd r = pf_dd_add_d(pf_dd_mul(Z, pf_dd_exp((pf_dd){-y0, 0})), -1.0);
  if (!(fabs(r.hi) < 0x1p-40)) return 0;
  const double r2 = 0.5 * r.hi * r.hi;
  const pf_dd L = pf_dd_add((pf_dd){y0, 0}, pf_dd_add_d(r, -r2));
  const double errL = (dZ + 1.01 * (EEXP + 3 * EOP)) * (1 + 0x1p-30) + fabs(r.hi) * r.hi * r.hi + r.hi * r.hi * 0x1p-50 +
                      2 * EOP * (y0 + fabs(r.hi));
  const pf_dd lse = pf_dd_add((pf_dd){m, 0}, L);
  const double errlse = errL + pf_cef_add_err((pf_dd){m, 0}, L);
  /* the loss */
  const pf_dd c1 = pf_two_sum(1.0, -eps), ceps = eps != 0 ? pf_dd_div((pf_dd){eps, 0}, (pf_dd){n, 0}) : (pf_dd){0, 0};
  const pf_dd p1 = pf_dd_mul(c1, (pf_dd){x[t], 0});
  pf_dd loss = pf_dd_add(lse, pf_dd_neg(p1));
  double err = errlse + 2 * EOP * fabs(p1.hi) + pf_cef_add_err(lse, p1);
  if (eps != 0) {
    pf_dd sx = {0, 0};
    double asum = 0;
    for (size_t j = 0; j < cols; j++) sx = pf_dd_add_d(sx, x[j]), asum += fabs(x[j]);
    const pf_dd p2 = pf_dd_mul(ceps, sx);
    err += fabs(ceps.hi) * n * EOP * asum * 1.01 + 4 * EOP * fabs(p2.hi) + pf_cef_add_err(loss, p2);
    loss = pf_dd_add(loss, pf_dd_neg(p2));
  }
  if (z != 0) {
    const pf_dd l2 = pf_dd_mul(lse, lse), p3 = pf_dd_mul((pf_dd){z, 0}, l2);
    err += z * (2 * fabs(lse.hi) * errlse * 1.01 + errlse * errlse + 2 * EOP * fabs(l2.hi)) + 2 * EOP * fabs(p3.hi) +
           pf_cef_add_err(loss, p3);
    loss = pf_dd_add(loss, p3);
  }
  if (!pf_fast_settle(out, i, loss, err, lt)) return 0;
  *loss_out = loss, *err_out = err;
  /* the gradient */
  pf_dd zf = {1, 0};
  double errzf = 0;
  if (z != 0) {
    const pf_dd tz = pf_dd_mul((pf_dd){2 * z, 0}, lse);
    zf = pf_dd_add_d(tz, 1.0);
    errzf = 2 * z * errlse * 1.01 + 2 * EOP * fabs(tz.hi) + pf_cef_add_err(tz, (pf_dd){1, 0});
  }
  const pf_dd inv = pf_dd_div((pf_dd){1, 0}, Z), gd = nc != 0 ? pf_dd_div((pf_dd){1, 0}, (pf_dd){nc, 0}) : (pf_dd){1, 0};
  const double rZ = dZ * (1 + 0x1p-30) + 2 * EOP, rg = nc != 0 ? 2 * EOP : 0;
  for (size_t j = 0; j < cols; j++) {
    pf_dd v;
    double ev;
    if (j != t) {
      if (e[j].hi == 0 && eps == 0) {
        /* g zf exp(z) / Z with exp(z) below 2^-1076 of Z: 0 in binary64 and every dtype, or MPFR's
         * TINY, provided |g zf| <= 1 (a large z-loss factor could lift it into binary64's range) */
        if (!(fabs(zf.hi) + errzf <= 1) || !pf_fast_negligible(out, base + j, dt, e[j].lo, Z.hi)) return 0;
        continue;
      }
      if (e[j].hi == 0) {
        v = (pf_dd){0, 0}, ev = (fabs(zf.hi) + errzf) * 0x1p-1074;
      } else {
        v = pf_dd_mul(pf_dd_mul(e[j], zf), inv);
        ev = fabs(v.hi) * (EEXP + rZ + 4 * EOP) + fabs(e[j].hi * inv.hi) * errzf * 1.01;
      }
      if (eps != 0) {
        ev += 4 * EOP * fabs(ceps.hi) + pf_cef_add_err(v, ceps);
        v = pf_dd_add(v, pf_dd_neg(ceps));
      }
    } else {
      const pf_dd a = pf_dd_add(zf, pf_dd_neg(c1));
      const double ea = errzf + pf_cef_add_err(zf, c1);
      const pf_dd A = e[t].hi == 0 ? (pf_dd){0, 0} : pf_dd_mul(e[t], a);
      const double eA = e[t].hi == 0 ? (fabs(a.hi) + ea) * 0x1p-1074 : fabs(e[t].hi) * ea * 1.01 + fabs(A.hi) * (EEXP + 2 * EOP);
      const pf_dd B = pf_dd_mul(c1, Zt);
      pf_dd num = pf_dd_add(A, pf_dd_neg(B));
      double en = eA + fabs(B.hi) * (dZt + 2 * EOP) + pf_cef_add_err(A, B);
      if (eps != 0) {
        const pf_dd C = pf_dd_mul(ceps, Z);
        en += fabs(C.hi) * (dZ + 6 * EOP) + pf_cef_add_err(num, C);
        num = pf_dd_add(num, pf_dd_neg(C));
      }
      v = pf_dd_mul(num, inv);
      ev = en * fabs(inv.hi) * (1 + rZ) * 1.01 + fabs(v.hi) * (rZ + 2 * EOP);
    }
    const pf_dd dx = pf_dd_mul(gd, v);
    const double edx = fabs(gd.hi) * ev * (1 + rg) + fabs(dx.hi) * (2 * EOP + rg);
    if (!pf_fast_settle(out, base + j, dx, edx, dt)) return 0;
  }
  return 1;
}
