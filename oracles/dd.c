/* The double-word functions the fast oracles share (dd.h): exp, rounding to a dtype, and the
 * rule that decides whether an enclosure settles an output. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <mpfr.h>

#include "core/dtype.h"
#include "oracles/dd.h"

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

void pf_dd_exp_tables(const double **l256, const pf_dd **exp2_tab, pf_dd *sixth) {
  pthread_once(&pf_fast_once, pf_fast_init);
  *l256 = pf_l256, *exp2_tab = pf_exp2_tab, *sixth = pf_sixth;
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
PF_DD_CLONES pf_dd pf_dd_exp(pf_dd z) {
  pthread_once(&pf_fast_once, pf_fast_init);
  const double N = nearbyint(z.hi * 0x1.71547652b82fep8); /* z 256 / ln 2, to an integer */
  pf_dd r = pf_dd_add_d(z, -N * pf_l256[0]);
  r = pf_dd_add(r, pf_dd_neg(pf_two_prod(N, pf_l256[1])));
  r = pf_dd_add_d(r, -N * pf_l256[2]);
  const double x = r.hi;
  const double q = 1.0 / 24 + x * (1.0 / 120 + x * (1.0 / 720 + x * (1.0 / 5040 + x * (1.0 / 40320))));
  pf_dd p = pf_dd_add(pf_sixth, pf_two_prod(x, q));
  p = pf_dd_add_d(pf_dd_mul(r, p), 0.5);
  p = pf_dd_add_d(pf_dd_mul(r, p), 1);
  p = pf_dd_add_d(pf_dd_mul(r, p), 1);
  const long n = (long)N, j = n & 255, k = (n - j) / 256; /* floor division: j in [0, 255] */
  return pf_dd_ldexp(pf_dd_mul(pf_exp2_tab[j], p), (int)k);
}

/* The hi part decides, but on a midpoint of t, where the low part breaks the tie: x.hi is a
 * midpoint when it lies half the spacing at its own exponent from r (below a power of two r
 * that spacing is the smaller one, the binade x.hi is in), and the other candidate is r plus
 * or minus that spacing. */
double pf_dd_round_dtype(pf_dd x, pf_dtype t) {
  const double r = pf_round(t, x.hi);
  if (x.lo == 0 || r == x.hi) return r;
  const double q = pf_ulp(t, x.hi);
  if (fabs(x.hi - r) * 2 != q) return r; /* not a midpoint (x.hi - r is exact: they are close) */
  return (x.lo > 0) == (x.hi > r) ? r + (x.hi > r ? q : -q) : r;
}

/* pf_fast_settle's rare path: y's enclosure straddles, or may straddle, a rounding boundary by
 * the cheap test; its ends rounded as double words decide (1, *a) or not (0) */
PF_DD_CLONES int pf_fast_settle_ends(pf_dd x, double err, pf_dtype t, double *a) {
  /* the ends, each beyond the exact one by more than its own add's error (2^-101) */
  const double w = err * (1 + 0x1p-50) + fabs(x.hi) * 0x1p-100;
  *a = pf_dd_round_dtype(pf_dd_add(x, (pf_dd){-w, 0}), t);
  return *a == pf_dd_round_dtype(pf_dd_add(x, (pf_dd){w, 0}), t); /* else it straddles a boundary of t: MPFR's */
}

int pf_fast_settle_exact(pf_oracle_result *out, size_t i, pf_dd x, pf_dtype t) {
  if (x.hi == 0 || fabs(x.hi) < 0x1p-900 || !(fabs(x.hi) * (1 + 0x1p-59) < pf_max_finite(t))) return 0;
  out->dtype[i] = (unsigned char)t;
  out->exact[i] = x.hi; /* the nearest binary64: x is normalized */
  out->rounded[i] = out->rounded_alt[i] = pf_dd_round_dtype(x, t);
  out->status[i] = PF_ORACLE_NUMBER;
  return 1;
}

int pf_fast_negligible(pf_oracle_result *out, size_t i, pf_dtype t, double z, double sum) {
  out->dtype[i] = (unsigned char)t;
  out->exact[i] = out->rounded[i] = out->rounded_alt[i] = 0;
  out->status[i] = PF_ORACLE_NUMBER;
  /* MPFR's word for an output below its exponent range (2^(emin - 1), emin = 1 - 2^62):
   * TINY. log2 y = z log2(e) - log2(sum), to far better than the margin of 2^-40 of it;
   * within the margin the row is MPFR's */
  const double l2y = z * 0x1.71547652b82fep0 - log2(sum), edge = (double)mpfr_get_emin_min() - 1;
  if (fabs(l2y - edge) <= 0x1p-40 * fabs(edge)) return 0;
  if (l2y < edge) out->status[i] = PF_ORACLE_TINY;
  return 1;
}
