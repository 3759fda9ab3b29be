/* Softmax backward on the GPU (softmax_bwd.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_SOFTMAX_BWD_CUDA_H
#define PF_SOFTMAX_BWD_CUDA_H

#include <stddef.h>

#include "core/dtype_math.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What softmax_bwd.cu receives for a case (softmax_bwd_cpu.c makes it). */
typedef struct {
  size_t rows, cols;
  int stored; /* 1: y rounded to the storage dtype between the forward and the backward */
  int faults; /* PF_SOFTMAX_BWD_F_* (softmax_bwd_math.h) */
  pf_dtype t, acc;
} pf_softmax_bwd_launch;

/* x, dy: rows*cols values of the storage dtype; dx: outputs; fe: events ORed over all rows. */
pf_status pf_softmax_bwd_cuda(const pf_softmax_bwd_launch *L, const double *x, const double *dy, double *dx, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
