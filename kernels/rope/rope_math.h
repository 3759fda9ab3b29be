/* Rotary embeddings' scalar arithmetic: each variant's frequency table, angle, cos and sin and
 * rotation in the order of its code, every operation rounded to the dtype it is done in (the
 * contracts' bounds are in rope_cpu.c). PF_HD: the CUDA kernel shares the table and the angle. */
#ifndef PF_ROPE_MATH_H
#define PF_ROPE_MATH_H

#include <math.h>
#include <stddef.h>

#include "core/dtype_math.h"
#include "kernels/rope/rope_spec.h"

/* Fault switches (pf_rope_launch.faults). angle-in-storage: the angle's product taken in the
 * storage dtype though the table is fp32 (HF Llama's inv_freq @ position_ids under a bf16
 * autocast, before it was wrapped in autocast(enabled=False)); sin-sign: rotate_half as
 * cat(x2, -x1), the rotation by -theta; cos-in-storage: cos and sin rounded to the storage dtype
 * before a fused kernel's fp32 rotation (a cached table kept in bf16). */
enum { PF_ROPE_F_ANGLE_IN_STORAGE = 1, PF_ROPE_F_SIN_SIGN = 2, PF_ROPE_F_COS_IN_STORAGE = 4 };

typedef struct {
  size_t positions, heads, dim;
  int algo, faults, scaling, layout;
  pf_dtype dtype, accum; /* accum: the dtype of the frequency table, the angle and cos, sin */
  double base, factor, offset;
} pf_rope_launch;

/* inv_freq[k] as Megatron-core builds it (RotaryEmbedding.__init__, megatron-core 0.16.1):
 * 1.0 / (B ** (torch.arange(0, dim, 2, dtype=float32) / dim)), B taken to fp32 (an NTK base is
 * Python's double B f ** (dim / (dim - 2)) first); every step in fp32. The power is rounded
 * correctly here; PyTorch's CPU takes it from SLEEF's powf (within 1 ulp: the difference is
 * named in docs/kernels/rope.md). The table in the storage dtype (accum = storage): rounded to
 * it afterwards, as a model cast to bf16 casts the buffer. */
PF_HD double pf_rope_inv_freq(const pf_rope_launch *L, size_t k) {
  const double B = pf_round(PF_FP32, pf_rope_base(L->scaling, L->base, L->factor, L->dim));
  const double x = pf_round(PF_FP32, (double)(2 * k) / (double)L->dim);
  const double w = pf_round(PF_FP32, 1.0 / pf_round(PF_FP32, pow(B, x)));
  return pf_round(L->accum, w);
}

/* The position as the table's dtype holds it: torch.arange(n, dtype=table) + offset (the
 * Python int offset made a tensor of the table's dtype first: rounded to it), then seq *= 1 / f
 * under linear scaling (the Python double 1 / f taken to fp32, ATen's opmath for a float scalar:
 * a product of the storage dtype computed in fp32 and rounded again); measured on torch 2.15 */
PF_HD double pf_rope_seq(const pf_rope_launch *L, size_t i, unsigned *fe) {
  const pf_dtype a = L->accum;
  const double off = pf_round(a, L->offset);
  double s = pf_round_fe(a, pf_round(PF_FP32, pf_round_fe(a, (double)i, fe) + off), fe);
  if (L->scaling == PF_ROPE_SCALE_LINEAR)
    s = pf_round_fe(a, pf_round(PF_FP32, s * pf_round(PF_FP32, 1.0 / L->factor)), fe);
  return s;
}

/* theta = torch.outer(seq, inv_freq): one product in the table's dtype; under angle-in-storage
 * both factors and the product in the storage dtype */
PF_HD double pf_rope_theta(const pf_rope_launch *L, double seq, double inv, unsigned *fe) {
  if (L->faults & PF_ROPE_F_ANGLE_IN_STORAGE)
    return pf_mul(L->dtype, pf_round_fe(L->dtype, seq, fe), pf_round_fe(L->dtype, inv, fe), fe);
  return pf_mul(L->accum, seq, inv, fe);
}

/* cos and sin of theta in fp32, rounded correctly (binary64's, rounded to fp32: a double rounding
 * that can only land on the wrong side of an fp32 midpoint within 2^-29 ulps of it); then to the
 * table's dtype (torch.cos of a bf16 tensor: fp32's cos rounded to bf16) */
PF_HD void pf_rope_cos_sin(const pf_rope_launch *L, double theta, double *c, double *s) {
  *c = pf_round(L->accum, pf_round(PF_FP32, cos(theta)));
  *s = pf_round(L->accum, pf_round(PF_FP32, sin(theta)));
}

/* y_j from t_j, its partner tp, cos c and sin s (c, s as pf_rope_cos_sin gives them):
 * torch: t * cos_ + rotate_half(t) * sin_ with cos_, sin_ = cos, sin .to(t.dtype), each operation
 *        in the storage dtype (Megatron-core's _apply_rotary_pos_emb_bshd);
 * fused: v = t cos + t' sin in fp32, a fused multiply-add over the rounded second product, then
 *        rounded once to the storage dtype (Transformer Engine's fused RoPE and apex's) */
PF_HD double pf_rope_apply(const pf_rope_launch *L, double tj, double tp, int sign, double c, double s, unsigned *fe) {
  const pf_dtype t = L->dtype;
  const double r = (L->faults & PF_ROPE_F_SIN_SIGN) ? -sign * tp : sign * tp;
  if (L->algo == PF_ROPE_TORCH) {
    const double cs = pf_round(t, c), ss = pf_round(t, s);
    return pf_add(t, pf_mul(t, tj, cs, fe), pf_mul(t, r, ss, fe), fe);
  }
  double c32 = c, s32 = s;
  if (L->faults & PF_ROPE_F_COS_IN_STORAGE) c32 = pf_round(t, c32), s32 = pf_round(t, s32);
  return pf_round_fe(t, pf_fma32(tj, c32, pf_mul(PF_FP32, r, s32, fe), fe), fe);
}

#endif
