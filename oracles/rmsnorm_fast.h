/* The RMSNorm oracle's fast path (rmsnorm_fast.c): double-word arithmetic with a proven error
 * bound, trusted only where its enclosure decides every output of the row; rmsnorm_mpfr.c calls
 * it first. */
#ifndef PF_RMSNORM_FAST_H
#define PF_RMSNORM_FAST_H

#include "core/kernel.h"
#include "oracles/dd.h"

typedef struct {
  size_t cols;
  pf_dtype dtype, stats; /* y's dtype, rstd's */
  double eps;
  int zero_centered;
  size_t y_at;           /* the output layout: rstd i, y y_at + i cols + j */
} pf_rms_fast_params;

/* A row's rstd (*r) within *rr times r, by the budget of rmsnorm_fast.c; 0 when the row is not
 * the fast path's (non-finite or huge values, a row of zeros with eps 0). y's fields are not used. */
int pf_rms_fast_stats(const pf_rms_fast_params *p, const double *x, pf_dd *r, double *rr);

/* Row i (x: its cols values; g: gamma): 1 when its rstd and every y were settled into out, else 0
 * and nothing of the row to trust. */
int pf_rms_fast_row(const pf_rms_fast_params *p, const double *x, const double *g, size_t i, pf_oracle_result *out);

#endif
