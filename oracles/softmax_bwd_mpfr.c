/* The softmax backward oracle: for each row, the exact
 *
 *   dx_i = s_i (dy_i - sum_j dy_j s_j),   s = softmax(x) = exp(x - m) / sum_k exp(x_k - m),
 *
 * of the actual stored x and dy, by interval arithmetic in MPFR (lower ends rounded down, upper
 * ends up), the precision doubled until every element's enclosure rounds to one value of the
 * storage dtype, up to opts->prec_max (then a TIE). Since sum_j s_j = 1 exactly, the sum is
 * taken around c = dy at the row's largest x: dy_i - S = (dy_i - c) - sum_j (dy_j - c) s_j,
 * which is exactly 0 where dy is constant (an interval around S would never prove it) and
 * cancels less elsewhere. A row with a non-finite x or dy is undefined (every output NaN).
 * Independent of every kernel variant: stored and recompute are judged against the same. A
 * fast path (softmax_bwd_fast.c) settles most rows first; what it cannot decide is computed
 * here. */
#include "oracles/softmax_bwd_mpfr.h"

#include <math.h>
#include <stdlib.h>

#include "oracles/oracle_util.h"
#include "oracles/softmax_bwd_fast.h"

typedef struct {
  mpfr_t *slo, *shi, zlo, zhi, t, wlo, whi, plo, phi, Slo, Shi, dlo, dhi;
  size_t cols;
  long prec; /* the precision the numbers have */
} pf_sb_work;

/* 0 when out of memory (nothing to free then) */
static int pf_sb_init(pf_sb_work *w, size_t cols, long prec) {
  w->cols = cols;
  w->prec = prec;
  w->slo = malloc((cols ? cols : 1) * sizeof(mpfr_t));
  w->shi = malloc((cols ? cols : 1) * sizeof(mpfr_t));
  if (!w->slo || !w->shi) {
    free(w->slo);
    free(w->shi);
    return 0;
  }
  for (size_t j = 0; j < cols; j++) mpfr_init2(w->slo[j], prec), mpfr_init2(w->shi[j], prec);
  mpfr_inits2(prec, w->zlo, w->zhi, w->t, w->wlo, w->whi, w->plo, w->phi, w->Slo, w->Shi, w->dlo, w->dhi, (mpfr_ptr)0);
  return 1;
}

static void pf_sb_prec(pf_sb_work *w, long prec) {
  if (prec == w->prec) return; /* most rows settle at the first precision: nothing to redo */
  w->prec = prec;
  for (size_t j = 0; j < w->cols; j++) mpfr_set_prec(w->slo[j], prec), mpfr_set_prec(w->shi[j], prec);
  mpfr_ptr all[] = {w->zlo, w->zhi, w->t, w->wlo, w->whi, w->plo, w->phi, w->Slo, w->Shi, w->dlo, w->dhi};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mpfr_set_prec(all[k], prec);
}

static void pf_sb_free(pf_sb_work *w) {
  for (size_t j = 0; j < w->cols; j++) mpfr_clear(w->slo[j]), mpfr_clear(w->shi[j]);
  free(w->slo);
  free(w->shi);
  mpfr_clears(w->zlo, w->zhi, w->t, w->wlo, w->whi, w->plo, w->phi, w->Slo, w->Shi, w->dlo, w->dhi, (mpfr_ptr)0);
}

/* [plo, phi] enclosing [alo, ahi] * [blo, bhi] where 0 <= blo (a probability) */
static void pf_sb_mul(mpfr_ptr plo, mpfr_ptr phi, mpfr_srcptr alo, mpfr_srcptr ahi, mpfr_srcptr blo, mpfr_srcptr bhi) {
  mpfr_mul(plo, alo, mpfr_sgn(alo) >= 0 ? blo : bhi, MPFR_RNDD);
  mpfr_mul(phi, ahi, mpfr_sgn(ahi) >= 0 ? bhi : blo, MPFR_RNDU);
}

/* [lo, hi] is not [0, 0] and lies within 2^(emin + 256) of 0 */
static int pf_sb_tiny(mpfr_srcptr lo, mpfr_srcptr hi) {
  const mpfr_exp_t top = mpfr_get_emin() + 256;
  if (mpfr_zero_p(lo) && mpfr_zero_p(hi)) return 0;
  return (mpfr_zero_p(lo) || mpfr_get_exp(lo) <= top) && (mpfr_zero_p(hi) || mpfr_get_exp(hi) <= top);
}

/* Row i at the working precision: 1 when every element settled (or final). */
static int pf_sb_row(pf_sb_work *w, const double *x, const double *dy, size_t cols, size_t jm, pf_oracle_result *out,
                     size_t base, pf_dtype t, int final, int keep_hex) {
  const double m = x[jm], c = dy[jm];
  /* s_j enclosures: exp(x_j - m) over the sum */
  mpfr_set_zero(w->zlo, 1);
  mpfr_set_zero(w->zhi, 1);
  for (size_t j = 0; j < cols; j++) {
    mpfr_set_d(w->t, x[j], MPFR_RNDN);
    mpfr_sub_d(w->t, w->t, m, MPFR_RNDD);
    mpfr_exp(w->slo[j], w->t, MPFR_RNDD);
    mpfr_set_d(w->t, x[j], MPFR_RNDN);
    mpfr_sub_d(w->t, w->t, m, MPFR_RNDU);
    mpfr_exp(w->shi[j], w->t, MPFR_RNDU);
    mpfr_add(w->zlo, w->zlo, w->slo[j], MPFR_RNDD);
    mpfr_add(w->zhi, w->zhi, w->shi[j], MPFR_RNDU);
  }
  for (size_t j = 0; j < cols; j++) {
    mpfr_div(w->slo[j], w->slo[j], w->zhi, MPFR_RNDD);
    mpfr_div(w->shi[j], w->shi[j], w->zlo, MPFR_RNDU);
  }
  /* S' = sum_j (dy_j - c) s_j */
  mpfr_set_zero(w->Slo, 1);
  mpfr_set_zero(w->Shi, 1);
  for (size_t j = 0; j < cols; j++) {
    mpfr_set_d(w->wlo, dy[j], MPFR_RNDN);
    mpfr_sub_d(w->wlo, w->wlo, c, MPFR_RNDD);
    mpfr_set_d(w->whi, dy[j], MPFR_RNDN);
    mpfr_sub_d(w->whi, w->whi, c, MPFR_RNDU);
    pf_sb_mul(w->plo, w->phi, w->wlo, w->whi, w->slo[j], w->shi[j]);
    mpfr_add(w->Slo, w->Slo, w->plo, MPFR_RNDD);
    mpfr_add(w->Shi, w->Shi, w->phi, MPFR_RNDU);
  }
  /* dx_i = s_i ((dy_i - c) - S') */
  int settled = 1;
  for (size_t i = 0; i < cols && settled; i++) {
    mpfr_set_d(w->wlo, dy[i], MPFR_RNDN);
    mpfr_sub_d(w->wlo, w->wlo, c, MPFR_RNDD);
    mpfr_set_d(w->whi, dy[i], MPFR_RNDN);
    mpfr_sub_d(w->whi, w->whi, c, MPFR_RNDU);
    mpfr_sub(w->dlo, w->wlo, w->Shi, MPFR_RNDD);
    mpfr_sub(w->dhi, w->whi, w->Slo, MPFR_RNDU);
    pf_sb_mul(w->plo, w->phi, w->dlo, w->dhi, w->slo[i], w->shi[i]);
    if (pf_sb_tiny(w->plo, w->phi)) {
      /* an enclosure at the bottom of MPFR's exponent range (an s_j or d_i of inputs 3e18
       * apart): |dx_i| < 2^(emin + 256), 0 in every dtype */
      pf_oracle_set_tiny(out, base + i, t, keep_hex);
      continue;
    }
    settled = pf_oracle_settle(out, base + i, w->plo, w->phi, t, final, keep_hex);
  }
  return settled;
}

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  long max_prec[PF_MAX_THREADS];
  size_t fast[PF_MAX_THREADS]; /* rows the fast path settled */
  int nomem[PF_MAX_THREADS];
} pf_sb_case;

static void pf_sb_rows(void *ctx, int th, size_t begin, size_t end) {
  pf_sb_case *k = ctx;
  const pf_case *c = k->c;
  const size_t cols = c->shape[1];
  const long prec0 = k->opts->prec < 64 ? 64 : k->opts->prec;
  pf_sb_work w;
  /* the fast path unless MPFR alone is asked for, or the exact values' hex digits (its exact
   * value is the binary64 one) */
  const int fast = !k->opts->mpfr_only && !k->opts->keep_hex;
  pf_dd *e = fast ? malloc(2 * (cols ? cols : 1) * sizeof(pf_dd)) : NULL;
  if ((fast && !e) || !pf_sb_init(&w, cols, prec0)) {
    free(e);
    k->nomem[th] = 1;
    return;
  }
  k->max_prec[th] = prec0;
  for (size_t i = begin; i < end; i++) {
    const double *x = k->in[0].data + i * cols, *dy = k->in[1].data + i * cols;
    int defined = cols > 0;
    size_t jm = 0;
    for (size_t j = 0; j < cols; j++) {
      defined &= isfinite(x[j]) && isfinite(dy[j]);
      if (x[j] > x[jm]) jm = j;
    }
    if (!defined) {
      for (size_t j = 0; j < cols; j++) pf_oracle_set_undefined(k->out, i * cols + j, k->opts->keep_hex);
      continue;
    }
    if (e && pf_softmax_bwd_fast_row(x, dy, cols, jm, k->out, i * cols, c->dtype, e)) {
      k->fast[th]++;
      continue;
    }
    for (long prec = prec0;; prec *= 2) {
      pf_sb_prec(&w, prec);
      const int final = prec * 2 > k->opts->prec_max;
      if (prec > k->max_prec[th]) k->max_prec[th] = prec;
      if (pf_sb_row(&w, x, dy, cols, jm, k->out, i * cols, c->dtype, final, k->opts->keep_hex)) break;
    }
  }
  free(e);
  pf_sb_free(&w);
}

pf_status pf_softmax_bwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  pf_sb_case *k = calloc(1, sizeof *k);
  if (!k) return pf_error(PF_ERR_NOMEM, "softmax_bwd oracle: out of memory");
  *k = (pf_sb_case){.c = c, .in = in, .opts = opts, .out = out};
  const int threads = pf_parallel_threads(rows, 300.0 * (double)cols) /* the fast path's work */;
  pf_oracle_parallel(rows, threads, pf_sb_rows, k);
  out->max_prec = opts->prec < 64 ? 64 : opts->prec;
  out->fast_units = 0;
  int nomem = 0;
  for (int t = 0; t < threads; t++) {
    out->fast_units += k->fast[t];
    if (k->max_prec[t] > out->max_prec) out->max_prec = k->max_prec[t];
    nomem |= k->nomem[t];
  }
  out->mpfr_units = rows - out->fast_units;
  free(k);
  if (nomem) return pf_error(PF_ERR_NOMEM, "softmax_bwd oracle: cannot allocate a row of %zu", cols);
  return PF_OK;
}
