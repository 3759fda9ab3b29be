/* What a case of the Adam family means, for its emulation (adam_math.h) and its oracle alike:
 * the variants' algorithm numbers (pf_kernel.algo), the update's modes and legitimate options,
 * and the hyperparameters as a kernel receives them from a case's exact values. */
#ifndef PF_ADAM_SPEC_H
#define PF_ADAM_SPEC_H

#include <math.h>

#include "core/dtype_math.h"

enum { PF_ADAM_FUSED = 0, PF_ADAM_TORCH = 1, PF_ADAM_NO_MASTER = 2, PF_ADAM_STATE_LOWP = 3,
       PF_ADAM_EPS_INSIDE = 4, PF_ADAM_NO_BIAS_CORRECTION = 5, PF_ADAM_TORCH_FOREACH = 6, PF_ADAM_TORCH_FUSED = 7,
       PF_ADAM_TORCH_FUSED_CUDA = 8 };
/* PyTorch's AdamW: the single-tensor, foreach or fused path (state and gradient in T, no master) */
#define pf_adam_is_torch(variant)                                                                    \
  ((variant) == PF_ADAM_TORCH || (variant) == PF_ADAM_TORCH_FOREACH || (variant) == PF_ADAM_TORCH_FUSED || \
   (variant) == PF_ADAM_TORCH_FUSED_CUDA)
enum { PF_ADAM_MODE_ADAMW = 0, PF_ADAM_MODE_L2 = 1 };
/* Legitimate choices of an fp32 Adam (the FusedAdam family's parameters ema, bias_correction,
 * scalars), as bits beside the mode: the moments as lerps, fma(beta, m, fma(-beta, g, g)) (llm.c,
 * PyTorch's CUDA fused kernel) rather than beta m + (1 - beta) g; 1 - beta^t computed on the
 * device as 1 - powf(beta, t) in fp32 (llm.c) rather than on the host in binary64; 1 - beta
 * rounded once from the binary64 beta (a constant of the Python side) rather than computed in
 * fp32 from the fp32 beta. */
enum { PF_ADAM_OPT_LERP = 4, PF_ADAM_OPT_BC_DEVICE = 8, PF_ADAM_OPT_SCALARS64 = 16 };

typedef struct {
  double lr, beta1, beta2, eps, wd; /* binary32 values (FusedAdam's float arguments) */
  double bc1, bc2;                  /* fl32(1 - beta^t) computed on the host in binary64 */
  /* PyTorch: binary64 scalars of the Python side */
  double t_decay;                   /* 1 - lr * wd */
  double t_omb1, t_omb2;            /* 1 - beta1, 1 - beta2 */
  double t_step_size, t_bc2_sqrt;   /* lr / bc1, sqrt(bc2) */
  double t_eps, t_beta2;
  /* PyTorch's fused CUDA kernel: 1 - beta^t in fp32 from the fp32 beta (its pow_ on the fp32
   * step count), computed here once so that the CPU and the GPU use the same bits */
  double c_bc1, c_bc2;
  /* PyTorch's fused kernels (torch-fused, torch-fused-cuda) as GradScaler drives them: the
   * gradients arrive multiplied by the loss scale gscale (an fp32 value; 1: none), which the
   * kernel divides out in fp32; skip (found_inf = 1): the step leaves p, m, v as they are */
  double gscale;
  int skip;
} pf_adam_hyper;

/* The hyperparameters as the kernels receive them, from the exact (binary64) values at step t:
 * FusedAdam's float arguments and host-side bias corrections, PyTorch's binary64 scalars. */
PF_HD pf_adam_hyper pf_adam_hyper_make(double lr, double b1, double b2, double eps, double wd, double t,
                                       int bias_correction) {
  pf_adam_hyper h;
  h.lr = pf_round(PF_FP32, lr);
  h.beta1 = pf_round(PF_FP32, b1);
  h.beta2 = pf_round(PF_FP32, b2);
  h.eps = pf_round(PF_FP32, eps);
  h.wd = pf_round(PF_FP32, wd);
  h.bc1 = bias_correction ? pf_round(PF_FP32, 1.0 - pow(h.beta1, t)) : 1.0;
  h.bc2 = bias_correction ? pf_round(PF_FP32, 1.0 - pow(h.beta2, t)) : 1.0;
  h.t_decay = 1.0 - lr * wd;
  h.t_omb1 = 1.0 - b1;
  h.t_omb2 = 1.0 - b2;
  h.t_beta2 = b2;
  h.t_eps = eps;
  h.t_step_size = lr / (1.0 - pow(b1, t));
  h.t_bc2_sqrt = sqrt(1.0 - pow(b2, t));
  h.c_bc1 = pf_round(PF_FP32, 1.0 - pf_round(PF_FP32, pow(h.beta1, t)));
  h.c_bc2 = pf_round(PF_FP32, 1.0 - pf_round(PF_FP32, pow(h.beta2, t)));
  h.gscale = 1.0;
  h.skip = 0;
  return h;
}

#endif
