/* RMSNorm backward's scalar arithmetic: each variant's dx and dgamma in the order of its loops,
 * every operation rounded to the dtype it is done in, beside each computed value a running bound
 * on its distance from the exact quantity it stands for (the forward's statistics from
 * rmsnorm_math.h, the value-and-bound operations of layernorm_bwd_math.h). The derivation is in
 * docs/kernels/rmsnorm_bwd.md. */
#ifndef PF_RMSNORM_BWD_MATH_H
#define PF_RMSNORM_BWD_MATH_H

#include <math.h>
#include <stddef.h>

#include "core/dtype_math.h"
#include "kernels/layernorm_bwd/layernorm_bwd_math.h"
#include "kernels/rmsnorm/rmsnorm_math.h"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd_spec.h"

/* Fault switches (pf_rmsb_launch.faults). var-dropped: dx without the rstd term (-xhat (1/n)
 * sum a xhat: rstd treated as a constant); 1p-ignored: gamma used as it is where the case says
 * zero-centred; partials-in-storage: dgamma's per-block sums in the storage dtype where the
 * case accumulates in fp32 (a kernel that forgets its fp32 partials). */
enum { PF_RMSB_F_VAR_DROPPED = 1, PF_RMSB_F_1P_IGNORED = 2, PF_RMSB_F_PARTIALS_IN_STORAGE = 4 };

/* What a case is computed with (rmsnorm_bwd_cpu.c's pf_rmsb_launch_of). */
typedef struct {
  pf_rms_launch fwd; /* the statistics as the forward computed them */
  size_t rows, cols, blocks;
  int algo, faults;
  pf_dtype dtype, accum, weights;
  pf_dtype red; /* the dtype dgamma's per-block sums are held in */
} pf_rmsb_launch;

/* a / n in t, n a positive integer (its rounding to t included) */
PF_HD pf_ln_val pf_rmsb_div_n(pf_dtype t, pf_ln_val a, size_t n, unsigned *fe) {
  const double nt = pf_round(t, (double)n), en = fabs(nt - (double)n);
  const double q = pf_div(t, a.v, nt, fe);
  return (pf_ln_val){q, a.e / nt + (fabs(a.v) + a.e) * en / (nt * (double)n) + pf_ln_rerr(t, q)};
}

/* A row's rstd as the forward computed it (rmsnorm_math.h's sum of squares and rstd, in the
 * forward's accumulation dtype); q, eq: n doubles each to work in. */
PF_HD pf_ln_val pf_rmsb_rstd(const pf_rmsb_launch *L, const double *x, double *q, double *eq, unsigned *fe) {
  const pf_dtype t = L->fwd.accum;
  for (size_t j = 0; j < L->cols; j++) {
    q[j] = pf_mul(t, x[j], x[j], fe);
    eq[j] = pf_ln_rerr(t, q[j]);
  }
  return pf_rms_rstd(t, pf_rms_sum(L->fwd.algo, t, q, eq, L->cols, fe), L->cols, L->fwd.eps, fe);
}

/* g' as the backward applies it: g, or 1 + g formed in the weights' dtype (zero-centred) */
PF_HD pf_ln_val pf_rmsb_gamma(const pf_rmsb_launch *L, double g, unsigned *fe) {
  if (!L->fwd.zero_centered || (L->faults & PF_RMSB_F_1P_IGNORED)) return pf_lnb_exact(g);
  const double r = pf_add(L->weights, 1.0, g, fe);
  return (pf_ln_val){r, fabs(r - (1.0 + g))};
}

/* ---- fused: one row ----------------------------------------------------------------------------
 * A fused backward's row in the accumulation dtype A (apex's and Transformer Engine's RMSNorm
 * backward, the LayerNorm kernel without its mean): rstd as the forward (squares summed in
 * order), xhat_j = fl(x_j rstd), a_j = fl(g'_j dy_j), s2 = sum fl(a_j xhat_j) in order, then
 * dx_j = fl(fl(fl(1/n) rstd) fl(fl(n a_j) - fl(xhat_j s2))). xh[j] gets xhat_j (dgamma's factor);
 * dx[j] the value before its rounding to the storage dtype; w: 2 n doubles to work in. */
PF_HD pf_ln_val pf_rmsb_fused_row(const pf_rmsb_launch *L, const double *x, const double *dy, const double *g,
                                  pf_ln_val *xh, pf_ln_val *dx, double *w, unsigned *fe) {
  const pf_dtype A = L->accum;
  const size_t n = L->cols;
  const pf_ln_val r = pf_rmsb_rstd(L, x, w, w + n, fe);
  pf_ln_val s2 = {0, 0};
  for (size_t j = 0; j < n; j++) {
    xh[j] = pf_lnb_mul(A, pf_lnb_exact(x[j]), r, fe);
    dx[j] = pf_lnb_mul(A, pf_lnb_round(A, pf_rmsb_gamma(L, g[j], fe), fe), pf_lnb_exact(dy[j]), fe); /* a_j */
    s2 = pf_lnb_add(A, s2, pf_lnb_mul(A, dx[j], xh[j], fe), fe);
  }
  const double nt = pf_round(A, (double)n), inv = pf_div(A, 1.0, nt, fe);
  const pf_ln_val ninv = {inv, fabs(inv - 1.0 / (double)n)}, nv = {nt, fabs(nt - (double)n)};
  const pf_ln_val term = pf_lnb_mul(A, ninv, r, fe);
  for (size_t j = 0; j < n; j++) {
    pf_ln_val t = pf_lnb_mul(A, nv, dx[j], fe);
    if (!(L->faults & PF_RMSB_F_VAR_DROPPED)) t = pf_lnb_sub(A, t, pf_lnb_mul(A, xh[j], s2, fe), fe);
    dx[j] = pf_lnb_mul(A, term, t, fe);
  }
  return r;
}

/* ---- torch: one row ----------------------------------------------------------------------------
 * Autograd through PyTorch's F.rms_norm composite (torch 2.15, CPU; every tensor fp32 after the
 * forward's x.float()): with g = dy in fp32, r = rstd,
 *   gt_j = fl(g_j w_j)                          mul's backward (w taken to fp32)
 *   gr = sum_j fl(gt_j x_j)                     mul's backward to r, ATen's fp32 row sum
 *   p1_j = fl(gt_j r)                           mul's backward to x
 *   G = fl(-0.5 fl(gr fl(fl(r r) r)))           rsqrt's backward: -0.5 grad r^3 (pow 3 = r r r)
 *   p2_j = fl(fl(G / n) fl(2 x_j))              mean's and pow(2)'s backward
 *   dx_j = fl(p1_j + p2_j), then to the storage dtype
 * (measured op by op under a TorchDispatchMode, and bit for bit; docs/kernels/rmsnorm_bwd.md).
 * q, eq: n doubles each to work in. Returns rstd (dgamma's factor). */
PF_HD pf_ln_val pf_rmsb_torch_row(const pf_rmsb_launch *L, const double *x, const double *dy, const double *g,
                                  pf_ln_val *dx, double *q, double *eq, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  const size_t n = L->cols;
  const pf_ln_val r = pf_rmsb_rstd(L, x, q, eq, fe);
  for (size_t j = 0; j < n; j++) {
    dx[j] = pf_lnb_mul(F, pf_lnb_exact(dy[j]), pf_lnb_exact(g[j]), fe); /* gt_j */
    const pf_ln_val t = pf_lnb_mul(F, dx[j], pf_lnb_exact(x[j]), fe);
    q[j] = t.v, eq[j] = t.e;
  }
  const pf_ln_val gr = pf_rms_sum(PF_RMS_TORCH, F, q, eq, n, fe);
  const pf_ln_val r3 = pf_lnb_mul(F, pf_lnb_mul(F, r, r, fe), r, fe);
  const pf_ln_val G = pf_lnb_mul(F, pf_lnb_exact(-0.5), pf_lnb_mul(F, gr, r3, fe), fe);
  const pf_ln_val gm = pf_rmsb_div_n(F, G, n, fe);
  for (size_t j = 0; j < n; j++) {
    const pf_ln_val p1 = pf_lnb_mul(F, dx[j], r, fe);
    const pf_ln_val p2 = pf_lnb_mul(F, gm, pf_lnb_exact(pf_mul(F, 2.0, x[j], fe)), fe);
    dx[j] = (L->faults & PF_RMSB_F_VAR_DROPPED) ? p1 : pf_lnb_add(F, p1, p2, fe);
  }
  return r;
}

#endif
