/* CUDA attention (attention.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_ATTENTION_CUDA_H
#define PF_ATTENTION_CUDA_H

#include "core/status.h"
#include "kernels/attention/attention_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* q, k, v: heads x (lq or lk) x d values of the storage dtype; out: attention_cpu.c's layout
 * (O, then S and P for the non-flash variants); fe: events of the run (see attention.cu for
 * what cuBLAS can report). PF_ERR_UNSUPPORTED for a GEMM accumulation cuBLAS has no compute
 * type for (bf16). */
pf_status pf_attention_cuda(const pf_attn_launch *L, const double *q, const double *k, const double *v, double *out,
                            unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
