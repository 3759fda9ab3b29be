/* LayerNorm backward's scalar arithmetic: each variant's dx, dgamma and dbeta in the order of its
 * loops, every operation rounded to the dtype it is done in (dtype_math.h), and beside each
 * computed value a running bound on its distance from the exact quantity it stands for (the
 * forward's pf_ln_val, layernorm_math.h, whose statistics this family recomputes as the forward
 * kernel saved them).
 *
 * The bounds are running error bounds: a product of computed a, b (off the exact A, B by ea, eb)
 * is off A B by |a| eb + |b| ea + ea eb plus its own rounding, a sum by the sum of its operands'
 * bounds plus its rounding (pf_ln_rerr). The derivation, per variant, is in
 * docs/kernels/layernorm_bwd.md. */
#ifndef PF_LAYERNORM_BWD_MATH_H
#define PF_LAYERNORM_BWD_MATH_H

#include <math.h>
#include <stddef.h>

#include "core/dtype_math.h"
#include "kernels/layernorm/layernorm_math.h"
#include "kernels/layernorm_bwd/layernorm_bwd_spec.h"

/* Fault switches (pf_lnb_launch.faults). mean-dropped: dx without the mean's term (the
 * -(1/n) sum a_k of a hand-written backward that treats the mean as a constant); var-dropped:
 * dx without the variance's term (rstd treated as a constant: the -xhat (1/n) sum a xhat goes);
 * 1p-ignored: gamma used as it is where the case says zero-centred (1 + gamma), a backward that
 * misses apply_layernorm_1p while its forward has it. */
enum { PF_LNB_F_MEAN_DROPPED = 1, PF_LNB_F_VAR_DROPPED = 2, PF_LNB_F_1P_IGNORED = 4 };

/* What a case is computed with (layernorm_bwd_cpu.c's pf_lnb_launch_of). */
typedef struct {
  pf_ln_launch fwd; /* the statistics as the forward kernel computed and saved them */
  size_t rows, cols, blocks;
  int algo, faults;
  pf_dtype dtype, accum, weights;
  pf_dtype red; /* the dtype dgamma's and dbeta's per-block sums are held in */
} pf_lnb_launch;

/* Rows [*begin, *end) of block t of the token reduction (LayerNorm's and RMSNorm's backward): blocks contiguous runs of ceil(rows / b)
 * rows, b = min(blocks, rows) (ATen's parallel_for over the rows; a CUDA kernel's thread blocks
 * over the tokens); a block past the rows is empty. */
PF_HD void pf_lnb_block_rows(size_t rows, size_t blocks, size_t t, size_t *begin, size_t *end) {
  const size_t b = blocks < rows ? blocks : rows;
  const size_t ch = b ? (rows + b - 1) / b : 0;
  *begin = t * ch < rows ? t * ch : rows;
  *end = (t + 1) * ch < rows ? (t + 1) * ch : rows;
}

/* ---- values with their bounds --------------------------------------------------------------- */
PF_HD pf_ln_val pf_lnb_exact(double v) { return (pf_ln_val){v, 0}; }
PF_HD pf_ln_val pf_lnb_neg(pf_ln_val a) { return (pf_ln_val){-a.v, a.e}; }
/* a rounded to t (a value already computed, off by a.e) */
PF_HD pf_ln_val pf_lnb_round(pf_dtype t, pf_ln_val a, unsigned *fe) {
  const double r = pf_round_fe(t, a.v, fe);
  return (pf_ln_val){r, a.e + (r == a.v ? 0 : pf_ln_rerr(t, r))};
}
PF_HD pf_ln_val pf_lnb_add(pf_dtype t, pf_ln_val a, pf_ln_val b, unsigned *fe) {
  const double r = pf_add(t, a.v, b.v, fe);
  return (pf_ln_val){r, a.e + b.e + pf_ln_rerr(t, r)};
}
PF_HD pf_ln_val pf_lnb_sub(pf_dtype t, pf_ln_val a, pf_ln_val b, unsigned *fe) {
  return pf_lnb_add(t, a, pf_lnb_neg(b), fe);
}
PF_HD double pf_lnb_prod_err(pf_ln_val a, pf_ln_val b) { return fabs(a.v) * b.e + fabs(b.v) * a.e + a.e * b.e; }
PF_HD pf_ln_val pf_lnb_mul(pf_dtype t, pf_ln_val a, pf_ln_val b, unsigned *fe) {
  const double r = pf_mul(t, a.v, b.v, fe);
  return (pf_ln_val){r, pf_lnb_prod_err(a, b) + pf_ln_rerr(t, r)};
}
/* fma in fp32, rounded once */
PF_HD pf_ln_val pf_lnb_fma(pf_ln_val a, pf_ln_val b, pf_ln_val c, unsigned *fe) {
  const double r = pf_fma32(a.v, b.v, c.v, fe);
  return (pf_ln_val){r, pf_lnb_prod_err(a, b) + c.e + pf_ln_rerr(PF_FP32, r)};
}

/* A row's statistics as the forward saved them (rounded to its stats dtype), with their bounds
 * against the exact mean and rstd. */
PF_HD void pf_lnb_stats(const pf_lnb_launch *L, const double *x, pf_ln_val *mean, pf_ln_val *rstd, unsigned *fe) {
  pf_ln_val m, M2;
  pf_ln_moments(&L->fwd, x, &m, &M2, fe);
  const pf_ln_val r = pf_ln_rstd(&L->fwd, pf_ln_variance(&L->fwd, m, M2, fe), fe);
  *mean = pf_lnb_round(L->fwd.stats, m, fe);
  *rstd = pf_lnb_round(L->fwd.stats, r, fe);
}

/* gamma as the backward applies it: g, or 1 + g formed in the weights' dtype (zero-centred) */
PF_HD pf_ln_val pf_lnb_gamma(const pf_lnb_launch *L, double g, unsigned *fe) {
  if (!L->fwd.zero_centered || (L->faults & PF_LNB_F_1P_IGNORED)) return pf_lnb_exact(g);
  const double r = pf_add(L->weights, 1.0, g, fe);
  return (pf_ln_val){r, fabs(r - (1.0 + g))};
}

/* ---- fused: one row ----------------------------------------------------------------------------
 * A fused CUDA backward's row (apex's cuComputeGradInput, Megatron's and Transformer Engine's
 * LayerNorm backward, in the accumulation dtype A): the statistics by Welford (as the forward),
 * xhat_j = fl(fl(x_j - mean) rstd), a_j = fl(g'_j dy_j), s1 = sum a_j and s2 = sum fl(a_j xhat_j)
 * in order, then dx_j = fl(fl(fl(1/n) rstd) fl(fl(fl(n a_j) - s1) - fl(xhat_j s2))). xh[j] gets
 * xhat_j (dgamma's factor); dx[j] the value before its rounding to the storage dtype. */
PF_HD void pf_lnb_fused_row(const pf_lnb_launch *L, const double *x, const double *dy, const double *g,
                            pf_ln_val *xh, pf_ln_val *dx, unsigned *fe) {
  const pf_dtype A = L->accum;
  const size_t n = L->cols;
  pf_ln_val m, r;
  pf_lnb_stats(L, x, &m, &r, fe);
  pf_ln_val s1 = {0, 0}, s2 = {0, 0};
  for (size_t j = 0; j < n; j++) {
    xh[j] = pf_lnb_mul(A, pf_lnb_sub(A, pf_lnb_exact(x[j]), m, fe), r, fe);
    const pf_ln_val a = pf_lnb_mul(A, pf_lnb_round(A, pf_lnb_gamma(L, g[j], fe), fe), pf_lnb_exact(dy[j]), fe);
    dx[j] = a; /* kept for the second loop */
    s1 = pf_lnb_add(A, s1, a, fe);
    s2 = pf_lnb_add(A, s2, pf_lnb_mul(A, a, xh[j], fe), fe);
  }
  const double nt = pf_round(A, (double)n), inv = pf_div(A, 1.0, nt, fe);
  const pf_ln_val ninv = {inv, fabs(inv - 1.0 / (double)n)}; /* 1/n as held in A */
  const pf_ln_val nv = {nt, fabs(nt - (double)n)};
  const pf_ln_val term = pf_lnb_mul(A, ninv, r, fe);
  for (size_t j = 0; j < n; j++) {
    pf_ln_val t = pf_lnb_mul(A, nv, dx[j], fe);
    if (!(L->faults & PF_LNB_F_MEAN_DROPPED)) t = pf_lnb_sub(A, t, s1, fe);
    if (!(L->faults & PF_LNB_F_VAR_DROPPED)) t = pf_lnb_sub(A, t, pf_lnb_mul(A, xh[j], s2, fe), fe);
    dx[j] = pf_lnb_mul(A, term, t, fe);
  }
}

/* ---- torch: one row ----------------------------------------------------------------------------
 * ATen's CPU backward (aten/src/ATen/native/cpu/layer_norm_kernel.cpp, torch 2.15), in fp32:
 *   ds = sum dy x g, db = sum dy g by vector lanes (below); with a = rstd, scale = fl(1/n),
 *   b = fl(fl(fl(fl(fma(db, mean, -ds) a) a) a) scale), c = fma(-b, mean, -fl(fl(db a) scale)),
 *   dx_j = fl(fma(b, x_j, fl(fl(a dy_j) g_j)) + c)
 * (the compiler's contractions measured against torch 2.15's build; docs/kernels/layernorm_bwd.md). */

/* ATen's vector reduction's final tree over 8 fp32 lanes (vec_reduce_all, AVX2: a 128-bit swap,
 * then shuffles 0x4E and 0xB1): ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)) */
PF_HD pf_ln_val pf_lnb_tree8(const pf_ln_val *v, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  const pf_ln_val a = pf_lnb_add(F, pf_lnb_add(F, v[0], v[4], fe), pf_lnb_add(F, v[2], v[6], fe), fe);
  const pf_ln_val b = pf_lnb_add(F, pf_lnb_add(F, v[1], v[5], fe), pf_lnb_add(F, v[3], v[7], fe), fe);
  return pf_lnb_add(F, a, b, fe);
}

/* How ATen's build adds a product into a lane (pf_lnb_torch_sum's how): by a fused multiply-add
 * in the vector loop, in the last partial vector (and the second half of a row under 16), and
 * whether a row between 8 and 16 ends in the tree. GCC contracts an add of a product used
 * nowhere else; which adds it contracted was measured on torch 2.15 (docs/kernels/layernorm_bwd.md). */
enum { PF_LNB_FMA_LOOP = 1, PF_LNB_FMA_TAIL = 2, PF_LNB_SMALL_TREE = 4 };

/* sum_j p_j q_j as ATen's map2/map3_reduce_all adds it in fp32 (W = 8: fp32 rows, one vector of 8
 * lanes; W = 16: fp16 and bf16 rows, a vector of 16 converted to two float halves, each its own
 * 8 accumulators, the halves added lane by lane at the end): lane l accumulates the terms
 * l, l + W, ...; the last partial vector's terms go into the first lanes; the lanes end in the
 * tree. Rows shorter than W: the terms in order (for 8 < n < 16, the second half added onto the
 * first lanes, then the 8 lanes by the tree or in order). */
PF_HD pf_ln_val pf_lnb_torch_sum(const pf_ln_val *p, const pf_ln_val *q, size_t n, size_t W, int how, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  pf_ln_val acc[16] = {{0, 0}};
#define PF_LNB_ACC(l, k, fused) \
  (acc[l] = (fused) ? pf_lnb_fma(p[k], q[k], acc[l], fe) : pf_lnb_add(F, acc[l], pf_lnb_mul(F, p[k], q[k], fe), fe))
  if (n < W) {
    if (W == 16 && n > 8) {
      for (size_t l = 0; l < 8; l++) acc[l] = pf_lnb_mul(F, p[l], q[l], fe);
      for (size_t l = 0; l + 8 < n; l++) PF_LNB_ACC(l, 8 + l, how & PF_LNB_FMA_TAIL);
      if (how & PF_LNB_SMALL_TREE) return pf_lnb_tree8(acc, fe);
      n = 8;
    } else {
      for (size_t l = 0; l < n; l++) acc[l] = pf_lnb_mul(F, p[l], q[l], fe);
    }
    pf_ln_val s = acc[0];
    for (size_t l = 1; l < n; l++) s = pf_lnb_add(F, s, acc[l], fe);
    return s;
  }
  for (size_t l = 0; l < W; l++) acc[l] = pf_lnb_mul(F, p[l], q[l], fe);
  size_t d = W;
  for (; d < n - n % W; d += W)
    for (size_t l = 0; l < W; l++) PF_LNB_ACC(l, d + l, how & PF_LNB_FMA_LOOP);
  for (size_t l = 0; d + l < n; l++) PF_LNB_ACC(l, d + l, how & PF_LNB_FMA_TAIL);
#undef PF_LNB_ACC
  if (W == 16)
    for (size_t l = 0; l < 8; l++) acc[l] = pf_lnb_add(F, acc[l], acc[8 + l], fe);
  return pf_lnb_tree8(acc, fe);
}

/* One row of ATen's backward: dx[j] before its rounding to the storage dtype; mean and rstd as
 * saved (for dgamma's update). P and Q: n values each to work in. Three paths:
 *   fp32 rows: map3_reduce_all's fl(dy x) g and map2_reduce_all's dy g, contracted in the tail;
 *   fp16/bf16 rows, weights of their dtype: the same products, contracted in the loop and tail;
 *   fp16/bf16 rows, fp32 weights: the kernel's own loop, ds = x fl(dy g) contracted, db = dy g
 *   not (the product feeds ds too), rows between 8 and 16 summed by the tree. */
PF_HD void pf_lnb_torch_row(const pf_lnb_launch *L, const double *x, const double *dy, const double *g, pf_ln_val *P,
                            pf_ln_val *Q, pf_ln_val *dx, pf_ln_val *mean, pf_ln_val *rstd, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  const size_t n = L->cols, W = L->dtype == PF_FP32 ? 8 : 16;
  const int mixed = W == 16 && L->weights == PF_FP32;
  const int fused = PF_LNB_FMA_LOOP | PF_LNB_FMA_TAIL;
  const int how_ds = W == 8 ? PF_LNB_FMA_TAIL : mixed ? fused | PF_LNB_SMALL_TREE : fused;
  const int how_db = W == 8 ? PF_LNB_FMA_TAIL : mixed ? PF_LNB_SMALL_TREE : fused;
  pf_ln_val m, a;
  pf_lnb_stats(L, x, &m, &a, fe);
  *mean = m, *rstd = a;
  for (size_t j = 0; j < n; j++) {
    P[j] = mixed ? pf_lnb_exact(x[j]) : pf_lnb_mul(F, pf_lnb_exact(dy[j]), pf_lnb_exact(x[j]), fe);
    Q[j] = mixed ? pf_lnb_mul(F, pf_lnb_exact(dy[j]), pf_lnb_exact(g[j]), fe) : pf_lnb_exact(g[j]);
  }
  const pf_ln_val ds = pf_lnb_torch_sum(P, Q, n, W, how_ds, fe);
  for (size_t j = 0; j < n; j++) P[j] = pf_lnb_exact(dy[j]), Q[j] = pf_lnb_exact(g[j]);
  const pf_ln_val db = pf_lnb_torch_sum(P, Q, n, W, how_db, fe);
  const double sc = pf_div(F, 1.0, (double)n, fe); /* n < 2^24: exact in fp32 */
  const pf_ln_val scale = {sc, fabs(sc - 1.0 / (double)n)};
  pf_ln_val b = pf_lnb_fma(db, m, pf_lnb_neg(ds), fe);
  b = pf_lnb_mul(F, pf_lnb_mul(F, pf_lnb_mul(F, pf_lnb_mul(F, b, a, fe), a, fe), a, fe), scale, fe);
  if (L->faults & PF_LNB_F_VAR_DROPPED) b.v = 0;
  pf_ln_val c = (L->faults & PF_LNB_F_MEAN_DROPPED)
                    ? pf_lnb_mul(F, pf_lnb_neg(b), m, fe)
                    : pf_lnb_fma(pf_lnb_neg(b), m, pf_lnb_neg(pf_lnb_mul(F, pf_lnb_mul(F, db, a, fe), scale, fe)), fe);
  for (size_t j = 0; j < n; j++) {
    const pf_ln_val ag = pf_lnb_mul(F, pf_lnb_mul(F, a, pf_lnb_exact(dy[j]), fe), pf_lnb_exact(g[j]), fe);
    dx[j] = pf_lnb_add(F, pf_lnb_fma(b, pf_lnb_exact(x[j]), ag, fe), c, fe);
  }
}

#endif
