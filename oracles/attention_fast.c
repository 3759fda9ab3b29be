/* The attention oracle's fast path: the same definition as attention_mpfr.c,
 *   s_j = alpha (q . k_j), alpha = 1/sqrt(d),  p_j = exp(s_j) / sum_k exp(s_k),  o = sum_j p_j v_j,
 * computed with a proven error bound and trusted only where the bound decides every output of
 * the row (dd.c's pf_fast_settle); a row it cannot decide goes to MPFR.
 *
 * Error budget (u = 2^-53; double-word operations at twice their published bounds, dd.h):
 *   q . k_j      a compensated sum (Ogita, Rump and Oishi's Sum2, SIAM J. Sci. Comput. 26(6),
 *                2005) of the d products, each exact in binary64 (the inputs are fp32, fp16 or
 *                bf16 values: 24 x 24 bits). Kept as the double word p + sigma (not rounded),
 *                its error is at most gamma_{d-1} gamma_{d-2} sum |q_m k_jm| (their Prop. 4.5
 *                without the final rounding), and sum |q_m k_jm| <= |q| |k_j| (Cauchy-Schwarz):
 *                err_dot <= gamma_d^2 |q| |k_j|, the norms bounded from above (norm_up).
 *   s_j          times alpha (a double word within 2^-105): 2^-99 |s_j| more.
 *   exp(s_j - m) m is a double (any value: it cancels in p), the subtraction 2^-100 |z|, an
 *                absolute error ez in z makes exp's relative error at most 2^-87 + 1.01 ez
 *                (ez <= 2^-40, else the row is MPFR's).
 *   p_j          the sum of positive terms (2^-101 each) has the relative error rS, its terms'
 *                errors weighted by the terms, plus n 2^-101; 1/sum and a product add 2^-99:
 *                rp_j <= (r_j + rS + 2^-99) (1 + 2^-40).
 *   o_e          a compensated dot product of the p_j (double words: the high parts' products
 *                split exactly by an FMA, the low parts' added to the compensation) with v_je;
 *                its error is at most 4 (n + 3)^2 u^2 W_e, W_e = sum_j p_j |v_je| (summed beside
 *                it), plus sum_j p_j rp_j |v_je| <= (2 rS + 2^-99) W_e for the p_j's own errors.
 * Keys masked with a finite sentinel whose exp is below 2^-1076 of the largest term count as 0
 * within that (as in softmax_fast.c). Products near binary64's underflow (below 2^-900), scores
 * farther than 600 below the maximum but not negligible, and non-finite inputs go to MPFR.
 *
 * The dot products run 16 keys (scores) or 4 columns (output) at a time with AVX2 and FMA where
 * the processor has them, lane for lane the same operations as the plain C loops, so the
 * result is the same bits either way. */
#include "oracles/attention_fast.h"
#include "oracles/softmax_fast.h" /* pf_oracle_visible */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpfr.h>

#include "core/case.h"
#include "core/dtype.h"
#include "core/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PF_X86 1
#endif

/* scores[j] = q . k_j for j in [j0, j1) as double words (Sum2, one key per lane) */
static void pf_dots_c(const double *q, const float *KT, size_t Lk, size_t d, size_t j0, size_t j1, double *sh,
                      double *sl) {
  for (size_t j = j0; j < j1; j++) {
    double s = 0, c = 0;
    for (size_t m = 0; m < d; m++) {
      const double x = q[m] * (double)KT[m * Lk + j]; /* exact */
      const double t = s + x, bp = t - s, ap = t - bp;
      c += (s - ap) + (x - bp);
      s = t;
    }
    const pf_dd r = pf_two_sum(s, c);
    sh[j] = r.hi;
    sl[j] = r.lo;
  }
}

/* o[e] += p_j v_je over the keys with p_j != 0 (Dot2 with double-word p, one column per lane);
 * s, c: the running sum and its compensation, W: sum_j p_j |v_je| (for the bound), d each */
static void pf_pv_c(const double *ph, const double *pl, const float *V, size_t Lk, size_t d, double *s, double *c,
                    double *W) {
  for (size_t j = 0; j < Lk; j++) {
    if (ph[j] == 0) continue;
    const double a = ph[j], b = pl[j];
    for (size_t e = 0; e < d; e++) {
      const double v = (double)V[j * d + e], h = a * v, l = fma(a, v, -h);
      const double t = s[e] + h, bp = t - s[e], ap = t - bp, err = (s[e] - ap) + (h - bp);
      c[e] = c[e] + (err + fma(b, v, l));
      s[e] = t;
      W[e] += a * fabs(v);
    }
  }
}

#ifdef PF_X86
__attribute__((target("avx2,fma"))) static void pf_dots_avx2(const double *q, const float *KT, size_t Lk, size_t d,
                                                              size_t j0, size_t j1, double *sh, double *sl) {
  size_t j = j0;
  for (; j + 16 <= j1; j += 16) {
    __m256d s[4], c[4];
    for (int l = 0; l < 4; l++) s[l] = c[l] = _mm256_setzero_pd();
    for (size_t m = 0; m < d; m++) {
      const __m256d qm = _mm256_broadcast_sd(q + m);
      const float *k = KT + m * Lk + j;
      for (int l = 0; l < 4; l++) {
        const __m256d x = _mm256_mul_pd(qm, _mm256_cvtps_pd(_mm_loadu_ps(k + 4 * l)));
        const __m256d t = _mm256_add_pd(s[l], x), bp = _mm256_sub_pd(t, s[l]), ap = _mm256_sub_pd(t, bp);
        c[l] = _mm256_add_pd(c[l], _mm256_add_pd(_mm256_sub_pd(s[l], ap), _mm256_sub_pd(x, bp)));
        s[l] = t;
      }
    }
    double sv[16], cv[16];
    for (int l = 0; l < 4; l++) {
      _mm256_storeu_pd(sv + 4 * l, s[l]);
      _mm256_storeu_pd(cv + 4 * l, c[l]);
    }
    for (int l = 0; l < 16; l++) {
      const pf_dd r = pf_two_sum(sv[l], cv[l]);
      sh[j + (size_t)l] = r.hi;
      sl[j + (size_t)l] = r.lo;
    }
  }
  pf_dots_c(q, KT, Lk, d, j, j1, sh, sl);
}

__attribute__((target("avx2,fma"))) static void pf_pv_avx2(const double *ph, const double *pl, const float *V,
                                                            size_t Lk, size_t d, double *s, double *c, double *W) {
  const size_t d4 = d & ~(size_t)3;
  const __m256d sign = _mm256_set1_pd(-0.0);
  for (size_t j = 0; j < Lk; j++) {
    if (ph[j] == 0) continue;
    const __m256d a = _mm256_set1_pd(ph[j]), b = _mm256_set1_pd(pl[j]);
    const float *vr = V + j * d;
    for (size_t e = 0; e < d4; e += 4) {
      const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(vr + e)), se = _mm256_loadu_pd(s + e);
      const __m256d h = _mm256_mul_pd(a, v), l = _mm256_fmsub_pd(a, v, h);
      const __m256d t = _mm256_add_pd(se, h), bp = _mm256_sub_pd(t, se), ap = _mm256_sub_pd(t, bp);
      const __m256d err = _mm256_add_pd(_mm256_sub_pd(se, ap), _mm256_sub_pd(h, bp));
      _mm256_storeu_pd(c + e, _mm256_add_pd(_mm256_loadu_pd(c + e), _mm256_add_pd(err, _mm256_fmadd_pd(b, v, l))));
      _mm256_storeu_pd(s + e, t);
      _mm256_storeu_pd(W + e, _mm256_add_pd(_mm256_loadu_pd(W + e), _mm256_mul_pd(a, _mm256_andnot_pd(sign, v))));
    }
    for (size_t e = d4; e < d; e++) { /* the same operations as pf_pv_c */
      const double v = (double)vr[e], h = ph[j] * v, l = fma(ph[j], v, -h);
      const double t = s[e] + h, bp = t - s[e], ap = t - bp, err = (s[e] - ap) + (h - bp);
      c[e] = c[e] + (err + fma(pl[j], v, l));
      s[e] = t;
      W[e] += ph[j] * fabs(v);
    }
  }
}
#endif

pf_status pf_attn_fast_init(pf_attn_fast *f, const pf_case *c, const pf_tensor *in, int store_sp, int mask,
                            double sentinel, double Lstore) {
  const size_t heads = c->shape[0] * c->shape[1], Lq = c->shape[2], Lk = c->shape[3], d = c->shape[4];
  *f = (pf_attn_fast){.heads = heads, .Lq = Lq, .Lk = Lk, .d = d, .Q = in[0].data, .mask = mask,
                      .store_sp = store_sp, .sentinel = sentinel, .Lstore = Lstore, .dt = c->dtype};
  f->KT = malloc(heads * Lk * d * sizeof *f->KT);
  f->V = malloc(heads * Lk * d * sizeof *f->V);
  f->knorm = malloc(heads * Lk * sizeof *f->knorm);
  f->vmax = malloc(heads * d * sizeof *f->vmax);
  f->vmin = malloc(heads * sizeof *f->vmin);
  f->head_ok = malloc(heads);
  if (!f->KT || !f->V || !f->knorm || !f->vmax || !f->vmin || !f->head_ok) {
    pf_attn_fast_free(f);
    return pf_error(PF_ERR_NOMEM, "attention oracle: cannot allocate the fast path's copy of K and V");
  }
  const double u = 0x1p-53, g = (double)d * u / (1 - (double)d * u);
  f->gamma2 = g * g * (1 + 0x1p-40);
  f->norm_up = 1 + (double)(d + 8) * 0x1p-52;
  mpfr_t a;
  mpfr_init2(a, 256);
  mpfr_set_ui(a, (unsigned long)d, MPFR_RNDN);
  mpfr_rec_sqrt(a, a, MPFR_RNDN);
  f->alpha.hi = mpfr_get_d(a, MPFR_RNDN);
  mpfr_sub_d(a, a, f->alpha.hi, MPFR_RNDN);
  f->alpha.lo = mpfr_get_d(a, MPFR_RNDN);
  mpfr_clear(a);
  for (size_t h = 0; h < heads; h++) {
    const double *K = in[1].data + h * Lk * d, *V = in[2].data + h * Lk * d;
    int ok = 1;
    double vmin = INFINITY;
    for (size_t e = 0; e < d; e++) f->vmax[h * d + e] = 0;
    for (size_t j = 0; j < Lk; j++) {
      double kk = 0;
      for (size_t m = 0; m < d; m++) {
        const double k = K[j * d + m], v = V[j * d + m];
        ok &= isfinite(k) && isfinite(v) && (double)(float)k == k && (double)(float)v == v;
        f->KT[h * Lk * d + m * Lk + j] = (float)k;
        f->V[h * Lk * d + j * d + m] = (float)v;
        kk += k * k;
        if (fabs(v) > f->vmax[h * d + m]) f->vmax[h * d + m] = fabs(v);
        if (v != 0 && fabs(v) < vmin) vmin = fabs(v);
      }
      f->knorm[h * Lk + j] = sqrt(kk) * f->norm_up;
    }
    f->head_ok[h] = (unsigned char)ok;
    f->vmin[h] = vmin;
  }
  f->avx2 = pf_avx2();
  return PF_OK;
}

void pf_attn_fast_free(pf_attn_fast *f) {
  free(f->KT);
  free(f->V);
  free(f->knorm);
  free(f->vmax);
  free(f->vmin);
  free(f->head_ok);
  memset(f, 0, sizeof *f);
}

pf_status pf_attn_fast_work_init(pf_attn_fast_work *w, const pf_attn_fast *f) {
  w->sh = malloc(3 * f->Lk * sizeof(double));
  w->e = malloc(f->Lk * sizeof *w->e);
  w->oh = malloc(3 * f->d * sizeof(double));
  if (!w->sh || !w->e || !w->oh) {
    pf_attn_fast_work_free(w);
    return pf_error(PF_ERR_NOMEM, "attention oracle: cannot allocate a row of %zu keys", f->Lk);
  }
  w->sl = w->sh + f->Lk;
  w->er = w->sl + f->Lk;
  w->ol = w->oh + f->d;
  w->ow = w->ol + f->d;
  return PF_OK;
}

void pf_attn_fast_work_free(pf_attn_fast_work *w) {
  free(w->sh);
  free(w->e);
  free(w->oh);
  memset(w, 0, sizeof *w);
}

PF_DD_CLONES int pf_attn_fast_row(const pf_attn_fast *f, size_t h, size_t i, pf_oracle_result *out, pf_attn_fast_work *w) {
  const size_t Lq = f->Lq, Lk = f->Lk, d = f->d, row = h * Lq + i;
  const size_t no = f->heads * Lq * d, ns = f->heads * Lq * Lk;
  if (!f->head_ok[h]) return 0;
  const double *q = f->Q + row * d;
  double qq = 0;
  for (size_t m = 0; m < d; m++) {
    if (!isfinite(q[m]) || (double)(float)q[m] != q[m]) return 0;
    qq += q[m] * q[m];
  }
  const double qn = sqrt(qq) * f->norm_up;
  /* keys [0, vis) are seen; the rest hold the sentinel (-inf: not there at all) */
  const size_t vis = pf_oracle_visible(f->mask, i, Lq, Lk);
  const size_t nd = f->store_sp ? Lk : vis; /* the dot products needed */
  const float *KT = f->KT + h * Lk * d;
#ifdef PF_X86
  if (f->avx2) pf_dots_avx2(q, KT, Lk, d, 0, nd, w->sh, w->sl);
  else
#endif
    pf_dots_c(q, KT, Lk, d, 0, nd, w->sh, w->sl);
  /* scores s_j = alpha dot_j with their absolute error bounds; the stored S = s / Lstore. The
   * products are multiples of 2^-298 (fp32's smallest subnormal squared), so nothing in the
   * sum comes near binary64's underflow */
  double m = -INFINITY;
  for (size_t j = 0; j < nd; j++) {
    const pf_dd s = pf_dd_mul((pf_dd){w->sh[j], w->sl[j]}, f->alpha);
    const double er = f->alpha.hi * f->gamma2 * qn * f->knorm[h * Lk + j] * (1 + 0x1p-40) + fabs(s.hi) * 0x1p-99;
    if (f->store_sp) {
      const pf_dd S = f->Lstore == 1 ? s : pf_dd_div(s, (pf_dd){f->Lstore, 0});
      const double eS = f->Lstore == 1 ? er : er / f->Lstore * (1 + 0x1p-50) + fabs(S.hi) * 0x1p-99;
      if (!pf_fast_settle(out, no + row * Lk + j, S, eS, f->dt)) return 0;
    }
    w->sh[j] = s.hi;
    w->sl[j] = s.lo;
    w->er[j] = er;
    if (j < vis && s.hi > m) m = s.hi;
  }
  if (vis < Lk && !isinf(f->sentinel) && f->sentinel > m) m = f->sentinel;
  /* e_j = exp(s_j - m), 0 for -inf and for the negligible (z < -746, z kept in e[j].lo); r_j
   * its relative error bound */
  pf_dd S = {0, 0};
  double wr = 0; /* sum_j e_j r_j: the sum's error, each term's error weighted by the term */
  size_t zeros = 0, n = 0;
  for (size_t j = 0; j < Lk; j++) {
    if (j >= vis && isinf(f->sentinel)) {
      w->e[j] = (pf_dd){0, -INFINITY};
      continue;
    }
    const pf_dd s = j < vis ? (pf_dd){w->sh[j], w->sl[j]} : (pf_dd){f->sentinel, 0};
    const pf_dd z = pf_dd_add(s, (pf_dd){-m, 0});
    const double ez = (j < vis ? w->er[j] : 0) + fabs(z.hi) * 0x1p-100;
    if (z.hi + ez < -746) { /* negligible however wrong z is */
      w->e[j] = (pf_dd){0, z.hi};
      zeros++;
      continue;
    }
    if (!(ez <= 0x1p-40) || z.hi < -600) return 0;
    w->e[j] = pf_dd_exp(z);
    S = pf_dd_add(S, w->e[j]);
    w->er[j] = 0x1p-87 + 1.01 * ez; /* from here on: r_j */
    wr += w->e[j].hi * w->er[j];
    n++;
  }
  /* the sum's relative error: its terms' errors, weighted (each e_j.hi within 2^-52 of e_j),
   * and its adds' */
  const double rS = (wr / S.hi * (1 + 0x1p-50) + (double)n * 0x1p-101 + (double)zeros * 0x1p-200) * (1 + 0x1p-40);
  if (!(rS <= 0x1p-58)) return 0;
  const pf_dd inv = pf_dd_div((pf_dd){1, 0}, S);
  double pmin = INFINITY;
  for (size_t j = 0; j < Lk; j++) {
    const size_t at = no + ns + row * Lk + j;
    if (w->e[j].hi == 0) {
      if (f->store_sp) {
        if (isinf(w->e[j].lo)) {
          out->dtype[at] = (unsigned char)f->dt;
          out->exact[at] = out->rounded[at] = out->rounded_alt[at] = 0;
          out->status[at] = PF_ORACLE_NUMBER;
        } else if (!pf_fast_negligible(out, at, f->dt, w->e[j].lo, S.hi))
          return 0;
      }
      w->sh[j] = w->sl[j] = 0; /* p_j as the output's sum reads it */
      continue;
    }
    const pf_dd p = pf_dd_mul(w->e[j], inv);
    const double rp = (w->er[j] + rS + 0x1p-99) * (1 + 0x1p-40);
    if (f->store_sp && !pf_fast_settle(out, at, p, rp * p.hi, f->dt)) return 0;
    w->sh[j] = p.hi;
    w->sl[j] = p.lo;
    if (p.hi < pmin) pmin = p.hi;
  }
  /* o = sum_j p_j v_j; every product p_j v_je far from underflow, so each FMA split is exact */
  if (f->vmin[h] < INFINITY && pmin * f->vmin[h] < 0x1p-900) return 0;
  for (size_t e = 0; e < d; e++) w->oh[e] = w->ol[e] = w->ow[e] = 0;
  const float *V = f->V + h * Lk * d;
#ifdef PF_X86
  if (f->avx2) pf_pv_avx2(w->sh, w->sl, V, Lk, d, w->oh, w->ol, w->ow);
  else
#endif
    pf_pv_c(w->sh, w->sl, V, Lk, d, w->oh, w->ol, w->ow);
  /* sum_j p_j rp_j |v_je| <= W_e (sum_j p_j r_j + rS + 2^-99) and sum_j p_j r_j is rS's first
   * term; W_e = sum_j p_j |v_je| as computed (n products and adds, p_j within 2^-40) */
  const double nn = (double)n + 3, eo = ((2 * rS + 0x1p-99) * (1 + 0x1p-39) + 4 * nn * nn * 0x1p-106 + 0x1p-100) * (1 + 0x1p-40);
  for (size_t e = 0; e < d; e++) {
    const double vm = f->vmax[h * d + e], W = w->ow[e] * (1 + nn * 0x1p-52) * (1 + 0x1p-40);
    /* (the last term: the compensation's products may be subnormal) */
    const double err = vm > 0 ? eo * W + (double)zeros * 0x1p-200 * vm + 3 * nn * 0x1p-1074 : 0;
    if (!pf_fast_settle(out, row * d + e, pf_two_sum(w->oh[e], w->ol[e]), err, f->dt)) return 0;
  }
  return 1;
}
