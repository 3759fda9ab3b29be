/* The Adam oracle's fast path: the same definition as adam_mpfr.c,
 *   g' = g (+ wd p in l2 mode);  m' = b1 m + (1 - b1) g';  v' = b2 v + (1 - b2) g'^2
 *   d = sqrt(v' / bc2) + eps  (or sqrt(v' / bc2 + eps));  p' = p - lr (m' / bc1 / d + wd p)
 * in double-word arithmetic (dd.h, bounds at twice the published ones) with an absolute error
 * bound carried through every step, and trusted only where it settles every output of the
 * element (dd.c's pf_fast_settle); otherwise the element is MPFR's.
 *
 * Error budget, step by step (e_x: x's absolute error; u2 = 2^-101 for a product or a
 * quotient, 2^-103 for a sum of double words, 2^-104 for a double word and a double):
 *   wd p, b1 m          exact two-products; 1 - b (b a double) exact as a double word
 *   g'                  e_g = 2^-104 |g'| (l2), 0 otherwise
 *   m'                  e_m = |1 - b1| e_g + 2^-101 |(1 - b1) g'| + 2^-103 |m'|
 *   v'                  all terms >= 0: relative e_v = 2 e_g / |g'| + 2 2^-101 + 2^-103 (+ those
 *                       of b2 v: exact)
 *   bc1, bc2            from MPFR at 256 bits, rounded to double words: 2^-105 relative
 *   d                   v'/bc2 (2^-100 + e_v + 2^-105), the square root halves it (+ 2^-102),
 *                       eps adds 2^-104 of the (positive) sum
 *   m'/bc1/d            e = e_m / (bc1 d) + |x| (e_d + 2^-99 + 2^-105)
 *   + wd p, lr ..., p - e_u + 2^-103 |.|, lr e + 2^-101 |.|, + 2^-104 |p'|
 * Each error is taken (1 + 2^-40) larger for the second-order terms. Every intermediate stays
 * above 2^-900 (or is 0), so that no double word's low part is subnormal. */
#include "oracles/adam_fast.h"

#include <math.h>

#include <mpfr.h>

#include "core/case.h"
#include "core/parallel.h"
#include "kernels/adam/adam_spec.h" /* the variants' PF_ADAM_* values */
#include "oracles/dd_avx2.h"
#include "oracles/oracle_util.h"

static pf_dd pf_bias_correction(double b, unsigned long t) {
  mpfr_t x;
  mpfr_init2(x, 256);
  mpfr_set_d(x, b, MPFR_RNDN);
  mpfr_pow_ui(x, x, t, MPFR_RNDN);
  mpfr_ui_sub(x, 1, x, MPFR_RNDN);
  pf_dd r;
  r.hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(x, x, r.hi, MPFR_RNDN);
  r.lo = mpfr_get_d(x, MPFR_RNDN);
  mpfr_clear(x);
  return r;
}

void pf_adam_fast_init(pf_adam_fast *f, const pf_case *c, int master, pf_dtype st, pf_dtype pt) {
  const int algo = pf_case_algo(c);
  f->lr = pf_case_param(c, "lr"), f->b1 = pf_case_param(c, "beta1"), f->b2 = pf_case_param(c, "beta2");
  f->eps = pf_case_param(c, "eps"), f->wd = pf_case_param(c, "wd");
  f->k1 = pf_two_sum(1, -f->b1);
  f->k2 = pf_two_sum(1, -f->b2);
  const unsigned long t = (unsigned long)pf_case_param(c, "step");
  if (algo == PF_ADAM_NO_BIAS_CORRECTION) f->bc1 = f->bc2 = (pf_dd){1, 0};
  else f->bc1 = pf_bias_correction(f->b1, t), f->bc2 = pf_bias_correction(f->b2, t);
  f->l2 = pf_case_param(c, "mode") == 1;
  f->eps_inside = algo == PF_ADAM_EPS_INSIDE;
  f->master = master, f->st = st, f->pt = pt, f->t = c->dtype;
  f->avx2 = pf_avx2();
}

/* nonzero and below 2^-900: a double word's low part could be subnormal */
static int pf_tiny(pf_dd x) { return x.hi != 0 && fabs(x.hi) < 0x1p-900; }

PF_DD_CLONES int pf_adam_fast_element(const pf_adam_fast *f, size_t i, size_t n, double p, double g, double m,
                                      double v, pf_oracle_result *out) {
  const double s = 1 + 0x1p-40;
  if (!(f->bc1.hi > 0x1p-900) || !(f->bc2.hi > 0x1p-900)) return 0;
  /* g' and m' */
  pf_dd gp = {g, 0};
  double eg = 0;
  if (f->l2) {
    gp = pf_dd_add_d(pf_two_prod(f->wd, p), g);
    eg = 0x1p-104 * fabs(gp.hi) * s;
  }
  const pf_dd B = pf_dd_mul(f->k1, gp), mp = pf_dd_add(pf_two_prod(f->b1, m), B);
  const double em = (fabs(f->k1.hi) * eg + 0x1p-101 * fabs(B.hi) + 0x1p-103 * fabs(mp.hi)) * s;
  if (pf_tiny(gp) || pf_tiny(B) || pf_tiny(mp) || !pf_fast_settle(out, i, mp, em, f->st)) return 0;
  /* v' (every term >= 0) */
  const pf_dd g2 = pf_dd_mul(gp, gp), C = pf_dd_mul(f->k2, g2), vp = pf_dd_add(pf_two_prod(f->b2, v), C);
  const double ev = (gp.hi != 0 ? 2 * eg / fabs(gp.hi) : 0) + 2 * 0x1p-101 + 0x1p-103; /* relative */
  if (v < 0 || pf_tiny(g2) || pf_tiny(C) || pf_tiny(vp) || !pf_fast_settle(out, n + i, vp, ev * s * vp.hi, f->st))
    return 0;
  /* d */
  const pf_dd q = pf_dd_div(vp, f->bc2);
  double ed = ev + 0x1p-100 + 0x1p-105; /* relative, of q */
  pf_dd d;
  if (f->eps_inside) {
    const pf_dd qe = pf_dd_add_d(q, f->eps);
    d = qe.hi > 0 ? pf_dd_sqrt(qe) : qe;
    ed = (ed + 0x1p-104) * s / 2 + 0x1p-102;
  } else {
    d = pf_dd_add_d(q.hi > 0 ? pf_dd_sqrt(q) : q, f->eps);
    ed = (ed * s / 2 + 0x1p-102) + 0x1p-104;
  }
  ed *= s;
  if (d.hi == 0) { /* v' = 0 and eps = 0: p' undefined, as MPFR says */
    pf_oracle_set_undefined(out, 2 * n + i, 0);
    if (f->master) pf_oracle_set_undefined(out, 3 * n + i, 0);
    return 1;
  }
  if (pf_tiny(q) || pf_tiny(d) || !(ed <= 0x1p-60)) return 0;
  /* m'/bc1/d (+ wd p), times lr, from p */
  const pf_dd D = pf_dd_mul(f->bc1, d), x = pf_dd_div(mp, D);
  double e = (em / D.hi * (1 + 0x1p-50) + fabs(x.hi) * (ed + 0x1p-99 + 0x1p-105)) * s;
  pf_dd y = x;
  if (!f->l2) {
    y = pf_dd_add(x, pf_two_prod(f->wd, p));
    e = (e + 0x1p-103 * fabs(y.hi)) * s;
  }
  const pf_dd z = pf_dd_mul((pf_dd){f->lr, 0}, y);
  e = (f->lr * e + 0x1p-101 * fabs(z.hi)) * s;
  const pf_dd pp = pf_dd_add_d(pf_dd_neg(z), p);
  e = (e + 0x1p-104 * fabs(pp.hi)) * s;
  if (pf_tiny(D) || pf_tiny(x) || pf_tiny(y) || pf_tiny(z) || pf_tiny(pp)) return 0;
  if (!pf_fast_settle(out, 2 * n + i, pp, e, f->pt)) return 0;
  if (f->master && !pf_fast_settle(out, 3 * n + i, pp, e, f->t)) return 0;
  return 1;
}

#ifdef PF_DD_AVX2
/* pf_adam_fast_element on elements i..i+3, the same operations lane for lane; only a lane whose
 * every output the cheap test settles is written (the others go through the scalar path, which
 * computes the same values and can still settle them from the ends). */
PF_AVX2_TARGET static int pf_adam_fast_4_avx2(const pf_adam_fast *f, size_t i, size_t n, const double *P,
                                              const double *G, const double *M, const double *V,
                                              pf_oracle_result *out) {
  const __m256d s = pf4_c(1 + 0x1p-40), zero = _mm256_setzero_pd();
  const __m256d p = _mm256_loadu_pd(P), g = _mm256_loadu_pd(G), m = _mm256_loadu_pd(M), v = _mm256_loadu_pd(V);
  const __m256d inf = pf4_c(INFINITY);
  __m256d ok = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(pf4_abs(p), inf, _CMP_LT_OQ),
                                           _mm256_cmp_pd(pf4_abs(g), inf, _CMP_LT_OQ)),
                             _mm256_and_pd(_mm256_cmp_pd(pf4_abs(m), inf, _CMP_LT_OQ),
                                           _mm256_cmp_pd(pf4_abs(v), inf, _CMP_LT_OQ)));
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(v, zero, _CMP_GE_OQ));
  /* g' and m' */
  pf_dd4 gp = pf4_d(g);
  __m256d eg = zero;
  if (f->l2) {
    gp = pf4_add_d(pf4_two_prod(pf4_c(f->wd), p), g);
    eg = _mm256_mul_pd(_mm256_mul_pd(pf4_c(0x1p-104), pf4_abs(gp.hi)), s);
  }
  const pf_dd4 B = pf4_mul(pf4_bcast(f->k1), gp), mp = pf4_add(pf4_two_prod(pf4_c(f->b1), m), B);
  const __m256d em = _mm256_mul_pd(_mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(pf4_c(fabs(f->k1.hi)), eg),
                                                               _mm256_mul_pd(pf4_c(0x1p-101), pf4_abs(B.hi))),
                                                 _mm256_mul_pd(pf4_c(0x1p-103), pf4_abs(mp.hi))),
                                   s);
  __m256d bad = _mm256_or_pd(_mm256_or_pd(pf4_tiny(gp), pf4_tiny(B)), pf4_tiny(mp));
  __m256d rm, rv, rp, rt = zero;
  ok = _mm256_and_pd(ok, pf4_settle(mp, em, f->st, &rm));
  /* v' (every term >= 0) */
  const pf_dd4 g2 = pf4_mul(gp, gp), C = pf4_mul(pf4_bcast(f->k2), g2), vp = pf4_add(pf4_two_prod(pf4_c(f->b2), v), C);
  const __m256d egr = _mm256_blendv_pd(_mm256_div_pd(_mm256_mul_pd(pf4_c(2), eg), pf4_abs(gp.hi)), zero,
                                       _mm256_cmp_pd(gp.hi, zero, _CMP_EQ_OQ));
  const __m256d ev = _mm256_add_pd(_mm256_add_pd(egr, pf4_c(2 * 0x1p-101)), pf4_c(0x1p-103));
  bad = _mm256_or_pd(bad, _mm256_or_pd(_mm256_or_pd(pf4_tiny(g2), pf4_tiny(C)), pf4_tiny(vp)));
  ok = _mm256_and_pd(ok, pf4_settle(vp, _mm256_mul_pd(_mm256_mul_pd(ev, s), vp.hi), f->st, &rv));
  /* d */
  const pf_dd4 q = pf4_div(vp, pf4_bcast(f->bc2));
  __m256d ed = _mm256_add_pd(_mm256_add_pd(ev, pf4_c(0x1p-100)), pf4_c(0x1p-105));
  pf_dd4 d;
  if (f->eps_inside) {
    const pf_dd4 qe = pf4_add_d(q, pf4_c(f->eps)), r = pf4_sqrt(qe);
    const __m256d pos = _mm256_cmp_pd(qe.hi, zero, _CMP_GT_OQ);
    d = (pf_dd4){_mm256_blendv_pd(qe.hi, r.hi, pos), _mm256_blendv_pd(qe.lo, r.lo, pos)};
    ed = _mm256_add_pd(_mm256_div_pd(_mm256_mul_pd(_mm256_add_pd(ed, pf4_c(0x1p-104)), s), pf4_c(2)), pf4_c(0x1p-102));
  } else {
    const pf_dd4 r = pf4_sqrt(q);
    const __m256d pos = _mm256_cmp_pd(q.hi, zero, _CMP_GT_OQ);
    d = pf4_add_d((pf_dd4){_mm256_blendv_pd(q.hi, r.hi, pos), _mm256_blendv_pd(q.lo, r.lo, pos)}, pf4_c(f->eps));
    ed = _mm256_add_pd(_mm256_add_pd(_mm256_div_pd(_mm256_mul_pd(ed, s), pf4_c(2)), pf4_c(0x1p-102)), pf4_c(0x1p-104));
  }
  ed = _mm256_mul_pd(ed, s);
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(d.hi, zero, _CMP_NEQ_OQ)); /* undefined: the scalar path says so */
  bad = _mm256_or_pd(bad, _mm256_or_pd(pf4_tiny(q), pf4_tiny(d)));
  ok = _mm256_and_pd(ok, _mm256_cmp_pd(ed, pf4_c(0x1p-60), _CMP_LE_OQ));
  /* m'/bc1/d (+ wd p), times lr, from p */
  const pf_dd4 D = pf4_mul(pf4_bcast(f->bc1), d), x = pf4_div(mp, D);
  __m256d e = _mm256_mul_pd(
      _mm256_add_pd(_mm256_mul_pd(_mm256_div_pd(em, D.hi), pf4_c(1 + 0x1p-50)),
                    _mm256_mul_pd(pf4_abs(x.hi), _mm256_add_pd(_mm256_add_pd(ed, pf4_c(0x1p-99)), pf4_c(0x1p-105)))),
      s);
  pf_dd4 y = x;
  if (!f->l2) {
    y = pf4_add(x, pf4_two_prod(pf4_c(f->wd), p));
    e = _mm256_mul_pd(_mm256_add_pd(e, _mm256_mul_pd(pf4_c(0x1p-103), pf4_abs(y.hi))), s);
  }
  const pf_dd4 z = pf4_mul(pf4_d(pf4_c(f->lr)), y);
  e = _mm256_mul_pd(_mm256_add_pd(_mm256_mul_pd(pf4_c(f->lr), e), _mm256_mul_pd(pf4_c(0x1p-101), pf4_abs(z.hi))), s);
  const pf_dd4 pp = pf4_add_d(pf4_neg(z), p);
  e = _mm256_mul_pd(_mm256_add_pd(e, _mm256_mul_pd(pf4_c(0x1p-104), pf4_abs(pp.hi))), s);
  bad = _mm256_or_pd(bad, _mm256_or_pd(_mm256_or_pd(pf4_tiny(D), pf4_tiny(x)),
                                       _mm256_or_pd(_mm256_or_pd(pf4_tiny(y), pf4_tiny(z)), pf4_tiny(pp))));
  ok = _mm256_and_pd(ok, pf4_settle(pp, e, f->pt, &rp));
  if (f->master) ok = _mm256_and_pd(ok, pf4_settle(pp, e, f->t, &rt));
  const int mask = _mm256_movemask_pd(_mm256_andnot_pd(bad, ok));
  if (mask) {
    pf4_store_settled(out, i, mask, mp, rm, f->st);
    pf4_store_settled(out, n + i, mask, vp, rv, f->st);
    pf4_store_settled(out, 2 * n + i, mask, pp, rp, f->pt);
    if (f->master) pf4_store_settled(out, 3 * n + i, mask, pp, rt, f->t);
  }
  return mask;
}
#endif

int pf_adam_fast_4(const pf_adam_fast *f, size_t i, size_t n, const double *p, const double *g, const double *m,
                   const double *v, pf_oracle_result *out) {
#ifdef PF_DD_AVX2
  if (f->avx2 && f->bc1.hi > 0x1p-900 && f->bc2.hi > 0x1p-900) return pf_adam_fast_4_avx2(f, i, n, p, g, m, v, out);
#endif
  (void)f, (void)i, (void)n, (void)p, (void)g, (void)m, (void)v, (void)out;
  return 0;
}
