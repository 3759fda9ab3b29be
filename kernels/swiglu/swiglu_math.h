/* SwiGLU's scalar arithmetic: each variant's silu and product in the order of its code, every
 * operation rounded to the dtype it is done in (PF_HD: the CUDA kernel shares it). The
 * contracts' running bounds are in swiglu_cpu.c. */
#ifndef PF_SWIGLU_MATH_H
#define PF_SWIGLU_MATH_H

#include <math.h>

#include "core/dtype_math.h"
#include "core/expf.h"
#include "kernels/gelu/gelu_math.h" /* SLEEF's expf, ATen's lanes */
#include "kernels/swiglu/swiglu_spec.h"

/* Fault switches. halves-swapped: silu applied to the up projection and the gate passed through
 * (the two halves of a fused gate_up weight taken in the other order: Megatron's chunk order
 * against HF's gate_proj/up_proj on a checkpoint conversion); silu-in-storage: silu as
 * x * sigmoid(x) in eager ops of the storage dtype, the sigmoid and the product each rounded
 * before a fused kernel's fp32 product. */
enum { PF_SWIGLU_F_HALVES_SWAPPED = 1, PF_SWIGLU_F_SILU_IN_STORAGE = 2 };

typedef struct {
  size_t n; /* elements */
  int algo, faults;
  pf_dtype dtype;
} pf_swiglu_launch;

/* silu in fp32 as ATen's silu_kernel computes it: x / (1 + exp(-x)), exp SLEEF's over the
 * vectorized body (vec), the C library's on the tensor's scalar tail and in a fused kernel (here
 * pf_expf, correctly rounded but within 2^-29 ulps of a midpoint) */
PF_HD float pf_silu32(float x, int vec) { return x / (1.0f + (vec ? pf_sleef_expf(-x) : pf_expf(-x))); }

/* y before its rounding to the storage dtype, from a and b (values of the storage dtype):
 * torch: F.silu(a) * b, two ATen ops: silu rounded to the storage dtype, then the product in fp32
 *        (exact for bf16 and fp16 operands) rounded by the caller;
 * fused: silu(a) b in fp32 (Megatron's and Transformer Engine's fused SwiGLU), one rounding */
PF_HD float pf_swiglu_fp32(const pf_swiglu_launch *L, float a, float b, int vec) {
  if (L->faults & PF_SWIGLU_F_HALVES_SWAPPED) {
    const float t = a;
    a = b, b = t;
  }
  float s;
  if (L->faults & PF_SWIGLU_F_SILU_IN_STORAGE) { /* a * torch.sigmoid(a) in the storage dtype */
    const float sig = (float)pf_round(L->dtype, 1.0f / (1.0f + pf_expf(-a)));
    s = (float)pf_round(L->dtype, a * sig);
  } else {
    s = pf_silu32(a, L->algo == PF_SWIGLU_TORCH && vec);
  }
  if (L->algo == PF_SWIGLU_TORCH) s = (float)pf_round(L->dtype, s);
  return s * b;
}

#endif
