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

#include "kernels/adam/adam_math.h" /* the variants' PF_ADAM_* values */
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
