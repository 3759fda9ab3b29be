/* What a case of the RMSNorm family means, for its emulation (rmsnorm_math.h) and its oracle
 * alike: the variants' algorithm numbers (pf_kernel.algo), the parameters' indices and choices in
 * the order of their table (rmsnorm_cpu.c), the inputs' dtypes and the output layout.
 *
 *   y[i, j] = x[i, j] rstd_i g'_j,   rstd_i = 1 / sqrt((1/n) sum_j x[i, j]^2 + eps),
 *   g'_j = gamma_j, or 1 + gamma_j with a zero-centred gamma (Gemma, Transformer Engine's
 *   zero_centered_gamma).
 * Outputs: rstd (rows), as fused kernels save it for the backward, then y (rows x cols). */
#ifndef PF_RMSNORM_SPEC_H
#define PF_RMSNORM_SPEC_H

#include "core/case.h"
#include "core/dtype.h"

enum { PF_RMS_TORCH = 0, PF_RMS_FUSED = 1 };
enum { PF_RMS_P_EPS = 0, PF_RMS_P_WEIGHTS = 1, PF_RMS_P_ZERO_CENTERED = 2, PF_RMS_NPARAMS = 3 };
enum { PF_RMS_WEIGHTS_STORAGE = 0, PF_RMS_WEIGHTS_FP32 = 1 };
enum { PF_RMS_IN_X = 0, PF_RMS_IN_GAMMA = 1 };

/* gamma: in the storage dtype, or fp32 (parameters kept in fp32 beside bf16 activations) */
static inline pf_dtype pf_rms_weights_dtype(const pf_case *c) {
  return (int)c->params[PF_RMS_P_WEIGHTS] == PF_RMS_WEIGHTS_FP32 ? PF_FP32 : c->dtype;
}

/* the dtype rstd is saved in: the accumulation dtype (PyTorch's composite computes it in fp32) */
static inline pf_dtype pf_rms_stats_dtype(const pf_case *c) { return c->accum; }

/* the output layout: rstd_i at i, y[i, j] at rows + i cols + j */
static inline size_t pf_rms_y_at(const pf_case *c) { return c->shape[0]; }

#endif
