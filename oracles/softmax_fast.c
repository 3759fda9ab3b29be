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
 *   sum of n terms           each add 2^-101 of the partial sum, in any order (the terms are
 *                            positive; the row is summed in four interleaved parts): n 2^-101
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

#include "core/case.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "core/kernel.h"
#include "oracles/oracle_util.h"
#include "oracles/dd_avx2.h"
#include "oracles/softmax_fast.h"

/* Score j's term exp(t_j - m) into e[j], added to acc (the sum of the terms j' = j mod 4: the
 * row is summed in four interleaved parts, as the vector loop sums it; the bound above holds
 * for any order of the additions, the terms being positive): 0 when the row is MPFR's. */
static inline int pf_softmax_term(const pf_dd *t, pf_dd m, size_t j, pf_dd *e, pf_dd *acc, size_t *zeros) {
  if (isinf(t[j].hi)) { /* -inf: exp is exactly 0 */
    e[j] = (pf_dd){0, -INFINITY};
    return 1;
  }
  const pf_dd z = pf_dd_add(t[j], pf_dd_neg(m));
  if (z.hi < -746) { /* below 2^-1076 of the largest term: 0, within that; z kept */
    e[j] = (pf_dd){0, z.hi};
    ++*zeros;
    return 1;
  }
  if (z.hi < -600) return 0;
  e[j] = pf_dd_exp(z);
  *acc = pf_dd_add(*acc, e[j]);
  return 1;
}

/* Output i = e[j] / s (inv = 1 / s), within w_rel of itself, settled: 0 when it cannot be */
static inline int pf_softmax_output(const pf_dd *e, size_t j, pf_dd inv, double w_rel, double sum, pf_dtype dt,
                                    pf_oracle_result *out, size_t i) {
  out->dtype[i] = (unsigned char)dt;
  if (e[j].hi == 0) { /* exp(-inf): 0; below 2^-1076 of the sum: 0 everywhere */
    if (isinf(e[j].lo)) {
      out->exact[i] = out->rounded[i] = out->rounded_alt[i] = 0;
      out->status[i] = PF_ORACLE_NUMBER;
      return 1;
    }
    return pf_fast_negligible(out, i, dt, e[j].lo, sum);
  }
  const pf_dd y = pf_dd_mul(e[j], inv);
  const double w = fabs(y.hi) * w_rel;
  double a;
  if (!pf_dd_decided(y, w, dt, &a)) { /* the cheap test cannot tell: the ends themselves */
    const pf_dd lo = pf_dd_add(y, (pf_dd){-w, 0}), hi = pf_dd_add(y, (pf_dd){w, 0});
    a = pf_dd_round_dtype(lo, dt);
    if (lo.hi != hi.hi || a != pf_dd_round_dtype(hi, dt)) return 0; /* not decided: MPFR's */
  }
  out->exact[i] = y.hi;
  out->rounded[i] = out->rounded_alt[i] = a;
  out->status[i] = PF_ORACLE_NUMBER;
  return 1;
}

#ifdef PF_DD_AVX2
/* The terms of scores [0, cols - cols % 4) four at a time (pf_softmax_term's operations lane for
 * lane; a block with a -inf score or a term near or below the cut-offs goes through
 * pf_softmax_term): 0 when the row is MPFR's. */
PF_AVX2_TARGET static int pf_softmax_terms_avx2(const pf_dd *t, pf_dd m, size_t cols, pf_dd *e, pf_dd *acc,
                                               size_t *zeros) {
  const double *l256;
  const pf_dd *tab;
  pf_dd sixth;
  pf_dd_exp_tables(&l256, &tab, &sixth);
  const pf_dd4 mm = pf4_neg(pf4_bcast(m));
  pf_dd4 s = pf4_load(acc);
  for (size_t j = 0; j + 4 <= cols; j += 4) {
    const pf_dd4 tj = pf4_load(t + j), z = pf4_add(tj, mm);
    if (_mm256_movemask_pd(_mm256_cmp_pd(z.hi, pf4_c(-600), _CMP_GE_OQ)) != 15) { /* -inf is below too */
      pf4_store(acc, s);
      for (size_t l = 0; l < 4; l++)
        if (!pf_softmax_term(t, m, j + l, e, acc + l, zeros)) return 0;
      s = pf4_load(acc);
      continue;
    }
    const pf_dd4 ej = pf4_exp(z, l256, tab, sixth);
    pf4_store(e + j, ej);
    s = pf4_add(s, ej);
  }
  pf4_store(acc, s);
  return 1;
}

/* Outputs i..i+3 from terms e[0..3]: the lanes the cheap test settles are written, and returned
 * as a bit mask; pf_softmax_output takes the others (it computes the same values) */
PF_AVX2_TARGET static int pf_softmax_outputs4(const pf_dd *e, pf_dd inv, double w_rel, pf_dtype dt,
                                             pf_oracle_result *out, size_t i) {
  const pf_dd4 ej = pf4_load(e), y = pf4_mul(ej, pf4_bcast(inv));
  __m256d r;
  /* a term taken as 0 (its low part holds -inf or z) is pf_softmax_output's */
  const __m256d ok = _mm256_andnot_pd(_mm256_cmp_pd(ej.hi, _mm256_setzero_pd(), _CMP_EQ_OQ),
                                      pf4_settle(y, _mm256_mul_pd(pf4_abs(y.hi), pf4_c(w_rel)), dt, &r));
  const int mask = _mm256_movemask_pd(ok);
  if (mask) pf4_store_settled(out, i, mask, y, r, dt);
  return mask;
}
#endif

/* One row by the fast path: 1 when every output was settled, 0 to leave the row to MPFR.
 * t: the scores as double words, or -inf (masked); m: their maximum; e: cols double words of
 * work. */
PF_DD_CLONES static int pf_softmax_fast_row(const pf_dd *t, pf_dd m, size_t cols, pf_dtype dt, pf_dd *e,
                                            pf_oracle_result *out, size_t base) {
  pf_dd acc[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
  size_t zeros = 0, j = 0;
#ifdef PF_DD_AVX2
  const int avx2 = pf_avx2();
  if (avx2) {
    if (!pf_softmax_terms_avx2(t, m, cols, e, acc, &zeros)) return 0;
    j = cols - cols % 4;
  }
#endif
  for (; j < cols; j++)
    if (!pf_softmax_term(t, m, j, e, acc + j % 4, &zeros)) return 0;
  const pf_dd s = pf_dd_add(pf_dd_add(acc[0], acc[1]), pf_dd_add(acc[2], acc[3]));
  const double delta = 0x1p-87 + 0x1.3p-92 + (double)cols * 0x1p-101 + 0x1p-99 + 0x1p-100;
  /* the terms taken as 0 make the exact sum larger by at most zeros 2^-1076 s (counted as
   * zeros 2^-200, which binary64 can hold) */
  const double w_rel = delta + (double)zeros * 0x1p-200;
  const pf_dd inv = pf_dd_div((pf_dd){1, 0}, s);
  int lanes = 0; /* the current block of four: the outputs the vector test settled */
  for (j = 0; j < cols; j++) {
#ifdef PF_DD_AVX2
    if (j % 4 == 0) lanes = avx2 && j + 4 <= cols ? pf_softmax_outputs4(e + j, inv, w_rel, dt, out, base + j) : 0;
#endif
    if (lanes >> (j % 4) & 1) continue;
    if (!pf_softmax_output(e, j, inv, w_rel, s.hi, dt, out, base + j)) return 0;
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
