/* The TP differential's oracle: for every step and element, the set of master, parameter, m
 * and v values that a correct run may produce, whatever the tensor-parallel layout.
 *
 * The configurations share every elementwise operation bit for bit (both hold a tied weight
 * on two pipeline stages and add its two gradient buffers alike); they differ only in the
 * order the squared norm is summed (per-tensor partial sums on each rank, the all-reduce).
 * So the set is built from:
 * 1. the gradients: the fp32 buffers every configuration computes alike (intervals of one
 *    value; the arithmetic below takes intervals);
 * 2. the exact squared norm of the norm set (MPFR, 1024 bits: exact for sums of fp32 squares)
 *    over those intervals, widened by the proven bound of fp32 summation in any order:
 *    every term passes through at most K roundings, K = the largest tensor + 21 (the square,
 *    the per-tensor norm and its square, 14 tensors, 4 ranks), so the computed sum lies in
 *    [S (1 - u)^K - a, S (1 + u)^K + a], u = 2^-24, a = (n + 64) 2^-148 for underflow;
 * 3. the fp32 norm and coefficient: fl(sqrt(.)) and fl(max_norm / fl(norm + 1e-6)) round
 *    monotonically, so their values at the ends of that range bound every computed one;
 *    clipping is certain below 1, absent at or above, and both are allowed in between;
 * 4. FusedAdam in fp32 on intervals: each operation (fl of +, -, *, /, sqrt) is monotone in
 *    each argument, so evaluating the step at the right ends of the argument intervals (the
 *    corners, where signs may vary) bounds every value a correct run can reach; the state
 *    intervals carry over the steps; the parameter is the dtype's rounding of the master's.
 * No tolerance: a value outside its set was produced by no summation order of the norm. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "kernels/adam/adam_math.h"
#include "kernels/kernel.h"
#include "kernels/tp_diff/tp.h"
#include "oracles/oracle_util.h"

/* the fp32 values just above / below x */
static double pf_up32(double x) {
  const double r = pf_round(PF_FP32, x);
  return r < x ? pf_next_up(PF_FP32, r) : r;
}
static double pf_down32(double x) {
  const double r = pf_round(PF_FP32, x);
  return r > x ? pf_next_down(PF_FP32, r) : r;
}
static double pf_min4(const double v[4]) {
  double m = v[0];
  for (int i = 1; i < 4; i++) m = v[i] < m || isnan(v[i]) ? v[i] : m;
  return m;
}
static double pf_max4(const double v[4]) {
  double m = v[0];
  for (int i = 1; i < 4; i++) m = v[i] > m || isnan(v[i]) ? v[i] : m;
  return m;
}

static void pf_tp_set(pf_oracle_result *out, size_t x, double lo, double hi, pf_dtype t) {
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

pf_status pf_tp_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  const pf_dtype F = PF_FP32, T = L.dtype;
  const size_t n = L.n;
  const double *grads = in[1].data;
  double *st = malloc(n * 10 * sizeof(double)); /* p, m, v lo/hi; g lo/hi */
  if (!st) return pf_error(PF_ERR_NOMEM, "tp oracle: cannot allocate %zu elements", n);
  double *plo = st, *phi = st + n, *mlo = st + 2 * n, *mhi = st + 3 * n, *vlo = st + 4 * n, *vhi = st + 5 * n;
  double *glo = st + 6 * n, *ghi = st + 7 * n, *clo = st + 8 * n, *chi = st + 9 * n;
  for (size_t e = 0; e < n; e++) {
    plo[e] = phi[e] = in[0].data[e];
    mlo[e] = mhi[e] = vlo[e] = vhi[e] = 0;
  }
  size_t maxblock = 0;
  for (int k = 0; k < PF_TP_NBLOCKS; k++)
    if (L.b[k].rows * L.b[k].cols > maxblock) maxblock = L.b[k].rows * L.b[k].cols;
  const pf_mpfr_range saved = pf_mpfr_range_widen();
  mpfr_t slo, shi, t, f;
  mpfr_inits2(1024, slo, shi, t, f, (mpfr_ptr)0);
  unsigned fe = 0;
  out->max_prec = 1024;
  for (size_t s = 0; s < L.steps; s++) {
    /* 1. gradients: the same fp32 buffers in every configuration */
    for (size_t e = 0; e < n; e++) glo[e] = ghi[e] = pf_tp_buffer(&L, grads, s, e, &fe);
    /* 2. the exact squared norm over the intervals, widened for any fp32 summation order */
    mpfr_set_zero(slo, 1);
    mpfr_set_zero(shi, 1);
    for (size_t e = 0; e < n; e++) {
      const double a = fabs(glo[e]), b = fabs(ghi[e]);
      const double mn = glo[e] <= 0 && ghi[e] >= 0 ? 0 : (a < b ? a : b), mx = a > b ? a : b;
      mpfr_set_d(t, mn, MPFR_RNDN);
      mpfr_fma(slo, t, t, slo, MPFR_RNDD);
      mpfr_set_d(t, mx, MPFR_RNDN);
      mpfr_fma(shi, t, t, shi, MPFR_RNDU);
    }
    const long K = (long)maxblock + 21;
    mpfr_set_d(f, 1 - 0x1p-24, MPFR_RNDN);
    mpfr_pow_si(f, f, K, MPFR_RNDD);
    mpfr_mul(slo, slo, f, MPFR_RNDD);
    mpfr_sub_d(slo, slo, (double)(n + 64) * 0x1p-148, MPFR_RNDD);
    mpfr_set_d(f, 1 + 0x1p-24, MPFR_RNDN);
    mpfr_pow_si(f, f, K, MPFR_RNDU);
    mpfr_mul(shi, shi, f, MPFR_RNDU);
    mpfr_add_d(shi, shi, (double)(n + 64) * 0x1p-148, MPFR_RNDU);
    double sum_lo = mpfr_get_d(slo, MPFR_RNDD), sum_hi = mpfr_get_d(shi, MPFR_RNDU);
    sum_lo = sum_lo < 0 ? 0 : pf_up32(sum_lo);
    sum_hi = pf_down32(sum_hi);
    /* 3. norm and coefficient */
    const double mn32 = pf_round(F, c->params[PF_TPP_MAXNORM]), e6 = pf_round(F, 1e-6);
    const double norm_lo = pf_round(F, sqrt(sum_lo)), norm_hi = pf_round(F, sqrt(sum_hi));
    const double c_lo = pf_div(F, mn32, pf_add(F, norm_hi, e6, &fe), &fe);
    const double c_hi = pf_div(F, mn32, pf_add(F, norm_lo, e6, &fe), &fe);
    const int may_clip = c_lo < 1, may_not = c_hi >= 1;
    const double c_top = c_hi < 1 ? c_hi : pf_next_down(F, 1.0);
    if (getenv("PF_TP_DEBUG")) fprintf(stderr, "step %zu: sum [%a, %a] norm [%a, %a] coef [%a, %a] (%lld ulps)\n", s + 1, sum_lo, sum_hi, norm_lo, norm_hi, c_lo, c_hi, (long long)pf_ulp_distance(F, c_lo, c_hi));
    for (size_t e = 0; e < n; e++) {
      double lo = INFINITY, hi = -INFINITY;
      if (may_clip) {
        const double v[4] = {pf_mul(F, glo[e], c_lo, &fe), pf_mul(F, glo[e], c_top, &fe), pf_mul(F, ghi[e], c_lo, &fe),
                             pf_mul(F, ghi[e], c_top, &fe)};
        lo = pf_min4(v);
        hi = pf_max4(v);
      }
      if (may_not) {
        lo = glo[e] < lo ? glo[e] : lo;
        hi = ghi[e] > hi ? ghi[e] : hi;
      }
      clo[e] = lo;
      chi[e] = hi;
    }
    /* 4. FusedAdam on intervals */
    const double lr = c->params[PF_TPP_LR], b1 = c->params[PF_TPP_BETA1], b2 = c->params[PF_TPP_BETA2];
    const double eps = c->params[PF_TPP_EPS];
    const pf_adam_hyper hw = pf_adam_hyper_make(lr, b1, b2, eps, c->params[PF_TPP_WD], (double)s + 1, 1);
    const pf_adam_hyper h0 = pf_adam_hyper_make(lr, b1, b2, eps, 0, (double)s + 1, 1);
    for (size_t e = 0; e < n; e++) {
      size_t i, j;
      const pf_adam_hyper *h = L.b[pf_tp_block_of(&L, e, &i, &j)].decay ? &hw : &h0;
      const double omb1 = pf_sub(F, 1.0, h->beta1, &fe), omb2 = pf_sub(F, 1.0, h->beta2, &fe);
#define PF_M(m, g) pf_add(F, pf_mul(F, h->beta1, (m), &fe), pf_mul(F, omb1, (g), &fe), &fe)
#define PF_V(v, g) pf_add(F, pf_mul(F, h->beta2, (v), &fe), pf_mul(F, pf_mul(F, omb2, (g), &fe), (g), &fe), &fe)
#define PF_D(v) pf_add(F, pf_round(F, sqrt(pf_div(F, (v), h->bc2, &fe))), h->eps, &fe)
      const double m_lo = PF_M(mlo[e], clo[e]), m_hi = PF_M(mhi[e], chi[e]);
      const double a = fabs(clo[e]), b = fabs(chi[e]);
      const double ag_lo = clo[e] <= 0 && chi[e] >= 0 ? 0 : (a < b ? a : b), ag_hi = a > b ? a : b;
      const double v_lo = PF_V(vlo[e], ag_lo), v_hi = PF_V(vhi[e], ag_hi);
      const double mh_lo = pf_div(F, m_lo, h->bc1, &fe), mh_hi = pf_div(F, m_hi, h->bc1, &fe);
      const double d_lo = PF_D(v_lo), d_hi = PF_D(v_hi);
      const double u[4] = {pf_div(F, mh_lo, d_lo, &fe), pf_div(F, mh_lo, d_hi, &fe), pf_div(F, mh_hi, d_lo, &fe),
                           pf_div(F, mh_hi, d_hi, &fe)};
      const double u_lo = pf_min4(u), u_hi = pf_max4(u);
      const double w[4] = {pf_add(F, u_lo, pf_mul(F, h->wd, plo[e], &fe), &fe), pf_add(F, u_lo, pf_mul(F, h->wd, phi[e], &fe), &fe),
                           pf_add(F, u_hi, pf_mul(F, h->wd, plo[e], &fe), &fe), pf_add(F, u_hi, pf_mul(F, h->wd, phi[e], &fe), &fe)};
      const double p_lo = pf_sub(F, plo[e], pf_mul(F, h->lr, pf_max4(w), &fe), &fe);
      const double p_hi = pf_sub(F, phi[e], pf_mul(F, h->lr, pf_min4(w), &fe), &fe);
#undef PF_M
#undef PF_V
#undef PF_D
      plo[e] = p_lo, phi[e] = p_hi, mlo[e] = m_lo, mhi[e] = m_hi, vlo[e] = v_lo, vhi[e] = v_hi;
      for (int run = 0; run < 2; run++) {
        pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_MASTER, e), p_lo, p_hi, F);
        pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_PARAM, e), pf_round(T, p_lo), pf_round(T, p_hi), T);
        pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_M, e), m_lo, m_hi, F);
        pf_tp_set(out, pf_tp_run_at(&L, run, s, PF_TP_V, e), v_lo, v_hi, F);
      }
    }
    /* copies: equal, exactly */
    for (size_t j = 0; j < 2 * L.nsync; j++) pf_tp_set(out, pf_tp_sync_at(&L, s, 0) + j, 0, 0, F);
  }
  mpfr_clears(slo, shi, t, f, (mpfr_ptr)0);
  pf_mpfr_range_restore(saved);
  free(st);
  return PF_OK;
}
