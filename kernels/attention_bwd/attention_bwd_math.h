/* Attention backward's arithmetic, shared by the C emulation (attention_bwd_cpu.c) and a CUDA
 * kernel: values carried as doubles holding numbers of the dtype each step rounds to.
 *
 * With S = alpha Q K^T (+ mask), P = softmax(S), O = P V and the incoming gradient dO:
 *   dV = P^T dO,  dP = dO V^T,  dS = P o (dP - D),  D_i = sum_j P_ij dP_ij = sum_d dO_id O_id,
 *   dQ = alpha dS K,  dK = alpha dS^T Q.
 * One head at a time: q, dO are Lq x d, k, v are Lk x d, row-major. GEMMs accumulate in acc
 * (pf_attn_dot: one rounding per multiply-add, in index order). */
#ifndef PF_ATTENTION_BWD_MATH_H
#define PF_ATTENTION_BWD_MATH_H

#include "kernels/attention/attention_math.h"
#include "kernels/attention_bwd/attention_bwd_spec.h"


/* Fault switches:
 *   attn-bwd-no-delta       D = 0: dS = P o dP, the softmax Jacobian's rank-one term forgotten
 *   attn-bwd-lse-no-max     flash: P recomputed as exp(s - log l), the forward's max not reused
 *   attn-bwd-no-scale       dQ and dK without the softmax scale alpha */
enum { PF_ATTN_BWD_F_NO_DELTA = 1, PF_ATTN_BWD_F_LSE_NO_MAX = 2, PF_ATTN_BWD_F_NO_SCALE = 4 };

typedef struct {
  size_t lq, lk, d, block;
  int algo, mask, faults;
  pf_dtype t, acc; /* storage, GEMM accumulation; softmax and flash's row statistics in fp32 */
  pf_dtype dacc;   /* flash: the dtype D = rowsum is accumulated in (fp32, or t) */
} pf_attn_bwd_launch;

/* The score s_ij as both variants compute it: fl32(alpha32 fl32(q_i . k_j)) (the standard
 * variant then stores it in t), -inf where masked. */
PF_HD double pf_attn_bwd_score(const pf_attn_bwd_launch *L, const double *qi, const double *kj, size_t i, size_t j,
                               unsigned *fe) {
  if (pf_softmax_masked(L->mask, i, j, L->lq, L->lk)) return -INFINITY;
  const double alpha32 = pf_round(PF_FP32, pf_attn_inv_sqrt_d(L->d));
  return pf_mul(PF_FP32, alpha32, pf_round_fe(PF_FP32, pf_attn_dot(L->acc, qi, 1, kj, 1, L->d, fe), fe), fe);
}

/* flash's forward for query row i: O_i in t and the row's log-sum-exp L_i = m + log l in fp32
 * (what FlashAttention-2's forward saves for the backward): key blocks of L->block, the running
 * max and sum, P rounded to t for P V, the fp32 accumulator rescaled when the max grows. With
 * attn-bwd-lse-no-max the saved statistic is log l alone. Scratch: s, pt of block values, o of d. */
PF_HD double pf_attn_bwd_flash_fwd_row(const pf_attn_bwd_launch *L, const double *qi, const double *k, const double *v,
                                       size_t i, double *Oi, double *s, double *pt, double *o, unsigned *fe) {
  const size_t Lk = L->lk, d = L->d, Bc = L->block;
  const pf_dtype T = L->t, A = L->acc, F = PF_FP32;
  double m = -INFINITY, l = 0;
  for (size_t e = 0; e < d; e++) o[e] = 0;
  if (pf_softmax_hidden(L->mask, i, L->lq, Lk)) { /* no key to see: O_i = 0 (PyTorch's), P_i = 0 */
    for (size_t e = 0; e < d; e++) Oi[e] = 0;
    return -INFINITY;
  }
  for (size_t j0 = 0; j0 < Lk; j0 += Bc) {
    const size_t nb = Lk - j0 < Bc ? Lk - j0 : Bc;
    double mn = m;
    for (size_t j = 0; j < nb; j++) {
      s[j] = pf_attn_bwd_score(L, qi, k + (j0 + j) * d, i, j0 + j, fe);
      if (s[j] > mn) mn = s[j];
    }
    if (mn == -INFINITY) continue; /* only masked keys so far */
    const double r = m == mn ? 1.0 : pf_softmax_exp(F, pf_sub(F, m, mn, fe), fe);
    double rs = 0;
    for (size_t j = 0; j < nb; j++) {
      const double p = pf_softmax_exp(F, pf_sub(F, s[j], mn, fe), fe);
      rs = pf_add(F, rs, p, fe);
      pt[j] = pf_round_fe(T, p, fe);
    }
    l = pf_add(F, pf_mul(F, l, r, fe), rs, fe);
    for (size_t e = 0; e < d; e++)
      o[e] = pf_add(F, pf_mul(F, o[e], r, fe), pf_round_fe(F, pf_attn_dot(A, pt, 1, v + j0 * d + e, d, nb, fe), fe), fe);
    m = mn;
  }
  for (size_t e = 0; e < d; e++) Oi[e] = pf_round_fe(T, pf_div(F, o[e], l, fe), fe);
  const double logl = pf_round_fe(F, (double)logf((float)l), fe);
  return (L->faults & PF_ATTN_BWD_F_LSE_NO_MAX) ? logl : pf_add(F, m, logl, fe);
}

#endif
