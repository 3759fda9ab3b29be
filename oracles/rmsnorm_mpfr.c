/* The RMSNorm oracle: the exact rstd and y of each row of the stored inputs (rmsnorm_spec.h's
 * definition), rounded correctly to the outputs' dtypes.
 *
 * Q = sum x^2 is computed without rounding (MPFR at a precision holding the row's squares'
 * exponent span and the bits of n); then by interval arithmetic (every operation rounded down
 * for the lower end, up for the upper) rstd = 1 / sqrt(Q / n + eps) and y_j = x_j g'_j rstd with
 * x_j g'_j exact, at a precision that doubles until every element's enclosure rounds to one value
 * of its dtype. A row with a non-finite x is undefined, so are rstd and y where Q / n + eps is 0
 * (a row of zeros with eps 0), and y at a column whose gamma is not finite. */
#include "oracles/rmsnorm_mpfr.h"

#include <math.h>
#include <stdlib.h>

#include "core/kernel.h"
#include "kernels/rmsnorm/rmsnorm_spec.h" /* parameters, dtypes, the output layout */
#include "oracles/oracle_util.h"
#include "oracles/rmsnorm_fast.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  pf_rms_fast_params p; /* the fast path's view of the case */
} pf_rms_oracle;

static void pf_rms_mpfr_row(const void *ctx, size_t i, long *max_prec) {
  const pf_rms_oracle *k = ctx;
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t n = c->shape[1];
  const double *x = k->in[PF_RMS_IN_X].data + i * n, *g = k->in[PF_RMS_IN_GAMMA].data;
  const pf_dtype st = pf_rms_stats_dtype(c);
  const size_t y0 = pf_rms_y_at(c) + i * n;
  const double eps = c->params[PF_RMS_P_EPS];
  const int zc = (int)c->params[PF_RMS_P_ZERO_CENTERED];
  long hi = -1100, lo = 1100; /* every x a multiple of 2^lo below 2^hi */
  for (size_t j = 0; j < n; j++) {
    if (!isfinite(x[j])) {
      pf_oracle_set_undefined(out, i, opts->keep_hex);
      for (size_t q = 0; q < n; q++) pf_oracle_set_undefined(out, y0 + q, opts->keep_hex);
      return;
    }
    if (x[j] == 0) continue;
    int e;
    frexp(x[j], &e);
    if (e > hi) hi = e;
    if (e - 53 < lo) lo = e - 53;
  }
  if (hi < lo) hi = lo = 0;
  long pQ = 2 * (hi - lo) + 8;
  for (size_t m = n; m > 1; m >>= 1) pQ++;
  mpfr_t Q, t, g1, T, rlo, rhi, ylo, yhi;
  mpfr_init2(Q, pQ);
  mpfr_init2(t, 128);
  mpfr_init2(g1, 1200); /* 1 + gamma, exact */
  mpfr_init2(T, 1400);  /* x g', exact */
  mpfr_set_zero(Q, 1);
  for (size_t j = 0; j < n; j++) {
    mpfr_set_d(t, x[j], MPFR_RNDN);
    mpfr_sqr(t, t, MPFR_RNDN); /* exact in 128 bits */
    mpfr_add(Q, Q, t, MPFR_RNDN); /* exact in pQ bits */
  }
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  for (long prec = prec0;; prec *= 2) {
    const int final = prec * 2 > opts->prec_max;
    mpfr_inits2(prec, rlo, rhi, ylo, yhi, (mpfr_ptr)0);
    /* the denominator sqrt(Q/n + eps): ylo, yhi hold its ends for now */
    mpfr_div_ui(ylo, Q, (unsigned long)n, MPFR_RNDD);
    mpfr_add_d(ylo, ylo, eps, MPFR_RNDD);
    mpfr_sqrt(ylo, ylo, MPFR_RNDD);
    mpfr_div_ui(yhi, Q, (unsigned long)n, MPFR_RNDU);
    mpfr_add_d(yhi, yhi, eps, MPFR_RNDU);
    mpfr_sqrt(yhi, yhi, MPFR_RNDU);
    int settled = 1;
    if (mpfr_zero_p(yhi)) { /* Q / n + eps = 0 exactly */
      pf_oracle_set_undefined(out, i, opts->keep_hex);
      for (size_t j = 0; j < n; j++) pf_oracle_set_undefined(out, y0 + j, opts->keep_hex);
    } else {
      /* the lower end is positive too: MPFR's exponent range holds any positive sum's root */
      mpfr_ui_div(rlo, 1, yhi, MPFR_RNDD);
      mpfr_ui_div(rhi, 1, ylo, MPFR_RNDU);
      settled = pf_oracle_settle(out, i, rlo, rhi, st, final, opts->keep_hex);
      for (size_t j = 0; j < n && settled; j++) {
        if (!isfinite(g[j])) {
          pf_oracle_set_undefined(out, y0 + j, opts->keep_hex);
          continue;
        }
        mpfr_set_d(g1, g[j], MPFR_RNDN);
        if (zc) mpfr_add_ui(g1, g1, 1, MPFR_RNDN);
        mpfr_mul_d(T, g1, x[j], MPFR_RNDN); /* exact */
        const int pos = mpfr_sgn(T) >= 0;
        mpfr_mul(ylo, T, pos ? rlo : rhi, MPFR_RNDD);
        mpfr_mul(yhi, T, pos ? rhi : rlo, MPFR_RNDU);
        settled &= pf_oracle_settle(out, y0 + j, ylo, yhi, c->dtype, final, opts->keep_hex);
      }
    }
    mpfr_clears(rlo, rhi, ylo, yhi, (mpfr_ptr)0);
    if (prec > *max_prec) *max_prec = prec;
    if (settled) break;
  }
  mpfr_clears(Q, t, g1, T, (mpfr_ptr)0);
}

static int pf_rms_fast(const void *ctx, size_t i, pf_oracle_result *out) {
  const pf_rms_oracle *k = ctx;
  return pf_rms_fast_row(&k->p, k->in[PF_RMS_IN_X].data + i * k->p.cols, k->in[PF_RMS_IN_GAMMA].data, i, out);
}

pf_status pf_rmsnorm_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const pf_rms_oracle k = {c, in, opts, out,
                           {c->shape[1], c->dtype, pf_rms_stats_dtype(c), c->params[PF_RMS_P_EPS],
                            (int)c->params[PF_RMS_P_ZERO_CENTERED], pf_rms_y_at(c)}};
  /* the fast path first (rmsnorm_fast.c), row by row */
  return pf_oracle_by_rows(c->shape[0], 60.0 * (double)c->shape[1], opts, out, &k, pf_rms_fast, pf_rms_mpfr_row);
}
