/* RMSNorm forward on the GPU (rmsnorm.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_RMSNORM_CUDA_H
#define PF_RMSNORM_CUDA_H

#include "core/status.h"
#include "kernels/rmsnorm/rmsnorm_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: rows*cols values of the storage dtype; g: cols values of the weights' dtype; out: rstd, y
 * (rmsnorm_spec.h's layout); fe: events ORed over every row. fused only (PF_ERR_UNSUPPORTED for
 * torch). */
pf_status pf_rmsnorm_cuda(const pf_rms_launch *L, const double *x, const double *g, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
