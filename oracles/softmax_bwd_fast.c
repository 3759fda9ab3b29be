/* The softmax backward oracle's fast path: the definition of softmax_bwd_mpfr.c for one row,
 *
 *   dx_i = s_i (w_i - T / Z),  s_i = e_i / Z,  e_j = exp(x_j - m),  Z = sum_j e_j,
 *   w_j = dy_j - c,  T = sum_j w_j e_j   (m = x[jm], c = dy[jm]: the sum taken around c, as
 *                                         the MPFR path takes it, so that a constant dy gives 0)
 *
 * in double-word arithmetic (dd.h) with a proven error bound, trusted only where the enclosure
 * decides every output of the row (Ziv's strategy); a row it cannot decide is MPFR's, and so is
 * every output whose w_i - T / Z cancels by more than the bound allows.
 *
 * Error budget (each double-word operation taken at 2^-100 relative, twice what dd.h proves,
 * EOP; pf_dd_exp within 2^-87, EEXP), carried as an absolute bound per quantity:
 *   x_j - m, w_j           exact (two-sums; the inputs are values of a 16- or 32-bit dtype)
 *   e_j                    EEXP relative; a term more than 746 below the maximum is below
 *                          2^-1076 and taken as 0 with that absolute error; a row with a term
 *                          between 600 and 746 below goes to MPFR (dd.h's bounds end where a
 *                          low part leaves binary64's normal range)
 *   Z (positive terms)     EEXP + n EOP relative, in any order, plus the zeros (Z >= 1)
 *   T                      each product |w_j e_j| (EEXP + EOP), each add EOP of its operands,
 *                          each zero term |w_j| 2^-1074; a product below 2^-900 (where a low
 *                          part may be subnormal) 2^-945 absolute
 *   q = T / Z              errT / Z + |q| (dZ + 2 EOP)
 *   w_i - q, s_i, dx_i     an add, a quotient and a product, each with its EOP; first-order
 *                          terms widened by 1% for the second-order ones. */
#include "oracles/softmax_bwd_fast.h"

#include <math.h>

#define EOP 0x1p-100
#define EEXP 0x1p-87

/* a bound times a magnitude, rounded up and never to 0 unless a factor is 0 (binary64's
 * underflow would): a dropped term's bound must reach every output it touches, or an output
 * that is 0 only because of the drop would be taken as an exact 0 */
static inline double pf_sbf_mul_up(double a, double b) { return a == 0 || b == 0 ? 0 : a * b * 1.01 + 0x1p-1074; }
/* a double-word add's rounding: EOP of the operands' magnitudes */
static double pf_sbf_add_err(pf_dd a, pf_dd b) { return 2 * EOP * (fabs(a.hi) + fabs(b.hi)); }

PF_DD_CLONES int pf_softmax_bwd_fast_row(const double *x, const double *dy, size_t cols, size_t jm, pf_oracle_result *out,
                                         size_t base, pf_dtype dt, pf_dd *e) {
  const double m = x[jm], c = dy[jm], n = (double)cols;
  pf_dd *w = e + cols;
  pf_dd Z = {0, 0}, T = {0, 0};
  double k = 0, errT = 0;
  for (size_t j = 0; j < cols; j++) {
    const pf_dd z = pf_two_sum(x[j], -m);
    w[j] = pf_two_sum(dy[j], -c);
    if (z.hi < -746) {
      e[j] = (pf_dd){0, z.hi}; /* negligible; z kept for pf_fast_negligible */
      k += 1;
      /* e_j < 2^-1076: |w_j| 2^-1074, rounded up and never to 0 (a sum that is 0 only because
       * such terms were dropped must not pass for an exact 0) */
      errT += pf_sbf_mul_up(fabs(w[j].hi), 0x1p-1074);
      continue;
    }
    if (z.hi < -600) return 0;
    e[j] = pf_dd_exp(z);
    Z = pf_dd_add(Z, e[j]);
    if (w[j].hi == 0) continue;
    const pf_dd p = pf_dd_mul(w[j], e[j]);
    errT += fabs(p.hi) < 0x1p-900 ? 0x1p-945 : fabs(p.hi) * (EEXP + EOP) * 1.01;
    errT += pf_sbf_add_err(T, p);
    T = pf_dd_add(T, p);
  }
  if (T.hi != 0 && fabs(T.hi) < 0x1p-900) return 0; /* a low part possibly subnormal */
  const double dZ = EEXP + n * EOP + k * 0x1p-1074;
  const pf_dd inv = pf_dd_div((pf_dd){1, 0}, Z);
  const double rinv = dZ * 1.01 + 2 * EOP; /* inv's error, relative */
  const pf_dd q = pf_dd_mul(T, inv);
  const double errq = pf_sbf_mul_up(errT, fabs(inv.hi) * (1 + rinv)) + fabs(q.hi) * (rinv + 2 * EOP) * 1.01;
  for (size_t i = 0; i < cols; i++) {
    const pf_dd d = pf_dd_add(w[i], pf_dd_neg(q));
    const double errd = errq + pf_sbf_add_err(w[i], q);
    if (e[i].hi == 0) {
      /* s_i below 2^-1076: dx_i = s_i d_i is 0 in binary64 and every dtype (or MPFR's TINY)
       * when d_i's sign and size are known and |d_i| < 2^20 */
      if (!(errd < 0.5 * fabs(d.hi) && fabs(d.hi) < 0x1p20)) return 0;
      if (!pf_fast_negligible(out, base + i, dt, e[i].lo, Z.hi / fabs(d.hi))) return 0;
      continue;
    }
    const pf_dd s = pf_dd_mul(e[i], inv);
    const double rs = EEXP * 1.01 + rinv + 2 * EOP; /* s_i's error, relative */
    const pf_dd dx = pf_dd_mul(s, d);
    const double errdx = pf_sbf_mul_up(fabs(s.hi) * (1 + rs), errd) + fabs(dx.hi) * (rs + 2 * EOP) * 1.01;
    if (!pf_fast_settle(out, base + i, dx, errdx, dt)) return 0;
  }
  return 1;
}
