/* The LayerNorm oracle: the exact mean, rstd and y of each row of the stored inputs
 * (layernorm_spec.h's definition), rounded correctly to the outputs' dtypes.
 *
 * Exactly, with n x_j integers-times-a-power-of-two: S = sum x, Q = sum x^2 and
 * D = n Q - S^2 (= n^2 var >= 0) are computed without rounding (MPFR at a precision that holds
 * them: the row's exponent span, doubled, plus the bits of n), mean = S / n; then by interval
 * arithmetic (every operation rounded down for the lower end, up for the upper) rstd =
 * 1 / sqrt(D / n^2 + eps) (or 1 / (sqrt(D) / n + eps)) and y_j = (n x_j - S) g'_j rstd / n + beta_j
 * with (n x_j - S) g'_j exact, at a precision that doubles until every element's enclosure
 * rounds to one value of its dtype. A row with a non-finite x is undefined; so is rstd (and y)
 * where var + eps is 0; a column with a non-finite gamma or beta has its y undefined. */
#include "oracles/layernorm_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "kernels/layernorm/layernorm_spec.h" /* parameters, dtypes, the output layout */
#include "oracles/layernorm_fast.h"
#include "oracles/oracle_util.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  pf_ln_fast_params p; /* the fast path's view of the case */
} pf_ln_oracle;

/* the bits that hold a sum of n values whose bits span from 2^lo to below 2^hi, exactly */
static long pf_ln_bits(long hi, long lo, size_t n) {
  long b = hi - lo + 4;
  for (size_t k = n; k > 1; k >>= 1) b++;
  return b < 64 ? 64 : b;
}

/* One row by MPFR. */
static void pf_ln_mpfr_row(const void *ctx, size_t i, long *max_prec) {
  const pf_ln_oracle *k = ctx;
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t rows = c->shape[0], n = c->shape[1];
  const double *x = k->in[PF_LN_IN_X].data + i * n, *g = k->in[PF_LN_IN_GAMMA].data, *b = k->in[PF_LN_IN_BETA].data;
  const pf_dtype st = pf_ln_stats_dtype(c, pf_case_algo(c));
  const size_t y0 = pf_ln_y_at(c) + i * n;
  const double eps = c->params[PF_LN_P_EPS];
  const int outside = (int)c->params[PF_LN_P_EPS_PLACE] == PF_LN_EPS_OUTSIDE;
  const int zc = (int)c->params[PF_LN_P_ZERO_CENTERED];
  /* the row's exponent span: every x is a multiple of 2^lo below 2^hi */
  long hi = -1100, lo = 1100;
  for (size_t j = 0; j < n; j++) {
    if (!isfinite(x[j])) {
      pf_oracle_set_undefined(out, i, opts->keep_hex);
      pf_oracle_set_undefined(out, rows + i, opts->keep_hex);
      for (size_t q = 0; q < n; q++) pf_oracle_set_undefined(out, y0 + q, opts->keep_hex);
      return;
    }
    if (x[j] == 0) continue;
    int e;
    frexp(x[j], &e);
    if (e > hi) hi = e;
    if (e - 53 < lo) lo = e - 53;
  }
  if (hi < lo) hi = lo = 0; /* a row of zeros */
  const long pS = pf_ln_bits(hi, lo, n) + 1, pD = pf_ln_bits(2 * hi, 2 * lo, n) + pS + 4;
  mpfr_t S, Q, D, t, T, g1, mlo, mhi, vlo, vhi, rlo, rhi, ylo, yhi;
  mpfr_inits2(pS, S, (mpfr_ptr)0);
  mpfr_inits2(pD, Q, D, t, (mpfr_ptr)0);
  mpfr_init2(g1, 1200);     /* 1 + gamma: binary64 gamma spans at most 1100 bits from 1 */
  mpfr_init2(T, pS + 1300); /* (n x - S) g' */
  mpfr_set_zero(S, 1);
  mpfr_set_zero(Q, 1);
  for (size_t j = 0; j < n; j++) {
    mpfr_add_d(S, S, x[j], MPFR_RNDN); /* exact: pS bits hold every partial sum */
    mpfr_set_d(t, x[j], MPFR_RNDN);
    mpfr_sqr(t, t, MPFR_RNDN);
    mpfr_add(Q, Q, t, MPFR_RNDN);       /* exact */
  }
  mpfr_mul_ui(D, Q, (unsigned long)n, MPFR_RNDN);
  mpfr_sqr(t, S, MPFR_RNDN);
  mpfr_sub(D, D, t, MPFR_RNDN);         /* exact: n^2 var */
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  for (long prec = prec0;; prec *= 2) {
    const int final = prec * 2 > opts->prec_max;
    mpfr_inits2(prec, mlo, mhi, vlo, vhi, rlo, rhi, ylo, yhi, (mpfr_ptr)0);
    mpfr_div_ui(mlo, S, (unsigned long)n, MPFR_RNDD);
    mpfr_div_ui(mhi, S, (unsigned long)n, MPFR_RNDU);
    int settled = pf_oracle_settle(out, i, mlo, mhi, st, final, opts->keep_hex);
    /* rstd's denominator, an enclosure [vlo, vhi] */
    if (outside) {
      mpfr_sqrt(vlo, D, MPFR_RNDD);
      mpfr_div_ui(vlo, vlo, (unsigned long)n, MPFR_RNDD);
      mpfr_add_d(vlo, vlo, eps, MPFR_RNDD);
      mpfr_sqrt(vhi, D, MPFR_RNDU);
      mpfr_div_ui(vhi, vhi, (unsigned long)n, MPFR_RNDU);
      mpfr_add_d(vhi, vhi, eps, MPFR_RNDU);
    } else {
      mpfr_div_ui(vlo, D, (unsigned long)n, MPFR_RNDD);
      mpfr_div_ui(vlo, vlo, (unsigned long)n, MPFR_RNDD);
      mpfr_add_d(vlo, vlo, eps, MPFR_RNDD);
      mpfr_sqrt(vlo, vlo, MPFR_RNDD);
      mpfr_div_ui(vhi, D, (unsigned long)n, MPFR_RNDU);
      mpfr_div_ui(vhi, vhi, (unsigned long)n, MPFR_RNDU);
      mpfr_add_d(vhi, vhi, eps, MPFR_RNDU);
      mpfr_sqrt(vhi, vhi, MPFR_RNDU);
    }
    if (mpfr_zero_p(vhi)) { /* var + eps = 0 exactly: rstd and y are not defined */
      pf_oracle_set_undefined(out, rows + i, opts->keep_hex);
      for (size_t j = 0; j < n; j++) pf_oracle_set_undefined(out, y0 + j, opts->keep_hex);
    } else {
      mpfr_ui_div(rlo, 1, vhi, MPFR_RNDD);
      if (mpfr_zero_p(vlo)) mpfr_set_inf(rhi, 1); /* vlo rounded to 0 only as var + eps = 0: not here */
      else mpfr_ui_div(rhi, 1, vlo, MPFR_RNDU);
      settled &= pf_oracle_settle(out, rows + i, rlo, rhi, st, final, opts->keep_hex);
      for (size_t j = 0; j < n && settled; j++) {
        if (!isfinite(g[j]) || !isfinite(b[j])) {
          pf_oracle_set_undefined(out, y0 + j, opts->keep_hex);
          continue;
        }
        mpfr_set_d(g1, g[j], MPFR_RNDN);
        if (zc) mpfr_add_ui(g1, g1, 1, MPFR_RNDN); /* exact in 1200 bits */
        mpfr_set_d(T, x[j], MPFR_RNDN);
        mpfr_mul_ui(T, T, (unsigned long)n, MPFR_RNDN);
        mpfr_sub(T, T, S, MPFR_RNDN);
        mpfr_mul(T, T, g1, MPFR_RNDN); /* exact: (n x - S) g' */
        const int pos = mpfr_sgn(T) >= 0;
        mpfr_mul(ylo, T, pos ? rlo : rhi, MPFR_RNDD);
        mpfr_mul(yhi, T, pos ? rhi : rlo, MPFR_RNDU);
        mpfr_div_ui(ylo, ylo, (unsigned long)n, MPFR_RNDD);
        mpfr_div_ui(yhi, yhi, (unsigned long)n, MPFR_RNDU);
        mpfr_add_d(ylo, ylo, b[j], MPFR_RNDD);
        mpfr_add_d(yhi, yhi, b[j], MPFR_RNDU);
        settled &= pf_oracle_settle(out, y0 + j, ylo, yhi, c->dtype, final, opts->keep_hex);
      }
    }
    mpfr_clears(mlo, mhi, vlo, vhi, rlo, rhi, ylo, yhi, (mpfr_ptr)0);
    if (prec > *max_prec) *max_prec = prec;
    if (settled) break;
  }
  mpfr_clears(S, Q, D, t, T, g1, (mpfr_ptr)0);
}

static int pf_ln_fast(const void *ctx, size_t i, pf_oracle_result *out) {
  const pf_ln_oracle *k = ctx;
  const size_t n = k->p.cols;
  return pf_ln_fast_row(&k->p, k->in[PF_LN_IN_X].data + i * n, k->in[PF_LN_IN_GAMMA].data, k->in[PF_LN_IN_BETA].data,
                        i, out);
}

pf_status pf_layernorm_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const pf_ln_oracle k = {c, in, opts, out,
                          {c->shape[1], c->dtype, pf_ln_stats_dtype(c, pf_case_algo(c)), c->params[PF_LN_P_EPS],
                           (int)c->params[PF_LN_P_EPS_PLACE] == PF_LN_EPS_OUTSIDE,
                           (int)c->params[PF_LN_P_ZERO_CENTERED], c->shape[0], pf_ln_y_at(c)}};
  /* the fast path first (layernorm_fast.c), row by row */
  return pf_oracle_by_rows(c->shape[0], 100.0 * (double)c->shape[1], opts, out, &k, pf_ln_fast, pf_ln_mpfr_row);
}
