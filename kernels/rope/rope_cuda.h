/* Rotary embeddings on the GPU (rope.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_ROPE_CUDA_H
#define PF_ROPE_CUDA_H

#include "core/status.h"
#include "kernels/rope/rope_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* t: positions x heads x dim values of the storage dtype; out: y in the same layout; fe: events
 * ORed over every element. fused only (PF_ERR_UNSUPPORTED for torch). */
pf_status pf_rope_cuda(const pf_rope_launch *L, const double *t, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
