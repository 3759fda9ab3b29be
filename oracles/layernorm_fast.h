/* The LayerNorm oracle's fast path (layernorm_fast.c): double-word arithmetic with a proven
 * error bound, trusted only where its enclosure decides every output of the row;
 * layernorm_mpfr.c calls it first. */
#ifndef PF_LAYERNORM_FAST_H
#define PF_LAYERNORM_FAST_H

#include "core/kernel.h"
#include "oracles/dd.h"

typedef struct {
  size_t cols;
  pf_dtype dtype, stats; /* y's dtype, mean's and rstd's */
  double eps;
  int eps_outside, zero_centered;
  size_t rows, y_at;     /* the output layout: mean i, rstd rows + i, y y_at + i cols + j */
} pf_ln_fast_params;

/* A row's statistics: -mean (*nm) within *em, rstd (*r) within *rr times r, by the budget of
 * layernorm_fast.c; 0 when the row is not the fast path's (non-finite or huge values, a constant
 * row, a bound too loose to be of use). eps_outside is taken from p; y's fields are not used. */
int pf_ln_fast_stats(const pf_ln_fast_params *p, const double *x, pf_dd *nm, double *em, pf_dd *r, double *rr);

/* Row i (x: its cols values; g, b: gamma and beta): 1 when its mean, rstd and every y were
 * settled into out, else 0 and nothing of the row to trust. */
int pf_ln_fast_row(const pf_ln_fast_params *p, const double *x, const double *g, const double *b, size_t i,
                   pf_oracle_result *out);

#endif
