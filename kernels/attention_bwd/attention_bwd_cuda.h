/* Attention backward on the GPU (attention_bwd.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_ATTENTION_BWD_CUDA_H
#define PF_ATTENTION_BWD_CUDA_H

#include <stddef.h>

#include "core/status.h"
#include "kernels/attention_bwd/attention_bwd_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* q, k, v, dO: the case's inputs (heads x len x d each, values of L->t); out: the case's
 * outputs (dQ, dK, dV, then the standard variant's dP and dS); alpha32 = fl32(1/sqrt(d)). */
pf_status pf_attention_bwd_cuda(const pf_attn_bwd_launch *L, size_t heads, double alpha32, const double *q,
                                const double *k, const double *v, const double *dO, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
