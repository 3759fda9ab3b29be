/* Softmax backward's row arithmetic, shared by the C emulation (softmax_bwd_cpu.c) and a CUDA
 * kernel: every operation rounded to the accumulation dtype (dtype_math.h). */
#ifndef PF_SOFTMAX_BWD_MATH_H
#define PF_SOFTMAX_BWD_MATH_H

#include "core/dtype_math.h"
#include "kernels/softmax_bwd/softmax_bwd_spec.h"


/* Fault switches: softmax-bwd-no-sum forgets the sum (dx = y dy, the gradient of exp, not of
 * softmax); softmax-bwd-sum-in-storage accumulates the sum in the storage dtype whatever the
 * accumulation dtype (a reduction left in half precision). */
enum { PF_SOFTMAX_BWD_F_NO_SUM = 1, PF_SOFTMAX_BWD_F_SUM_IN_STORAGE = 2 };

/* One row: S = sum_j fl(dy_j y_j) in column order, then dx_j = fl_out(fl(y_j fl(dy_j - S))),
 * in acc (y: the row's probabilities as the variant holds them, values of acc or of out_t). */
PF_HD void pf_softmax_bwd_row(int faults, pf_dtype acc, pf_dtype out_t, const double *y, const double *dy,
                              size_t cols, double *dx, unsigned *fe) {
  const pf_dtype st = (faults & PF_SOFTMAX_BWD_F_SUM_IN_STORAGE) ? out_t : acc;
  double s = 0;
  for (size_t j = 0; j < cols; j++) s = pf_add(st, s, pf_mul(st, dy[j], y[j], fe), fe);
  if (faults & PF_SOFTMAX_BWD_F_NO_SUM) s = 0;
  for (size_t j = 0; j < cols; j++) dx[j] = pf_round_fe(out_t, pf_mul(acc, y[j], pf_sub(acc, dy[j], s, fe), fe), fe);
}

#endif
