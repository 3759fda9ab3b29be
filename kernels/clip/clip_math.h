/* Gradient clipping's scalar steps, shared by the C emulation (clip_cpu.c) and CUDA (clip.cu):
 * every operation rounds to the dtype named, in the order the CPU loop takes, so both backends
 * compute the same bits. */
#ifndef PF_CLIP_MATH_H
#define PF_CLIP_MATH_H

#include <math.h>
#include <stddef.h>

#include "core/dtype_math.h"
#include "kernels/clip/clip_spec.h"


/* One tensor's part of the global norm: megatron, its sum of squares accumulated in A then
 * stored in fp32; torch, its norm (fp32 sqrt of the sum) stored in T; inf, max |g| (NaN wins). */
PF_HD double pf_clip_tensor_part(int var, pf_dtype T, pf_dtype A, const double *g, size_t n, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  if (var == PF_CLIP_INF) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
      if (fabs(g[i]) > m || g[i] != g[i]) m = g[i] != g[i] ? g[i] : fabs(g[i]);
    return m;
  }
  double s = 0;
  for (size_t i = 0; i < n; i++) s = pf_add(A, s, pf_mul(A, g[i], g[i], fe), fe);
  if (var == PF_CLIP_TORCH) return pf_round_fe(T, pf_round(F, sqrt(s)), fe); /* vector_norm: fp32, returned in T */
  return pf_round_fe(F, s, fe);
}

/* The global norm from the tensors' parts, added in tensor order in fp32; sqrt is correctly
 * rounded in fp32; torch returns it in T. */
PF_HD double pf_clip_norm_of(int var, pf_dtype T, const double *part, size_t k, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  double norm = 0;
  if (var == PF_CLIP_INF) {
    for (size_t t = 0; t < k; t++)
      if (part[t] > norm || part[t] != part[t]) norm = part[t];
    return norm;
  }
  double total = 0;
  for (size_t t = 0; t < k; t++)
    total = pf_add(F, total, var == PF_CLIP_TORCH ? pf_mul(F, part[t], part[t], fe) : part[t], fe);
  norm = pf_round(F, sqrt(total));
  return var == PF_CLIP_TORCH ? pf_round_fe(T, norm, fe) : norm;
}

/* megatron and inf: coef = fl32(max_norm / fl32(norm + 1e-6)); clipping applies when coef < 1.
 * torch (torch/nn/utils/clip_grad.py, 2.15): max_norm / (total_norm + 1e-6) on the norm held
 * in T: fl_T(norm + 1e-6), then Tensor.__rtruediv__ = reciprocal() * max_norm, each op in fp32
 * stored in T; clamp(max=1), where a NaN stays NaN. */
PF_HD double pf_clip_coef(int var, pf_dtype T, double max_norm, double norm, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  if (var != PF_CLIP_TORCH) return pf_div(F, pf_round(F, max_norm), pf_add(F, norm, pf_round(F, 1e-6), fe), fe);
  const double d = pf_round_fe(T, pf_add(F, norm, pf_round(F, 1e-6), fe), fe);
  const double r = pf_round_fe(T, pf_div(F, 1.0, d, fe), fe);
  const double coef = pf_round_fe(T, pf_mul(F, r, pf_round(F, max_norm), fe), fe);
  return coef > 1 ? 1.0 : coef;
}

/* A clipped gradient: fl_T(fl32(g coef)) when coef < 1, else g itself; torch multiplies every
 * gradient by the clamped coefficient (_foreach_mul_), so a NaN norm makes every one NaN. */
PF_HD double pf_clip_apply(int var, pf_dtype T, double g, double coef, unsigned *fe) {
  if (var == PF_CLIP_TORCH) return pf_round_fe(T, pf_mul(PF_FP32, g, coef, fe), fe);
  return coef < 1 ? pf_round_fe(T, pf_mul(PF_FP32, g, coef, fe), fe) : g;
}

/* What clip.cu is launched with for a case (pf_clip_launch_of, clip_cpu.c). */
typedef struct {
  size_t tensors, n;
  int variant;
  pf_dtype dtype, accum;
  double max_norm;
} pf_clip_launch;

#endif
