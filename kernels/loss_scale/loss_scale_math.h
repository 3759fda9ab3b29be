/* Dynamic loss scaling, shared by the C emulation and CUDA: one step's scaling and unscaling of
 * the gradients (the scaler's state and its update are the family's spec, loss_scale_spec.h:
 * DeepSpeed deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler; Megatron
 * megatron/core/optimizer/grad_scaler.py DynamicGradScaler; PyTorch torch/amp/grad_scaler.py
 * GradScaler.update, which calls _amp_update_scale_). */
#ifndef PF_LOSS_SCALE_MATH_H
#define PF_LOSS_SCALE_MATH_H

#include "core/dtype_math.h"
#include "kernels/loss_scale/loss_scale_spec.h"

/* One element of a step: the backward pass's h = fl_T(S g); *overflow set when it is not finite. */
PF_HD double pf_ls_scale_elem(pf_dtype t, double g, double S, int *overflow, unsigned *fe) {
  const double h = pf_round_fe(t, g * S, fe);
  if (!(h - h == 0)) *overflow = 1;
  return h;
}

/* The gradient the optimizer receives: fl32(h fl32(1/S)) when the step applies, else 0. */
PF_HD double pf_ls_unscale_elem(double h, double inv, int applied, unsigned *fe) {
  return applied ? pf_mul(PF_FP32, h, inv, fe) : 0.0;
}

/* What loss_scale.cu is launched with for a case (pf_loss_scale_launch_of, loss_scale_cpu.c). */
typedef struct {
  size_t steps, n;
  int variant, no_skip;
  int unscale_after; /* 1/S of the scale after the update: DeepSpeed 0.19's order, or the fault
                        loss-scale-unscale-after-update on the other variants */
  pf_dtype dtype;
  pf_ls_state start;
} pf_ls_launch;

#endif
