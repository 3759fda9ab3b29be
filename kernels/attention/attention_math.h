/* Attention scalar math shared by the C emulation (attention_cpu.c) and CUDA.
 *
 * GEMM emulation: a dot product of two vectors of the storage dtype, accumulated in acc in
 * index order, one rounding per multiply-add (the product of two values of a 24-bit or
 * narrower format is exact in binary64, so fl_acc(sum + a*b) is a fused multiply-add with
 * one rounding). For acc = fp16/bf16 this models a 16-bit-accumulating GEMM (cuBLAS compute
 * type 16F) as a sequential chain; tensor cores sum in blocks, so the real order differs,
 * which the contract's bound (any order) covers. */
#ifndef PF_ATTENTION_MATH_H
#define PF_ATTENTION_MATH_H

#include <math.h>
#include <stddef.h>

#include "harness/dtype_math.h"

enum { PF_ATTN_POST_SCALE = 0, PF_ATTN_INWARD = 1, PF_ATTN_LAYER_SCALED = 2, PF_ATTN_FLASH = 3 };

/* sum_k a[k * sa] * b[k * sb], accumulated in acc, k = 0..n-1 in order. */
PF_HD double pf_attn_dot(pf_dtype acc, const double *a, size_t sa, const double *b, size_t sb, size_t n,
                         unsigned *fe) {
  double s = 0;
  for (size_t k = 0; k < n; k++) s = pf_round_fe(acc, pf_nan_check(s + a[k * sa] * b[k * sb], a[k * sa], b[k * sb], fe), fe);
  return s;
}

/* d^(-1/4) and 1/sqrt(d) as the frameworks compute them on the host in double, then as the
 * binary32 scalar a kernel receives. sqrt is correctly rounded, so these are the same bits
 * everywhere. */
PF_HD double pf_attn_inv_sqrt_d(size_t d) { return 1.0 / sqrt((double)d); }
PF_HD double pf_attn_inv_fourth_root_d(size_t d) { return 1.0 / sqrt(sqrt((double)d)); }

#endif
