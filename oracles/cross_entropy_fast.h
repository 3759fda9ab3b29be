/* The cross-entropy oracle's fast path (cross_entropy_fast.c): one row in double-word arithmetic
 * with a proven error bound, trusted only where it decides every output of the row. */
#ifndef PF_CROSS_ENTROPY_FAST_H
#define PF_CROSS_ENTROPY_FAST_H

#include "oracles/dd.h"

/* Row x (cols logits, all finite), target t, label smoothing eps, z-loss z, nc the rows the
 * mean counts (the gradient's factor is 1 / nc; 0 for sum and none: 1): settles the row's loss (output index
 * i, dtype lt) and its gradient (outputs base .. base + cols - 1, dtype dt) and returns 1 with
 * the loss's enclosure [*loss - *err, *loss + *err]; 0 when it cannot (outputs written then are
 * the caller's to overwrite: the row is MPFR's). e: scratch of cols double words. */
int pf_ce_fast_row(const double *x, size_t cols, size_t t, double eps, double z, double nc, pf_oracle_result *out,
                   size_t i, pf_dtype lt, size_t base, pf_dtype dt, pf_dd *e, pf_dd *loss, double *err);

#endif
