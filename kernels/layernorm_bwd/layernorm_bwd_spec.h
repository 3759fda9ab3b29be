/* What a case of the LayerNorm backward family means, for its emulation (layernorm_bwd_math.h)
 * and its oracle alike: the variants' algorithm numbers (pf_kernel.algo), the parameters' indices
 * in the order of their table (layernorm_bwd_cpu.c), the inputs and the output layout.
 *
 * The forward is layernorm_spec.h's, eps inside the root: xhat = (x - mean) rstd,
 * y = xhat g' + beta. Given the upstream gradient dy (rows x cols), with a_j = g'_j dy_j:
 *   dx[i, j]   = rstd_i (a_j - (1/n) sum_k a_k - xhat_j (1/n) sum_k a_k xhat_k)
 *   dgamma[j]  = sum_i dy[i, j] xhat[i, j]      (the token reduction: over every row)
 *   dbeta[j]   = sum_i dy[i, j]
 * with mean and rstd the exact statistics of x (a kernel recomputes or reloads its own).
 * Outputs: dx (rows x cols, the storage dtype), then dgamma and dbeta (cols each, the weights'
 * dtype). */
#ifndef PF_LAYERNORM_BWD_SPEC_H
#define PF_LAYERNORM_BWD_SPEC_H

#include "core/case.h"
#include "core/dtype.h"

enum { PF_LNB_TORCH = 0, PF_LNB_FUSED = 1 };
enum { PF_LNB_P_EPS = 0, PF_LNB_P_WEIGHTS = 1, PF_LNB_P_ZERO_CENTERED = 2, PF_LNB_P_BLOCKS = 3, PF_LNB_NPARAMS = 4 };
enum { PF_LNB_WEIGHTS_STORAGE = 0, PF_LNB_WEIGHTS_FP32 = 1 };
enum { PF_LNB_IN_X = 0, PF_LNB_IN_DY = 1, PF_LNB_IN_GAMMA = 2 };

/* gamma, dgamma and dbeta: in the storage dtype, or fp32 (Megatron's mixed-precision LayerNorm) */
static inline pf_dtype pf_lnb_weights_dtype(const pf_case *c) {
  return (int)c->params[PF_LNB_P_WEIGHTS] == PF_LNB_WEIGHTS_FP32 ? PF_FP32 : c->dtype;
}

/* the output layout: dx[i, j] at i cols + j, dgamma[j] at rows cols + j, dbeta[j] after it */
static inline size_t pf_lnb_dgamma_at(const pf_case *c) { return c->shape[0] * c->shape[1]; }
static inline size_t pf_lnb_dbeta_at(const pf_case *c) { return c->shape[0] * c->shape[1] + c->shape[1]; }

#endif
