/* One Adam / AdamW step for one element, shared by the C emulation and CUDA.
 * Sources: apex csrc/multi_tensor_adam.cu (FusedAdam), torch/optim/adam.py _multi_tensor_adam
 * (AdamW). Every operation rounds to the dtype named (fp32 math for
 * FusedAdam; the parameter's dtype after every tensor operation for PyTorch's foreach
 * AdamW, whose arithmetic runs in fp32 "opmath" and stores each result in the tensor's
 * dtype). Hyperparameters arrive as the kernel receives them (pf_adam_hyper). */
#ifndef PF_ADAM_MATH_H
#define PF_ADAM_MATH_H

#include <math.h>

#include "core/dtype_math.h"
#include "kernels/adam/adam_spec.h"

/* One element. p: parameter (the fp32 master or the low-precision parameter), g, m, v:
 * gradient and state in their dtypes; on return the new p, m, v (each rounded to its
 * dtype: pt for p, st for the state). */
PF_HD void pf_adam_step(int variant, int mode, pf_dtype pt, pf_dtype st, const pf_adam_hyper *h, double *p,
                        double g, double *m, double *v, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  /* _fused_adamw_'s grad_scale and found_inf (FusedAdamKernel.cpp, fused_adam_utils.cuh): an
   * inf found skips the step; the gradient, loaded to fp32, is divided by the scale in fp32 and
   * used unrounded (measured on torch 2.15's CPU kernel: with a scale of 1000 in bf16, 27% of m
   * differ from dividing first and storing the quotient to T) */
  if (h->skip) return;
  if (h->gscale != 1.0 && (variant == PF_ADAM_TORCH_FUSED || variant == PF_ADAM_TORCH_FUSED_CUDA))
    g = pf_div(F, g, h->gscale, fe);
  if (variant == PF_ADAM_TORCH_FUSED_CUDA) {
    /* torch.optim.AdamW(fused=True) on CUDA (torch 2.11: fused_adam_utils.cuh, adam_math): p,
     * g, m, v loaded to fp32, the scalars as fp32, each step in fp32, measured bit for bit on
     * an H200 (m and v: 65,536 of 65,536 elements):
     *   p = fma(-fl(lr wd), p, p)
     *   m = fma(beta1, m, fma(-beta1, g, g))          (not the CPU kernel's lerp)
     *   v = fma(beta2, v, fma(-beta2, g g, g g))
     *   p = p - fl(fl(lr / bc1) m) / (sqrt(v) / sqrt(bc2) + eps)
     * and p, m, v stored to T once; the update uses the fp32 m and v. */
    const double p1 = pf_fma32(-pf_mul(F, h->lr, h->wd, fe), *p, *p, fe);
    const double mn = pf_fma32(h->beta1, *m, pf_fma32(-h->beta1, g, g, fe), fe);
    const double g2 = pf_mul(F, g, g, fe);
    const double vn = pf_fma32(h->beta2, *v, pf_fma32(-h->beta2, g2, g2, fe), fe);
    const double ss = pf_div(F, h->lr, h->c_bc1, fe), bc2s = pf_round_fe(F, sqrt(h->c_bc2), fe);
    const double d = pf_add(F, pf_div(F, pf_round_fe(F, sqrt(vn), fe), bc2s, fe), h->eps, fe);
    *p = pf_round_fe(pt, pf_sub(F, p1, pf_div(F, pf_mul(F, ss, mn, fe), d, fe), fe), fe);
    *m = pf_round_fe(st, mn, fe);
    *v = pf_round_fe(st, vn, fe);
    return;
  }
  if (pf_adam_is_torch(variant)) {
    /* torch/optim/adam.py _single_tensor_adam (torch 2.15), on ATen's CPU kernels: each op in
     * opmath fp32 (scalars rounded to fp32), its result stored in T, measured bit for bit:
     *   p.mul_(1 - lr*wd)
     *   m.lerp_(g, w = 1-beta1)   lerp_vec (Lerp.h): fma(w, g - m, m), for w >= 0.5 fma(w - 1, g - m, g)
     *   v.mul_(beta2).addcmul_(g, g, value=1-beta2)   fma(fl(c g), g, fl(beta2 v))
     *   denom = (v.sqrt() / sqrt(bc2)).add_(eps)   eps rounded to T (add's scalar), not fp32
     *   p.addcdiv_(m, denom, value=-lr/bc1)   p + fl(fl(value m) / denom)
     * The foreach path (_multi_tensor_adam) is the same but for _foreach_mul_, which on the CPU
     * rounds its scalar to the tensor's dtype, through fp32 first (twice: at beta2 =
     * 0x1.fefffffp-1 bf16 gets 1, not 0x1.fep-1, measured on torch 2.15): 1 - lr*wd to pt,
     * beta2 to st. */
    const int foreach = variant == PF_ADAM_TORCH_FOREACH;
    /* the fused path (_fused_adamw_) keeps every intermediate in fp32 and stores p, m, v once */
    const pf_dtype P = variant == PF_ADAM_TORCH_FUSED ? F : pt, S = variant == PF_ADAM_TORCH_FUSED ? F : st;
    const double wdec = foreach ? pf_round_fe(pt, pf_round_fe(F, h->t_decay, fe), fe) : pf_round_fe(F, h->t_decay, fe);
    double pw = pf_round_fe(P, pf_mul(F, *p, wdec, fe), fe);
    const double w = pf_round_fe(F, h->t_omb1, fe), diff = pf_sub(F, g, *m, fe);
    const double mw = pf_round_fe(S, w < 0.5 ? pf_fma32(w, diff, *m, fe) : pf_fma32(pf_sub(F, w, 1, fe), diff, g, fe), fe);
    const double b2 = foreach ? pf_round_fe(st, pf_round_fe(F, h->t_beta2, fe), fe) : pf_round_fe(F, h->t_beta2, fe);
    double vw = pf_round_fe(S, pf_mul(F, *v, b2, fe), fe);
    vw = pf_round_fe(S, pf_fma32(pf_mul(F, pf_round_fe(F, h->t_omb2, fe), g, fe), g, vw, fe), fe);
    double d = pf_round_fe(S, pf_round_fe(F, sqrt(vw), fe), fe);
    d = pf_round_fe(S, pf_div(F, d, pf_round_fe(F, h->t_bc2_sqrt, fe), fe), fe);
    /* add_(eps): ATen's add takes a CPU scalar in the tensor's dtype (its ufunc kernel reads
     * the scalar as scalar_t, not opmath), so eps is rounded to the state's dtype first */
    d = pf_round_fe(S, pf_add(F, d, pf_round_fe(S, h->t_eps, fe), fe), fe);
    const double value = -pf_round_fe(F, h->t_step_size, fe);
    *p = pf_round_fe(pt, pf_add(F, pw, pf_div(F, pf_mul(F, value, mw, fe), d, fe), fe), fe);
    *m = pf_round_fe(st, mw, fe);
    *v = pf_round_fe(st, vw, fe);
    return;
  }
  /* FusedAdam (apex / DeepSpeed multi_tensor_adam): all math in fp32; the options (PF_ADAM_OPT_*) */
  const int lerp = mode & PF_ADAM_OPT_LERP, bcd = mode & PF_ADAM_OPT_BC_DEVICE, s64 = mode & PF_ADAM_OPT_SCALARS64;
  mode &= 1;
  double gg = g;
  if (mode == PF_ADAM_MODE_L2) gg = pf_add(F, gg, pf_mul(F, h->wd, *p, fe), fe);
  const double omb1 = s64 ? pf_round_fe(F, h->t_omb1, fe) : pf_sub(F, 1.0, h->beta1, fe);
  const double omb2 = s64 ? pf_round_fe(F, h->t_omb2, fe) : pf_sub(F, 1.0, h->beta2, fe);
  const double g2 = pf_mul(F, gg, gg, fe);
  const double mn = lerp ? pf_fma32(h->beta1, *m, pf_fma32(-h->beta1, gg, gg, fe), fe)
                         : pf_add(F, pf_mul(F, h->beta1, *m, fe), pf_mul(F, omb1, gg, fe), fe);
  const double vn = lerp ? pf_fma32(h->beta2, *v, pf_fma32(-h->beta2, g2, g2, fe), fe)
                         : pf_add(F, pf_mul(F, h->beta2, *v, fe), pf_mul(F, pf_mul(F, omb2, gg, fe), gg, fe), fe);
  const double mhat = pf_div(F, mn, bcd ? h->c_bc1 : h->bc1, fe), vhat = pf_div(F, vn, bcd ? h->c_bc2 : h->bc2, fe);
  const double denom = variant == PF_ADAM_EPS_INSIDE ? pf_round_fe(F, sqrt(pf_add(F, vhat, h->eps, fe)), fe)
                                                     : pf_add(F, pf_round_fe(F, sqrt(vhat), fe), h->eps, fe);
  double upd = pf_div(F, mhat, denom, fe);
  if (mode == PF_ADAM_MODE_ADAMW) upd = pf_add(F, upd, pf_mul(F, h->wd, *p, fe), fe);
  *p = pf_round_fe(pt, pf_sub(F, *p, pf_mul(F, h->lr, upd, fe), fe), fe);
  *m = pf_round_fe(st, mn, fe);
  *v = pf_round_fe(st, vn, fe);
}

#endif
