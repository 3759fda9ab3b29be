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

#include "core/dtype_math.h"
#include "kernels/attention/attention_spec.h"
#include "kernels/softmax/softmax_math.h"


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

/* What attention.cu is launched with for a case (pf_attention_launch_of, attention_cpu.c):
 * the values the emulation uses, in the dtypes the kernels receive them. */
typedef struct {
  size_t heads, lq, lk, d;
  int algo, mask, no_max, no_rescale;
  pf_dtype t, acc, smacc;  /* storage, GEMM accumulation (cuBLAS compute type), softmax */
  double alpha_acc;        /* post-scale and layer-scaled: the GEMM's alpha, in acc */
  double qscale;           /* inward: fl32(d^-1/4), applied to Q and K, stored in t */
  double sigma_acc;        /* the softmax's scale: L for layer-scaled, else 1, in smacc */
  double maskval;          /* what a masked score holds, in t */
  size_t block;            /* flash: the key block */
} pf_attn_launch;

/* Flash attention for query row i of one head (q: this row, k and v: the head's keys and
 * values): key blocks of L->block, fp32 scores, running max and sum, P rounded to the storage
 * dtype before P V, the fp32 output accumulator rescaled when the max grows (unless
 * no_rescale, the fault). Scratch: s and pt of block values, o of d values. */
PF_HD void pf_attn_flash_row(const pf_attn_launch *L, const double *qi, const double *k, const double *v, size_t i,
                             double *O, double *s, double *pt, double *o, unsigned *fe) {
  const size_t Lq = L->lq, Lk = L->lk, d = L->d, Bc = L->block;
  const pf_dtype T = L->t, A = L->acc, F = PF_FP32;
  const double alpha32 = pf_round(F, pf_attn_inv_sqrt_d(d));
  const double mask32 = pf_round_fe(F, L->maskval, fe);
  double m = -INFINITY, l = 0;
  for (size_t e = 0; e < d; e++) o[e] = 0;
  if (L->maskval == -INFINITY && pf_softmax_hidden(L->mask, i, Lq, Lk)) { /* no key to see: 0 */
    for (size_t e = 0; e < d; e++) O[e] = 0;
    return;
  }
  for (size_t j0 = 0; j0 < Lk; j0 += Bc) {
    const size_t nb = Lk - j0 < Bc ? Lk - j0 : Bc;
    double mb = -INFINITY;
    for (size_t j = 0; j < nb; j++) {
      const size_t jj = j0 + j;
      s[j] = pf_softmax_masked(L->mask, i, jj, Lq, Lk)
                 ? mask32
                 : pf_mul(F, alpha32, pf_round_fe(F, pf_attn_dot(A, qi, 1, k + jj * d, 1, d, fe), fe), fe);
      if (s[j] > mb) mb = s[j];
    }
    const double mn = L->no_max ? 0.0 : (mb > m ? mb : m);
    if (mn == -INFINITY) continue; /* only -inf so far: contributes 0 */
    const double r = m == mn ? 1.0 : pf_softmax_exp(F, pf_sub(F, m, mn, fe), fe);
    double rs = 0;
    for (size_t j = 0; j < nb; j++) {
      const double p32 = pf_softmax_exp(F, pf_sub(F, s[j], mn, fe), fe);
      rs = pf_add(F, rs, p32, fe);
      pt[j] = pf_round_fe(T, p32, fe); /* P in the storage dtype for the P V product */
    }
    l = pf_add(F, pf_mul(F, l, r, fe), rs, fe);
    for (size_t e = 0; e < d; e++) {
      const double blk = pf_round_fe(F, pf_attn_dot(A, pt, 1, v + j0 * d + e, d, nb, fe), fe);
      const double prev = L->no_rescale ? o[e] : pf_mul(F, o[e], r, fe);
      o[e] = pf_add(F, prev, blk, fe);
    }
    m = mn;
  }
  for (size_t e = 0; e < d; e++) O[e] = pf_round_fe(T, pf_div(F, o[e], l, fe), fe);
}

#endif
