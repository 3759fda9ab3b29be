/* LayerNorm's scalar arithmetic: each variant's row statistics and outputs, in the order of
 * its loops, every operation rounded to the dtype it is done in (dtype_math.h), and beside each
 * computed value a running bound on its distance from the exact quantity it stands for.
 *
 * The bounds are running error bounds (Wilkinson): they are carried with the computed values
 * themselves, so that each step's rounding error is u |computed| (1 + 2u) + s/2 (u the unit
 * roundoff, s the least subnormal of the dtype it rounds to) and each step's propagated error
 * follows from the exact identity it implements (Welford's update contracts its mean's error
 * by 1 - 1/k; two-pass's variance sees its mean's error only squared: sum (x - m')^2 =
 * sum (x - m)^2 + n (m' - m)^2). A bound is infinite where a step could overflow. The
 * derivation is in docs/kernels/layernorm.md. */
#ifndef PF_LAYERNORM_MATH_H
#define PF_LAYERNORM_MATH_H

#include <math.h>
#include <stddef.h>

#include "core/dtype_math.h"
#include "kernels/layernorm/layernorm_spec.h"

/* Fault switches (pf_ln_launch.faults). unbiased: the variance divided by n - 1 (torch.var's
 * default, in a hand-written LayerNorm); eps-outside: 1 / (sqrt(var) + eps) where the case puts
 * eps inside the root; 1p-ignored: gamma used as it is where the case says zero-centred (1 +
 * gamma), a converter or kernel that misses apply_layernorm_1p. */
enum { PF_LN_F_UNBIASED = 1, PF_LN_F_EPS_OUTSIDE = 2, PF_LN_F_1P_IGNORED = 4 };

/* What a row is computed with (layernorm_cpu.c's pf_ln_launch_of). */
typedef struct {
  size_t rows, cols;
  int algo, faults;
  pf_dtype dtype, accum, weights, stats;
  double eps;          /* the case's eps (a binary32 value) */
  int zero_centered, eps_outside;
} pf_ln_launch;

/* A computed value and a bound on its distance from the exact quantity. */
typedef struct {
  double v, e;
} pf_ln_val;

/* the rounding error of a result r (already rounded) in t: |r - exact| <= u |r| (1 + 2u) + s/2;
 * infinite where r overflowed */
PF_HD double pf_ln_rerr(pf_dtype t, double r) {
  if (r - r != 0) return INFINITY;
  const pf_format f = pf_format_of(t);
  const double u = ldexp(1.0, -f.prec);
  return u * fabs(r) * (1 + 2 * u) + ldexp(1.0, f.emin - f.prec);
}

/* The lane width of PyTorch's CPU moments (ATen's RowwiseMoments, aten/src/ATen/native/cpu/
 * moments_utils.h) as torch 2.15 runs it on an x86-64 machine: vectors of 8 floats, and of 16
 * elements of fp16 or bf16 (each converted to two float vectors), in chunks of 16 vectors. */
#define PF_LN_TORCH_LANES 8
#define PF_LN_TORCH_CHUNK 16

/* Welford's update of a running (mean, M2) by x as the k-th value, in t:
 *   d = x - m, m += d / k, M2 += d (x - m_new)
 * with the compiler's contractions where `how` says (fp32 only: t is then fp32):
 * PF_LN_FMA_MEAN, ATen's vector chunk: m = fma(fl(1/k), d, m); PF_LN_FMA_M2: M2 = fma(d, x - m, M2)
 * (the vector chunk, and ATen's scalar tail as its fp16 instantiation is compiled).
 * With the bounds: the exact update m' = m (1 - 1/k) + x / k contracts m's error by 1 - 1/k;
 * M2' = M2 + (x - m)(x - m'). */
enum { PF_LN_FMA_MEAN = 1, PF_LN_FMA_M2 = 2 };
PF_HD void pf_ln_welford_step(pf_dtype t, int how, double x, double k, pf_ln_val *m, pf_ln_val *M2, unsigned *fe) {
  const double d = pf_sub(t, x, m->v, fe), rd = pf_ln_rerr(t, d);
  double mn, em;
  if (how & PF_LN_FMA_MEAN) { /* ATen's vector chunk: c = fl(1/k), m = fma(c, d, m) */
    const double ck = pf_div(t, 1.0, k, fe), rc = pf_ln_rerr(t, ck); /* k < 2^24: exact in fp32 */
    mn = pf_fma32(ck, d, m->v, fe);
    em = (1 - 1 / k) * m->e + fabs(ck) * rd + (fabs(d) + rd) * rc + pf_ln_rerr(t, mn);
  } else {
    const double kt = pf_round(t, k), q = pf_div(t, d, kt, fe);
    mn = pf_add(t, m->v, q, fe);
    /* |q - (x - m)/k| <= rd / kt + |x - m| |1/kt - 1/k| + its rounding */
    const double eq = rd / kt + (fabs(d) + rd) * fabs(kt - k) / (kt * k) + pf_ln_rerr(t, q);
    em = (1 - 1 / k) * m->e + eq + pf_ln_rerr(t, mn);
  }
  const double e2 = pf_sub(t, x, mn, fe);
  const double Ed = m->e + rd, Ee = em + pf_ln_rerr(t, e2);
  double M2n;
  const int fm2 = how & PF_LN_FMA_M2;
  if (fm2) M2n = pf_fma32(d, e2, M2->v, fe);
  else M2n = pf_add(t, M2->v, pf_mul(t, d, e2, fe), fe);
  const double ep = fabs(d) * Ee + fabs(e2) * Ed + Ed * Ee + (fm2 ? 0 : pf_ln_rerr(t, d * e2));
  M2->e = M2->e + ep + pf_ln_rerr(t, M2n);
  M2->v = M2n;
  m->v = mn;
  m->e = em;
}

/* Chan's merge of (nb, mb, M2b) into (na, ma, M2a), in fp32, as ATen's AddMomentsVec (vector:
 * m += c delta; M2 = fma(delta na, c delta, M2 + M2b)) or AddMoments (scalar: m = fma(c, delta, m);
 * M2 += fma(delta^2 c, na, M2b)), c = nb / n. Exact: m = (1 - c) ma + c mb,
 * M2 = M2a + M2b + delta^2 na nb / n. */
PF_HD void pf_ln_merge(int vec, double nb, pf_ln_val mb, pf_ln_val M2b, double *na, pf_ln_val *ma, pf_ln_val *M2a,
                       unsigned *fe) {
  const pf_dtype F = PF_FP32;
  const double n = *na + nb;
  if (n == 0) return;
  const double c = pf_div(F, nb, n, fe), rc = pf_ln_rerr(F, c), cx = nb / n;
  const double d = pf_sub(F, mb.v, ma->v, fe), rd = pf_ln_rerr(F, d), Ed = ma->e + mb.e + rd;
  double mn, em, M2n, eM;
  if (vec) {
    const double M2t = pf_add(F, M2a->v, M2b.v, fe);
    const double cd = pf_mul(F, c, d, fe), m0d = pf_mul(F, d, *na, fe);
    mn = pf_add(F, ma->v, cd, fe);
    em = (1 - cx) * ma->e + cx * mb.e + fabs(c) * rd + (fabs(d) + rd) * rc + pf_ln_rerr(F, cd) + pf_ln_rerr(F, mn);
    M2n = pf_fma32(m0d, cd, M2t, fe);
    const double Ecd = fabs(c) * Ed + (fabs(d) + Ed) * rc + pf_ln_rerr(F, cd);
    const double Em0d = *na * Ed + pf_ln_rerr(F, m0d);
    eM = M2a->e + M2b.e + pf_ln_rerr(F, M2t) + fabs(m0d) * Ecd + fabs(cd) * Em0d + Em0d * Ecd + pf_ln_rerr(F, M2n);
  } else {
    mn = pf_fma32(c, d, ma->v, fe);
    em = (1 - cx) * ma->e + cx * mb.e + fabs(c) * rd + (fabs(d) + rd) * rc + pf_ln_rerr(F, mn);
    const double dd = pf_mul(F, d, d, fe), t = pf_mul(F, dd, c, fe);
    const double Edd = 2 * fabs(d) * Ed + Ed * Ed + pf_ln_rerr(F, dd);
    const double Et = fabs(c) * Edd + (dd + Edd) * rc + pf_ln_rerr(F, t);
    const double inner = pf_fma32(t, *na, M2b.v, fe);
    M2n = pf_add(F, M2a->v, inner, fe);
    eM = M2a->e + M2b.e + *na * Et + pf_ln_rerr(F, inner) + pf_ln_rerr(F, M2n);
  }
  ma->v = mn, ma->e = em;
  M2a->v = M2n, M2a->e = eM;
  *na = n;
}

/* Chan's merge of nb values' per-lane moments into the na values' (vector merges, ATen's
 * AddMomentsVec applied lane by lane: every lane has the same counts); *na becomes na + nb. */
PF_HD void pf_ln_merge_lanes(double nb, const pf_ln_val *mb, const pf_ln_val *M2b, double *na, pf_ln_val *ma,
                             pf_ln_val *M2a, unsigned *fe) {
  for (int j = 0; j < PF_LN_TORCH_LANES; j++) {
    double n = *na;
    pf_ln_merge(1, nb, mb[j], M2b[j], &n, &ma[j], &M2a[j], fe);
  }
  *na += nb;
}

/* A row's mean and M2 (the sum of squared deviations; for moments, the raw sum of squares,
 * which pf_ln_variance turns into the variance), with their bounds, by the variant's algorithm. */
PF_HD void pf_ln_moments(const pf_ln_launch *L, const double *x, pf_ln_val *mean, pf_ln_val *M2, unsigned *fe) {
  const pf_dtype A = L->accum;
  const size_t n = L->cols;
  pf_ln_val m = {0, 0}, q = {0, 0};
  if (L->algo == PF_LN_WELFORD) {
    for (size_t k = 0; k < n; k++) pf_ln_welford_step(A, 0, x[k], (double)(k + 1), &m, &q, fe);
  } else if (L->algo == PF_LN_TWO_PASS || L->algo == PF_LN_MOMENTS) {
    pf_ln_val S = {0, 0}, Q = {0, 0};
    for (size_t k = 0; k < n; k++) {
      S.v = pf_add(A, S.v, x[k], fe);
      S.e += pf_ln_rerr(A, S.v);
    }
    const double nt = pf_round(A, (double)n), en = fabs(nt - (double)n);
    m.v = pf_div(A, S.v, nt, fe);
    m.e = S.e / nt + (fabs(S.v) + S.e) * en / (nt * (double)n) + pf_ln_rerr(A, m.v);
    if (L->algo == PF_LN_TWO_PASS) {
      /* against sum (x - m')^2 for the computed m': only the roundings; then + n (m' - m)^2 */
      for (size_t k = 0; k < n; k++) {
        const double d = pf_sub(A, x[k], m.v, fe), rd = pf_ln_rerr(A, d);
        const double sq = pf_mul(A, d, d, fe);
        Q.v = pf_add(A, Q.v, sq, fe);
        Q.e += 2 * fabs(d) * rd + rd * rd + pf_ln_rerr(A, sq) + pf_ln_rerr(A, Q.v);
      }
      Q.e += (double)n * m.e * m.e;
      q = Q;
    } else {
      /* E[x^2] - E[x]^2: M2 = n (Q/n - m^2), formed as the variance itself (below) */
      for (size_t k = 0; k < n; k++) {
        const double sq = pf_mul(A, x[k], x[k], fe);
        Q.v = pf_add(A, Q.v, sq, fe);
        Q.e += pf_ln_rerr(A, sq) + pf_ln_rerr(A, Q.v);
      }
      q = Q; /* the raw sum of squares: pf_ln_variance forms Q/n - m^2 */
    }
  } else { /* PF_LN_TORCH: ATen's RowwiseMoments, in fp32 */
    const size_t W = L->dtype == PF_FP32 ? PF_LN_TORCH_LANES : 2 * PF_LN_TORCH_LANES;
    const size_t nv = n / W, chunks = (nv + PF_LN_TORCH_CHUNK - 1) / PF_LN_TORCH_CHUNK;
    int depth = 0;
    while (((size_t)1 << depth) < chunks) depth++;
    /* the cascade's stack: depth levels (at least one) of per-lane state */
    double cnt[64];
    pf_ln_val sm[64][PF_LN_TORCH_LANES], sq[64][PF_LN_TORCH_LANES];
    for (int l = 0; l < 64; l++) {
      cnt[l] = 0;
      for (int j = 0; j < PF_LN_TORCH_LANES; j++) sm[l][j] = sq[l][j] = (pf_ln_val){0, 0};
    }
    for (size_t ch = 0; ch < chunks; ch++) {
      const size_t m0 = nv - ch * PF_LN_TORCH_CHUNK < PF_LN_TORCH_CHUNK ? nv - ch * PF_LN_TORCH_CHUNK : PF_LN_TORCH_CHUNK;
      const double *xp = x + ch * PF_LN_TORCH_CHUNK * W;
      /* fp32: one vector of 8 lanes; fp16/bf16: two halves of a 16-element vector, each
       * merged into level 0 in turn */
      for (size_t h = 0; h < W / PF_LN_TORCH_LANES; h++) {
        pf_ln_val lm[PF_LN_TORCH_LANES], lq[PF_LN_TORCH_LANES];
        for (int j = 0; j < PF_LN_TORCH_LANES; j++) {
          lm[j] = lq[j] = (pf_ln_val){0, 0};
          for (size_t v = 0; v < m0; v++)
            pf_ln_welford_step(PF_FP32, PF_LN_FMA_MEAN | PF_LN_FMA_M2, xp[v * W + h * PF_LN_TORCH_LANES + j],
                               (double)(v + 1), &lm[j], &lq[j], fe);
        }
        pf_ln_merge_lanes((double)m0, lm, lq, &cnt[0], sm[0], sq[0], fe);
      }
      size_t mask = ch + 1;
      for (int l = 1; l < depth && (mask & 1) == 0; l++) {
        pf_ln_merge_lanes(cnt[l - 1], sm[l - 1], sq[l - 1], &cnt[l], sm[l], sq[l], fe);
        for (int j = 0; j < PF_LN_TORCH_LANES; j++) sm[l - 1][j] = sq[l - 1][j] = (pf_ln_val){0, 0};
        cnt[l - 1] = 0;
        mask >>= 1;
      }
    }
    for (int l = 1; l < depth; l++) pf_ln_merge_lanes(cnt[l], sm[l], sq[l], &cnt[0], sm[0], sq[0], fe);
    /* the tail, one value at a time (m += d / k; M2 += d (x - m): contracted into an fma in the fp16
     * instantiation, not in the fp32 and bf16 ones, measured), then the lanes merged into it */
    double k = 0;
    const int tail_how = L->dtype == PF_FP16 ? PF_LN_FMA_M2 : 0;
    for (size_t i = nv * W; i < n; i++) {
      k += 1;
      pf_ln_welford_step(PF_FP32, tail_how, x[i], k, &m, &q, fe);
    }
    const double per_lane = (double)(nv * W / PF_LN_TORCH_LANES);
    for (int j = 0; j < PF_LN_TORCH_LANES; j++) pf_ln_merge(0, per_lane, sm[0][j], sq[0][j], &k, &m, &q, fe);
  }
  *mean = m;
  *M2 = q;
}

/* The variance from the row's moments: M2 / n (n - 1 under the unbiased fault); moments:
 * max(fl(Q / n) - fl(m^2), 0), a negative difference (cancellation) clamped to 0, as ATen's
 * pre-Welford kernel did. The bound is against the exact biased variance. */
PF_HD pf_ln_val pf_ln_variance(const pf_ln_launch *L, pf_ln_val m, pf_ln_val M2, unsigned *fe) {
  const pf_dtype A = L->accum;
  const double n = (double)L->cols, div = L->faults & PF_LN_F_UNBIASED && n > 1 ? n - 1 : n;
  const double nt = pf_round(A, div), en = fabs(nt - n);
  pf_ln_val v;
  if (L->algo == PF_LN_MOMENTS) {
    const double a = pf_div(A, M2.v, nt, fe);
    const double ea = M2.e / nt + (fabs(M2.v) + M2.e) * en / (nt * n) + pf_ln_rerr(A, a);
    const double sq = pf_mul(A, m.v, m.v, fe);
    const double esq = 2 * fabs(m.v) * m.e + m.e * m.e + pf_ln_rerr(A, sq);
    v.v = pf_sub(A, a, sq, fe);
    v.e = ea + esq + pf_ln_rerr(A, v.v);
    if (v.v < 0) v.v = 0; /* the exact variance is >= 0: the clamp moves it no further */
    return v;
  }
  v.v = pf_div(A, M2.v, nt, fe);
  v.e = M2.e / nt + (fabs(M2.v) + M2.e) * en / (nt * n) + pf_ln_rerr(A, v.v);
  return v;
}

/* |sqrt(a') - sqrt(a)| for |a' - a| <= e, a' the computed value >= 0 */
PF_HD double pf_ln_sqrt_err(double a, double e) {
  const double r = sqrt(e);
  return a > 0 && e / sqrt(a) < r ? e / sqrt(a) : r;
}

/* rstd = 1 / sqrt(var + eps), or 1 / (sqrt(var) + eps), in the accumulation dtype (eps held
 * there: fp32's value of the case rounded to it) */
PF_HD pf_ln_val pf_ln_rstd(const pf_ln_launch *L, pf_ln_val var, unsigned *fe) {
  const pf_dtype A = L->accum;
  const double eps = pf_round(A, L->eps), eeps = fabs(eps - L->eps);
  const int outside = L->eps_outside || (L->faults & PF_LN_F_EPS_OUTSIDE);
  double den, eden;
  if (outside) {
    const double s = pf_round_fe(A, sqrt(var.v), fe);
    const double es = pf_ln_sqrt_err(var.v, var.e) + pf_ln_rerr(A, s);
    den = pf_add(A, s, eps, fe);
    eden = es + eeps + pf_ln_rerr(A, den);
  } else {
    const double w = pf_add(A, var.v, eps, fe);
    const double ew = var.e + eeps + pf_ln_rerr(A, w);
    den = pf_round_fe(A, sqrt(w), fe);
    eden = pf_ln_sqrt_err(w, ew) + pf_ln_rerr(A, den);
  }
  pf_ln_val r;
  r.v = pf_div(A, 1.0, den, fe);
  r.e = den > eden ? eden / (den * (den - eden)) + pf_ln_rerr(A, r.v) : INFINITY;
  return r;
}

/* gamma as the kernel applies it: g, or with a zero-centred gamma 1 + g computed in the weights'
 * dtype (Megatron's `weight + 1`); *e: its distance from the exact g' */
PF_HD double pf_ln_gamma(const pf_ln_launch *L, double g, double *e, unsigned *fe) {
  if (!L->zero_centered || (L->faults & PF_LN_F_1P_IGNORED)) {
    *e = 0;
    return g;
  }
  const double r = pf_add(L->weights, 1.0, g, fe);
  *e = fabs(r - (1.0 + g)); /* 1 + g is exact in binary64 */
  return r;
}

/* One output y[i, j] before its rounding to the storage dtype (rounded: the value stored), and
 * the bound on its distance from the exact y (the final rounding excluded). */
PF_HD double pf_ln_y(const pf_ln_launch *L, double x, pf_ln_val m, pf_ln_val r, double g, double b, double *ey,
                     unsigned *fe) {
  const pf_dtype A = L->accum;
  double eg;
  const double gg = pf_ln_gamma(L, g, &eg, fe);
  if (L->algo == PF_LN_TORCH && L->dtype == PF_FP32) {
    /* ATen, fp32: y = fma((x - mean) rstd, gamma, beta) */
    const double d = pf_sub(A, x, m.v, fe), Ed = m.e + pf_ln_rerr(A, d);
    const double p = pf_mul(A, d, r.v, fe), Ep = fabs(d) * r.e + (fabs(r.v) + r.e) * Ed + pf_ln_rerr(A, p);
    const double y = pf_fma32(p, gg, b, fe);
    *ey = fabs(gg) * Ep + (fabs(p) + Ep) * eg; /* the fma's rounding is the output's */
    return y;
  }
  if (L->algo == PF_LN_TORCH) {
    /* ATen, fp16/bf16 (in fp32): scale = rstd, bias = -rstd mean; y = fma(fma(x, scale, bias), gamma, beta) */
    const double bias = pf_mul(A, -r.v, m.v, fe);
    const double Eb = fabs(r.v) * m.e + (fabs(m.v) + m.e) * r.e + pf_ln_rerr(A, bias);
    const double t = pf_fma32(x, r.v, bias, fe), Et = fabs(x) * r.e + Eb + pf_ln_rerr(A, t);
    const double y = pf_fma32(t, gg, b, fe);
    *ey = fabs(gg) * Et + (fabs(t) + Et) * eg + pf_ln_rerr(A, y);
    return y;
  }
  /* y = fl(fl(fl(x - mean) rstd) g') + beta, g' and beta taken into the accumulation dtype */
  const double ga = pf_round_fe(A, gg, fe), ba = pf_round_fe(A, b, fe);
  const double eg2 = eg + fabs(ga - gg), eb = fabs(ba - b);
  const double d = pf_sub(A, x, m.v, fe), Ed = m.e + pf_ln_rerr(A, d);
  const double p = pf_mul(A, d, r.v, fe), Ep = fabs(d) * r.e + (fabs(r.v) + r.e) * Ed + pf_ln_rerr(A, p);
  const double q = pf_mul(A, p, ga, fe), Eq = fabs(ga) * Ep + (fabs(p) + Ep) * eg2 + pf_ln_rerr(A, q);
  const double y = pf_add(A, q, ba, fe);
  *ey = Eq + eb + (A == L->dtype ? 0 : pf_ln_rerr(A, y));
  return y;
}

#endif
