/* The LayerNorm and RMSNorm backward oracles' fast path (layernorm_bwd_fast.c): double-word
 * arithmetic with a proven error bound, trusted only where its enclosure decides an output;
 * layernorm_bwd_mpfr.c and rmsnorm_bwd_mpfr.c call it first. RMSNorm's backward is LayerNorm's
 * without the mean (no mean term in dx, no dbeta). */
#ifndef PF_LAYERNORM_BWD_FAST_H
#define PF_LAYERNORM_BWD_FAST_H

#include "core/kernel.h"
#include "oracles/dd.h"

typedef struct {
  size_t rows, cols;
  pf_dtype dtype, weights; /* dx's dtype; dgamma's and dbeta's */
  double eps;
  int zero_centered;
  int rms; /* RMSNorm: xhat = x rstd, dx without the mean term, dgamma alone (no dbeta) */
} pf_lnb_fast_params;

/* A row's statistics as the fast path holds them: -mean (nm) within em, rstd (r) within rr r;
 * ok 0 when the row is not the fast path's (then neither its dx nor any column is). */
typedef struct {
  pf_dd nm, r;
  double em, rr;
  int ok;
} pf_lnb_fast_row_stats;

/* Row x's statistics into *st; returns st->ok. */
int pf_lnb_fast_stats(const pf_lnb_fast_params *p, const double *x, pf_lnb_fast_row_stats *st);
/* Row i's dx (x, dy: its cols values; g: gamma): 1 when every one was settled into out. */
int pf_lnb_fast_dx(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x, const double *dy,
                   const double *g, size_t i, pf_oracle_result *out);
/* Column j's dgamma and dbeta (RMSNorm: dgamma alone; x, dy: the whole rows x cols; st: every
 * row's statistics): 1 when they were settled into out. */
int pf_lnb_fast_column(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x, const double *dy,
                       size_t j, pf_oracle_result *out);
/* Columns j .. j + count - 1 (count <= 4; four at once with AVX2, the same sums as one by one):
 * the mask (bit l: column j + l) of those settled. */
int pf_lnb_fast_columns(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x, const double *dy,
                        size_t j, size_t count, pf_oracle_result *out);

#endif
