/* What a case of the LayerNorm family means, for its emulation (layernorm_math.h) and its oracle
 * alike: the variants' algorithm numbers (pf_kernel.algo), the parameters' indices and choices
 * in the order of their table (layernorm_cpu.c), the inputs' dtypes and the output layout.
 *
 *   y[i, j] = (x[i, j] - mean_i) rstd_i g'_j + beta_j,   mean_i = (1/n) sum_j x[i, j],
 *   var_i = (1/n) sum_j (x[i, j] - mean_i)^2 (biased, as every framework's LayerNorm),
 *   rstd_i = 1 / sqrt(var_i + eps) (eps inside), or 1 / (sqrt(var_i) + eps) (eps outside),
 *   g'_j = gamma_j, or 1 + gamma_j with a zero-centred gamma (Megatron's apply_layernorm_1p,
 *   Transformer Engine's zero_centered_gamma).
 * Outputs: mean (rows), rstd (rows), then y (rows x cols), as the forward saves them for the
 * backward. */
#ifndef PF_LAYERNORM_SPEC_H
#define PF_LAYERNORM_SPEC_H

#include "core/case.h"
#include "core/dtype.h"

enum { PF_LN_TORCH = 0, PF_LN_WELFORD = 1, PF_LN_TWO_PASS = 2, PF_LN_MOMENTS = 3 };
enum { PF_LN_P_EPS = 0, PF_LN_P_WEIGHTS = 1, PF_LN_P_ZERO_CENTERED = 2, PF_LN_P_EPS_PLACE = 3, PF_LN_NPARAMS = 4 };
enum { PF_LN_WEIGHTS_STORAGE = 0, PF_LN_WEIGHTS_FP32 = 1 };
enum { PF_LN_EPS_INSIDE = 0, PF_LN_EPS_OUTSIDE = 1 };
enum { PF_LN_IN_X = 0, PF_LN_IN_GAMMA = 1, PF_LN_IN_BETA = 2 };

/* gamma and beta: in the storage dtype, or fp32 (Megatron's mixed-precision LayerNorm: bf16
 * activations, fp32 parameters) */
static inline pf_dtype pf_ln_weights_dtype(const pf_case *c) {
  return (int)c->params[PF_LN_P_WEIGHTS] == PF_LN_WEIGHTS_FP32 ? PF_FP32 : c->dtype;
}

/* the dtype mean and rstd are saved in: PyTorch's CPU kernel stores them in the weights' dtype
 * (fp32 with fp32 weights, else the input's); the others keep their accumulation dtype (apex
 * and Transformer Engine save fp32 statistics) */
static inline pf_dtype pf_ln_stats_dtype(const pf_case *c, int algo) {
  return algo == PF_LN_TORCH ? pf_ln_weights_dtype(c) : c->accum;
}

/* the output layout: mean_i at i, rstd_i at rows + i, y[i, j] at 2 rows + i cols + j */
static inline size_t pf_ln_y_at(const pf_case *c) { return 2 * c->shape[0]; }

#endif
