/* Attention backward: dQ, dK, dV of O = softmax(Q K^T / sqrt(d) + mask) V for an incoming
 * gradient dO; CPU emulation of every variant, their contracts and the variant table.
 *
 *   standard   the unfused kernel's backward from its stored tensors: S = fl_T(fl32(alpha32
 *              fl32(q . k))) and P = fl_T(softmax_fp32(S)) stored by the forward; dV = P^T dO,
 *              dP = dO V^T stored in T, D_i = sum_j fl32(dP_ij P_ij), dS = fl_T(P (dP - D)), the
 *              scale applied to dS in T, then dQ = dS K and dK = dS^T Q (GEMMs in the
 *              accumulation dtype A, stored in T). dP and dS are stages.
 *   flash      FlashAttention-2's backward (Dao 2023, Algorithm 2): the forward saves O in T and
 *              the row's log-sum-exp L = m + log l in fp32; the backward recomputes
 *              P = exp(s - L) in fp32 from recomputed scores, D_i = sum_d dO_id O_id (products
 *              in fp32, the sum in fp32 as FlashAttention-2 has it, or with the parameter delta
 *              in the storage dtype),
 *              dP = dO V^T in fp32, dS = P (dP - D) in fp32; P and dS rounded to T for the GEMMs
 *              dV = P^T dO, dQ = alpha dS K, dK = alpha dS^T Q (accumulated in A, scaled in fp32).
 *   flash-pdp  flash with D_i = sum_j P_ij dP_ij from the recomputed fp32 P and dP (the variant
 *              that does not read O).
 * Shape [batch, heads, q_len, k_len, head_dim]; inputs q, dO (q_len x d) and k, v (k_len x d)
 * per head, all in T. Outputs: dQ, dK, dV, then (standard) dP and dS. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/case.h"
#include "core/errbound.h"
#include "kernels/attention_bwd/attention_bwd_math.h"
#include "core/kernel.h"

#include "oracles/attention_bwd_mpfr.h"

enum { D_B = 0, D_H, D_LQ, D_LK, D_D };
enum { P_MASK = 0, P_BLOCK, P_DELTA };

static const char *const pf_ab_dims[] = {"batch", "heads", "q_len", "k_len", "head_dim"};
static const char *const pf_ab_inputs[] = {"q", "k", "v", "do"};
static const char *const pf_ab_mask_choices[] = {"none", "causal", "causal-top-left", NULL};
static const char *const pf_ab_delta_choices[] = {"fp32", "storage", NULL};
static const pf_param_desc pf_ab_params[] = {
    {"mask", PF_PARAM_CHOICE, 0, 0, 2, pf_ab_mask_choices,
     "causal: query i sees keys j <= i + k_len - q_len (none for i < q_len - k_len: its gradients 0); causal-top-left: j <= i", 0, "none,causal,causal-top-left"},
    {"block", PF_PARAM_INT, 64, 1, 4096, NULL, "key block size of flash's forward (flash, flash-pdp)", 0, "4,8,64,128"},
    {"delta", PF_PARAM_CHOICE, 0, 0, 1, pf_ab_delta_choices,
     "the dtype D = rowsum is accumulated in (flash, flash-pdp): fp32 as FlashAttention-2, or the storage dtype", 0, NULL},
};

static size_t pf_ab_heads(const pf_case *c) { return c->shape[D_B] * c->shape[D_H]; }
static size_t pf_ab_qn(const pf_case *c) { return pf_ab_heads(c) * c->shape[D_LQ] * c->shape[D_D]; }
static size_t pf_ab_kn(const pf_case *c) { return pf_ab_heads(c) * c->shape[D_LK] * c->shape[D_D]; }
static size_t pf_ab_sn(const pf_case *c) { return pf_ab_heads(c) * c->shape[D_LQ] * c->shape[D_LK]; }
static int pf_ab_standard(const pf_case *c) { return pf_case_algo(c) == PF_ATTN_BWD_STANDARD; }

static size_t pf_ab_input_count(const pf_case *c, int i) { return i == 0 || i == 3 ? pf_ab_qn(c) : pf_ab_kn(c); }
static size_t pf_ab_output_count(const pf_case *c) {
  return pf_ab_qn(c) + 2 * pf_ab_kn(c) + (pf_ab_standard(c) ? 2 * pf_ab_sn(c) : 0);
}

/* Data-flow order: dP, dS (standard's stored intermediates), dV, dQ, dK. dS's rows sum to 0 and
 * dQ, dK are sums of dS: a row through a saturated softmax cancels to almost nothing, and an
 * error relative to that row says nothing; they are judged against the whole tensor's norm
 * (rounding noise in place of a vanished gradient is flagged only when it is the gradient). */
static int pf_ab_stages(const pf_case *c, pf_stage *st) {
  const size_t qn = pf_ab_qn(c), kn = pf_ab_kn(c), sn = pf_ab_sn(c);
  int n = 0;
  if (pf_ab_standard(c)) {
    st[n++] = (pf_stage){"dP", qn + 2 * kn, sn, 1, 0, 4, {D_B, D_H, D_LQ, D_LK}, PF_MEASURE_ROW};
    st[n++] = (pf_stage){"dS", qn + 2 * kn + sn, sn, 1, 0, 4, {D_B, D_H, D_LQ, D_LK}, PF_MEASURE_TENSOR};
  }
  st[n++] = (pf_stage){"dV", qn + kn, kn, 0, 0, 4, {D_B, D_H, D_LK, D_D}, PF_MEASURE_ROW};
  st[n++] = (pf_stage){"dQ", 0, qn, 0, 0, 4, {D_B, D_H, D_LQ, D_D}, PF_MEASURE_TENSOR};
  st[n++] = (pf_stage){"dK", qn, kn, 0, 0, 4, {D_B, D_H, D_LK, D_D}, PF_MEASURE_TENSOR};
  return n;
}

static int pf_ab_input_dims(const pf_case *c, int i, int *d) {
  d[0] = D_B, d[1] = D_H, d[2] = i == 0 || i == 3 ? D_LQ : D_LK, d[3] = D_D;
  return 4;
}

static int pf_ab_faults(const pf_case *c) {
  return (strcmp(c->fault, "attn-bwd-no-delta") == 0 ? PF_ATTN_BWD_F_NO_DELTA : 0) |
         (strcmp(c->fault, "attn-bwd-lse-no-max") == 0 ? PF_ATTN_BWD_F_LSE_NO_MAX : 0) |
         (strcmp(c->fault, "attn-bwd-no-scale") == 0 ? PF_ATTN_BWD_F_NO_SCALE : 0);
}

static pf_attn_bwd_launch pf_ab_launch(const pf_case *c) {
  return (pf_attn_bwd_launch){c->shape[D_LQ], c->shape[D_LK],      c->shape[D_D], (size_t)c->params[P_BLOCK],
                              pf_case_algo(c),  (int)c->params[P_MASK], pf_ab_faults(c), c->dtype, c->accum,
                              c->params[P_DELTA] != 0 ? c->dtype : PF_FP32};
}

/* One head. P and dS: Lq x Lk scratch; w: 3 (block + d) scratch. */
static void pf_ab_head(const pf_attn_bwd_launch *L, const double *q, const double *k, const double *v, const double *dO,
                       double *dQ, double *dK, double *dV, double *dPo, double *dSo, double *P, double *dS, double *O,
                       double *Lse, double *w, unsigned *fe) {
  const size_t Lq = L->lq, Lk = L->lk, d = L->d;
  const pf_dtype T = L->t, A = L->acc, F = PF_FP32;
  const double alpha32 = pf_round(F, pf_attn_inv_sqrt_d(d));
  const int no_delta = L->faults & PF_ATTN_BWD_F_NO_DELTA, no_scale = L->faults & PF_ATTN_BWD_F_NO_SCALE;
  if (L->algo == PF_ATTN_BWD_STANDARD) {
    for (size_t i = 0; i < Lq; i++) {
      double *S = dS + i * Lk; /* the stored scores, in dS's row until dS is computed */
      for (size_t j = 0; j < Lk; j++) S[j] = pf_round_fe(T, pf_attn_bwd_score(L, q + i * d, k + j * d, i, j, fe), fe);
      /* S is -inf where masked already; the mask tells the softmax of a row hidden whole (P = 0) */
      pf_softmax_row(PF_SOFTMAX_SAFE, 0, F, T, S, i, Lq, Lk, 1.0, L->mask, -INFINITY, P + i * Lk, w, fe);
      double D = 0;
      for (size_t j = 0; j < Lk; j++) {
        dPo[i * Lk + j] = pf_round_fe(T, pf_attn_dot(A, dO + i * d, 1, v + j * d, 1, d, fe), fe);
        D = pf_add(F, D, pf_mul(F, dPo[i * Lk + j], P[i * Lk + j], fe), fe);
      }
      if (no_delta) D = 0;
      for (size_t j = 0; j < Lk; j++) {
        dSo[i * Lk + j] = pf_round_fe(T, pf_mul(F, P[i * Lk + j], pf_sub(F, dPo[i * Lk + j], D, fe), fe), fe);
        S[j] = no_scale ? dSo[i * Lk + j] : pf_round_fe(T, pf_mul(F, alpha32, dSo[i * Lk + j], fe), fe);
      }
    }
    for (size_t j = 0; j < Lk; j++)
      for (size_t e = 0; e < d; e++) {
        dV[j * d + e] = pf_round_fe(T, pf_attn_dot(A, P + j, Lk, dO + e, d, Lq, fe), fe);
        dK[j * d + e] = pf_round_fe(T, pf_attn_dot(A, dS + j, Lk, q + e, d, Lq, fe), fe);
      }
    for (size_t i = 0; i < Lq; i++)
      for (size_t e = 0; e < d; e++) dQ[i * d + e] = pf_round_fe(T, pf_attn_dot(A, dS + i * Lk, 1, k + e, d, Lk, fe), fe);
    return;
  }
  /* flash: the forward's O and L, then the recomputation */
  for (size_t i = 0; i < Lq; i++)
    Lse[i] = pf_attn_bwd_flash_fwd_row(L, q + i * d, k, v, i, O + i * d, w, w + L->block, w + 2 * L->block, fe);
  for (size_t i = 0; i < Lq; i++) {
    double D = 0;
    if (L->algo == PF_ATTN_BWD_FLASH)
      for (size_t e = 0; e < d; e++) D = pf_add(L->dacc, D, pf_mul(F, dO[i * d + e], O[i * d + e], fe), fe);
    for (size_t j = 0; j < Lk; j++) {
      const double s = pf_attn_bwd_score(L, q + i * d, k + j * d, i, j, fe);
      const double p = s == -INFINITY ? 0 : pf_softmax_exp(F, pf_sub(F, s, Lse[i], fe), fe);
      const double dp = pf_round_fe(F, pf_attn_dot(A, dO + i * d, 1, v + j * d, 1, d, fe), fe);
      P[i * Lk + j] = p, dS[i * Lk + j] = dp;
      if (L->algo == PF_ATTN_BWD_FLASH_PDP) D = pf_add(L->dacc, D, pf_mul(F, p, dp, fe), fe);
    }
    if (no_delta) D = 0;
    for (size_t j = 0; j < Lk; j++) {
      const double p = P[i * Lk + j];
      dS[i * Lk + j] = pf_round_fe(T, pf_mul(F, p, pf_sub(F, dS[i * Lk + j], D, fe), fe), fe);
      P[i * Lk + j] = pf_round_fe(T, p, fe);
    }
  }
  for (size_t j = 0; j < Lk; j++)
    for (size_t e = 0; e < d; e++) {
      dV[j * d + e] = pf_round_fe(T, pf_attn_dot(A, P + j, Lk, dO + e, d, Lq, fe), fe);
      const double g = pf_round_fe(F, pf_attn_dot(A, dS + j, Lk, q + e, d, Lq, fe), fe);
      dK[j * d + e] = pf_round_fe(T, no_scale ? g : pf_mul(F, alpha32, g, fe), fe);
    }
  for (size_t i = 0; i < Lq; i++)
    for (size_t e = 0; e < d; e++) {
      const double g = pf_round_fe(F, pf_attn_dot(A, dS + i * Lk, 1, k + e, d, Lk, fe), fe);
      dQ[i * d + e] = pf_round_fe(T, no_scale ? g : pf_mul(F, alpha32, g, fe), fe);
    }
}

pf_status pf_attention_bwd_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_attn_bwd_launch L = pf_ab_launch(c);
  const size_t H = pf_ab_heads(c), Lq = L.lq, Lk = L.lk, d = L.d, sn = Lq * Lk;
  const size_t qn = pf_ab_qn(c), kn = pf_ab_kn(c);
  double *buf = malloc((2 * sn + Lq * d + Lq + Lk + 3 * (L.block + d) + 4) * sizeof(double));
  if (!buf) return pf_error(PF_ERR_NOMEM, "attention_bwd: cannot allocate a head's %zu x %zu scratch", Lq, Lk);
  double *P = buf, *dS = P + sn, *O = dS + sn, *Lse = O + Lq * d, *w = Lse + Lq;
  for (size_t h = 0; h < H; h++) {
    double *dPo = pf_ab_standard(c) ? out + qn + 2 * kn + h * sn : P, *dSo = pf_ab_standard(c) ? dPo + H * sn : P;
    pf_ab_head(&L, in[0].data + h * Lq * d, in[1].data + h * Lk * d, in[2].data + h * Lk * d, in[3].data + h * Lq * d,
               out + h * Lq * d, out + qn + h * Lk * d, out + qn + kn + h * Lk * d, dPo, dSo, P, dS, O, Lse, w, fe);
  }
  free(buf);
  return PF_OK;
}

/* The flash variants' parameters are refused where they would be silently ignored. */
static pf_status pf_ab_check(const pf_case *c) {
  if (pf_ab_standard(c) && c->params[P_DELTA] != 0)
    return pf_error(PF_ERR_ARG, "delta: %s/%s reads D from its stored dP and P in fp32; the parameter is flash's and "
                                "flash-pdp's", c->kernel, c->variant);
  if (pf_ab_standard(c) && c->params[P_BLOCK] != pf_ab_params[P_BLOCK].def)
    return pf_error(PF_ERR_ARG, "block: %s/%s has no key blocks (its forward stores S and P); the parameter is flash's "
                                "and flash-pdp's", c->kernel, c->variant);
  return PF_OK;
}

/* ---- the contract ---------------------------------------------------------------------------
 * Every output's bound follows the variant's own operations with running error bounds
 * (core/errbound.h), as cross_entropy's does: each value paired with the exact quantity it
 * stands for and a bound on their distance, each rounding adding u |z| + sig / 2 of its dtype,
 * expf and logf 2 ulps; every dot product (a GEMM's element, accumulated in A with one rounding
 * per multiply-add) adds the binary64 evaluation of its exact sum, n 2^-52 sum |terms|. A row's
 * maximum stands for the exact scores' maximum, within the largest of the scores' bounds (the
 * maximum moves by at most as much as its arguments). The bound is absolute, per element,
 * before the output's rounding to T; an intermediate whose bound reaches its dtype's largest
 * finite makes it infinite, and the domain ends there. */

/* sum_k a_k b_k accumulated in acc, one rounding per multiply-add (pf_attn_dot) */
static pf_eb pf_ab_dot(pf_dtype acc, const pf_eb *a, size_t sa, const pf_eb *b, size_t sb, size_t n) {
  pf_eb s = {0, 0};
  double mag = 0;
  for (size_t k = 0; k < n; k++) {
    const pf_eb x = a[k * sa], y = b[k * sb];
    const double pv = x.v * y.v;
    s.v += pv;
    s.e += fabs(x.v) * y.e + fabs(y.v) * x.e + x.e * y.e;
    s.e += pf_eb_round_err(acc, fabs(s.v) + s.e);
    mag += fabs(pv);
  }
  s.e += (double)(n + 1) * 0x1p-52 * mag;
  return s;
}

/* s - m for a row's (running) maximum m, rounded in fp32. The maximum's own error is a shift
 * common to every term it is subtracted from (and to the rescale between two maxima): it cancels
 * in the quotient P = e / Z, in o / l and in m + log l, so the exact quantity is taken at the
 * computed shift and only the size of that error counts, in the rounding's magnitude. */
static pf_eb pf_ab_shift(pf_eb s, pf_eb m) {
  const double z = s.v - m.v;
  return (pf_eb){z, s.e + pf_eb_round_err(PF_FP32, fabs(z) + s.e + m.e)};
}

typedef struct {
  const pf_attn_bwd_launch *L;
  pf_eb alpha; /* fl32(1/sqrt d) against 1/sqrt d */
} pf_ab_ctx;

/* the score s_ij: fl32(alpha32 fl32(q_i . k_j)) */
static pf_eb pf_ab_score(const pf_ab_ctx *x, const pf_eb *qi, const pf_eb *kj) {
  return pf_eb_mul(PF_FP32, x->alpha, pf_eb_store(PF_FP32, pf_ab_dot(x->L->acc, qi, 1, kj, 1, x->L->d)));
}

/* flash's forward for row i, mirrored: O_i (d values into Oi) and the log-sum-exp (returned).
 * s, pt: scratch of block values. */
static pf_eb pf_ab_flash_fwd(const pf_ab_ctx *x, const pf_eb *qi, const pf_eb *k, const pf_eb *v, size_t i, pf_eb *Oi,
                             pf_eb *s, pf_eb *pt) {
  const pf_attn_bwd_launch *L = x->L;
  const size_t Lk = L->lk, d = L->d, Bc = L->block;
  const pf_dtype T = L->t, A = L->acc, F = PF_FP32;
  pf_eb M = {-INFINITY, 0}, l = {0, 0};
  for (size_t e = 0; e < d; e++) Oi[e] = (pf_eb){0, 0};
  if (pf_softmax_hidden(L->mask, i, L->lq, Lk)) return (pf_eb){-INFINITY, 0}; /* O_i = 0 exactly */
  for (size_t j0 = 0; j0 < Lk; j0 += Bc) {
    const size_t nb = Lk - j0 < Bc ? Lk - j0 : Bc;
    pf_eb mn = M;
    int any = 0;
    for (size_t j = 0; j < nb; j++) {
      if (pf_softmax_masked(L->mask, i, j0 + j, L->lq, Lk)) {
        s[j] = (pf_eb){-INFINITY, 0};
        continue;
      }
      s[j] = pf_ab_score(x, qi, k + (j0 + j) * d);
      mn.v = fmax(mn.v, s[j].v), mn.e = fmax(mn.e, s[j].e), any = 1;
    }
    if (!any) continue;
    pf_eb rs = {0, 0};
    double mag = 0;
    for (size_t j = 0; j < nb; j++) {
      const pf_eb p = s[j].v == -INFINITY ? (pf_eb){0, 0} : pf_eb_exp(F, pf_ab_shift(s[j], mn));
      rs = pf_eb_add(F, rs, p), mag += p.v;
      pt[j] = pf_eb_store(T, p);
    }
    rs.e += (double)(nb + 1) * 0x1p-52 * mag;
    const int first = M.v == -INFINITY;
    const pf_eb r = first ? (pf_eb){0, 0} : pf_eb_exp(F, pf_ab_shift((pf_eb){M.v, 0}, (pf_eb){mn.v, M.e + mn.e}));
    l = first ? rs : pf_eb_add(F, pf_eb_mul(F, l, r), rs);
    for (size_t e = 0; e < d; e++) {
      const pf_eb blk = pf_eb_store(F, pf_ab_dot(A, pt, 1, v + j0 * d + e, d, nb));
      Oi[e] = first ? blk : pf_eb_add(F, pf_eb_mul(F, Oi[e], r), blk);
    }
    M = mn;
  }
  for (size_t e = 0; e < d; e++) Oi[e] = pf_eb_store(T, pf_eb_div(F, Oi[e], l));
  /* m + log l: the shift cancels; log l's magnitude may be off by it (its rounding) */
  pf_eb lg = pf_eb_log(F, l);
  lg.e += M.e * 0x1p-21;
  return pf_eb_add(F, (pf_eb){M.v, M.e * 0x1p-21}, lg);
}

static pf_bound pf_ab_b(pf_eb a, pf_dtype t) {
  return fabs(a.v) + a.e < pf_max_finite(t) ? pf_eb_bound(a) : (pf_bound){INFINITY, INFINITY};
}

/* One head's bounds; P, dS: Lq x Lk scratch; O: Lq x d; w: Lk + 2 block scratch. */
static void pf_ab_head_bound(const pf_ab_ctx *x, const pf_eb *q, const pf_eb *k, const pf_eb *v, const pf_eb *dO,
                             pf_bound *bQ, pf_bound *bK, pf_bound *bV, pf_bound *bP, pf_bound *bS, pf_eb *P, pf_eb *dS,
                             pf_eb *O, pf_eb *w) {
  const pf_attn_bwd_launch *L = x->L;
  const size_t Lq = L->lq, Lk = L->lk, d = L->d;
  const pf_dtype T = L->t, A = L->acc, F = PF_FP32;
  const pf_eb zero = {0, 0};
  if (L->algo == PF_ATTN_BWD_STANDARD) {
    for (size_t i = 0; i < Lq; i++) {
      pf_eb Smax = {-INFINITY, 0}, Z = zero, Dp = zero;
      for (size_t j = 0; j < Lk; j++) {
        w[j] = pf_softmax_masked(L->mask, i, j, Lq, Lk) ? (pf_eb){-INFINITY, 0}
                                                        : pf_eb_store(T, pf_ab_score(x, q + i * d, k + j * d));
        if (w[j].v != -INFINITY) Smax.v = fmax(Smax.v, w[j].v), Smax.e = fmax(Smax.e, w[j].e);
      }
      double mag = 0;
      for (size_t j = 0; j < Lk; j++) {
        P[i * Lk + j] = w[j].v == -INFINITY ? zero : pf_eb_exp(F, pf_ab_shift(w[j], Smax));
        Z = pf_eb_add(F, Z, P[i * Lk + j]), mag += P[i * Lk + j].v;
      }
      Z.e += (double)(Lk + 1) * 0x1p-52 * mag;
      mag = 0;
      for (size_t j = 0; j < Lk; j++) {
        pf_eb *p = P + i * Lk + j;
        if (w[j].v != -INFINITY) *p = pf_eb_store(T, pf_eb_div(F, *p, Z));
        const pf_eb dp = pf_ab_dot(A, dO + i * d, 1, v + j * d, 1, d);
        bP[i * Lk + j] = pf_ab_b(dp, T);
        dS[i * Lk + j] = pf_eb_store(T, dp); /* dP as stored, until dS replaces it */
        const pf_eb t = pf_eb_mul(F, dS[i * Lk + j], *p);
        Dp = pf_eb_add(F, Dp, t), mag += fabs(t.v);
      }
      Dp.e += (double)(Lk + 1) * 0x1p-52 * mag;
      for (size_t j = 0; j < Lk; j++) {
        const pf_eb ds = pf_eb_mul(F, P[i * Lk + j], pf_eb_sub(F, dS[i * Lk + j], Dp));
        bS[i * Lk + j] = pf_ab_b(ds, T);
        dS[i * Lk + j] = pf_eb_store(T, pf_eb_mul(F, x->alpha, pf_eb_store(T, ds)));
      }
    }
    for (size_t j = 0; j < Lk; j++)
      for (size_t e = 0; e < d; e++) {
        bV[j * d + e] = pf_ab_b(pf_ab_dot(A, P + j, Lk, dO + e, d, Lq), T);
        bK[j * d + e] = pf_ab_b(pf_ab_dot(A, dS + j, Lk, q + e, d, Lq), T);
      }
    for (size_t i = 0; i < Lq; i++)
      for (size_t e = 0; e < d; e++) bQ[i * d + e] = pf_ab_b(pf_ab_dot(A, dS + i * Lk, 1, k + e, d, Lk), T);
    return;
  }
  for (size_t i = 0; i < Lq; i++) {
    const pf_eb lse = pf_ab_flash_fwd(x, q + i * d, k, v, i, O + i * d, w, w + L->block);
    pf_eb D = zero;
    double mag = 0;
    if (L->algo == PF_ATTN_BWD_FLASH) {
      for (size_t e = 0; e < d; e++) {
        const pf_eb t = pf_eb_mul(F, dO[i * d + e], O[i * d + e]);
        D = pf_eb_add(L->dacc, D, t), mag += fabs(t.v);
      }
      D.e += (double)(d + 1) * 0x1p-52 * mag;
    }
    for (size_t j = 0; j < Lk; j++) {
      pf_eb *p = P + i * Lk + j, *dp = dS + i * Lk + j;
      /* dP over the whole tile, masked positions too (P = 0 there: an overflowed dP would make
       * 0 inf = NaN, and the bound says so) */
      *dp = pf_eb_store(F, pf_ab_dot(A, dO + i * d, 1, v + j * d, 1, d));
      if (pf_softmax_masked(L->mask, i, j, Lq, Lk)) {
        *p = zero;
        continue;
      }
      *p = pf_eb_exp(F, pf_eb_sub(F, pf_ab_score(x, q + i * d, k + j * d), lse));
      if (L->algo == PF_ATTN_BWD_FLASH_PDP) {
        const pf_eb t = pf_eb_mul(F, *p, *dp);
        D = pf_eb_add(L->dacc, D, t), mag += fabs(t.v);
      }
    }
    if (L->algo == PF_ATTN_BWD_FLASH_PDP) D.e += (double)(Lk + 1) * 0x1p-52 * mag;
    for (size_t j = 0; j < Lk; j++) {
      dS[i * Lk + j] = pf_eb_store(T, pf_eb_mul(F, P[i * Lk + j], pf_eb_sub(F, dS[i * Lk + j], D)));
      P[i * Lk + j] = pf_eb_store(T, P[i * Lk + j]);
    }
  }
  for (size_t j = 0; j < Lk; j++)
    for (size_t e = 0; e < d; e++) {
      bV[j * d + e] = pf_ab_b(pf_ab_dot(A, P + j, Lk, dO + e, d, Lq), T);
      bK[j * d + e] = pf_ab_b(pf_eb_mul(F, x->alpha, pf_eb_store(F, pf_ab_dot(A, dS + j, Lk, q + e, d, Lq))), T);
    }
  for (size_t i = 0; i < Lq; i++)
    for (size_t e = 0; e < d; e++)
      bQ[i * d + e] = pf_ab_b(pf_eb_mul(F, x->alpha, pf_eb_store(F, pf_ab_dot(A, dS + i * Lk, 1, k + e, d, Lk))), T);
}

/* All bounds of the case; 0 when out of memory (every bound then infinite). */
static int pf_ab_bound_all(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const pf_attn_bwd_launch L = pf_ab_launch(c);
  const size_t H = pf_ab_heads(c), Lq = L.lq, Lk = L.lk, d = L.d, sn = Lq * Lk;
  const size_t qn = pf_ab_qn(c), kn = pf_ab_kn(c), nin = 2 * (Lq + Lk) * d;
  pf_eb *buf = malloc((nin + 2 * sn + Lq * d + Lk + 2 * L.block + 4) * sizeof(pf_eb));
  if (!buf) {
    for (size_t i = 0; i < pf_ab_output_count(c); i++) out[i] = (pf_bound){INFINITY, INFINITY};
    return 0;
  }
  pf_eb *q = buf, *k = q + Lq * d, *v = k + Lk * d, *dO = v + Lk * d, *P = dO + Lq * d, *dS = P + sn, *O = dS + sn,
        *w = O + Lq * d;
  const pf_ab_ctx x = {&L, pf_eb_const(PF_FP32, pf_attn_inv_sqrt_d(d))};
  for (size_t h = 0; h < H; h++) {
    for (size_t n = 0; n < Lq * d; n++)
      q[n] = pf_eb_exact(in[0].data[h * Lq * d + n]), dO[n] = pf_eb_exact(in[3].data[h * Lq * d + n]);
    for (size_t n = 0; n < Lk * d; n++)
      k[n] = pf_eb_exact(in[1].data[h * Lk * d + n]), v[n] = pf_eb_exact(in[2].data[h * Lk * d + n]);
    pf_bound *bP = pf_ab_standard(c) ? out + qn + 2 * kn + h * sn : NULL, *bS = bP ? bP + H * sn : NULL;
    pf_ab_head_bound(&x, q, k, v, dO, out + h * Lq * d, out + qn + h * Lk * d, out + qn + kn + h * Lk * d, bP, bS, P,
                     dS, O, w);
  }
  free(buf);
  return 1;
}

static void pf_ab_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) { pf_ab_bound_all(c, in, out); }

/* Domain: finite inputs, and every output's bound finite (each intermediate's bound within its
 * dtype's range: where it is not, the variant may overflow there). */
static int pf_ab_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  static const char *const names[] = {"q", "k", "v", "do"};
  for (int t = 0; t < 4; t++)
    for (size_t n = 0; n < in[t].n; n++)
      if (!isfinite(in[t].data[n])) {
        snprintf(why, len, "%s[%zu] is not finite (the gradient is undefined there)", names[t], n);
        return 0;
      }
  const size_t n = pf_ab_output_count(c);
  pf_bound *b = malloc(n * sizeof *b);
  if (!b || !pf_ab_bound_all(c, in, b)) {
    free(b);
    snprintf(why, len, "out of memory for the bounds of %zu outputs", n);
    return 0;
  }
  pf_stage st[PF_MAX_STAGES];
  const int ns = pf_ab_stages(c, st);
  for (int s = 0; s < ns; s++)
    for (size_t i = st[s].offset; i < st[s].offset + st[s].count; i++)
      if (!isfinite(b[i].abs)) {
        snprintf(why, len, "%s[%zu]: an intermediate may exceed its dtype's range (no bound)", st[s].name,
                 i - st[s].offset);
        free(b);
        return 0;
      }
  free(b);
  return 1;
}

/* per score (heads x q_len x k_len): the emulation 0.1 us + 65 ns per head_dim element, the
 * oracle's fast path 0.33 us + 40 ns per head_dim element (MPFR alone: 4.1 us + 1.15 us;
 * measured with --threads 1: 10 cases of 1x1x64x64 with head_dim 4 and 64, bf16) */
static void pf_ab_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double scores = (double)pf_ab_sn(c), d = (double)c->shape[D_D];
  *emulation_s = scores * (0.1e-6 + 65e-9 * d);
  *oracle_s = scores * (0.33e-6 + 40e-9 * d);
}

static const pf_op_sweep pf_ab_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "1x1x8x8x8", .along = "scale", .lo = 0x1p-3, .hi = 0x1p6, .fail = "finding", .cases_div = 4,
    /* dQ and dK's rounding bias over many cases: flash's bf16 dQ drifts toward zero by about
     * 0.04 ulps, a bias no single case shows (docs/kernels/attention_bwd.md) */
    .bias_shape = "1x2x32x32x16", .bias_scale = 4, .bias_cases = 128, .bias_cases_quick = 8,
    .fault_settings = (const pf_fault_setting[]){{"attn-bwd-lse-no-max", NULL, {"block=4"}}, {0}},
    .explanation =
        "The backward multiplies the probabilities P by dP - D, D_i = sum_j P_ij dP_ij: rows whose dP is nearly constant "
        "cancel, so the contracts are absolute. standard reads P back from the storage dtype (bf16: 2^-9 relative "
        "each) and stores dP and dS there; flash recomputes P in fp32 from the saved log-sum-exp and rounds P and dS to "
        "the storage dtype only for the GEMMs; flash takes D from the stored output O, flash-pdp from the fp32 P and dP. "
        "At large scales every softmax row saturates (P one-hot): the exact dQ and dK vanish (e^-gap) while the kernels "
        "return the rounding of dP - D, so the gradient is noise: the hazard imprecise, judged against the whole "
        "tensor's norm.",
};

int pf_decode_attention_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* attention_bwd_fuzzer.c */
const pf_op pf_attention_bwd_op = {
    .name = "attention_bwd",
    .summary = "the gradients dQ, dK, dV of softmax(Q K^T / sqrt(d) + mask) V for an incoming dO",
    .ndims = 5,
    .dim_names = pf_ab_dims,
    .dim_max = {1024, 1024, (size_t)1 << 16, (size_t)1 << 16, 4096},
    .dim_default = {1, 2, 16, 16, 16},
    .elems_max = (size_t)1 << 30,
    .nparams = sizeof pf_ab_params / sizeof pf_ab_params[0],
    .params = pf_ab_params,
    .ninputs = 4,
    .input_names = pf_ab_inputs,
    .input_count = pf_ab_input_count,
    .output_count = pf_ab_output_count,
    .oracle = pf_attention_bwd_mpfr,
    .stages = pf_ab_stages,
    .input_dims = pf_ab_input_dims,
    .batch_dim0 = 1,
    .cost = pf_ab_cost,
    .fuzz_decode = pf_decode_attention_bwd_fuzzer,
    .sweep = &pf_ab_sweep,
};

#define PF_AB_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
#define PF_AB_ACCUMS (PF_DT(PF_FP32) | PF_ACCUM_STORAGE)
static const char *const pf_ab_faults_std[] = {"attn-bwd-no-delta", "attn-bwd-no-scale", NULL};
static const char *const pf_ab_faults_flash[] = {"attn-bwd-no-delta", "attn-bwd-lse-no-max", "attn-bwd-no-scale", NULL};
#define PF_AB_CONTRACT_TAIL                                                                                           \
  "; each output's bound follows the variant's operations with running error bounds (u |z| + sig/2 per rounding, " \
  "2 ulps per expf and logf, n 2^-52 sum |terms| per dot product), absolute, before the output's rounding; "       \
  "domain: finite inputs, every intermediate's bound within its dtype's range"

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/attention_bwd/attention_bwd_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_ab_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_attention_bwd_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_attention_bwd_cuda", (void **)&fn);
  if (st) return st;
  const pf_attn_bwd_launch L = pf_ab_launch(c);
  return fn(&L, pf_ab_heads(c), pf_round(PF_FP32, pf_attn_inv_sqrt_d(L.d)), in[0].data, in[1].data, in[2].data,
            in[3].data, out, fe);
}
#define PF_AB_RUN_CUDA pf_ab_cuda_case
#else
#define PF_AB_RUN_CUDA NULL
#endif

static const pf_kernel pf_ab_standard_k = {
    PF_KERNEL_ABI, &pf_attention_bwd_op, "standard",
    "the unfused backward from the stored S and P: dV = P^T dO, dP and dS stored, dQ = dS K, dK = dS^T Q",
    PF_AB_DTYPES, PF_AB_ACCUMS, pf_ab_faults_std,
    "P = fl_T(softmax_fp32(fl_T(s))), dP = fl_T(dO V^T), D = sum fl32(dP P), dS = fl_T(fl32(P (dP - D))), "
    "dS' = fl_T(alpha32 dS), GEMMs in A stored in T" PF_AB_CONTRACT_TAIL,
    pf_attention_bwd_cpu, pf_ab_bound, pf_ab_in_domain, pf_ab_check, PF_AB_RUN_CUDA, .algo = PF_ATTN_BWD_STANDARD};
static const pf_kernel pf_ab_flash_k = {
    PF_KERNEL_ABI, &pf_attention_bwd_op, "flash",
    "FlashAttention-2's backward: P recomputed in fp32 from the saved log-sum-exp, D = rowsum(dO o O)",
    PF_AB_DTYPES, PF_AB_ACCUMS, pf_ab_faults_flash,
    "O and L = m + log l from the blocked forward; P = fl32(exp(s - L)), dP = fl32(dO V^T), D = sum fl32(dO O) (in T with delta=storage), "
    "dS = fl32(P (dP - D)); P, dS rounded to T for dV = P^T dO, dQ = alpha dS K, dK = alpha dS^T Q" PF_AB_CONTRACT_TAIL,
    pf_attention_bwd_cpu, pf_ab_bound, pf_ab_in_domain, pf_ab_check, PF_AB_RUN_CUDA, .algo = PF_ATTN_BWD_FLASH};
static const pf_kernel pf_ab_flash_pdp_k = {
    PF_KERNEL_ABI, &pf_attention_bwd_op, "flash-pdp",
    "flash with D = rowsum(dP o P) from the recomputed fp32 P and dP (O not read)",
    PF_AB_DTYPES, PF_AB_ACCUMS, pf_ab_faults_flash,
    "as flash, with D = sum_j fl32(P dP) (in fp32, or T with delta=storage)" PF_AB_CONTRACT_TAIL,
    pf_attention_bwd_cpu, pf_ab_bound, pf_ab_in_domain, pf_ab_check, PF_AB_RUN_CUDA, .algo = PF_ATTN_BWD_FLASH_PDP};

const pf_kernel *const pf_attention_bwd_kernels[] = {&pf_ab_standard_k, &pf_ab_flash_k, &pf_ab_flash_pdp_k, NULL};
