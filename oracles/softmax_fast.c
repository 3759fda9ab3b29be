/* The softmax oracle's fast path: the same definition as softmax_mpfr.c, y_j = exp(t_j) /
 * sum_k exp(t_k) with t_j = alpha x_j exact, computed in double-word arithmetic (dd.h) with a
 * proven relative error bound, and trusted only where its enclosure decides everything the
 * oracle reports (Ziv's strategy): one binary64 value (the exact value as the comparison reads
 * it) and one value of the output dtype. A row it cannot decide goes to MPFR.
 *
 * Error budget (u = 2^-53; the double-word bounds of dd.h taken at twice the published ones:
 * add 8u^2, mul 10u^2, div 20u^2, so at most 2^-101 each):
 *   t_j = alpha x_j          exact (a two-product)
 *   z_j = t_j - m            one add: 2^-101 |z_j|, absolute: |z_j| < 600 gives < 2^-91.7
 *   exp(z_j)                 a table of 2^(j/256) and a short polynomial (pf_dd_exp): below
 *                            2^-93.5 relative, budgeted as 2^-87
 *   sum of n terms           each add 2^-101 of the partial sum: n 2^-101 relative
 *   division                 1/s once (2^-101) and one product (2^-101): 2^-100
 *   so delta = 2^-87 + 2^-91.5 + n 2^-101 + 2^-100 for every output, and the enclosure
 *   [y (1 - delta'), y (1 + delta')] with delta' = delta + 2^-100 (its own two products).
 * Scores below the row's maximum by more than 746 have exp(z) below 2^-1076 of the largest
 * term; they are taken as 0 with that absolute error, counted in the sum's bound, and their
 * outputs (below 2^-1076) are 0 in binary64 and in every dtype. Rows with a score between 600
 * and 746 below the maximum go to MPFR: there a double word's low part (of exp(z), or of an
 * output as small as exp(z) / n) could leave binary64's normal range, where the bounds end. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include <mpfr.h>

#include "harness/dtype.h"
#include "kernels/kernel.h"
#include "oracles/oracle_util.h"
#include "oracles/softmax_fast.h"

/* One row by the fast path: 1 when every output was settled, 0 to leave the row to MPFR.
 * t: the scores as double words, or -inf (masked); m: their maximum. */
PF_DD_CLONES static int pf_softmax_fast_row(const pf_dd *t, pf_dd m, size_t cols, pf_dtype dt, pf_dd *e, pf_oracle_result *out,
                               size_t base) {
  pf_dd s = {0, 0};
  size_t zeros = 0;
  for (size_t j = 0; j < cols; j++) {
    if (isinf(t[j].hi)) { /* -inf: exp is exactly 0 */
      e[j] = (pf_dd){0, -INFINITY};
      continue;
    }
    const pf_dd z = pf_dd_add(t[j], pf_dd_neg(m));
    if (z.hi < -746) { /* below 2^-1076 of the largest term: 0, within that; z kept */
      e[j] = (pf_dd){0, z.hi};
      zeros++;
      continue;
    }
    if (z.hi < -600) return 0;
    e[j] = pf_dd_exp(z);
    s = pf_dd_add(s, e[j]);
  }
  const double delta = 0x1p-87 + 0x1.3p-92 + (double)cols * 0x1p-101 + 0x1p-99 + 0x1p-100;
  /* the terms taken as 0 make the exact sum larger by at most zeros 2^-1076 s (counted as
   * zeros 2^-200, which binary64 can hold) */
  const double delta_zero = (double)zeros * 0x1p-200;
  const pf_dd inv = pf_dd_div((pf_dd){1, 0}, s);
  for (size_t j = 0; j < cols; j++) {
    const size_t i = base + j;
    out->dtype[i] = (unsigned char)dt;
    if (e[j].hi == 0) { /* exp(-inf): 0; below 2^-1076 of the sum: 0 everywhere */
      if (isinf(e[j].lo)) {
        out->exact[i] = out->rounded[i] = out->rounded_alt[i] = 0;
        out->status[i] = PF_ORACLE_NUMBER;
      } else if (!pf_fast_negligible(out, i, dt, e[j].lo, s.hi))
        return 0;
      continue;
    }
    const pf_dd y = pf_dd_mul(e[j], inv);
    const double w = fabs(y.hi) * (delta + delta_zero);
    double a;
    if (!pf_dd_decided(y, w, dt, &a)) { /* the cheap test cannot tell: the ends themselves */
      const pf_dd lo = pf_dd_add(y, (pf_dd){-w, 0}), hi = pf_dd_add(y, (pf_dd){w, 0});
      a = pf_dd_round_dtype(lo, dt);
      if (lo.hi != hi.hi || a != pf_dd_round_dtype(hi, dt)) return 0; /* not decided: MPFR's */
    }
    out->exact[i] = y.hi;
    out->rounded[i] = out->rounded_alt[i] = a;
    out->status[i] = PF_ORACLE_NUMBER;
  }
  return 1;
}

/* A row the definition leaves undefined (a NaN or +inf score, or every score -inf), as the
 * MPFR path says it: 1. */
static int pf_softmax_fast_undefined(pf_oracle_result *out, size_t base, size_t cols) {
  for (size_t j = 0; j < cols; j++) pf_oracle_set_undefined(out, base + j, 0);
  return 1;
}

PF_DD_CLONES int pf_softmax_fast(const pf_case *c, const double *x, size_t row, double alpha, int mask, double sentinel,
                    pf_oracle_result *out, pf_dd *work) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  pf_dd *t = work, *e = work + cols, m = {-INFINITY, 0};
  int any = 0;
  for (size_t j = 0; j < cols; j++) {
    const int masked = pf_oracle_masked(mask, row, j, rows, cols);
    const double v = masked ? sentinel : x[j];
    if (isinf(v)) { /* its score is v itself (masked) or v alpha */
      const double sc = masked ? v : v * alpha;
      if (isnan(sc) || sc > 0) return pf_softmax_fast_undefined(out, row * cols, cols);
      t[j] = (pf_dd){-INFINITY, 0};
      continue;
    }
    if (isnan(v)) return pf_softmax_fast_undefined(out, row * cols, cols);
    t[j] = masked ? (pf_dd){sentinel, 0} : pf_two_prod(v, alpha);
    if (!isfinite(t[j].hi)) return 0; /* a finite input's score beyond binary64 */
    /* low parts in the subnormal range lose bits: leave such rows to MPFR */
    if (t[j].lo != 0 && fabs(t[j].lo) < 0x1p-960) return 0;
    if (!any || pf_dd_less(m, t[j])) m = t[j];
    any = 1;
  }
  if (!any) return pf_softmax_fast_undefined(out, row * cols, cols); /* every score -inf */
  return pf_softmax_fast_row(t, m, cols, c->dtype, e, out, row * cols);
}
