/* Softmax scalar math shared by the C emulation (softmax_cpu.c) and CUDA (softmax.cu).
 * Values are carried as doubles holding numbers of the accumulation dtype; every operation
 * rounds to that dtype (dtype_math.h), so the two backends differ only in loop and
 * reduction order. */
#ifndef PF_SOFTMAX_MATH_H
#define PF_SOFTMAX_MATH_H

#include <math.h>

#include "core/dtype_math.h"
#include "core/expf.h"
#include "kernels/softmax/softmax_spec.h"


/* exp in the accumulation dtype: binary32 exp, rounded to acc (as hexp/bf16 exp do). The
 * binary32 exp is pf_expf (correctly rounded, the same bits on the CPU and the GPU), not the
 * C library's: the contract allows any expf within 2 ulps, CUDA's included.
 * exp of a finite number is never 0 nor inf: expf returning either is an event. */
PF_HD double pf_softmax_exp(pf_dtype acc, double d, unsigned *fe) {
  const float e = pf_expf((float)d);
  if (d - d == 0) { /* d finite */
    if (e == 0) *fe |= PF_FE_UNDERFLOW;
    else if (e - e != 0) *fe |= PF_FE_OVERFLOW;
  }
  return pf_round_fe(acc, (double)e, fe);
}

/* Causal: row i sees columns j <= i + cols - rows (queries aligned to the end of the keys,
 * PyTorch's causal_lower_right: torch/nn/attention/bias.py); with more rows than columns the
 * first rows - cols rows see nothing. causal-top-left: j <= i always
 * (F.scaled_dot_product_attention's is_causal=True, torch.ones(L, S).tril()). */
PF_HD int pf_softmax_masked(int mask, size_t i, size_t j, size_t rows, size_t cols) {
  if (mask == PF_MASK_CAUSAL_TOP_LEFT) return j > i;
  if (mask != PF_MASK_CAUSAL) return 0;
  return j + rows > i + cols; /* j > i + cols - rows, in unsigned arithmetic */
}

/* Row i is masked whole (causal with rows > cols, i < rows - cols). With the -inf sentinel its
 * softmax is 0/0; it is defined as 0, as PyTorch's scaled_dot_product_attention gives it
 * (_safe_softmax, aten/src/ATen/native/transformers/attention.cpp) and Megatron's fused masked
 * softmax does. A finite sentinel (-10000, lowest) makes the row's scores all equal: uniform. */
PF_HD int pf_softmax_hidden(int mask, size_t i, size_t rows, size_t cols) {
  return mask == PF_MASK_CAUSAL && i + cols < rows;
}

/* The value a masked position takes, as the sentinel itself (exact); the kernel rounds it
 * to its accumulation dtype. */
PF_HD double pf_softmax_mask_value(int maskval, pf_dtype storage) {
  if (maskval == PF_MASKVAL_NEG_10000) return -10000.0;
  if (maskval == PF_MASKVAL_LOWEST) {
    pf_format f = pf_format_of(storage);
    return -ldexp(2.0 - ldexp(1.0, 1 - f.prec), f.emax);
  }
  return -INFINITY;
}

/* The scaled score of element j: fl_acc(x * fl_acc(alpha)), or the rounded sentinel. */
PF_HD double pf_softmax_score(pf_dtype acc, double x, double alpha_acc, int masked, double maskval,
                              unsigned *fe) {
  if (masked) return pf_round_fe(acc, maskval, fe);
  return pf_mul(acc, x, alpha_acc, fe);
}

/* Fault switches of a row (pf_softmax_row's faults): softmax-no-max makes safe and online
 * behave as naive would (the max is taken as 0); softmax-round-toward-zero rounds each output
 * to the storage dtype toward zero instead of to nearest (a biased rounding that stays within
 * every per-element bound: the bias check finds it). Their contract stays theirs. */
enum { PF_SOFTMAX_F_NO_MAX = 1, PF_SOFTMAX_F_ROUND_TOWARD_ZERO = 2 };

/* An output: the quotient e / s rounded to the accumulation dtype, then to the storage dtype;
 * with softmax-round-toward-zero the quotient (in binary64) is rounded toward zero, once. */
PF_HD double pf_softmax_out(pf_dtype acc, pf_dtype out_t, double e, double s, int faults, unsigned *fe) {
  if (faults & PF_SOFTMAX_F_ROUND_TOWARD_ZERO) return pf_decode(out_t, pf_encode(out_t, e / s, PF_RZ, 0));
  return pf_round_fe(out_t, pf_div(acc, e, s, fe), fe);
}

/* One row; faults: PF_SOFTMAX_F_* bits. */
PF_HD void pf_softmax_row(int algo, int faults, pf_dtype acc, pf_dtype out_t, const double *x, size_t row,
                           size_t rows, size_t cols, double alpha_acc, int mask, double maskval, double *y,
                           double *tmp, unsigned *fe) {
  const int no_max = faults & PF_SOFTMAX_F_NO_MAX;
  if (maskval == -INFINITY && pf_softmax_hidden(mask, row, rows, cols)) {
    for (size_t j = 0; j < cols; j++) y[j] = 0;
    return;
  }
  for (size_t j = 0; j < cols; j++)
    tmp[j] = pf_softmax_score(acc, x[j], alpha_acc, pf_softmax_masked(mask, row, j, rows, cols), maskval, fe);

  if (algo == PF_SOFTMAX_ONLINE) {
    double m = -INFINITY, l = 0;
    for (size_t j = 0; j < cols; j++) {
      const double t = tmp[j];
      const double mn = no_max ? 0.0 : (t > m ? t : m);
      if (mn == -INFINITY) continue; /* nothing seen yet but masked -inf: contributes 0 */
      const double rescale = m == mn ? 1.0 : pf_softmax_exp(acc, pf_sub(acc, m, mn, fe), fe);
      l = pf_add(acc, pf_mul(acc, l, rescale, fe), pf_softmax_exp(acc, pf_sub(acc, t, mn, fe), fe), fe);
      m = mn;
    }
    for (size_t j = 0; j < cols; j++)
      y[j] = pf_softmax_out(acc, out_t, pf_softmax_exp(acc, pf_sub(acc, tmp[j], m, fe), fe), l, faults, fe);
    return;
  }
  double m = 0;
  if (algo == PF_SOFTMAX_SAFE && !no_max) {
    m = -INFINITY;
    for (size_t j = 0; j < cols; j++)
      if (tmp[j] > m) m = tmp[j];
  }
  double s = 0;
  for (size_t j = 0; j < cols; j++) {
    tmp[j] = algo == PF_SOFTMAX_NAIVE || no_max ? pf_softmax_exp(acc, tmp[j], fe)
                                                : pf_softmax_exp(acc, pf_sub(acc, tmp[j], m, fe), fe);
    s = pf_add(acc, s, tmp[j], fe);
  }
  for (size_t j = 0; j < cols; j++) y[j] = pf_softmax_out(acc, out_t, tmp[j], s, faults, fe);
}

#endif
