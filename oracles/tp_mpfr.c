/* The TP differential's oracle: for every step and element, the set of master, parameter, m
 * and v values that a correct run may produce, whatever the tensor-parallel layout.
 *
 * The configurations share every elementwise operation bit for bit (both hold a tied weight
 * on two pipeline stages and add its two gradient buffers alike); they differ in the order the
 * squared norm is summed (per-tensor partial sums on each rank, the all-reduce) and, when the
 * second run has two data-parallel replicas, in the order of the gradient buffers' sums
 * ((g1 + g2) + (g3 + g4) against ((g1 + g2) + g3) + g4). So the set is built from:
 * 1. the gradients: the fp32 buffers of each run (pf_tp_buffers: one value each per run);
 * 2. the exact squared norm of the norm set (MPFR, 1024 bits: exact for sums of fp32 squares)
 *    of each run's buffers, the smaller and the larger widened by the proven bound of fp32
 *    summation in any order:
 *    every term passes through at most K roundings, K = the largest tensor + 21 or more (the
 *    square, the per-tensor norm and its square, 14 tensors, 4 ranks of a replica; see K
 *    below for each framework's count), so the computed sum lies in
 *    [S (1 - u)^K - a, S (1 + u)^K + a], u = 2^-24, a = (n + 64) 2^-148 for underflow;
 * 3. the fp32 norm and coefficient: fl(sqrt(.)) and fl(max_norm / fl(norm + 1e-6)) round
 *    monotonically, so their values at the ends of that range bound every computed one;
 *    clipping is certain below 1, absent at or above, and both are allowed in between; the
 *    clipped gradient fl(g c) is monotone in g and in c: its set is spanned by both runs'
 *    buffers at both ends of the coefficient;
 * 4. FusedAdam in fp32 on intervals: each operation (fl of +, -, *, /, sqrt) is monotone in
 *    each argument, so evaluating the step at the right ends of the argument intervals (the
 *    corners, where signs may vary) bounds every value a correct run can reach; the state
 *    intervals carry over the steps; the parameter is the dtype's rounding of the master's.
 * No tolerance: a value outside its set was produced by no summation order of the norm.
 *
 * The fp32 operations are the machine's own float operations (IEEE binary32, round to nearest
 * even, gradual underflow; FLT_EVAL_METHOD 0 keeps them in float and -ffp-contract=off keeps
 * them apart). The squared norm's fast path (Ziv): the sum of the squares as a compensated
 * double word (clip_fast.c's bound), times the factors, enclosed, and taken when both ends of
 * the enclosure give the same fp32 ends of the range; otherwise MPFR as above. */
#include "oracles/tp_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "kernels/adam/adam_spec.h"
#include "core/kernel.h"
#include "kernels/tp_diff/tp_diff_spec.h"
#include "oracles/dd.h"
#include "oracles/oracle_util.h"

#include <float.h>
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the TP oracle needs float operations evaluated in float"
#endif

/* fp32 arithmetic on fp32 values (doubles holding them) */
static inline double f32_add(double a, double b) { return (double)((float)a + (float)b); }
static inline double f32_sub(double a, double b) { return (double)((float)a - (float)b); }
static inline double f32_mul(double a, double b) { return (double)((float)a * (float)b); }
static inline double f32_div(double a, double b) { return (double)((float)a / (float)b); }
static inline double f32_sqrt(double a) { return (double)sqrtf((float)a); }
static inline double f32_fma(double a, double b, double c) { return (double)fmaf((float)a, (float)b, (float)c); }
/* The ends of a faithful fp32 square root of a (nonnegative fp32): PyTorch's CPU sqrt (MKL's
 * vsSqrt) is not correctly rounded: measured on 10^7 random operands, 0.58% of its results are
 * the other neighbour of the exact root. r r is exact in binary64. */
static inline double f32_sqrt_down(double a) {
  const float r = sqrtf((float)a);
  return (double)r * (double)r > a ? (double)nextafterf(r, 0.0f) : (double)r;
}
static inline double f32_sqrt_up(double a) {
  const float r = sqrtf((float)a);
  return (double)r * (double)r < a ? (double)nextafterf(r, INFINITY) : (double)r;
}

/* the fp32 values just above / below x */
static double pf_up32(double x) {
  const float r = (float)x;
  return (double)r < x ? (double)nextafterf(r, INFINITY) : (double)r;
}
static double pf_down32(double x) {
  const float r = (float)x;
  return (double)r > x ? (double)nextafterf(r, -INFINITY) : (double)r;
}
/* the smallest and largest of four, NaN if any is (then which NaN does not matter: every
 * undefined output is written as NAN); without branches, which the data would mispredict */
static inline int pf_any_nan4(const double v[4]) {
  return (v[0] != v[0]) | (v[1] != v[1]) | (v[2] != v[2]) | (v[3] != v[3]);
}
static inline double pf_min4(const double v[4]) {
  const double a = v[1] < v[0] ? v[1] : v[0], b = v[3] < v[2] ? v[3] : v[2];
  return pf_any_nan4(v) ? NAN : b < a ? b : a;
}
static inline double pf_max4(const double v[4]) {
  const double a = v[1] > v[0] ? v[1] : v[0], b = v[3] > v[2] ? v[3] : v[2];
  return pf_any_nan4(v) ? NAN : b > a ? b : a;
}
/* the smaller and larger of two, NaN if either is */
static double pf_min2(double a, double b) { return b < a || isnan(b) ? b : a; }
static double pf_max2(double a, double b) { return b > a || isnan(b) ? b : a; }
/* the low end of the squared norm's range from its binary64 value (rounded down) */
static double pf_tp_sum_lo(double x) { return x < 0 ? 0 : pf_up32(x); }

/* x (positive, 1024 bits) as a double word, within 2^-106 of it; t: scratch */
static pf_dd pf_mpfr_to_dd(mpfr_srcptr x, mpfr_ptr t) {
  const double hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(t, x, hi, MPFR_RNDN);
  return (pf_dd){hi, mpfr_get_d(t, MPFR_RNDN)};
}
/* RD and RU to binary64 of a double word (hi = RN(hi + lo)) */
static double pf_dd_down(pf_dd x) { return x.lo < 0 ? nextafter(x.hi, -INFINITY) : x.hi; }
static double pf_dd_up(pf_dd x) { return x.lo > 0 ? nextafter(x.hi, INFINITY) : x.hi; }

/* Step 2's range [sum_lo, sum_hi] by the fast path: 1 when both ends are decided (the values
 * MPFR gives), 0 to leave them to MPFR. g: the gradients, whose squares sum to S; flo, fhi: the factors as double words (2^-106 of
 * MPFR's 1024-bit values); a: the underflow allowance.
 * MPFR computes RD(RD(S flo) - a) and RU(RU(S fhi) + a), S exactly; here S is a compensated sum
 * (pf_dd_sum_squares) within gamma_n^2 S, the product a double word within 2^-101 of it
 * (twice dd.h's bound) and 2^-105 for the factor, the sum with a within 2^-104, MPFR's own
 * roundings within 2^-1000; the ends, each past that by its own add's error (2^-100), map
 * through RD (RU) to binary64 and the fp32 rounding up (down), both monotone: equal ends,
 * one value for every point between. */
static int pf_tp_norm_fast(const double *g, size_t n, pf_dd flo, pf_dd fhi, double a, double *sum_lo,
                           double *sum_hi) {
  double rel;
  const pf_dd S = pf_dd_sum_squares(g, n, &rel);
  if (!isfinite(S.hi) || (S.hi != 0 && S.hi < 0x1p-900)) return 0;
  rel += 0x1p-105 + 0x1p-101 + 0x1p-1000;
  const pf_dd ends[2] = {pf_dd_add_d(pf_dd_mul(S, flo), -a), pf_dd_add_d(pf_dd_mul(S, fhi), a)};
  double got[2][2];
  for (int k = 0; k < 2; k++) {
    const pf_dd x = ends[k];
    const double P = S.hi * (k ? fhi.hi : flo.hi); /* the product, to 2^-52 */
    const double err = ((rel * P * (1 + 0x1p-50) + 0x1p-104 * fabs(x.hi)) * (1 + 0x1p-40)) * (1 + 0x1p-50) +
                       fabs(x.hi) * 0x1p-100;
    if (!(fabs(x.hi) > 0x1p-900) || !isfinite(err)) return 0;
    for (int side = 0; side < 2; side++) {
      const pf_dd y = pf_dd_add(x, (pf_dd){side ? err : -err, 0});
      got[k][side] = k ? pf_down32(pf_dd_up(y)) : pf_tp_sum_lo(pf_dd_down(y));
    }
    if (got[k][0] != got[k][1]) return 0;
  }
  *sum_lo = got[0][0], *sum_hi = got[1][0];
  return 1;
}

/* output x is the set [lo, hi] of dtype t (NaN at either end: undefined) */
static inline void pf_tp_set(pf_oracle_result *out, size_t x, double lo, double hi, pf_dtype t) {
  out->dtype[x] = (unsigned char)t;
  if (isnan(lo) || isnan(hi)) {
    out->status[x] = PF_ORACLE_UNDEFINED;
    out->exact[x] = out->rounded[x] = out->rounded_alt[x] = NAN;
    return;
  }
  out->status[x] = PF_ORACLE_SET;
  out->rounded[x] = lo;
  out->rounded_alt[x] = hi;
  out->exact[x] = lo == hi ? lo : lo / 2 + hi / 2;
}

/* Step 1 for DeepSpeedZeroOptimizer (tp_diff_spec.h): the storage dtype's gradients (bf16, or fp16
 * scaled by S), every add an add in that dtype (the correctly rounded sum); at DP=2 the
 * micro-batch gradients fl(2 S g) (the loss times 2, the engine averaging) halved in the
 * reduction's dtype (exact in fp32), the replicas' halves summed in the dtype per micro-batch
 * (stage 2) or once after each replica's accumulation (stage 1); in fp16 unscaled by fl32(1/S)
 * (exact). Returns whether an accumulated gradient is inf or NaN (the step overflows). */
static int pf_tp_zero_buffers(const pf_tp_layout *L, double S, const double *grads, size_t s, int dp, double *g) {
  const pf_dtype T = L->dtype;
  const size_t n = L->n, per = L->mb / (size_t)dp;
  int overflow = 0;
#define PF_G(k, e) (S * grads[(s * L->mb + (k)) * (n + L->head) + (e)])
#define PF_HALF(u) (L->comm ? pf_round(T, (u) / 2) : (u) / 2)
  for (size_t e = 0; e < n; e++) {
    double acc = pf_round(T, PF_G(0, e));
    if (dp == 1)
      for (size_t k = 1; k < L->mb; k++) acc = pf_round(T, f32_add(acc, pf_round(T, PF_G(k, e))));
    else if (L->algo == PF_TP_DS_ZERO2)
      for (size_t j = 0; j < per; j++) {
        const double red = pf_round(T, f32_add(PF_HALF(pf_round(T, 2 * PF_G(j, e))), PF_HALF(pf_round(T, 2 * PF_G(per + j, e)))));
        acc = j ? pf_round(T, f32_add(acc, red)) : red;
      }
    else {
      double a[2];
      for (int r = 0; r < 2; r++) {
        a[r] = pf_round(T, 2 * PF_G((size_t)r * per, e));
        for (size_t j = 1; j < per; j++) a[r] = pf_round(T, f32_add(a[r], pf_round(T, 2 * PF_G((size_t)r * per + j, e))));
      }
      acc = pf_round(T, f32_add(PF_HALF(a[0]), PF_HALF(a[1])));
    }
    overflow |= !isfinite(acc);
    g[e] = T == PF_FP16 ? f32_mul(acc, pf_round(PF_FP32, 1.0 / S)) : acc;
  }
#undef PF_G
#undef PF_HALF
  return overflow;
}

/* Step 1, the gradient buffers of step s in a run of dp replicas at loss scale S, as the ranks
 * compute them: each replica's share of the micro-batches rounded to the dtype and summed in fp32 in order,
 * the replicas' sums added, then a tied element's two stages, unscaled by fl32(1/S) in fp16; for
 * every element, the fp32 adds as the machine's (pf_add of fp32 values is the binary32 add);
 * head, rg, rh: scratch (n each). */
static void pf_tp_buffers(const pf_tp_layout *L, double S, const double *grads, size_t s, int dp, double *g,
                          double *head, double *rg, double *rh) {
  const pf_dtype T = L->dtype;
  const size_t n = L->n, embed = L->b[pf_tp_embed(L)].offset, nt = L->tied ? n - embed : 0, per = L->mb / (size_t)dp;
  if (pf_tp_algo_zero(L->algo)) { /* DeepSpeedZeroOptimizer: accumulation in the dtype (tp_diff_spec.h); no tied weight */
    pf_tp_zero_buffers(L, S, grads, s, dp, g);
    return;
  }
  for (int d = 0; d < dp; d++) {
    for (size_t e = 0; e < n; e++) rg[e] = 0;
    for (size_t e = 0; e < nt; e++) rh[e] = 0;
    for (size_t k = (size_t)d * per; k < ((size_t)d + 1) * per; k++) { /* in micro-batch order, as the kernel sums */
      const double *gk = grads + (s * L->mb + k) * (n + L->head);
      for (size_t e = 0; e < n; e++) rg[e] = f32_add(rg[e], pf_round(T, S * gk[e]));
      for (size_t e = 0; e < nt; e++) rh[e] = f32_add(rh[e], pf_round(T, S * gk[n + e]));
    }
    if (L->comm) { /* the reduction in the storage dtype: each replica's buffer rounded to it */
      for (size_t e = 0; e < n; e++) rg[e] = pf_round(T, rg[e]);
      for (size_t e = 0; e < nt; e++) rh[e] = pf_round(T, rh[e]);
    }
    for (size_t e = 0; e < n; e++) g[e] = d ? f32_add(g[e], rg[e]) : rg[e]; /* replica 0 + replica 1 */
    for (size_t e = 0; e < nt; e++) head[e] = d ? f32_add(head[e], rh[e]) : rh[e];
  }
  if (L->comm && dp == 2) { /* and their sum, a sum of two values of the dtype, rounded again */
    for (size_t e = 0; e < n; e++) g[e] = pf_round(T, g[e]);
    for (size_t e = 0; e < nt; e++) head[e] = pf_round(T, head[e]);
  }
  if (dp == 2 && L->ep == 2) /* EP=2: an expert's slots, both replicas' micro-batches in each, on its replica alone */
    for (size_t e = L->exp0; e < L->exp0 + L->nexp; e++) {
      double buf = 0;
      for (size_t j = 0; j < per; j++) {
        const double a = S * grads[(s * L->mb + j) * (n + L->head) + e];
        const double b = S * grads[(s * L->mb + j + per) * (n + L->head) + e];
        buf = f32_add(buf, pf_round(T, f32_add(a, b)));
      }
      g[e] = L->comm ? pf_round(T, buf) : buf; /* the round trip through the reduction's dtype */
    }
  for (size_t e = 0; e < nt; e++) g[embed + e] = f32_add(g[embed + e], head[e]); /* stage 0 + stage 1 */
  if (T == PF_FP16) {
    const double inv = pf_round(PF_FP32, 1.0 / S);
    for (size_t e = 0; e < n; e++) g[e] = f32_mul(g[e], inv);
  }
}
/* Step 4 for the elements [e0, e1) of one block: FusedAdam in fp32 on the intervals of the
 * clipped gradient [clo, chi] and of the state (updated in place), the sets written to run
 * 0's outputs of step s. */
static void pf_tp_adam_intervals(const pf_tp_layout *L, size_t s, const pf_adam_hyper *h, size_t e0, size_t e1,
                                 const double *clo, const double *chi, double *plo, double *phi, double *mlo,
                                 double *mhi, double *vlo, double *vhi, pf_oracle_result *out) {
  const double omb1 = f32_sub(1.0, h->beta1), omb2 = f32_sub(1.0, h->beta2);
  const size_t om = pf_tp_run_at(L, 0, s, PF_TP_MASTER, 0), op = pf_tp_run_at(L, 0, s, PF_TP_PARAM, 0),
               oM = pf_tp_run_at(L, 0, s, PF_TP_M, 0), oV = pf_tp_run_at(L, 0, s, PF_TP_V, 0);
  const pf_dtype F = PF_FP32, T = L->dtype;
#define PF_M(m, g) f32_add(f32_mul(h->beta1, (m)), f32_mul(omb1, (g)))
#define PF_V(v, g) f32_add(f32_mul(h->beta2, (v)), f32_mul(f32_mul(omb2, (g)), (g)))
#define PF_D(v) f32_add(f32_sqrt(f32_div((v), h->bc2)), h->eps)
  for (size_t e = e0; e < e1; e++) {
    const double m_lo = PF_M(mlo[e], clo[e]), m_hi = PF_M(mhi[e], chi[e]);
    const double a = fabs(clo[e]), b = fabs(chi[e]);
    const double ag_lo = clo[e] <= 0 && chi[e] >= 0 ? 0 : (a < b ? a : b), ag_hi = a > b ? a : b;
    const double v_lo = PF_V(vlo[e], ag_lo), v_hi = PF_V(vhi[e], ag_hi);
    const double mh_lo = f32_div(m_lo, h->bc1), mh_hi = f32_div(m_hi, h->bc1);
    const double d_lo = PF_D(v_lo), d_hi = PF_D(v_hi);
    const double u[4] = {f32_div(mh_lo, d_lo), f32_div(mh_lo, d_hi), f32_div(mh_hi, d_lo), f32_div(mh_hi, d_hi)};
    const double u_lo = pf_min4(u), u_hi = pf_max4(u);
    const double w[4] = {f32_add(u_lo, f32_mul(h->wd, plo[e])), f32_add(u_lo, f32_mul(h->wd, phi[e])),
                         f32_add(u_hi, f32_mul(h->wd, plo[e])), f32_add(u_hi, f32_mul(h->wd, phi[e]))};
    const double p_lo = f32_sub(plo[e], f32_mul(h->lr, pf_max4(w)));
    const double p_hi = f32_sub(phi[e], f32_mul(h->lr, pf_min4(w)));
    plo[e] = p_lo, phi[e] = p_hi, mlo[e] = m_lo, mhi[e] = m_hi, vlo[e] = v_lo, vhi[e] = v_hi;
    pf_tp_set(out, om + e, p_lo, p_hi, F);
    pf_tp_set(out, op + e, pf_round(T, p_lo), pf_round(T, p_hi), T);
    pf_tp_set(out, oM + e, m_lo, m_hi, F);
    pf_tp_set(out, oV + e, v_lo, v_hi, F);
  }
#undef PF_M
#undef PF_V
#undef PF_D
}
/* Step 4 for DeepSpeed on the CPU: PyTorch's single-tensor AdamW in fp32 (adam_math.h,
 * PF_ADAM_TORCH: every intermediate an fp32 tensor) on intervals. Every operation is monotone
 * in each argument but the lerp, fma(w, fl(g - m), m), where m comes twice: its two
 * occurrences are bounded apart (fl(g - m) over the box, then the fma at its corners), which
 * encloses every value the coupled expression takes. v.sqrt() is faithful, not correctly
 * rounded (f32_sqrt_down). The scalars are PyTorch's: binary64 on the Python side, rounded to
 * fp32 by the kernels that take them. */
static void pf_tp_torch_adam_intervals(const pf_tp_layout *L, size_t s, const pf_adam_hyper *h, size_t e0, size_t e1,
                                       const double *clo, const double *chi, double *plo, double *phi, double *mlo,
                                       double *mhi, double *vlo, double *vhi, pf_oracle_result *out) {
  const pf_dtype F = PF_FP32, T = L->dtype;
  const double wdec = pf_round(F, h->t_decay), w = pf_round(F, h->t_omb1), b2 = pf_round(F, h->t_beta2);
  const double omb2 = pf_round(F, h->t_omb2), bc2s = pf_round(F, h->t_bc2_sqrt), eps = pf_round(F, h->t_eps);
  const double value = -pf_round(F, h->t_step_size);
  const size_t om = pf_tp_run_at(L, 0, s, PF_TP_MASTER, 0), op = pf_tp_run_at(L, 0, s, PF_TP_PARAM, 0),
               oM = pf_tp_run_at(L, 0, s, PF_TP_M, 0), oV = pf_tp_run_at(L, 0, s, PF_TP_V, 0);
  const double w1 = f32_sub(w, 1.0);
  for (size_t e = e0; e < e1; e++) {
    const double pw_lo = f32_mul(plo[e], wdec), pw_hi = f32_mul(phi[e], wdec);
    const double d_lo = f32_sub(clo[e], mhi[e]), d_hi = f32_sub(chi[e], mlo[e]); /* fl(g - m) */
    double m_lo, m_hi;
    if (w < 0.5) { /* fma(w, d, m), w >= 0: nondecreasing in d and in m */
      m_lo = f32_fma(w, d_lo, mlo[e]);
      m_hi = f32_fma(w, d_hi, mhi[e]);
    } else { /* fma(w - 1, d, g), w - 1 <= 0: nonincreasing in d, nondecreasing in g */
      m_lo = f32_fma(w1, d_hi, clo[e]);
      m_hi = f32_fma(w1, d_lo, chi[e]);
    }
    const double a = fabs(clo[e]), b = fabs(chi[e]);
    const double ag_lo = clo[e] <= 0 && chi[e] >= 0 ? 0 : (a < b ? a : b), ag_hi = a > b ? a : b;
    /* fma(fl(c g), g, fl(beta2 v)): fl(c g) g = fl(c |g|) |g| is nondecreasing in |g| */
    const double v_lo = f32_fma(f32_mul(omb2, ag_lo), ag_lo, f32_mul(vlo[e], b2));
    const double v_hi = f32_fma(f32_mul(omb2, ag_hi), ag_hi, f32_mul(vhi[e], b2));
    /* v.sqrt(): faithful (f32_sqrt_down, _up) */
    const double dn_lo = f32_add(f32_div(f32_sqrt_down(v_lo), bc2s), eps);
    const double dn_hi = f32_add(f32_div(f32_sqrt_up(v_hi), bc2s), eps);
    const double q_lo = f32_mul(value, m_hi), q_hi = f32_mul(value, m_lo); /* value < 0 */
    const double u[4] = {f32_div(q_lo, dn_lo), f32_div(q_lo, dn_hi), f32_div(q_hi, dn_lo), f32_div(q_hi, dn_hi)};
    const double p_lo = f32_add(pw_lo, pf_min4(u)), p_hi = f32_add(pw_hi, pf_max4(u));
    plo[e] = p_lo, phi[e] = p_hi, mlo[e] = m_lo, mhi[e] = m_hi, vlo[e] = v_lo, vhi[e] = v_hi;
    pf_tp_set(out, om + e, p_lo, p_hi, F);
    pf_tp_set(out, op + e, pf_round(T, p_lo), pf_round(T, p_hi), T);
    pf_tp_set(out, oM + e, m_lo, m_hi, F);
    pf_tp_set(out, oV + e, v_lo, v_hi, F);
  }
}

pf_status pf_tp_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  const pf_dtype F = PF_FP32;
  const size_t n = L.n;
  const double *grads = in[1].data;
  double *st = malloc(n * 13 * sizeof(double)); /* p, m, v lo/hi; g of both runs; clipped g lo/hi; scratch */
  if (!st) return pf_error(PF_ERR_NOMEM, "tp oracle: cannot allocate %zu elements", n);
  double *plo = st, *phi = st + n, *mlo = st + 2 * n, *mhi = st + 3 * n, *vlo = st + 4 * n, *vhi = st + 5 * n;
  double *g = st + 6 * n, *g2 = L.dp > 1 ? st + 7 * n : g, *clo = st + 8 * n, *chi = st + 9 * n;
  double *scratch = st + 10 * n;
  for (size_t e = 0; e < n; e++) {
    plo[e] = phi[e] = in[0].data[e];
    mlo[e] = mhi[e] = vlo[e] = vhi[e] = 0;
  }
  size_t maxblock = 0;
  for (int k = 0; k < L.nblocks; k++)
    if (L.b[k].rows * L.b[k].cols > maxblock) maxblock = L.b[k].rows * L.b[k].cols;
  const pf_mpfr_range saved = pf_mpfr_range_widen();
  mpfr_t sq, slo, shi, t, flo, fhi;
  mpfr_inits2(1024, sq, slo, shi, t, flo, fhi, (mpfr_ptr)0);
  /* the factors (1 -+ 2^-24)^K and the underflow allowance. K counts the roundings a term's
   * square passes through: its square (1), its tensor's sum (largest - 1), the per-tensor
   * root and its square (3 when the root is correctly rounded; 6 when it is only faithful,
   * as PyTorch's CPU norms are: a relative error below 2u, squared, lies within (1 +- u)^5),
   * the sum over a rank's 14 tensors (13), the all-reduce over 4 ranks of a replica (3).
   * Megatron (CUDA roots): largest + 19, taken as 21; DeepSpeed: largest + 22;
   * megatron-core's norm of the per-tensor norms squared again adds a root and a square (6):
   * largest + 28; plain PyTorch's DTensor norm of a sharded tensor (its 2 ranks' norms squared,
   * summed, rooted, and squared in the norm of the norms) adds 1 + 6 but has no all-reduce of
   * the ranks' totals: largest + 26. With experts, the dense and the expert norms are each
   * rooted (faithful) and squared again and the two squares summed (7), the expert group's
   * all-reduce spans up to 8 ranks (4 more): 12 more.
   * DeepSpeed's ZeRO optimizer sums each piece in binary64 (all of it within (1 + u) for pieces
   * below 2^28 elements), rounds to fp32 (1), all-reduces over DP and TP (3), roots each
   * group's sum (faithful) and squares it (6), sums the two groups' squares (1): 12, taken as
   * 16, whatever the tensors' sizes. */
  const long K = pf_tp_algo_zero(L.algo) ? 16 : (long)maxblock + (L.algo == PF_TP_MEGATRON_CORE ? 28
                                   : L.algo == PF_TP_TORCH       ? 26
                                   : L.algo == PF_TP_DEEPSPEED   ? 22
                                                                 : 21) + (L.experts ? 12 : 0);
  mpfr_set_d(flo, 1 - 0x1p-24, MPFR_RNDN);
  mpfr_pow_si(flo, flo, K, MPFR_RNDD);
  mpfr_set_d(fhi, 1 + 0x1p-24, MPFR_RNDN);
  mpfr_pow_si(fhi, fhi, K, MPFR_RNDU);
  const double under = (double)(n + 64) * 0x1p-148;
  const pf_dd flo_d = pf_mpfr_to_dd(flo, t), fhi_d = pf_mpfr_to_dd(fhi, t);
  const int fast = !opts->mpfr_only;
  const int debug = getenv("PF_TP_DEBUG") != NULL;
  out->max_prec = 1024;
  pf_tp_scaler sc = pf_tp_scaler_start(&L);
  size_t taken = 0;
  for (size_t s = 0; s < L.steps; s++) {
    /* 0. fp16: the step is skipped when a scaled micro-batch gradient overflows fp16 (the fp32
     * sums of fp16 values cannot; the same in every layout, experts apart), on every rank;
     * DeepSpeed's ZeRO: when an fp16 accumulation does (the domain has both runs agree) */
    const double S = sc.scale;
    /* DeepSpeed's ZeRO in fp16: run 0's buffers first, for their overflow (kept for step 1) */
    const int zero16 = L.dtype == PF_FP16 && pf_tp_algo_zero(L.algo);
    int found = 0;
    if (zero16) found = pf_tp_zero_buffers(&L, S, grads, s, 1, g);
    else if (L.dtype == PF_FP16)
      for (size_t x = 0; x < L.mb * (n + L.head) && !found; x++) found = isinf(pf_round(PF_FP16, S * grads[s * L.mb * (n + L.head) + x]));
    pf_tp_scaler_update(&L, &sc, found);
    if (found) { /* the sets as they were; no norm: -1 */
      for (int run = 0; run < 2; run++) {
        for (int slot = 0; slot < PF_TP_SLOTS; slot++) pf_tp_set(out, pf_tp_norm_at(&L, run, s, slot), -1, -1, F);
        for (size_t e = 0; e < n; e++) {
          pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_MASTER, e), plo[e], phi[e], F);
          pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_PARAM, e), pf_round(L.dtype, plo[e]), pf_round(L.dtype, phi[e]), L.dtype);
          pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_M, e), mlo[e], mhi[e], F);
          pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_V, e), vlo[e], vhi[e], F);
        }
      }
      for (size_t j = 0; j < 2 * L.nsync; j++) pf_tp_set(out, pf_tp_sync_at(&L, s, 0) + j, 0, 0, F);
      continue;
    }
    taken++;
    /* 1. gradients: each run's fp32 buffers (the same when the second has one replica) */
    if (!zero16) pf_tp_buffers(&L, S, grads, s, 1, g, clo, scratch, scratch + n);
    if (L.dp > 1) pf_tp_buffers(&L, S, grads, s, L.dp, g2, clo, scratch, scratch + n);
    /* 2. the exact squared norm of each run's buffers, widened for any fp32 summation order */
    double sum_lo = INFINITY, sum_hi = -INFINITY;
    for (int run = 0; run < (L.dp > 1 ? 2 : 1); run++) {
      const double *gr = run ? g2 : g;
      double lo, hi;
      if (fast && pf_tp_norm_fast(gr, n, flo_d, fhi_d, under, &lo, &hi)) {
        out->fast_units++;
      } else {
        out->mpfr_units++;
        mpfr_set_zero(sq, 1);
        for (size_t e = 0; e < n; e++) {
          mpfr_set_d(t, gr[e], MPFR_RNDN);
          mpfr_fma(sq, t, t, sq, MPFR_RNDN); /* exact */
        }
        mpfr_mul(slo, sq, flo, MPFR_RNDD);
        mpfr_sub_d(slo, slo, under, MPFR_RNDD);
        mpfr_mul(shi, sq, fhi, MPFR_RNDU);
        mpfr_add_d(shi, shi, under, MPFR_RNDU);
        lo = pf_tp_sum_lo(mpfr_get_d(slo, MPFR_RNDD));
        hi = pf_down32(mpfr_get_d(shi, MPFR_RNDU));
      }
      sum_lo = lo < sum_lo ? lo : sum_lo;
      sum_hi = hi > sum_hi ? hi : sum_hi;
    }
    /* 3. norm and coefficient */
    /* 3. the norm, the coefficient and the scale each gradient is multiplied by, at both ends;
     * DeepSpeed takes the root with Tensor.pow(0.5), which is PyTorch's sqrt: faithful;
     * megatron-core takes it in binary64 (Python's ** 0.5, C's pow: faithful too) */
    double norm_lo, norm_hi, s_lo, s_top;
    int may_clip, may_not;
    if (L.algo == PF_TP_MEGATRON_CORE) {
      const double n_lo = sum_lo > 0 ? nextafter(sqrt(sum_lo), 0) : 0, n_hi = nextafter(sqrt(sum_hi), INFINITY);
      const double mn = c->params[PF_TPP_MAXNORM];
      const double c_lo = mn / (n_hi + 1.0e-6), c_hi = mn / (n_lo + 1.0e-6); /* RN in binary64: monotone */
      norm_lo = pf_round(F, n_lo), norm_hi = pf_round(F, n_hi);
      may_clip = c_lo < 1, may_not = c_hi >= 1;
      s_lo = pf_round(F, c_lo);
      s_top = pf_round(F, c_hi < 1 ? c_hi : nextafter(1.0, 0));
    } else {
      const int faithful = L.algo == PF_TP_DEEPSPEED || L.algo == PF_TP_TORCH || pf_tp_algo_zero(L.algo);
      norm_lo = faithful ? f32_sqrt_down(sum_lo) : f32_sqrt(sum_lo);
      norm_hi = faithful ? f32_sqrt_up(sum_hi) : f32_sqrt(sum_hi);
      const double c_lo = pf_tp_coef(L.algo, c->params[PF_TPP_MAXNORM], norm_hi);
      const double c_hi = pf_tp_coef(L.algo, c->params[PF_TPP_MAXNORM], norm_lo);
      may_clip = c_lo < 1, may_not = c_hi >= 1;
      s_lo = c_lo;
      s_top = c_hi < 1 ? c_hi : (double)nextafterf(1.0f, 0.0f);
    }
    if (debug) fprintf(stderr, "step %zu: sum [%a, %a] norm [%a, %a] scale [%a, %a]\n", s + 1, sum_lo, sum_hi, norm_lo, norm_hi, s_lo, s_top);
    for (int run = 0; run < 2; run++)
      for (int slot = 0; slot < PF_TP_SLOTS; slot++) pf_tp_set(out, pf_tp_norm_at(&L, run, s, slot), norm_lo, norm_hi, F);
    for (size_t e = 0; e < n; e++) {
      double lo = INFINITY, hi = -INFINITY;
      const double gl = pf_min2(g[e], g2[e]), gh = pf_max2(g[e], g2[e]);
      if (may_clip) { /* fl(g c), c >= 0: nondecreasing in g; in c, its direction is g's sign */
        const double a[4] = {f32_mul(gl, s_lo), f32_mul(gl, s_top), f32_mul(gh, s_lo), f32_mul(gh, s_top)};
        lo = pf_min4(a);
        hi = pf_max4(a);
      }
      if (may_not) {
        lo = gl < lo ? gl : lo;
        hi = gh > hi ? gh : hi;
      }
      clo[e] = lo;
      chi[e] = hi;
    }
    /* 4. FusedAdam on intervals */
    const double lr = c->params[PF_TPP_LR], b1 = c->params[PF_TPP_BETA1], b2 = c->params[PF_TPP_BETA2];
    const double eps = c->params[PF_TPP_EPS];
    const pf_adam_hyper hw = pf_adam_hyper_make(lr, b1, b2, eps, c->params[PF_TPP_WD], (double)taken, 1);
    const pf_adam_hyper h0 = pf_adam_hyper_make(lr, b1, b2, eps, 0, (double)taken, 1);
    for (int k = 0; k < L.nblocks; k++) { /* e's block: the last whose offset is at most e */
      const size_t e0 = k ? L.b[k].offset : 0, e1 = k + 1 < L.nblocks ? L.b[k + 1].offset : n;
      (L.algo == PF_TP_MEGATRON ? pf_tp_adam_intervals : pf_tp_torch_adam_intervals)(
          &L, s, L.b[k].decay ? &hw : &h0, e0, e1, clo, chi, plo, phi, mlo, mhi, vlo, vhi, out);
    }
    /* the TP=2 run's sets are the TP=1 run's: its four blocks of n elements copied whole */
    const size_t from = pf_tp_run_at(&L, 0, s, PF_TP_MASTER, 0), to = pf_tp_run_at(&L, 1, s, PF_TP_MASTER, 0);
    memcpy(out->exact + to, out->exact + from, 4 * n * sizeof *out->exact);
    memcpy(out->rounded + to, out->rounded + from, 4 * n * sizeof *out->rounded);
    memcpy(out->rounded_alt + to, out->rounded_alt + from, 4 * n * sizeof *out->rounded_alt);
    memcpy(out->status + to, out->status + from, 4 * n);
    memcpy(out->dtype + to, out->dtype + from, 4 * n);
    /* copies: equal, exactly; each check's code and difference are a label and a value reported,
     * not numbers with a distance to measure: undefined here, judged by the operation's verdict */
    for (size_t j = 0; j < 2 * L.nsync; j++) pf_tp_set(out, pf_tp_sync_at(&L, s, 0) + j, NAN, NAN, F);
  }
  /* a round trip (resume_at): the resumed run equals the straight one, exactly; each code (0:
   * equal) and the two values beside it are labels and values reported, not numbers with a
   * distance to measure: undefined here, judged by the operation's verdict (code 0 or not) */
  if (L.resume)
    for (size_t j = pf_tp_resume_at(&L, 0, 0); j < pf_tp_output_count(&L); j++) pf_tp_set(out, j, NAN, NAN, F);
  mpfr_clears(sq, slo, shi, t, flo, fhi, (mpfr_ptr)0);
  pf_mpfr_range_restore(saved);
  free(st);
  return PF_OK;
}
