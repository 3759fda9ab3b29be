/* The RMSNorm backward oracle: the exact dx and dgamma of the stored inputs (rmsnorm_bwd_spec.h's
 * definition), rounded correctly to the outputs' dtypes.
 *
 * Row i (n columns, a_j = g'_j dy_j; every x, dy, g' a binary64 value, so every sum and product
 * below is exact in MPFR at a precision that holds it, oracle_util.h's exact arithmetic):
 *   Q = sum x^2, W = Q + n eps (= n (mean square + eps)), P = sum a x, H_j = a_j W - x_j P,
 * so that rstd = sqrt(n / W), xhat_j = x_j rstd and
 *   dx_j = rstd (a_j - xhat_j (1/n) sum a xhat) = rstd (a_j - x_j P / W) = (H_j / W) rstd:
 * the row's cancellation happens in H_j, exactly; rstd is left as an interval. Over the tokens
 * dgamma_j = sum_i dy_ij x_ij rstd_i by interval arithmetic (every operation rounded down for the
 * lower end, up for the upper). The precision of the intervals doubles until every element's
 * enclosure rounds to one value of its dtype. Undefined: dx of a row with a non-finite x, dy or
 * gamma, or W = 0 (eps 0 and a row of zeros); dgamma of a column that such a row (or a
 * non-finite dy in it) reaches. The fast path (layernorm_bwd_fast.c, as for LayerNorm's backward
 * without the mean) goes first, a row's dx and a column's dgamma at a time; what it leaves comes
 * here. */
#include "oracles/rmsnorm_bwd_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd_spec.h" /* parameters, dtypes, the output layout */
#include "oracles/layernorm_bwd_fast.h"
#include "oracles/oracle_util.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  size_t rows, n;
  mpfr_t *W;          /* per row, exact */
  mpfr_t *rlo, *rhi;  /* per row, rstd's enclosure at the starting precision */
  unsigned char *bad, *exact; /* per row: rstd undefined (a non-finite x, or W = 0); W, rlo, rhi there */
  pf_lnb_fast_params fp;
  pf_lnb_fast_row_stats *st; /* per row, the fast path's statistics (ok 0 where it has none) */
  unsigned char *left;       /* per column: left to MPFR by the fast path */
  long prec0, max_prec[PF_MAX_THREADS];
} pf_rmsbo;

/* rstd = sqrt(n / W), an enclosure at lo's and hi's precision */
static void pf_rmsbo_rstd(mpfr_ptr lo, mpfr_ptr hi, mpfr_srcptr W, size_t n) {
  mpfr_ui_div(lo, (unsigned long)n, W, MPFR_RNDD);
  mpfr_sqrt(lo, lo, MPFR_RNDD);
  mpfr_ui_div(hi, (unsigned long)n, W, MPFR_RNDU);
  mpfr_sqrt(hi, hi, MPFR_RNDU);
}

/* Row i's W (exact), rstd's enclosure at the starting precision, and whether rstd is defined. */
static void pf_rmsbo_exact_stats(pf_rmsbo *k, size_t i) {
  const size_t n = k->n;
  const double *x = k->in[PF_RMSB_IN_X].data + i * n;
  mpfr_ptr W = k->W[i];
  mpfr_set_prec(W, MPFR_PREC_MIN);
  mpfr_set_zero(W, 1);
  k->exact[i] = 1;
  k->bad[i] = 0;
  for (size_t j = 0; j < n; j++)
    if (!isfinite(x[j])) {
      k->bad[i] = 1;
      return;
    }
  mpfr_t t, u, v;
  mpfr_inits2(64, t, u, v, (mpfr_ptr)0);
  for (size_t j = 0; j < n; j++) { /* W = sum x^2 + n eps */
    mpfr_set_prec(t, 53);
    mpfr_set_d(t, x[j], MPFR_RNDN);
    pf_mpfr_exact_mul(u, t, t);
    pf_mpfr_exact_add(W, W, u, 1);
  }
  mpfr_set_prec(u, 64);
  mpfr_set_ui(u, (unsigned long)n, MPFR_RNDN);
  pf_mpfr_exact_mul_d(v, u, k->c->params[PF_RMSB_P_EPS], t);
  pf_mpfr_exact_add(W, W, v, 1);
  k->bad[i] = mpfr_sgn(W) <= 0;
  if (!k->bad[i]) pf_rmsbo_rstd(k->rlo[i], k->rhi[i], W, n);
  mpfr_clears(t, u, v, (mpfr_ptr)0);
}

/* Row i's dx by MPFR (its exact statistics first). */
static void pf_rmsbo_row(const void *ctx, size_t i, long *max_prec) {
  pf_rmsbo *k = (pf_rmsbo *)ctx; /* row i's own entries of W, rlo, rhi, bad, exact */
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t n = k->n;
  const double *x = k->in[PF_RMSB_IN_X].data + i * n, *dy = k->in[PF_RMSB_IN_DY].data + i * n;
  const double *g = k->in[PF_RMSB_IN_GAMMA].data;
  const int zc = (int)c->params[PF_RMSB_P_ZERO_CENTERED];
  pf_rmsbo_exact_stats(k, i);
  int dxbad = 0;
  for (size_t j = 0; j < n; j++)
    if (!isfinite(dy[j]) || !isfinite(g[j])) dxbad = 1;
  mpfr_srcptr W = k->W[i];
  mpfr_t P, t, u, v, a, H, H2, lo, hi, rlo, rhi;
  mpfr_inits2(64, P, t, u, v, a, H, H2, lo, hi, rlo, rhi, (mpfr_ptr)0);
  if (k->bad[i] || dxbad) {
    for (size_t j = 0; j < n; j++) pf_oracle_set_undefined(out, i * n + j, opts->keep_hex);
    mpfr_clears(P, t, u, v, a, H, H2, lo, hi, rlo, rhi, (mpfr_ptr)0);
    return;
  }
  /* P = sum a x; H_j = a_j W - x_j P, kept for the precision loop */
  mpfr_set_prec(P, MPFR_PREC_MIN);
  mpfr_set_zero(P, 1);
  mpfr_t *Hj = malloc(n * sizeof(mpfr_t));
  if (!Hj) { /* no memory: the row is left undefined rather than guessed */
    for (size_t j = 0; j < n; j++) pf_oracle_set_undefined(out, i * n + j, opts->keep_hex);
    mpfr_clears(P, t, u, v, a, H, H2, lo, hi, rlo, rhi, (mpfr_ptr)0);
    return;
  }
  for (int pass = 0; pass < 2; pass++)
    for (size_t j = 0; j < n; j++) {
      mpfr_set_prec(v, 1200); /* g' = g or 1 + g: a binary64 g and 1 span at most 1100 bits */
      mpfr_set_d(v, g[j], MPFR_RNDN);
      if (zc) mpfr_add_ui(v, v, 1, MPFR_RNDN); /* exact */
      pf_mpfr_exact_mul_d(a, v, dy[j], t);   /* a_j */
      if (pass == 0) {
        pf_mpfr_exact_mul_d(u, a, x[j], t);
        pf_mpfr_exact_add(P, P, u, 1);
      } else {
        pf_mpfr_exact_mul(H, a, W);
        pf_mpfr_exact_mul_d(H2, P, x[j], t);
        mpfr_init2(Hj[j], MPFR_PREC_MIN);
        pf_mpfr_exact_add(Hj[j], H, H2, -1);
      }
    }
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  for (long prec = prec0;; prec *= 2) {
    const int final = prec * 2 > opts->prec_max;
    mpfr_set_prec(lo, prec), mpfr_set_prec(hi, prec), mpfr_set_prec(rlo, prec), mpfr_set_prec(rhi, prec);
    pf_rmsbo_rstd(rlo, rhi, W, n);
    int settled = 1;
    for (size_t j = 0; j < n && settled; j++) {
      const int pos = mpfr_sgn(Hj[j]) >= 0;
      mpfr_div(lo, Hj[j], W, MPFR_RNDD);
      mpfr_mul(lo, lo, pos ? rlo : rhi, MPFR_RNDD);
      mpfr_div(hi, Hj[j], W, MPFR_RNDU);
      mpfr_mul(hi, hi, pos ? rhi : rlo, MPFR_RNDU);
      settled &= pf_oracle_settle(out, i * n + j, lo, hi, c->dtype, final, opts->keep_hex);
    }
    if (prec > *max_prec) *max_prec = prec;
    if (settled) break;
  }
  for (size_t j = 0; j < n; j++) mpfr_clear(Hj[j]);
  free(Hj);
  mpfr_clears(P, t, u, v, a, H, H2, lo, hi, rlo, rhi, (mpfr_ptr)0);
}

/* Columns [begin, end): dgamma. */
static void pf_rmsbo_cols(void *ctx, int thread, size_t begin, size_t end) {
  pf_rmsbo *k = ctx;
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t n = k->n, rows = k->rows;
  const pf_dtype wt = pf_rmsb_weights_dtype(c);
  const double *x = k->in[PF_RMSB_IN_X].data, *dy = k->in[PF_RMSB_IN_DY].data;
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  mpfr_t t, T, rlo, rhi, lo, hi, p;
  mpfr_inits2(64, t, T, rlo, rhi, lo, hi, p, (mpfr_ptr)0);
  for (size_t j = begin; j < end; j++) {
    if (!k->left[j]) continue;
    const size_t og = pf_rmsb_dgamma_at(c) + j;
    int undefined = 0;
    for (size_t i = 0; i < rows; i++) undefined |= !isfinite(dy[i * n + j]) || k->bad[i];
    if (undefined) {
      pf_oracle_set_undefined(out, og, opts->keep_hex);
      continue;
    }
    for (long prec = prec0;; prec *= 2) {
      const int final = prec * 2 > opts->prec_max;
      mpfr_set_prec(rlo, prec), mpfr_set_prec(rhi, prec), mpfr_set_prec(lo, prec), mpfr_set_prec(hi, prec);
      mpfr_set_prec(p, prec);
      mpfr_set_zero(lo, 1);
      mpfr_set_zero(hi, 1);
      for (size_t i = 0; i < rows; i++) {
        const double d = dy[i * n + j], xv = x[i * n + j];
        if (d == 0 || xv == 0) continue;
        mpfr_set_prec(t, 53);
        mpfr_set_d(t, xv, MPFR_RNDN);
        pf_mpfr_exact_mul_d(T, t, d, p); /* dy x, exact (p: scratch, reset below) */
        mpfr_set_prec(p, prec);
        mpfr_srcptr rl = k->rlo[i], rh = k->rhi[i];
        if (prec != prec0) { /* past the starting precision: rstd again, at this one */
          pf_rmsbo_rstd(rlo, rhi, k->W[i], n);
          rl = rlo, rh = rhi;
        }
        const int pos = mpfr_sgn(T) > 0;
        mpfr_mul(p, T, pos ? rl : rh, MPFR_RNDD);
        mpfr_add(lo, lo, p, MPFR_RNDD);
        mpfr_mul(p, T, pos ? rh : rl, MPFR_RNDU);
        mpfr_add(hi, hi, p, MPFR_RNDU);
      }
      if (prec > k->max_prec[thread]) k->max_prec[thread] = prec;
      if (pf_oracle_settle(out, og, lo, hi, wt, final, opts->keep_hex)) break;
    }
  }
  mpfr_clears(t, T, rlo, rhi, lo, hi, p, (mpfr_ptr)0);
}

/* the fast path's row: its statistics (kept for the columns), then its dx */
static int pf_rmsbo_fast_row(const void *ctx, size_t i, pf_oracle_result *out) {
  const pf_rmsbo *k = ctx;
  const size_t n = k->n;
  const double *x = k->in[PF_RMSB_IN_X].data + i * n, *dy = k->in[PF_RMSB_IN_DY].data + i * n;
  if (!pf_lnb_fast_stats(&k->fp, x, &k->st[i])) return 0;
  return pf_lnb_fast_dx(&k->fp, &k->st[i], x, dy, k->in[PF_RMSB_IN_GAMMA].data, i, out);
}

/* columns [begin, end) by the fast path (four at a time); those it cannot settle are left */
static void pf_rmsbo_fast_cols(void *ctx, int thread, size_t begin, size_t end) {
  pf_rmsbo *k = ctx;
  for (size_t j = begin; j < end; j += 4) {
    const size_t cnt = end - j < 4 ? end - j : 4;
    const int m = pf_lnb_fast_columns(&k->fp, k->st, k->in[PF_RMSB_IN_X].data, k->in[PF_RMSB_IN_DY].data, j, cnt, k->out);
    for (size_t l = 0; l < cnt; l++) k->left[j + l] = !(m >> l & 1);
  }
}

/* rows [begin, end) whose exact statistics the dx phase did not need: computed now */
static void pf_rmsbo_missing_stats(void *ctx, int thread, size_t begin, size_t end) {
  pf_rmsbo *k = ctx;
  for (size_t i = begin; i < end; i++)
    if (!k->exact[i]) pf_rmsbo_exact_stats(k, i);
}

pf_status pf_rmsnorm_bwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                              pf_oracle_result *out) {
  pf_rmsbo *k = calloc(1, sizeof *k);
  const size_t rows = c->shape[0], n = c->shape[1];
  if (!k) return pf_error(PF_ERR_NOMEM, "oracle: out of memory");
  k->c = c, k->in = in, k->opts = opts, k->out = out, k->rows = rows, k->n = n;
  k->fp = (pf_lnb_fast_params){rows, n, c->dtype, pf_rmsb_weights_dtype(c), c->params[PF_RMSB_P_EPS],
                               (int)c->params[PF_RMSB_P_ZERO_CENTERED], 1};
  const long prec0 = k->prec0 = opts->prec < 64 ? 64 : opts->prec;
  k->W = malloc((rows + 1) * sizeof(mpfr_t));
  k->rlo = malloc((rows + 1) * sizeof(mpfr_t));
  k->rhi = malloc((rows + 1) * sizeof(mpfr_t));
  k->bad = calloc(rows + 1, 1);
  k->exact = calloc(rows + 1, 1);
  k->st = calloc(rows + 1, sizeof *k->st);
  k->left = calloc(n + 1, 1);
  if (!k->W || !k->rlo || !k->rhi || !k->bad || !k->exact || !k->st || !k->left) {
    free(k->W), free(k->rlo), free(k->rhi), free(k->bad), free(k->exact), free(k->st), free(k->left), free(k);
    return pf_error(PF_ERR_NOMEM, "oracle: out of memory");
  }
  for (size_t i = 0; i < rows; i++)
    mpfr_init2(k->W[i], MPFR_PREC_MIN), mpfr_init2(k->rlo[i], prec0), mpfr_init2(k->rhi[i], prec0);
  /* dx row by row, the fast path first (which keeps each row's statistics for the columns) */
  const pf_status st = pf_oracle_rows_then_columns(rows, n, opts, out, k, pf_rmsbo_fast_row, pf_rmsbo_row,
                                                   pf_rmsbo_fast_cols, pf_rmsbo_missing_stats, pf_rmsbo_cols, k->left,
                                                   k->max_prec);
  for (size_t i = 0; i < rows; i++) mpfr_clear(k->W[i]), mpfr_clear(k->rlo[i]), mpfr_clear(k->rhi[i]);
  free(k->W), free(k->rlo), free(k->rhi), free(k->bad), free(k->exact), free(k->st), free(k->left), free(k);
  return st;
}
