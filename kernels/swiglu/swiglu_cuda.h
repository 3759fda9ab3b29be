/* SwiGLU on the GPU (swiglu.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_SWIGLU_CUDA_H
#define PF_SWIGLU_CUDA_H

#include "core/status.h"
#include "kernels/swiglu/swiglu_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a, b: L->n values of the storage dtype each; out: y; fe: events ORed over every element. fused
 * only (PF_ERR_UNSUPPORTED for torch). */
pf_status pf_swiglu_cuda(const pf_swiglu_launch *L, const double *a, const double *b, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
