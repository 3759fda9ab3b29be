/* RMSNorm's scalar arithmetic: each variant's sum of squares, rstd and outputs in the order of
 * its loops, every operation rounded to the dtype it is done in, beside each computed value a
 * running bound on its distance from the exact quantity (the same running error bounds as
 * LayerNorm's, kernels/layernorm/layernorm_math.h, whose helpers this uses). */
#ifndef PF_RMSNORM_MATH_H
#define PF_RMSNORM_MATH_H

#include <math.h>
#include <stddef.h>

#include "core/dtype_math.h"
#include "kernels/layernorm/layernorm_math.h"
#include "kernels/rmsnorm/rmsnorm_spec.h"

/* Fault switches (pf_rms_launch.faults). sum-in-storage: the squares summed in the storage dtype
 * whatever the accumulation (x.pow(2).mean() without the .float() that LlamaRMSNorm has);
 * 1p-in-storage: 1 + gamma formed in the storage dtype where the case holds it in fp32 weights
 * (a port of Gemma's fp32 (1 + w) that adds in bf16). */
enum { PF_RMS_F_SUM_IN_STORAGE = 1, PF_RMS_F_1P_IN_STORAGE = 2 };

typedef struct {
  size_t rows, cols;
  int algo, faults;
  pf_dtype dtype, accum, weights;
  double eps; /* a binary32 value */
  int zero_centered;
} pf_rms_launch;

/* PyTorch's fp32 sum over a contiguous row (aten/src/ATen/native/cpu/SumKernel.cpp, torch 2.15):
 * rows of 8 or more as vectors of PF_RMS_TORCH_LANES floats, fewer as scalars; the items summed
 * in four interleaved accumulators (ilp 4) through a cascade of 4 levels of 2^p items
 * (p = max(4, ceil(log2(items / 4)) / 4)), the leftovers into the first, the four added in
 * order; then the scalar tail and the lanes, in order. Measured: 8 lanes on this machine. */
#define PF_RMS_TORCH_LANES 8

/* acc[level][ilp][lane] += item, with the bound (e: |computed - exact sum so far|) */
PF_HD void pf_rms_acc_add(pf_ln_val *a, double v, double ev, unsigned *fe) {
  a->v = pf_add(PF_FP32, a->v, v, fe);
  a->e += ev + pf_ln_rerr(PF_FP32, a->v);
}

/* multi_row_sum over `size` groups of 4 items of L lanes, item t's lane l at q[t L + l]
 * (eq: its bound); out: 4 x L partial sums */
PF_HD void pf_rms_multi_row_sum(const double *q, const double *eq, size_t size, int L, pf_ln_val *out,
                                unsigned *fe) {
  enum { LV = 4, ILP = 4 };
  pf_ln_val acc[LV][ILP][PF_RMS_TORCH_LANES];
  for (int j = 0; j < LV; j++)
    for (int k = 0; k < ILP; k++)
      for (int l = 0; l < L; l++) acc[j][k][l] = (pf_ln_val){0, 0};
  int lp = 0;
  while (((size_t)1 << lp) < size) lp++; /* CeilLog2(size) */
  const int level_power = lp / LV > 4 ? lp / LV : 4;
  const size_t step = (size_t)1 << level_power, mask = step - 1;
  size_t i = 0;
  for (; i + step <= size;) {
    for (size_t j = 0; j < step; ++j, ++i)
      for (int k = 0; k < ILP; k++)
        for (int l = 0; l < L; l++) pf_rms_acc_add(&acc[0][k][l], q[(i * ILP + k) * L + l], eq[(i * ILP + k) * L + l], fe);
    for (int j = 1; j < LV; ++j) {
      for (int k = 0; k < ILP; k++)
        for (int l = 0; l < L; l++) {
          pf_rms_acc_add(&acc[j][k][l], acc[j - 1][k][l].v, acc[j - 1][k][l].e, fe);
          acc[j - 1][k][l] = (pf_ln_val){0, 0};
        }
      if ((i & (mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i)
    for (int k = 0; k < ILP; k++)
      for (int l = 0; l < L; l++) pf_rms_acc_add(&acc[0][k][l], q[(i * ILP + k) * L + l], eq[(i * ILP + k) * L + l], fe);
  for (int j = 1; j < LV; ++j)
    for (int k = 0; k < ILP; k++)
      for (int l = 0; l < L; l++) pf_rms_acc_add(&acc[0][k][l], acc[j][k][l].v, acc[j][k][l].e, fe);
  for (int k = 0; k < ILP; k++)
    for (int l = 0; l < L; l++) out[k * L + l] = acc[0][k][l];
}

/* row_sum of `items` items of L lanes: the partial sums, the leftover items into the first, the
 * four added in order; out: L lanes */
PF_HD void pf_rms_row_sum(const double *q, const double *eq, size_t items, int L, pf_ln_val *out, unsigned *fe) {
  pf_ln_val ps[4 * PF_RMS_TORCH_LANES];
  const size_t size_ilp = items / 4;
  pf_rms_multi_row_sum(q, eq, size_ilp, L, ps, fe);
  for (size_t t = size_ilp * 4; t < items; t++)
    for (int l = 0; l < L; l++) pf_rms_acc_add(&ps[l], q[t * L + l], eq[t * L + l], fe);
  for (int k = 1; k < 4; k++)
    for (int l = 0; l < L; l++) pf_rms_acc_add(&ps[l], ps[k * L + l].v, ps[k * L + l].e, fe);
  for (int l = 0; l < L; l++) out[l] = ps[l];
}

/* The sum of a row's squares q (n values, eq their bounds) by the variant: torch's cascade in
 * fp32, else in order in t. */
PF_HD pf_ln_val pf_rms_sum(int algo, pf_dtype t, const double *q, const double *eq, size_t n, unsigned *fe) {
  pf_ln_val s = {0, 0};
  if (algo != PF_RMS_TORCH) {
    for (size_t j = 0; j < n; j++) {
      s.v = pf_add(t, s.v, q[j], fe);
      s.e += eq[j] + pf_ln_rerr(t, s.v);
    }
    return s;
  }
  if (n < PF_RMS_TORCH_LANES) {
    pf_rms_row_sum(q, eq, n, 1, &s, fe);
    return s;
  }
  const size_t nv = n / PF_RMS_TORCH_LANES;
  pf_ln_val lanes[PF_RMS_TORCH_LANES];
  pf_rms_row_sum(q, eq, nv, PF_RMS_TORCH_LANES, lanes, fe);
  for (size_t j = nv * PF_RMS_TORCH_LANES; j < n; j++) pf_rms_acc_add(&s, q[j], eq[j], fe);
  for (int l = 0; l < PF_RMS_TORCH_LANES; l++) pf_rms_acc_add(&s, lanes[l].v, lanes[l].e, fe);
  return s;
}

/* rstd = 1 / sqrt(S / n + eps) in t (eps taken into t), the bound against the exact rstd */
PF_HD pf_ln_val pf_rms_rstd(pf_dtype t, pf_ln_val S, size_t n, double eps_case, unsigned *fe) {
  const double nt = pf_round(t, (double)n), en = fabs(nt - (double)n);
  const double ms = pf_div(t, S.v, nt, fe);
  const double ems = S.e / nt + (fabs(S.v) + S.e) * en / (nt * (double)n) + pf_ln_rerr(t, ms);
  const double eps = pf_round(t, eps_case);
  const double w = pf_add(t, ms, eps, fe), ew = ems + fabs(eps - eps_case) + pf_ln_rerr(t, w);
  const double den = pf_round_fe(t, sqrt(w), fe), eden = pf_ln_sqrt_err(w, ew) + pf_ln_rerr(t, den);
  pf_ln_val r;
  r.v = pf_div(t, 1.0, den, fe);
  r.e = den > eden ? eden / (den * (den - eden)) + pf_ln_rerr(t, r.v) : INFINITY;
  return r;
}

/* gamma as applied: g, or 1 + g formed in the weights' dtype (the storage dtype under the
 * fault 1p-in-storage); *e its distance from the exact 1 + g */
PF_HD double pf_rms_gamma(const pf_rms_launch *L, double g, double *e, unsigned *fe) {
  if (!L->zero_centered) {
    *e = 0;
    return g;
  }
  const pf_dtype w = L->faults & PF_RMS_F_1P_IN_STORAGE ? L->dtype : L->weights;
  const double r = pf_add(w, 1.0, g, fe);
  *e = fabs(r - (1.0 + g));
  return r;
}

/* y = fl(fl(x rstd) g') in the accumulation dtype (g' taken into it), before its rounding to the
 * storage dtype; ey its bound (that rounding excluded) */
PF_HD double pf_rms_y(const pf_rms_launch *L, double x, pf_ln_val r, double g, double *ey, unsigned *fe) {
  const pf_dtype A = L->accum;
  double eg;
  const double gg = pf_rms_gamma(L, g, &eg, fe);
  const double ga = pf_round_fe(A, gg, fe), eg2 = eg + fabs(ga - gg);
  const double p = pf_mul(A, x, r.v, fe), Ep = fabs(x) * r.e + pf_ln_rerr(A, p);
  const double y = pf_mul(A, p, ga, fe);
  *ey = fabs(ga) * Ep + (fabs(p) + Ep) * eg2 + (A == L->dtype ? 0 : pf_ln_rerr(A, y));
  return y;
}

#endif
