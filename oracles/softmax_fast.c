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

/* ln 2 / 256 = L1 + L2 + L3: L1 with 34 bits, so that N L1 is exact for |N| < 2^19 */
static double pf_l256[3];
static pf_dd pf_exp2_tab[256];  /* 2^(j/256), j = 0..255, to 2^-106 */
static pf_dd pf_sixth;          /* 1/6 */
static pthread_once_t pf_fast_once = PTHREAD_ONCE_INIT;

static void pf_fast_init(void) {
  mpfr_t l, r;
  mpfr_inits2(320, l, r, (mpfr_ptr)0);
  mpfr_const_log2(l, MPFR_RNDN);
  mpfr_div_2ui(l, l, 8, MPFR_RNDN);
  mpfr_set(r, l, MPFR_RNDN);
  mpfr_prec_round(r, 34, MPFR_RNDN);
  pf_l256[0] = mpfr_get_d(r, MPFR_RNDN);
  mpfr_set_prec(r, 320); /* prec_round left it at 34 bits */
  mpfr_sub_d(l, l, pf_l256[0], MPFR_RNDN);
  pf_l256[1] = mpfr_get_d(l, MPFR_RNDN);
  mpfr_sub_d(l, l, pf_l256[1], MPFR_RNDN);
  pf_l256[2] = mpfr_get_d(l, MPFR_RNDN);
  for (int j = 0; j < 256; j++) {
    mpfr_set_si(r, j, MPFR_RNDN);
    mpfr_div_2ui(r, r, 8, MPFR_RNDN);
    mpfr_exp2(r, r, MPFR_RNDN);
    const double h = mpfr_get_d(r, MPFR_RNDN);
    mpfr_sub_d(r, r, h, MPFR_RNDN);
    pf_exp2_tab[j] = (pf_dd){h, mpfr_get_d(r, MPFR_RNDN)};
  }
  mpfr_set_ui(r, 1, MPFR_RNDN);
  mpfr_div_ui(r, r, 6, MPFR_RNDN);
  const double h = mpfr_get_d(r, MPFR_RNDN);
  mpfr_sub_d(r, r, h, MPFR_RNDN);
  pf_sixth = (pf_dd){h, mpfr_get_d(r, MPFR_RNDN)};
  mpfr_clears(l, r, (mpfr_ptr)0);
}

/* exp(z) for -600 <= z <= 0 (a double word), within 2^-87 relative (the budget above; the
 * analysis gives below 2^-93.5, and test_oracle_fast measures 2^-94.8 against MPFR):
 *   N = round(z 256 / ln 2), z = N ln2/256 + r, |r| <= ln2/512 + 2^-40 (< 0.00136);
 *   r = z - N L1 - N L2 - N L3: N L1 exact, the adds relative to the small result, the rest
 *   below 2^-130;
 *   exp(r) = 1 + r (1 + r (1/2 + r (1/6 + r q))), q = 1/24 + r/120 + ... + r^4/40320 in
 *   binary64 (|r q| < 2^-14 with an error below 2^-52 of it, which r^3 < 2^-28.5 scales to
 *   2^-94.5 in exp(r); the series' tail below 2^-100), the four outer steps in double words
 *   (8 operations, each 2^-101);
 *   exp(z) = 2^(N div 256) 2^((N mod 256)/256) exp(r): the table's 2^-106 and one product. */
pf_dd pf_dd_exp(pf_dd z) {
  pthread_once(&pf_fast_once, pf_fast_init);
  const double N = nearbyint(z.hi * 0x1.71547652b82fep8); /* z 256 / ln 2, to an integer */
  pf_dd r = pf_dd_add(z, (pf_dd){-N * pf_l256[0], 0});
  r = pf_dd_add(r, pf_dd_neg(pf_two_prod(N, pf_l256[1])));
  r = pf_dd_add(r, (pf_dd){-N * pf_l256[2], 0});
  const double x = r.hi;
  const double q = 1.0 / 24 + x * (1.0 / 120 + x * (1.0 / 720 + x * (1.0 / 5040 + x * (1.0 / 40320))));
  pf_dd p = pf_dd_add(pf_sixth, pf_two_prod(x, q));
  p = pf_dd_add((pf_dd){0.5, 0}, pf_dd_mul(r, p));
  p = pf_dd_add((pf_dd){1, 0}, pf_dd_mul(r, p));
  p = pf_dd_add((pf_dd){1, 0}, pf_dd_mul(r, p));
  const long n = (long)N, j = n & 255, k = (n - j) / 256; /* floor division: j in [0, 255] */
  return pf_dd_ldexp(pf_dd_mul(pf_exp2_tab[j], p), (int)k);
}

/* The hi part decides, but on a midpoint of t, where the low part breaks the tie. */
double pf_dd_round_dtype(pf_dd x, pf_dtype t) {
  const double r = pf_round(t, x.hi);
  if (x.lo == 0 || r == x.hi) return r;
  const double other = x.hi > r ? pf_next_up(t, r) : pf_next_down(t, r);
  if (fabs(x.hi - r) * 2 != fabs(other - r)) return r; /* not a midpoint */
  return (x.lo > 0) == (x.hi > r) ? other : r;
}

/* One row by the fast path: 1 when every output was settled, 0 to leave the row to MPFR.
 * t: the scores as double words, or -inf (masked); m: their maximum. */
static int pf_softmax_fast_row(const pf_dd *t, pf_dd m, size_t cols, pf_dtype dt, pf_dd *e, pf_oracle_result *out,
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
    if (e[j].hi == 0) { /* exp(-inf), or below 2^-1076 of the sum: 0 everywhere */
      out->exact[i] = out->rounded[i] = out->rounded_alt[i] = 0;
      out->status[i] = PF_ORACLE_NUMBER;
      if (isinf(e[j].lo)) continue;
      /* MPFR's word for an output below its exponent range (2^(emin - 1), emin = 1 - 2^62):
       * TINY. log2 y = z log2(e) - log2(s), to far better than the margin of 2^-40 of it;
       * within the margin the row is MPFR's */
      const double l2y = e[j].lo * 0x1.71547652b82fep0 - log2(s.hi), edge = (double)mpfr_get_emin_min() - 1;
      if (fabs(l2y - edge) <= 0x1p-40 * fabs(edge)) return 0;
      if (l2y < edge) out->status[i] = PF_ORACLE_TINY;
      continue;
    }
    const pf_dd y = pf_dd_mul(e[j], inv);
    const double w = fabs(y.hi) * (delta + delta_zero);
    const pf_dd lo = pf_dd_add(y, (pf_dd){-w, 0}), hi = pf_dd_add(y, (pf_dd){w, 0});
    const double a = pf_dd_round_dtype(lo, dt), b = pf_dd_round_dtype(hi, dt);
    if (lo.hi != hi.hi || a != b) return 0; /* not decided: MPFR's */
    out->exact[i] = y.hi;
    out->rounded[i] = out->rounded_alt[i] = a;
    out->status[i] = PF_ORACLE_NUMBER;
  }
  return 1;
}

int pf_softmax_fast(const pf_case *c, const double *x, size_t row, double alpha, int mask, double sentinel,
                    pf_oracle_result *out, pf_dd *work) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  pf_dd *t = work, *e = work + cols, m = {-INFINITY, 0};
  int any = 0;
  for (size_t j = 0; j < cols; j++) {
    const int masked = pf_oracle_masked(mask, row, j, rows, cols);
    const double v = masked ? sentinel : x[j];
    if (isnan(v) || (v > 0 && isinf(v))) return 0; /* undefined rows: MPFR's path says so */
    t[j] = masked ? (pf_dd){sentinel, 0} : pf_two_prod(v, alpha);
    if (!isfinite(t[j].hi) && !(masked && isinf(sentinel))) return 0; /* a score beyond binary64 */
    if (isinf(t[j].hi)) continue;
    /* low parts in the subnormal range lose bits: leave such rows to MPFR */
    if (t[j].lo != 0 && fabs(t[j].lo) < 0x1p-960) return 0;
    if (!any || pf_dd_less(m, t[j])) m = t[j];
    any = 1;
  }
  if (!any) return 0;
  return pf_softmax_fast_row(t, m, cols, c->dtype, e, out, row * cols);
}
