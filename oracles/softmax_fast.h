/* The softmax oracle's fast path (softmax_fast.c): double-word arithmetic with a proven error
 * bound, trusted only where its enclosure decides the result; softmax_mpfr.c calls it first. */
#ifndef PF_SOFTMAX_FAST_H
#define PF_SOFTMAX_FAST_H

#include "core/kernel.h"
#include "kernels/softmax/softmax_spec.h" /* the mask choices */
#include "oracles/dd.h"

/* The oracle's mask (its own, from the family's spec: the choices of the mask parameter): causal
 * aligned bottom right, row i seeing columns j <= i + cols - rows (none when i < rows - cols);
 * causal-top-left: j <= i. */
static inline int pf_oracle_masked(int mask, size_t row, size_t j, size_t rows, size_t cols) {
  return mask == PF_MASK_CAUSAL_TOP_LEFT ? j > row : mask == PF_MASK_CAUSAL && j + rows > row + cols;
}
/* A row the causal mask hides whole: with the -inf sentinel its exact value is taken as 0
 * (PyTorch's _safe_softmax); with a finite one the equal scores make it uniform. */
/* How many leading columns row `row` sees (every mask here shows a prefix of the row). */
static inline size_t pf_oracle_visible(int mask, size_t row, size_t rows, size_t cols) {
  if (mask == PF_MASK_CAUSAL_TOP_LEFT) return row + 1 < cols ? row + 1 : cols;
  if (mask != PF_MASK_CAUSAL) return cols;
  if (row + cols < rows) return 0;
  return row + cols - rows + 1 < cols ? row + cols - rows + 1 : cols;
}
static inline int pf_oracle_hidden(int mask, size_t row, size_t rows, size_t cols) {
  return mask == PF_MASK_CAUSAL && row + cols < rows;
}

/* Row `row` of the case (x: its inputs; alpha, mask, sentinel: the case's score definition):
 * 1 when every output was settled into out, else 0 and nothing of the row to trust. work
 * holds 2 cols double words. */
int pf_softmax_fast(const pf_case *c, const double *x, size_t row, double alpha, int mask, double sentinel,
                    pf_oracle_result *out, pf_dd *work);

#endif
