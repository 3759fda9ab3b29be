/* CUDA gradient clipping (clip.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_CLIP_CUDA_H
#define PF_CLIP_CUDA_H

#include "core/status.h"
#include "kernels/clip/clip_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* g: tensors*n gradients of the dtype; out: the norm, then the clipped gradients (clip_cpu.c's
 * layout); fe: events ORed over the whole computation. */
pf_status pf_clip_cuda(const pf_clip_launch *L, const double *g, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
