/* The LayerNorm backward oracle's fast path: the definition of layernorm_bwd_spec.h in
 * double-word arithmetic (dd.h) with a proven error bound, trusted only where the bound decides
 * an output (pf_fast_settle); layernorm_bwd_mpfr.c calls it first and takes what it leaves.
 * RMSNorm's backward (rmsnorm_bwd_spec.h, rmsnorm_bwd_mpfr.c) is the same without the mean: its
 * statistics from rmsnorm_fast.c's pf_rms_fast_stats (mean 0 exactly), no mean term, no dbeta.
 *
 * Error budget (u = 2^-53; every bound an absolute one on a computed double word, carried
 * beside it and enlarged by 2^-40 of itself for its own rounding in binary64):
 *   statistics   -mean within em and rstd r within rr r (layernorm_fast.c's pf_ln_fast_stats)
 *   d_j          x_j - mean (DWPlusFP): within em + 2u^2 |d_j|
 *   xhat_j       d_j r (DWTimesDW3, 5u^2): |xh| (rr + 5u^2)(1 + 2 rr) + r (1 + rr) e_d
 *   a_j          g'_j dy_j, g' = g or 1 + g (exact by TwoSum), dy a double: 5u^2 |a|
 *   A, C         sum a_j and sum a_j xhat_j in four interleaved sums (lane j mod 4, the same
 *                order with AVX2 and without), each of its N double-word terms t_k: their high
 *                parts by TwoSum into s, the TwoSum errors q_k and the low parts into one double c
 *                (Sum2 with the low parts joining the errors): s + c is off the exact sum by
 *                gamma_2N (sum |q_k| + |lo_k|) <= gamma_2N (1 + gamma_N)(u N (1 + gamma_N) M_hi + M_lo),
 *                M_hi = sum |hi_k|, M_lo = sum |lo_k| as computed, plus the terms' own bounds;
 *                the four lanes' (s, c) then summed the same way as four terms; the products by
 *                DWTimesDW3:
 *                |a| e_xh + |xh| e_a + e_a e_xh + 5u^2 |a xh|
 *   dx_j         r (a_j - A / n - xhat_j C / n): the quotients by DWDivDW3 (9.8u^2), the product
 *                and the two subtractions as above, then times r: r e_q + (|q| + e_q) rr r + 5u^2
 *   dgamma_j     sum over the rows of dy xhat (DWTimesDW3 and the sum of A and C)
 *   dbeta_j      sum over the rows of dy by DWPlusFP (2u^2 of each partial sum), exact when no add
 *                rounded (then settled as it is, a tie of its dtype included)
 * The row statistics bound every operand away from binary64's underflow and overflow (checked:
 * values and sums within 2^+-300). */
#include "oracles/layernorm_bwd_fast.h"

#include <math.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "oracles/dd.h"
#include "oracles/dd_avx2.h"
#include "oracles/layernorm_fast.h"
#include "oracles/rmsnorm_fast.h"

#define PF_U2 0x1p-106 /* u^2 */
#define PF_SLACK (1 + 0x1p-40)

/* a double word within e of its value, e's own rounding included */
typedef struct {
  pf_dd v;
  double e;
} pf_lnbf;

static inline double pf_lnbf_abs(pf_dd x) { return fabs(x.hi) + fabs(x.lo); }
static inline pf_lnbf pf_lnbf_add(pf_lnbf a, pf_lnbf b) {
  const pf_dd s = pf_dd_add(a.v, b.v);
  return (pf_lnbf){s, (a.e + b.e + 3.01 * PF_U2 * pf_lnbf_abs(s)) * PF_SLACK};
}
static inline pf_lnbf pf_lnbf_mul(pf_lnbf a, pf_lnbf b) {
  const pf_dd p = pf_dd_mul(a.v, b.v);
  const double ma = pf_lnbf_abs(a.v), mb = pf_lnbf_abs(b.v);
  return (pf_lnbf){p, (ma * b.e + mb * a.e + a.e * b.e + 5.01 * PF_U2 * pf_lnbf_abs(p)) * PF_SLACK};
}
/* a / n, n a positive integer below 2^53 (exact in binary64) */
static inline pf_lnbf pf_lnbf_div_n(pf_lnbf a, double n) {
  const pf_dd q = pf_dd_div(a.v, (pf_dd){n, 0});
  return (pf_lnbf){q, (a.e / n + 9.81 * PF_U2 * pf_lnbf_abs(q)) * PF_SLACK};
}
static inline pf_lnbf pf_lnbf_neg(pf_lnbf a) { return (pf_lnbf){pf_dd_neg(a.v), a.e}; }

/* A running sum of double words (the bound above): s + c, the terms' bounds e, sum |hi| mh and
 * sum |lo| ml, n terms. */
typedef struct {
  double s, c, mh, ml, e;
  size_t n;
} pf_lnbf_acc;

static inline void pf_lnbf_acc_add(pf_lnbf_acc *a, pf_lnbf t) {
  const pf_dd q = pf_two_sum(a->s, t.v.hi);
  a->s = q.hi;
  a->c += q.lo + t.v.lo;
  a->mh += fabs(t.v.hi);
  a->ml += fabs(t.v.lo);
  a->e += t.e;
  a->n++;
}

static inline pf_lnbf pf_lnbf_acc_total(const pf_lnbf_acc *a) {
  const double N = (double)a->n, gN = N * 0x1p-53 / (1 - N * 0x1p-53), g2N = 2 * N * 0x1p-53 / (1 - 2 * N * 0x1p-53);
  const double es = g2N * (1 + gN) * (0x1p-53 * N * (1 + gN) * a->mh + a->ml);
  return (pf_lnbf){pf_two_sum(a->s, a->c), (a->e * (1 + gN) + es) * PF_SLACK};
}

/* four lanes' sums as one: each lane's (s, c) a term of a last sum */
static inline pf_lnbf pf_lnbf_acc4_total(const pf_lnbf_acc *a) {
  pf_lnbf_acc t = {0, 0, 0, 0, 0, 0};
  for (int l = 0; l < 4; l++) {
    const pf_lnbf v = pf_lnbf_acc_total(&a[l]);
    pf_lnbf_acc_add(&t, (pf_lnbf){{a[l].s, a[l].c}, v.e});
  }
  return pf_lnbf_acc_total(&t);
}

/* every value finite and within 2^+-300 of 1 (or 0) */
static int pf_lnbf_tame(const double *v, size_t n, size_t stride) {
  for (size_t k = 0; k < n; k++) {
    const double a = fabs(v[k * stride]);
    if (!(a <= 0x1p300) || (a != 0 && a < 0x1p-300)) return 0;
  }
  return 1;
}

int pf_lnb_fast_stats(const pf_lnb_fast_params *p, const double *x, pf_lnb_fast_row_stats *st) {
  if (p->rms) {
    const pf_rms_fast_params fp = {p->cols, p->dtype, p->dtype, p->eps, 0, 0};
    st->nm = (pf_dd){0, 0}, st->em = 0;
    st->ok = pf_lnbf_tame(x, p->cols, 1) && pf_rms_fast_stats(&fp, x, &st->r, &st->rr);
    return st->ok;
  }
  const pf_ln_fast_params fp = {p->cols, p->dtype, p->dtype, p->eps, 0, 0, 0, 0};
  st->ok = pf_lnbf_tame(x, p->cols, 1) && pf_ln_fast_stats(&fp, x, &st->nm, &st->em, &st->r, &st->rr);
  return st->ok;
}

/* xhat_j of a row */
static inline pf_lnbf pf_lnbf_xhat(const pf_lnb_fast_row_stats *st, double x) {
  const pf_dd d = pf_dd_add_d(st->nm, x);
  const double ed = (st->em + 2.02 * PF_U2 * fabs(d.hi)) * PF_SLACK;
  const pf_dd xh = pf_dd_mul(d, st->r);
  const double e =
      (pf_lnbf_abs(xh) * (st->rr + 5.01 * PF_U2) * (1 + 2 * st->rr) + fabs(st->r.hi) * (1 + 2 * st->rr) * ed) * PF_SLACK;
  return (pf_lnbf){xh, e};
}

/* a_j = g'_j dy_j */
static inline pf_lnbf pf_lnbf_a(const pf_lnb_fast_params *p, double g, double dy) {
  const pf_dd gg = p->zero_centered ? pf_two_sum(1.0, g) : (pf_dd){g, 0};
  const pf_dd a = pf_dd_mul(gg, (pf_dd){dy, 0});
  return (pf_lnbf){a, 5.01 * PF_U2 * pf_lnbf_abs(a) * PF_SLACK};
}

/* the row's products for element j: a_j into w[j], xhat_j into w[n + j] */
static inline pf_lnbf pf_lnbf_prod(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x,
                                   const double *dy, const double *g, size_t j, size_t n, pf_lnbf *w) {
  w[j] = pf_lnbf_a(p, g[j], dy[j]);
  w[n + j] = pf_lnbf_xhat(st, x[j]);
  return pf_lnbf_mul(w[j], w[n + j]);
}

/* dx_j from the row's a_j - mean(a) - xhat_j mean(a xhat): settled into out, or 0 */
static inline int pf_lnbf_dx1(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, pf_lnbf a, pf_lnbf xh,
                              pf_lnbf mA, pf_lnbf mC, double rabs, pf_oracle_result *out, size_t k) {
  const pf_lnbf am = p->rms ? a : pf_lnbf_add(a, mA); /* a_j - A / n (RMSNorm: no mean term) */
  const pf_lnbf q = pf_lnbf_add(am, pf_lnbf_neg(pf_lnbf_mul(xh, mC)));
  const pf_dd dx = pf_dd_mul(st->r, q.v);
  const double e =
      (rabs * q.e + (pf_lnbf_abs(q.v) + q.e) * st->rr * rabs * (1 + 2 * st->rr) + 5.01 * PF_U2 * pf_lnbf_abs(dx)) *
      PF_SLACK;
  return dx.hi != 0 && fabs(dx.hi) >= 0x1p-900 && pf_fast_settle(out, k, dx, e, p->dtype);
}

#ifdef PF_DD_AVX2
typedef struct {
  pf_dd4 v;
  __m256d e;
} pf_lnbf4;

PF_AVX2_INLINE __m256d pf4_dabs(pf_dd4 x) { return _mm256_add_pd(pf4_abs(x.hi), pf4_abs(x.lo)); }
PF_AVX2_INLINE __m256d pf4_slack(__m256d e) { return _mm256_mul_pd(e, pf4_c(PF_SLACK)); }
PF_AVX2_INLINE pf_lnbf4 pf_lnbf4_mul(pf_lnbf4 a, pf_lnbf4 b) {
  const pf_dd4 q = pf4_mul(a.v, b.v);
  const __m256d ma = pf4_dabs(a.v), mb = pf4_dabs(b.v);
  __m256d e = _mm256_add_pd(_mm256_mul_pd(ma, b.e), _mm256_mul_pd(mb, a.e));
  e = _mm256_add_pd(e, _mm256_mul_pd(a.e, b.e));
  e = _mm256_add_pd(e, _mm256_mul_pd(pf4_c(5.01 * PF_U2), pf4_dabs(q)));
  return (pf_lnbf4){q, pf4_slack(e)};
}
PF_AVX2_INLINE pf_lnbf4 pf_lnbf4_add(pf_lnbf4 a, pf_lnbf4 b) {
  const pf_dd4 q = pf4_add(a.v, b.v);
  const __m256d e = _mm256_add_pd(_mm256_add_pd(a.e, b.e), _mm256_mul_pd(pf4_c(3.01 * PF_U2), pf4_dabs(q)));
  return (pf_lnbf4){q, pf4_slack(e)};
}
PF_AVX2_INLINE pf_lnbf4 pf_lnbf4_xhat(const pf_lnb_fast_row_stats *st, __m256d x) {
  const pf_dd4 d = pf4_add_d(pf4_bcast(st->nm), x);
  const __m256d ed = pf4_slack(_mm256_add_pd(pf4_c(st->em), _mm256_mul_pd(pf4_c(2.02 * PF_U2), pf4_abs(d.hi))));
  const pf_dd4 xh = pf4_mul(d, pf4_bcast(st->r));
  __m256d e = _mm256_mul_pd(_mm256_mul_pd(pf4_dabs(xh), pf4_c(st->rr + 5.01 * PF_U2)), pf4_c(1 + 2 * st->rr));
  e = _mm256_add_pd(e, _mm256_mul_pd(pf4_c(fabs(st->r.hi) * (1 + 2 * st->rr)), ed));
  return (pf_lnbf4){xh, pf4_slack(e)};
}
PF_AVX2_INLINE pf_lnbf4 pf_lnbf4_a(const pf_lnb_fast_params *p, __m256d g, __m256d dy) {
  const pf_dd4 gg = p->zero_centered ? pf4_two_sum(pf4_c(1.0), g) : pf4_d(g);
  const pf_dd4 a = pf4_mul(gg, pf4_d(dy));
  return (pf_lnbf4){a, pf4_slack(_mm256_mul_pd(pf4_c(5.01 * PF_U2), pf4_dabs(a)))};
}
PF_AVX2_INLINE void pf_lnbf4_store(pf_lnbf *w, pf_lnbf4 v) {
  double h[4], l[4], e[4];
  _mm256_storeu_pd(h, v.v.hi), _mm256_storeu_pd(l, v.v.lo), _mm256_storeu_pd(e, v.e);
  for (int k = 0; k < 4; k++) w[k] = (pf_lnbf){{h[k], l[k]}, e[k]};
}
PF_AVX2_INLINE pf_lnbf4 pf_lnbf4_load(const pf_lnbf *w) {
  return (pf_lnbf4){{_mm256_setr_pd(w[0].v.hi, w[1].v.hi, w[2].v.hi, w[3].v.hi),
                     _mm256_setr_pd(w[0].v.lo, w[1].v.lo, w[2].v.lo, w[3].v.lo)},
                    _mm256_setr_pd(w[0].e, w[1].e, w[2].e, w[3].e)};
}

/* the row's first loop over j < n4 (a multiple of 4): a_j and xhat_j into w, the four lanes' sums
 * of a and a xhat, as the scalar loop adds them */
PF_AVX2_TARGET static void pf_lnbf4_sums(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st,
                                         const double *x, const double *dy, const double *g, size_t n, size_t n4,
                                         pf_lnbf *w, pf_lnbf_acc *sa, pf_lnbf_acc *sc) {
  __m256d s[2], c[2], mh[2], ml[2], e[2];
  for (int k = 0; k < 2; k++) s[k] = c[k] = mh[k] = ml[k] = e[k] = _mm256_setzero_pd();
  for (size_t j = 0; j < n4; j += 4) {
    const pf_lnbf4 a = pf_lnbf4_a(p, _mm256_loadu_pd(g + j), _mm256_loadu_pd(dy + j));
    const pf_lnbf4 xh = pf_lnbf4_xhat(st, _mm256_loadu_pd(x + j));
    pf_lnbf4_store(w + j, a);
    pf_lnbf4_store(w + n + j, xh);
    const pf_lnbf4 t[2] = {a, pf_lnbf4_mul(a, xh)};
    for (int k = 0; k < 2; k++) {
      const pf_dd4 q = pf4_two_sum(s[k], t[k].v.hi);
      s[k] = q.hi;
      c[k] = _mm256_add_pd(c[k], _mm256_add_pd(q.lo, t[k].v.lo));
      mh[k] = _mm256_add_pd(mh[k], pf4_abs(t[k].v.hi));
      ml[k] = _mm256_add_pd(ml[k], pf4_abs(t[k].v.lo));
      e[k] = _mm256_add_pd(e[k], t[k].e);
    }
  }
  pf_lnbf_acc *acc[2] = {sa, sc};
  for (int k = 0; k < 2; k++) {
    double vs[4], vc[4], vh[4], vl[4], ve[4];
    _mm256_storeu_pd(vs, s[k]), _mm256_storeu_pd(vc, c[k]), _mm256_storeu_pd(vh, mh[k]), _mm256_storeu_pd(vl, ml[k]);
    _mm256_storeu_pd(ve, e[k]);
    for (int l = 0; l < 4; l++) acc[k][l] = (pf_lnbf_acc){vs[l], vc[l], vh[l], vl[l], ve[l], n4 / 4};
  }
}

/* dx for j .. j + 3: the lanes the cheap test settles, as a mask (the scalar path takes the others) */
PF_AVX2_TARGET static int pf_lnbf4_dx(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const pf_lnbf *a,
                                      const pf_lnbf *xh, pf_lnbf mA, pf_lnbf mC, double rabs, pf_oracle_result *out,
                                      size_t k) {
  const pf_lnbf4 a4 = pf_lnbf4_load(a), x4 = pf_lnbf4_load(xh);
  const pf_lnbf4 mA4 = {pf4_bcast(mA.v), pf4_c(mA.e)}, mC4 = {pf4_bcast(mC.v), pf4_c(mC.e)};
  const pf_lnbf4 am = p->rms ? a4 : pf_lnbf4_add(a4, mA4);
  const pf_lnbf4 pm = pf_lnbf4_mul(x4, mC4);
  const pf_lnbf4 q = pf_lnbf4_add(am, (pf_lnbf4){pf4_neg(pm.v), pm.e});
  const pf_dd4 dx = pf4_mul(pf4_bcast(st->r), q.v);
  __m256d e = _mm256_mul_pd(pf4_c(rabs), q.e);
  __m256d t = _mm256_mul_pd(_mm256_add_pd(pf4_dabs(q.v), q.e), pf4_c(st->rr));
  t = _mm256_mul_pd(_mm256_mul_pd(t, pf4_c(rabs)), pf4_c(1 + 2 * st->rr));
  e = _mm256_add_pd(_mm256_add_pd(e, t), _mm256_mul_pd(pf4_c(5.01 * PF_U2), pf4_dabs(dx)));
  e = pf4_slack(e);
  __m256d r;
  const int mask = _mm256_movemask_pd(pf4_settle(dx, e, p->dtype, &r));
  if (mask) pf4_store_settled(out, k, mask, dx, r, p->dtype);
  return mask;
}
#endif

PF_DD_CLONES int pf_lnb_fast_dx(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x,
                                const double *dy, const double *g, size_t i, pf_oracle_result *out) {
  const size_t n = p->cols;
  if (!st->ok || n >= ((size_t)1 << 26) || !pf_lnbf_tame(dy, n, 1) || !pf_lnbf_tame(g, n, 1)) return 0;
  pf_lnbf *w = malloc(2 * n * sizeof *w); /* a_j, then xhat_j */
  if (!w) return 0;
  pf_lnbf_acc sa[4], sc[4];
  for (int l = 0; l < 4; l++) sa[l] = sc[l] = (pf_lnbf_acc){0, 0, 0, 0, 0, 0};
  size_t j0 = 0;
#ifdef PF_DD_AVX2
  const int avx2 = pf_avx2();
  if (avx2) pf_lnbf4_sums(p, st, x, dy, g, n, j0 = n / 4 * 4, w, sa, sc);
#endif
  for (size_t j = j0; j < n; j++) {
    const pf_lnbf ax = pf_lnbf_prod(p, st, x, dy, g, j, n, w);
    pf_lnbf_acc_add(&sa[j % 4], w[j]);
    pf_lnbf_acc_add(&sc[j % 4], ax);
  }
  const double dn = (double)n;
  const pf_lnbf mA = pf_lnbf_neg(pf_lnbf_div_n(pf_lnbf_acc4_total(sa), dn));
  const pf_lnbf mC = pf_lnbf_div_n(pf_lnbf_acc4_total(sc), dn);
  const double rabs = fabs(st->r.hi) + fabs(st->r.lo);
  int ok = 1, lanes = 0;
  for (size_t j = 0; j < n && ok; j++) {
#ifdef PF_DD_AVX2
    if (j % 4 == 0) lanes = avx2 && j + 4 <= n ? pf_lnbf4_dx(p, st, w + j, w + n + j, mA, mC, rabs, out, i * n + j) : 0;
#endif
    if (lanes >> (j % 4) & 1) continue;
    ok = pf_lnbf_dx1(p, st, w[j], w[n + j], mA, mC, rabs, out, i * n + j);
  }
  free(w);
  return ok;
}

/* column j's dgamma (the sum sg) and dbeta (B within sb, or exact) settled into out, or 0 */
static int pf_lnbf_column_settle(const pf_lnb_fast_params *p, const pf_lnbf_acc *sg, pf_dd B, double sb, int exact,
                                 size_t j, pf_oracle_result *out) {
  const size_t n = p->cols, og = p->rows * n + j, ob = p->rows * n + n + j;
  const pf_lnbf G = pf_lnbf_acc_total(sg);
  /* an exact 0 (every dy 0 in the column) is MPFR's: the settle test wants a nonzero value */
  if (!p->rms && !(exact ? pf_fast_settle_exact(out, ob, B, p->weights)
                          : B.hi != 0 && fabs(B.hi) >= 0x1p-900 && pf_fast_settle(out, ob, B, sb * PF_SLACK, p->weights)))
    return 0;
  return G.v.hi != 0 && fabs(G.v.hi) >= 0x1p-900 && pf_fast_settle(out, og, G.v, G.e, p->weights);
}

PF_DD_CLONES int pf_lnb_fast_column(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x,
                                    const double *dy, size_t j, pf_oracle_result *out) {
  const size_t n = p->cols, rows = p->rows;
  if (!pf_lnbf_tame(dy + j, rows, n)) return 0;
  pf_lnbf_acc sg = {0, 0, 0, 0, 0, 0};
  pf_dd B = {0, 0};
  double sb = 0;
  int exact = 1; /* B the exact sum: dbeta settles even on a tie of its dtype */
  for (size_t i = 0; i < rows; i++) {
    if (!st[i].ok) return 0;
    const double d = dy[i * n + j];
    pf_lnbf_acc_add(&sg, pf_lnbf_mul((pf_lnbf){{d, 0}, 0}, pf_lnbf_xhat(&st[i], x[i * n + j])));
    exact &= pf_two_sum(B.lo, pf_two_sum(B.hi, d).lo).lo == 0; /* DWPlusFP's one rounding did not round */
    B = pf_dd_add_d(B, d);
    sb += 2.02 * PF_U2 * pf_lnbf_abs(B);
  }
  return pf_lnbf_column_settle(p, &sg, B, sb, exact, j, out);
}

#ifdef PF_DD_AVX2
/* columns j .. j + 3 at once, each lane one column summed over the rows in the scalar order:
 * the mask of the columns settled (0 where a row has no statistics) */
PF_AVX2_TARGET static int pf_lnbf4_columns(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st,
                                           const double *x, const double *dy, size_t j, pf_oracle_result *out) {
  const size_t n = p->cols, rows = p->rows;
  int tame = 0;
  for (int l = 0; l < 4; l++) tame |= pf_lnbf_tame(dy + j + (size_t)l, rows, n) << l;
  __m256d s = _mm256_setzero_pd(), c = s, mh = s, ml = s, e = s, sb = s;
  pf_dd4 B = {s, s};
  __m256d ex = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
  for (size_t i = 0; i < rows; i++) {
    if (!st[i].ok) return 0;
    const __m256d d = _mm256_loadu_pd(dy + i * n + j);
    const pf_lnbf4 t = pf_lnbf4_mul((pf_lnbf4){pf4_d(d), _mm256_setzero_pd()}, pf_lnbf4_xhat(&st[i], _mm256_loadu_pd(x + i * n + j)));
    const pf_dd4 q = pf4_two_sum(s, t.v.hi);
    s = q.hi;
    c = _mm256_add_pd(c, _mm256_add_pd(q.lo, t.v.lo));
    mh = _mm256_add_pd(mh, pf4_abs(t.v.hi));
    ml = _mm256_add_pd(ml, pf4_abs(t.v.lo));
    e = _mm256_add_pd(e, t.e);
    ex = _mm256_and_pd(ex, _mm256_cmp_pd(pf4_two_sum(B.lo, pf4_two_sum(B.hi, d).lo).lo, _mm256_setzero_pd(), _CMP_EQ_OQ));
    B = pf4_add_d(B, d);
    sb = _mm256_add_pd(sb, _mm256_mul_pd(pf4_c(2.02 * PF_U2), pf4_dabs(B)));
  }
  double vs[4], vc[4], vh[4], vl[4], ve[4], bh[4], bl[4], vb[4];
  _mm256_storeu_pd(vs, s), _mm256_storeu_pd(vc, c), _mm256_storeu_pd(vh, mh), _mm256_storeu_pd(vl, ml);
  _mm256_storeu_pd(ve, e), _mm256_storeu_pd(bh, B.hi), _mm256_storeu_pd(bl, B.lo), _mm256_storeu_pd(vb, sb);
  const int exm = _mm256_movemask_pd(ex);
  int mask = 0;
  for (int l = 0; l < 4; l++) {
    const pf_lnbf_acc sg = {vs[l], vc[l], vh[l], vl[l], ve[l], rows};
    if ((tame >> l & 1) &&
        pf_lnbf_column_settle(p, &sg, (pf_dd){bh[l], bl[l]}, vb[l], exm >> l & 1, j + (size_t)l, out))
      mask |= 1 << l;
  }
  return mask;
}
#endif

int pf_lnb_fast_columns(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x,
                        const double *dy, size_t j, size_t count, pf_oracle_result *out) {
  int mask = 0;
  size_t l = 0;
#ifdef PF_DD_AVX2
  if (count == 4 && pf_avx2()) {
    mask = pf_lnbf4_columns(p, st, x, dy, j, out);
    l = 4;
  }
#endif
  for (; l < count; l++) mask |= pf_lnb_fast_column(p, st, x, dy, j + l, out) << l;
  return mask;
}
