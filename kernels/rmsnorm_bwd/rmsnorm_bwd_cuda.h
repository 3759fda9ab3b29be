/* RMSNorm backward on the GPU (rmsnorm_bwd.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_RMSNORM_BWD_CUDA_H
#define PF_RMSNORM_BWD_CUDA_H

#include "core/status.h"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x, dy: rows*cols values of the storage dtype; g: cols values of the weights' dtype; out: dx,
 * dgamma (rmsnorm_bwd_spec.h's layout); fe: events ORed over every thread. fused only
 * (PF_ERR_UNSUPPORTED for torch). */
pf_status pf_rmsnorm_bwd_cuda(const pf_rmsb_launch *L, const double *x, const double *dy, const double *g, double *out,
                              unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
