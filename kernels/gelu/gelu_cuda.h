/* GELU on the GPU (gelu.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_GELU_CUDA_H
#define PF_GELU_CUDA_H

#include "core/status.h"
#include "kernels/gelu/gelu_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: L->n values of the storage dtype; out: y; fe: events ORed over every element. fused only
 * (PF_ERR_UNSUPPORTED for torch). */
pf_status pf_gelu_cuda(const pf_gelu_launch *L, const double *x, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
