/* What a case of the RMSNorm backward family means, for its emulation (rmsnorm_bwd_math.h) and
 * its oracle alike: the variants' algorithm numbers (pf_kernel.algo), the parameters' indices in
 * the order of their table (rmsnorm_bwd_cpu.c), the inputs and the output layout.
 *
 * The forward is rmsnorm_spec.h's: xhat = x rstd, rstd = 1 / sqrt((1/n) sum x^2 + eps),
 * y = xhat g'. Given the upstream gradient dy (rows x cols), with a_j = g'_j dy_j:
 *   dx[i, j]  = rstd_i (a_j - xhat_j (1/n) sum_k a_k xhat_k)
 *   dgamma[j] = sum_i dy[i, j] xhat[i, j]      (the token reduction: over every row)
 * with rstd the exact statistic of x. Outputs: dx (rows x cols, the storage dtype), then dgamma
 * (cols, the weights' dtype). */
#ifndef PF_RMSNORM_BWD_SPEC_H
#define PF_RMSNORM_BWD_SPEC_H

#include "core/case.h"
#include "core/dtype.h"

enum { PF_RMSB_TORCH = 0, PF_RMSB_FUSED = 1 };
enum { PF_RMSB_P_EPS = 0, PF_RMSB_P_WEIGHTS = 1, PF_RMSB_P_ZERO_CENTERED = 2, PF_RMSB_P_BLOCKS = 3, PF_RMSB_NPARAMS = 4 };
enum { PF_RMSB_WEIGHTS_STORAGE = 0, PF_RMSB_WEIGHTS_FP32 = 1 };
enum { PF_RMSB_IN_X = 0, PF_RMSB_IN_DY = 1, PF_RMSB_IN_GAMMA = 2 };

/* gamma and dgamma: in the storage dtype, or fp32 (parameters kept in fp32 beside bf16 activations) */
static inline pf_dtype pf_rmsb_weights_dtype(const pf_case *c) {
  return (int)c->params[PF_RMSB_P_WEIGHTS] == PF_RMSB_WEIGHTS_FP32 ? PF_FP32 : c->dtype;
}

/* the output layout: dx[i, j] at i cols + j, dgamma[j] at rows cols + j */
static inline size_t pf_rmsb_dgamma_at(const pf_case *c) { return c->shape[0] * c->shape[1]; }

#endif
