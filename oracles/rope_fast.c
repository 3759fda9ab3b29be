/* The rotary-embedding oracle's fast path. theta_{p,k} = p phi_k exactly (rope_spec.h: phi_k =
 * omega_k, or omega_k / f under linear scaling). With row i = m b + r (b = ceil(sqrt(rows))),
 * e^(i theta) = far_k[m] near_k[r], far_k[m] = e^(i (offset + m b) phi_k), near_k[r] = e^(i r phi_k):
 * MPFR makes three values per frequency (e^(i phi), e^(i b phi), e^(i offset phi)), the tables are
 * their powers by complex double-word multiplication, each angle one more multiplication.
 *
 * Budget (u = 2^-53; errors as complex moduli; every value of modulus within 2^-80 of 1):
 *   MPFR's three values: phi_k to 200 bits within a few ulps, the angle (a position below 2^31
 *   times phi) to 240 bits, sin and cos to 200: within 2^-150; split into double words (per
 *   component |x - (hi + lo)| <= ulp(lo) / 2 <= 2^-106): within 2^-105;
 *   one complex multiplication (pf_rope_cmul: per component two pf_dd_mul, 5u^2 each, and one
 *   pf_dd_add, 3.01u^2 of a sum of modulus <= 1 + 2^-80): within 2^-101.5 + its operands' errors;
 *   so near[r] is within r (2^-105 + 2^-101.5) (1 + 2^-100)^r <= r 2^-100.9 of e^(i r phi), far[m]
 *   within (m + 1) 2^-100.9, their product within (m + r + 2) 2^-100.9 <= (b + nm + 2) 2^-100.9;
 *   y = t_j cos + s t_j' sin (pf_rope_dot): that error times |t_j| + |t_j'|, and the dot's own
 *   14u^2 (|t_j| + |t_j'|) (below): within (|t_j| + |t_j'|) (b + nm + 3) 2^-100.
 * pf_fast_settle then takes the enclosure if it decides y's rounding (a y cancelled below
 * 2^-56 of its bound is left to MPFR). */
#include "oracles/rope_fast.h"

#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

#include "kernels/rope/rope_spec.h"
#include "oracles/oracle_util.h"

void pf_rope_mpfr_phi(mpfr_ptr phi, const pf_case *c, size_t k) {
  const long prec = (long)mpfr_get_prec(phi);
  const size_t dim = c->shape[PF_ROPE_D_DIM];
  const int scaling = (int)c->params[PF_ROPE_P_SCALING];
  const double base = c->params[PF_ROPE_P_BASE], f = c->params[PF_ROPE_P_FACTOR];
  mpfr_t l, a;
  mpfr_inits2(prec + 16, l, a, (mpfr_ptr)0);
  mpfr_set_d(l, base, MPFR_RNDN);
  mpfr_log(l, l, MPFR_RNDN); /* ln B */
  if (scaling == PF_ROPE_SCALE_NTK) { /* + dim / (dim - 2) ln f */
    mpfr_set_d(a, f, MPFR_RNDN);
    mpfr_log(a, a, MPFR_RNDN);
    mpfr_mul_ui(a, a, (unsigned long)dim, MPFR_RNDN);
    mpfr_div_ui(a, a, (unsigned long)(dim - 2), MPFR_RNDN);
    mpfr_add(l, l, a, MPFR_RNDN);
  }
  mpfr_mul_ui(l, l, (unsigned long)(2 * k), MPFR_RNDN);
  mpfr_div_ui(l, l, (unsigned long)dim, MPFR_RNDN);
  mpfr_neg(l, l, MPFR_RNDN);
  mpfr_exp(phi, l, MPFR_RNDN); /* omega_k; the exponent's error (|l| < 2^6) stays below 2^-(prec+8) */
  if (scaling == PF_ROPE_SCALE_LINEAR) mpfr_div_d(phi, phi, f, MPFR_RNDN);
  mpfr_clears(l, a, (mpfr_ptr)0);
}

/* x (|x| <= 1) as a double word: hi nearest, lo the nearest of the rest */
static pf_dd pf_rope_dd_of(mpfr_srcptr x, mpfr_ptr t) {
  const double hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(t, x, hi, MPFR_RNDN); /* exact: x's bits past hi's */
  return (pf_dd){hi, mpfr_get_d(t, MPFR_RNDN)};
}

/* z = x y for complex double words (re, im) */
static inline void pf_rope_cmul(const pf_dd *x, const pf_dd *y, pf_dd *z) {
  const pf_dd re = pf_dd_add(pf_dd_mul(x[0], y[0]), pf_dd_neg(pf_dd_mul(x[1], y[1])));
  z[1] = pf_dd_add(pf_dd_mul(x[0], y[1]), pf_dd_mul(x[1], y[0]));
  z[0] = re;
}

typedef struct {
  pf_rope_fast *f;
  const pf_case *c;
  double offset;
} pf_rope_fast_job;

/* e^(i pos phi) into e (cos, sin), pos > 0 */
static void pf_rope_fast_exp(pf_dd *e, mpfr_srcptr phi, double pos, mpfr_ptr th, mpfr_ptr s, mpfr_ptr co, mpfr_ptr t) {
  mpfr_mul_d(th, phi, pos, MPFR_RNDN);
  mpfr_sin_cos(s, co, th, MPFR_RNDN);
  e[0] = pf_rope_dd_of(co, t);
  e[1] = pf_rope_dd_of(s, t);
}

static PF_DD_CLONES void pf_rope_fast_tables(void *ctx, int thread, size_t begin, size_t end) {
  (void)thread;
  const pf_rope_fast_job *j = ctx;
  pf_rope_fast *f = j->f;
  mpfr_t phi, th, s, co, t;
  mpfr_init2(phi, 200);
  mpfr_init2(th, 240);
  mpfr_inits2(200, s, co, t, (mpfr_ptr)0);
  for (size_t k = begin; k < end; k++) {
    pf_dd w[2], W[2], *near = f->near + 2 * k * f->b, *far = f->far + 2 * k * f->nm;
    pf_rope_mpfr_phi(phi, j->c, k);
    pf_rope_fast_exp(w, phi, 1, th, s, co, t);
    pf_rope_fast_exp(W, phi, (double)f->b, th, s, co, t);
    near[0] = (pf_dd){1, 0}, near[1] = (pf_dd){0, 0};
    if (j->offset == 0) far[0] = (pf_dd){1, 0}, far[1] = (pf_dd){0, 0};
    else pf_rope_fast_exp(far, phi, j->offset, th, s, co, t);
    for (size_t r = 1; r < f->b; r++) pf_rope_cmul(near + 2 * (r - 1), w, near + 2 * r);
    for (size_t m = 1; m < f->nm; m++) pf_rope_cmul(far + 2 * (m - 1), W, far + 2 * m);
  }
  mpfr_clears(phi, th, s, co, t, (mpfr_ptr)0);
}

pf_status pf_rope_fast_init(pf_rope_fast *f, const pf_case *c, int threads) {
  f->positions = c->shape[PF_ROPE_D_POS];
  f->heads = c->shape[PF_ROPE_D_HEADS];
  f->dim = c->shape[PF_ROPE_D_DIM];
  f->half = f->dim / 2;
  f->layout = (int)c->params[PF_ROPE_P_LAYOUT];
  f->dtype = c->dtype;
  size_t b = 1;
  while (b * b < f->positions) b++;
  f->b = b;
  f->nm = (f->positions + b - 1) / b;
  f->err = (double)(b + f->nm + 3) * 0x1p-100;
  f->near = malloc(2 * f->half * b * sizeof(pf_dd));
  f->far = malloc(2 * f->half * f->nm * sizeof(pf_dd));
  if (!f->near || !f->far) {
    pf_rope_fast_free(f);
    return pf_error(PF_ERR_NOMEM, "rope oracle: no memory for the fast path's tables");
  }
  pf_rope_fast_job j = {f, c, c->params[PF_ROPE_P_OFFSET]};
  pf_oracle_parallel(f->half, threads, pf_rope_fast_tables, &j);
  return PF_OK;
}

void pf_rope_fast_free(pf_rope_fast *f) {
  free(f->near);
  free(f->far);
  f->near = f->far = NULL;
}

/* a c + b s for doubles a, b and double words c, s (|c|, |s| <= 1 + 2^-80): the products'
 * high parts exact (two_prod), a c.lo within u^2 |a| and b s.lo alike, the low parts' sum (four
 * terms of at most u (|a| + |b|) each, three additions) within 12u^2 (|a| + |b|), the final
 * fast_two_sum exact where the result is kept (|y| far above the low part): 14u^2 (|a| + |b|) */
static inline pf_dd pf_rope_dot(double a, pf_dd c, double b, pf_dd s) {
  const pf_dd p = pf_two_prod(a, c.hi), q = pf_two_prod(b, s.hi), h = pf_two_sum(p.hi, q.hi);
  const double lo = (p.lo + q.lo) + (a * c.lo + b * s.lo) + h.lo;
  return pf_fast_two_sum(h.hi, lo);
}

PF_DD_CLONES int pf_rope_fast_row(const pf_rope_fast *f, const double *t, size_t i, pf_oracle_result *out) {
  const size_t m = i / f->b, r = i % f->b, n = f->heads * f->dim;
  for (size_t k = 0; k < f->half; k++) {
    const pf_dd *C = f->far + 2 * (k * f->nm + m), *B = f->near + 2 * (k * f->b + r);
    const pf_dd co = pf_dd_add(pf_dd_mul(C[0], B[0]), pf_dd_neg(pf_dd_mul(C[1], B[1])));
    const pf_dd si = pf_dd_add(pf_dd_mul(C[0], B[1]), pf_dd_mul(C[1], B[0]));
    for (size_t h = 0; h < f->heads; h++)
      for (int side = 0; side < 2; side++) {
        /* the pair of frequency k: (k, k + half) or (2k, 2k + 1) */
        const size_t j = f->layout == PF_ROPE_LAYOUT_INTERLEAVED ? 2 * k + (size_t)side : k + (side ? f->half : 0);
        size_t kk, q;
        int sign;
        pf_rope_pair(f->layout, f->dim, j, &kk, &q, &sign);
        const double a = t[h * f->dim + j], b = t[h * f->dim + q];
        const size_t at = i * n + h * f->dim + j;
        if (a == 0 && b == 0) {
          pf_oracle_set_zero(out, at, f->dtype, 0);
          continue;
        }
        const pf_dd y = pf_rope_dot(a, co, sign * b, si);
        if (!pf_fast_settle(out, at, y, (fabs(a) + fabs(b)) * f->err, f->dtype)) return 0;
      }
  }
  return 1;
}
