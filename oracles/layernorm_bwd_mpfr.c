/* The LayerNorm backward oracle: the exact dx, dgamma and dbeta of the stored inputs
 * (layernorm_bwd_spec.h's definition), rounded correctly to the outputs' dtypes.
 *
 * Row i (n columns, a_j = g'_j dy_j; every x, dy, g' a binary64 value, so every sum and product
 * below is exact in MPFR at a precision that holds it):
 *   S = sum x, Q = sum x^2, D = n Q - S^2 (= n^2 var), W = D + n^2 eps (= n^2 (var + eps)),
 *   A = sum a, P = sum a x, E = n P - S A, F_j = n x_j - S, G_j = n a_j - A,
 * so that rstd = n / sqrt(W), xhat_j = F_j / sqrt(W) and
 *   dx_j = (rstd / n) (G_j - F_j E / W) = H_j / (W sqrt(W)),   H_j = G_j W - F_j E exact:
 * the row's cancellation happens in H_j, exactly; one square root is left, taken as an
 * interval. Over the tokens: dgamma_j = sum_i dy_ij F_ij / sqrt(W_i) by interval arithmetic
 * (every operation rounded down for the lower end, up for the upper), dbeta_j = sum_i dy_ij
 * exactly. The precision of the intervals doubles until every element's enclosure rounds to one
 * value of its dtype. The fast path (layernorm_bwd_fast.c) goes first, a row's dx and a column's
 * dgamma and dbeta at a time; what it leaves comes here. Undefined: dx of a row with a non-finite x, dy or gamma, or W = 0; dgamma
 * of a column that such a row (or a non-finite dy in it) reaches; dbeta of a column with a
 * non-finite dy. */
#include "oracles/layernorm_bwd_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "kernels/layernorm_bwd/layernorm_bwd_spec.h" /* parameters, dtypes, the output layout */
#include "oracles/layernorm_bwd_fast.h"
#include "oracles/oracle_util.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  size_t rows, n;
  mpfr_t *S, *W;             /* per row, exact (pf_lnbo_exact_stats fills them) */
  unsigned char *bad, *exact; /* per row: its statistics undefined (a non-finite x, or W = 0); S and W there */
  pf_lnb_fast_params fp;
  pf_lnb_fast_row_stats *st; /* per row, the fast path's statistics (ok 0 where it has none) */
  unsigned char *left;       /* per column: left to MPFR by the fast path */
  long max_prec[PF_MAX_THREADS];
} pf_lnbo;

/* g'_j = g_j or 1 + g_j, exact */
static void pf_lnbo_gamma(mpfr_ptr r, double g, int zc) {
  mpfr_set_prec(r, 1200); /* 1 + a binary64 value spans at most 1100 bits */
  mpfr_set_d(r, g, MPFR_RNDN);
  if (zc) mpfr_add_ui(r, r, 1, MPFR_RNDN);
  mpfr_prec_round(r, mpfr_min_prec(r) < MPFR_PREC_MIN ? MPFR_PREC_MIN : mpfr_min_prec(r), MPFR_RNDN); /* exact */
}

/* Row i's S and W, exact, and whether its statistics are defined (bad). */
static void pf_lnbo_exact_stats(pf_lnbo *k, size_t i) {
  const size_t n = k->n;
  const double *x = k->in[PF_LNB_IN_X].data + i * n;
  mpfr_ptr S = k->S[i], W = k->W[i];
  mpfr_set_prec(S, MPFR_PREC_MIN);
  mpfr_set_zero(S, 1);
  mpfr_set_prec(W, MPFR_PREC_MIN);
  mpfr_set_zero(W, 1);
  k->exact[i] = 1;
  k->bad[i] = 0;
  for (size_t j = 0; j < n; j++)
    if (!isfinite(x[j])) {
      k->bad[i] = 1;
      return;
    }
  mpfr_t Q, t, u, v, H;
  mpfr_inits2(64, Q, t, u, v, H, (mpfr_ptr)0);
  mpfr_set_zero(Q, 1);
  for (size_t j = 0; j < n; j++) {
    mpfr_set_prec(t, 53);
    mpfr_set_d(t, x[j], MPFR_RNDN);
    pf_mpfr_exact_add(S, S, t, 1);
    pf_mpfr_exact_mul(u, t, t);
    pf_mpfr_exact_add(Q, Q, u, 1);
  }
  /* W = n Q - S^2 + n^2 eps */
  mpfr_set_prec(u, 64);
  mpfr_set_ui(u, (unsigned long)n, MPFR_RNDN);
  pf_mpfr_exact_mul(v, Q, u);
  pf_mpfr_exact_mul(H, S, S);
  pf_mpfr_exact_add(W, v, H, -1);
  mpfr_set_prec(t, 53);
  mpfr_set_d(t, k->c->params[PF_LNB_P_EPS], MPFR_RNDN);
  pf_mpfr_exact_mul(v, t, u);
  pf_mpfr_exact_mul(H, v, u);
  pf_mpfr_exact_add(W, W, H, 1);
  if (mpfr_sgn(W) <= 0) k->bad[i] = 1; /* var + eps = 0: rstd is not defined */
  mpfr_clears(Q, t, u, v, H, (mpfr_ptr)0);
}

/* Row i's dx by MPFR (its exact statistics first). */
static void pf_lnbo_row(const void *ctx, size_t i, long *max_prec) {
  pf_lnbo *k = (pf_lnbo *)ctx; /* row i's own entries of S, W, bad, exact */
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t n = k->n;
  const double *x = k->in[PF_LNB_IN_X].data + i * n, *dy = k->in[PF_LNB_IN_DY].data + i * n;
  const double *g = k->in[PF_LNB_IN_GAMMA].data;
  const int zc = (int)c->params[PF_LNB_P_ZERO_CENTERED];
  pf_lnbo_exact_stats(k, i);
  int dxbad = k->bad[i];
  for (size_t j = 0; j < n; j++)
    if (!isfinite(dy[j]) || !isfinite(g[j])) dxbad = 1;
  if (dxbad) {
    for (size_t j = 0; j < n; j++) pf_oracle_set_undefined(out, i * n + j, opts->keep_hex);
    return;
  }
  mpfr_srcptr S = k->S[i], W = k->W[i];
  mpfr_t A, P, t, u, v, a, G, F, H, H2;
  mpfr_inits2(64, A, P, t, u, v, a, G, F, H, H2, (mpfr_ptr)0);
  mpfr_set_zero(A, 1);
  mpfr_set_zero(P, 1);
  for (size_t j = 0; j < n; j++) {
    mpfr_set_prec(t, 53);
    mpfr_set_d(t, x[j], MPFR_RNDN);
    pf_lnbo_gamma(v, g[j], zc);
    pf_mpfr_exact_mul_d(a, v, dy[j], u); /* a_j */
    pf_mpfr_exact_add(A, A, a, 1);
    pf_mpfr_exact_mul(u, a, t); /* a_j x_j */
    pf_mpfr_exact_add(P, P, u, 1);
  }
  mpfr_set_prec(u, 64);
  mpfr_set_ui(u, (unsigned long)n, MPFR_RNDN);
  /* E = n P - S A (kept in P) */
  pf_mpfr_exact_mul(v, P, u);
  pf_mpfr_exact_mul(H, S, A);
  pf_mpfr_exact_add(P, v, H, -1);
  /* H_j = (n a_j - A) W - (n x_j - S) E, kept for the precision loop */
  mpfr_t *Hj = malloc(n * sizeof(mpfr_t));
  if (!Hj) { /* no memory: the row is left undefined rather than guessed */
    for (size_t j = 0; j < n; j++) pf_oracle_set_undefined(out, i * n + j, opts->keep_hex);
    mpfr_clears(A, P, t, u, v, a, G, F, H, H2, (mpfr_ptr)0);
    return;
  }
  for (size_t j = 0; j < n; j++) {
    pf_lnbo_gamma(v, g[j], zc);
    pf_mpfr_exact_mul_d(a, v, dy[j], t);
    pf_mpfr_exact_mul(v, a, u);
    pf_mpfr_exact_add(G, v, A, -1);
    mpfr_set_prec(t, 53);
    mpfr_set_d(t, x[j], MPFR_RNDN);
    pf_mpfr_exact_mul(v, t, u);
    pf_mpfr_exact_add(F, v, S, -1);
    pf_mpfr_exact_mul(H, G, W);
    pf_mpfr_exact_mul(H2, F, P);
    mpfr_init2(Hj[j], MPFR_PREC_MIN);
    pf_mpfr_exact_add(Hj[j], H, H2, -1);
  }
  mpfr_t qlo, qhi, lo, hi;
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  for (long prec = prec0;; prec *= 2) {
    const int final = prec * 2 > opts->prec_max;
    mpfr_inits2(prec, qlo, qhi, lo, hi, (mpfr_ptr)0);
    /* W sqrt(W), an enclosure */
    mpfr_sqrt(qlo, W, MPFR_RNDD);
    mpfr_mul(qlo, qlo, W, MPFR_RNDD);
    mpfr_sqrt(qhi, W, MPFR_RNDU);
    mpfr_mul(qhi, qhi, W, MPFR_RNDU);
    int settled = 1;
    for (size_t j = 0; j < n && settled; j++) {
      const int pos = mpfr_sgn(Hj[j]) >= 0;
      mpfr_div(lo, Hj[j], pos ? qhi : qlo, MPFR_RNDD);
      mpfr_div(hi, Hj[j], pos ? qlo : qhi, MPFR_RNDU);
      settled &= pf_oracle_settle(out, i * n + j, lo, hi, c->dtype, final, opts->keep_hex);
    }
    mpfr_clears(qlo, qhi, lo, hi, (mpfr_ptr)0);
    if (prec > *max_prec) *max_prec = prec;
    if (settled) break;
  }
  for (size_t j = 0; j < n; j++) mpfr_clear(Hj[j]);
  free(Hj);
  mpfr_clears(A, P, t, u, v, a, G, F, H, H2, (mpfr_ptr)0);
}

/* Columns [begin, end) that the fast path left: dgamma and dbeta by MPFR (every row's exact
 * statistics in place). */
static void pf_lnbo_cols(void *ctx, int thread, size_t begin, size_t end) {
  pf_lnbo *k = ctx;
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t n = k->n, rows = k->rows;
  const pf_dtype wt = pf_lnb_weights_dtype(c);
  const double *x = k->in[PF_LNB_IN_X].data, *dy = k->in[PF_LNB_IN_DY].data;
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  mpfr_t B, t, u, F, T, rlo, rhi, lo, hi, p;
  mpfr_inits2(64, B, t, u, F, T, rlo, rhi, lo, hi, p, (mpfr_ptr)0);
  mpfr_set_prec(u, 64);
  mpfr_set_ui(u, (unsigned long)n, MPFR_RNDN);
  for (size_t j = begin; j < end; j++) {
    if (!k->left[j]) continue;
    const size_t og = pf_lnb_dgamma_at(c) + j, ob = pf_lnb_dbeta_at(c) + j;
    int dybad = 0, rowbad = 0;
    for (size_t i = 0; i < rows; i++) {
      if (!isfinite(dy[i * n + j])) dybad = 1;
      if (k->bad[i]) rowbad = 1;
    }
    if (dybad) {
      pf_oracle_set_undefined(out, og, opts->keep_hex);
      pf_oracle_set_undefined(out, ob, opts->keep_hex);
      continue;
    }
    /* dbeta: exact */
    mpfr_set_prec(B, MPFR_PREC_MIN);
    mpfr_set_zero(B, 1);
    for (size_t i = 0; i < rows; i++) {
      mpfr_set_prec(t, 53);
      mpfr_set_d(t, dy[i * n + j], MPFR_RNDN);
      pf_mpfr_exact_add(B, B, t, 1);
    }
    pf_oracle_settle(out, ob, B, B, wt, 1, opts->keep_hex);
    if (rowbad) {
      pf_oracle_set_undefined(out, og, opts->keep_hex);
      continue;
    }
    for (long prec = prec0;; prec *= 2) {
      const int final = prec * 2 > opts->prec_max;
      mpfr_set_prec(rlo, prec);
      mpfr_set_prec(rhi, prec);
      mpfr_set_prec(lo, prec);
      mpfr_set_prec(hi, prec);
      mpfr_set_prec(p, prec);
      mpfr_set_zero(lo, 1);
      mpfr_set_zero(hi, 1);
      for (size_t i = 0; i < rows; i++) {
        const double d = dy[i * n + j];
        if (d == 0) continue;
        mpfr_set_prec(t, 53);
        mpfr_set_d(t, x[i * n + j], MPFR_RNDN);
        pf_mpfr_exact_mul(T, t, u);
        pf_mpfr_exact_add(F, T, k->S[i], -1);
        pf_mpfr_exact_mul_d(T, F, d, t); /* dy F, exact */
        if (mpfr_zero_p(T)) continue;
        /* 1 / sqrt(W_i), an enclosure */
        mpfr_rec_sqrt(rlo, k->W[i], MPFR_RNDD);
        mpfr_rec_sqrt(rhi, k->W[i], MPFR_RNDU);
        const int pos = mpfr_sgn(T) > 0;
        mpfr_mul(p, T, pos ? rlo : rhi, MPFR_RNDD);
        mpfr_add(lo, lo, p, MPFR_RNDD);
        mpfr_mul(p, T, pos ? rhi : rlo, MPFR_RNDU);
        mpfr_add(hi, hi, p, MPFR_RNDU);
      }
      if (prec > k->max_prec[thread]) k->max_prec[thread] = prec;
      if (pf_oracle_settle(out, og, lo, hi, wt, final, opts->keep_hex)) break;
    }
  }
  mpfr_clears(B, t, u, F, T, rlo, rhi, lo, hi, p, (mpfr_ptr)0);
}

/* the fast path's row: its statistics (kept for the columns), then its dx */
static int pf_lnbo_fast_row(const void *ctx, size_t i, pf_oracle_result *out) {
  const pf_lnbo *k = ctx;
  const size_t n = k->n;
  const double *x = k->in[PF_LNB_IN_X].data + i * n, *dy = k->in[PF_LNB_IN_DY].data + i * n;
  if (!pf_lnb_fast_stats(&k->fp, x, &k->st[i])) return 0;
  return pf_lnb_fast_dx(&k->fp, &k->st[i], x, dy, k->in[PF_LNB_IN_GAMMA].data, i, out);
}

/* columns [begin, end) by the fast path (four at a time); those it cannot settle are left */
static void pf_lnbo_fast_cols(void *ctx, int thread, size_t begin, size_t end) {
  pf_lnbo *k = ctx;
  for (size_t j = begin; j < end; j += 4) {
    const size_t cnt = end - j < 4 ? end - j : 4;
    const int m = pf_lnb_fast_columns(&k->fp, k->st, k->in[PF_LNB_IN_X].data, k->in[PF_LNB_IN_DY].data, j, cnt, k->out);
    for (size_t l = 0; l < cnt; l++) k->left[j + l] = !(m >> l & 1);
  }
}

/* rows [begin, end) whose exact statistics the dx phase did not need: computed now */
static void pf_lnbo_missing_stats(void *ctx, int thread, size_t begin, size_t end) {
  pf_lnbo *k = ctx;
  for (size_t i = begin; i < end; i++)
    if (!k->exact[i]) pf_lnbo_exact_stats(k, i);
}

pf_status pf_layernorm_bwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                                pf_oracle_result *out) {
  pf_lnbo *k = calloc(1, sizeof *k);
  const size_t rows = c->shape[0], n = c->shape[1];
  if (!k) return pf_error(PF_ERR_NOMEM, "oracle: out of memory");
  k->c = c, k->in = in, k->opts = opts, k->out = out, k->rows = rows, k->n = n;
  k->fp = (pf_lnb_fast_params){rows, n, c->dtype, pf_lnb_weights_dtype(c), c->params[PF_LNB_P_EPS],
                               (int)c->params[PF_LNB_P_ZERO_CENTERED], 0};
  k->S = malloc((rows + 1) * sizeof(mpfr_t));
  k->W = malloc((rows + 1) * sizeof(mpfr_t));
  k->bad = calloc(rows + 1, 1);
  k->exact = calloc(rows + 1, 1);
  k->st = calloc(rows + 1, sizeof *k->st);
  k->left = calloc(n + 1, 1);
  if (!k->S || !k->W || !k->bad || !k->exact || !k->st || !k->left) {
    free(k->S), free(k->W), free(k->bad), free(k->exact), free(k->st), free(k->left), free(k);
    return pf_error(PF_ERR_NOMEM, "oracle: out of memory");
  }
  for (size_t i = 0; i < rows; i++) mpfr_init2(k->S[i], MPFR_PREC_MIN), mpfr_init2(k->W[i], MPFR_PREC_MIN);
  /* dx row by row, the fast path first (which keeps each row's statistics for the columns) */
  const pf_status st = pf_oracle_rows_then_columns(rows, n, opts, out, k, pf_lnbo_fast_row, pf_lnbo_row, pf_lnbo_fast_cols,
                                                   pf_lnbo_missing_stats, pf_lnbo_cols, k->left, k->max_prec);
  for (size_t i = 0; i < rows; i++) mpfr_clear(k->S[i]), mpfr_clear(k->W[i]);
  free(k->S), free(k->W), free(k->bad), free(k->exact), free(k->st), free(k->left), free(k);
  return st;
}
