/* GELU's scalar arithmetic: each variant's fp32 evaluation in the order of its code (PF_HD: the
 * CUDA kernel shares it), and SLEEF's expf, which ATen's vectorized erf calls. The contracts'
 * running bounds are in gelu_cpu.c. */
#ifndef PF_GELU_MATH_H
#define PF_GELU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype_math.h"
#include "kernels/gelu/gelu_spec.h"

/* Fault switches. tanh-for-erf: the tanh form computed where the erf form was asked (a model
 * trained with one GELU and run with the other: HF's gelu_new against gelu, Megatron's
 * openai_gelu); erf-in-storage: erf, the sum and the product each rounded to the storage dtype
 * (x * 0.5 * (1 + torch.erf(x / 1.41421)) written out in eager bf16 ops). */
enum { PF_GELU_F_TANH_FOR_ERF = 1, PF_GELU_F_ERF_IN_STORAGE = 2 };

/* The vector width of ATen's CPU kernels on this machine (torch.backends.cpu.get_cpu_capability()
 * AVX512: 16 floats, 32 bf16 or fp16); cpu_kernel_vec takes two vectors a step and leaves the last
 * n mod (2 lanes) elements of the tensor to the scalar function. */
#define PF_GELU_TORCH_LANES 16

typedef struct {
  size_t n; /* elements */
  int algo, faults, approximate;
  pf_dtype dtype;
} pf_gelu_launch;

/* SLEEF's expf_u10 (sleefsimdsp.c xexpf, as its AVX2 and AVX512F builds run it: vmla a fused
 * multiply-add, vrint to nearest even): the bits ATen's vectorized erf gets */
PF_HD float pf_sleef_expf(float d) {
  /* SLEEF selects these after computing every lane; here first, so that q stays an int */
  if (d < -104) return 0;
  if (100 < d) return INFINITY;
  if (d != d) return d;
  const int q = (int)rintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
  float s = fmaf((float)q, -0.693145751953125f, d);
  s = fmaf((float)q, -1.428606765330187045e-06f, s);
  float u = 0.000198527617612853646278381f;
  u = fmaf(u, s, 0.00139304355252534151077271f);
  u = fmaf(u, s, 0.00833336077630519866943359f);
  u = fmaf(u, s, 0.0416664853692054748535156f);
  u = fmaf(u, s, 0.166666671633720397949219f);
  u = fmaf(u, s, 0.5f);
  u = 1.0f + fmaf(s * s, u, s);
  const int h = q >> 1; /* vldexp2: two powers of two, each a normal number */
  uint32_t b1 = (uint32_t)(h + 0x7f) << 23, b2 = (uint32_t)(q - h + 0x7f) << 23;
  float p1, p2;
  memcpy(&p1, &b1, 4);
  memcpy(&p2, &b2, 4);
  return u * p1 * p2;
}

/* ATen's Vectorized<float>::erf (vec256/vec512_float.h, torch 2.15): Abramowitz and Stegun 7.1.26,
 * erf(|v|) ~ 1 - (p1 t + ... + p5 t^5) e^(-v^2), t = 1 / (1 + p |v|), by FMAs and SLEEF's expf,
 * the sign put back by an exclusive or (so a slightly negative value at 0 keeps its own sign) */
PF_HD float pf_aten_erf(float v) {
  const float a = fabsf(v);
  const float t = 1.0f / fmaf(0.3275911f, a, 1.0f);
  const float r = fmaf(fmaf(fmaf(fmaf(1.061405429f, t, -1.453152027f), t, 1.421413741f), t, -0.284496736f), t,
                       0.254829592f);
  const float e = -pf_sleef_expf(-(v * v));
  const float w = fmaf(e * t, r, 1.0f);
  return signbit(v) ? -w : w;
}

/* erf and tanh of an fp32 value, rounded correctly to fp32 (binary64's, rounded once more: wrong
 * only within 2^-29 ulps of an fp32 midpoint), standing for glibc's erff and tanhf, CUDA's, and
 * SLEEF's tanhf (the named difference) */
PF_HD float pf_gelu_erf32(float v) { return (float)pf_round(PF_FP32, erf((double)v)); }
PF_HD float pf_gelu_tanh32(float v) { return (float)pf_round(PF_FP32, tanh((double)v)); }

/* y in fp32 before its rounding to the storage dtype, for the element's value x (of the storage
 * dtype); vec: the element is in ATen's vectorized body (else its scalar tail, or a fused kernel):
 *   erf:  (x * 0.5) * (1 + erf(x * (float)M_SQRT1_2))
 *   tanh: (0.5 * x) * (1 + tanh((float)(sqrt 2 * 2/sqrt pi * 0.5) * (x + (float)0.044715 * ((x x) x)))) */
PF_HD float pf_gelu_fp32(const pf_gelu_launch *L, float x, int vec) {
  const int tanh_form = L->approximate == PF_GELU_TANH || (L->faults & PF_GELU_F_TANH_FOR_ERF);
  if (tanh_form) {
    const float beta = (float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5), kappa = (float)PF_GELU_KAPPA;
    const float cube = x * x * x, inner = beta * (x + kappa * cube);
    return 0.5f * x * (1.0f + pf_gelu_tanh32(inner));
  }
  const float v = x * (float)0.70710678118654752440;
  if (L->faults & PF_GELU_F_ERF_IN_STORAGE) { /* every op rounded to the storage dtype */
    const pf_dtype t = L->dtype;
    const float e = (float)pf_round(t, pf_gelu_erf32((float)pf_round(t, v)));
    const float s = (float)pf_round(t, 1.0f + e);
    return (float)pf_round(t, (float)pf_round(t, x * 0.5f) * s);
  }
  const float e = (L->algo == PF_GELU_TORCH && vec) ? pf_aten_erf(v) : pf_gelu_erf32(v);
  return x * 0.5f * (1.0f + e);
}

#endif
