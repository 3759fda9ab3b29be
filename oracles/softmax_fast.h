/* The softmax oracle's fast path (softmax_fast.c): double-word arithmetic with a proven error
 * bound, trusted only where its enclosure decides the result; softmax_mpfr.c calls it first. */
#ifndef PF_SOFTMAX_FAST_H
#define PF_SOFTMAX_FAST_H

#include "kernels/kernel.h"
#include "oracles/dd.h"

/* The oracle's mask (independent of the kernels'): causal (1) aligned bottom right, row i
 * seeing columns j <= i + max(cols - rows, 0); causal-top-left (2): j <= i. */
static inline int pf_oracle_masked(int mask, size_t row, size_t j, size_t rows, size_t cols) {
  return mask >= 1 && j > row + (mask == 1 && cols >= rows ? cols - rows : 0);
}

/* Row `row` of the case (x: its inputs; alpha, mask, sentinel: the case's score definition):
 * 1 when every output was settled into out, else 0 and nothing of the row to trust. work
 * holds 2 cols double words. */
int pf_softmax_fast(const pf_case *c, const double *x, size_t row, double alpha, int mask, double sentinel,
                    pf_oracle_result *out, pf_dd *work);

#endif
