/* LayerNorm backward on the GPU (layernorm_bwd.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_LAYERNORM_BWD_CUDA_H
#define PF_LAYERNORM_BWD_CUDA_H

#include "core/status.h"
#include "kernels/layernorm_bwd/layernorm_bwd_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x, dy: rows*cols values of the storage dtype; g: cols values of the weights' dtype; out: dx,
 * dgamma, dbeta (layernorm_bwd_spec.h's layout); fe: events ORed over every thread. fused only
 * (PF_ERR_UNSUPPORTED for torch). */
pf_status pf_layernorm_bwd_cuda(const pf_lnb_launch *L, const double *x, const double *dy, const double *g, double *out,
                                unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
