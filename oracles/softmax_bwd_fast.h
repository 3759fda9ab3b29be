/* The softmax backward oracle's fast path (softmax_bwd_fast.c): one row in double-word
 * arithmetic with a proven error bound, trusted only where it decides every output of the row;
 * softmax_bwd_mpfr.c calls it first. */
#ifndef PF_SOFTMAX_BWD_FAST_H
#define PF_SOFTMAX_BWD_FAST_H

#include "oracles/dd.h"

/* Row x, dy (cols finite values each; jm: an index of x's maximum): settles outputs base ..
 * base + cols - 1 (dtype dt) and returns 1; 0 when it cannot (outputs written then are the
 * caller's to overwrite: the row is MPFR's). e: scratch of 2 cols double words. */
int pf_softmax_bwd_fast_row(const double *x, const double *dy, size_t cols, size_t jm, pf_oracle_result *out,
                            size_t base, pf_dtype dt, pf_dd *e);

#endif
