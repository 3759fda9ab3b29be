/* LayerNorm forward on the GPU (layernorm.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_LAYERNORM_CUDA_H
#define PF_LAYERNORM_CUDA_H

#include "core/status.h"
#include "kernels/layernorm/layernorm_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: rows*cols values of the storage dtype; g, b: cols values of the weights' dtype; out: mean,
 * rstd, y (layernorm_spec.h's layout); fe: events ORed over every row. welford, two-pass and
 * moments (PF_ERR_UNSUPPORTED for torch). */
pf_status pf_layernorm_cuda(const pf_ln_launch *L, const double *x, const double *g, const double *b, double *out,
                            unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
