/* The Adam oracle: one exact step on the stored p, g, m, v with the case's exact
 * hyperparameters, by interval arithmetic in MPFR, rounded to each output's dtype.
 *
 *   g' = g (+ wd p in l2 mode);  m' = b1 m + (1 - b1) g';  v' = b2 v + (1 - b2) g'^2
 *   bc1 = 1 - b1^t, bc2 = 1 - b2^t (1 for no-bias-correction)
 *   d = sqrt(v'/bc2) + eps   (sqrt(v'/bc2 + eps) for eps-inside)
 *   p' = p - lr (m'/bc1 / d + wd p)   (no decay term in l2 mode)
 * PyTorch's AdamW order computes the same quantity. An element whose denominator can be 0
 * (v' = 0 and eps = 0) is undefined. */
#include "oracles/adam_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/adam/adam_spec.h" /* the variants' PF_ADAM_* values */
#include "core/kernel.h"
#include "oracles/adam_fast.h"
#include "oracles/oracle_util.h"

typedef struct {
  mpfr_t lo, hi;
} pf_iv;

static void iv_init(pf_iv *a, long prec) { mpfr_inits2(prec, a->lo, a->hi, (mpfr_ptr)0); }
static void iv_clear(pf_iv *a) { mpfr_clears(a->lo, a->hi, (mpfr_ptr)0); }
static void iv_set_d(pf_iv *a, double x) {
  mpfr_set_d(a->lo, x, MPFR_RNDD);
  mpfr_set_d(a->hi, x, MPFR_RNDU);
}
static void iv_add(pf_iv *r, const pf_iv *a, const pf_iv *b) {
  mpfr_add(r->lo, a->lo, b->lo, MPFR_RNDD);
  mpfr_add(r->hi, a->hi, b->hi, MPFR_RNDU);
}
static void iv_sub(pf_iv *r, const pf_iv *a, const pf_iv *b, mpfr_t tmp) {
  mpfr_sub(tmp, a->lo, b->hi, MPFR_RNDD);
  mpfr_sub(r->hi, a->hi, b->lo, MPFR_RNDU);
  mpfr_set(r->lo, tmp, MPFR_RNDD);
}
/* General product: the min and max of the four end products. */
static void iv_mul(pf_iv *r, const pf_iv *a, const pf_iv *b, mpfr_t t1, mpfr_t t2) {
  mpfr_srcptr as[2] = {a->lo, a->hi}, bs[2] = {b->lo, b->hi};
  int first = 1;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      mpfr_mul(t1, as[i], bs[j], MPFR_RNDD);
      mpfr_mul(t2, as[i], bs[j], MPFR_RNDU);
      if (first || mpfr_less_p(t1, r->lo)) mpfr_set(r->lo, t1, MPFR_RNDD);
      if (first || mpfr_greater_p(t2, r->hi)) mpfr_set(r->hi, t2, MPFR_RNDU);
      first = 0;
    }
}
/* Division by a positive interval b (b.lo > 0). */
static void iv_div_pos(pf_iv *r, const pf_iv *a, const pf_iv *b, mpfr_t tmp) {
  mpfr_div(tmp, a->lo, mpfr_sgn(a->lo) >= 0 ? b->hi : b->lo, MPFR_RNDD);
  mpfr_div(r->hi, a->hi, mpfr_sgn(a->hi) >= 0 ? b->lo : b->hi, MPFR_RNDU);
  mpfr_set(r->lo, tmp, MPFR_RNDD);
}
static void iv_sqrt(pf_iv *r, const pf_iv *a) {
  if (mpfr_sgn(a->lo) < 0) mpfr_set_zero(r->lo, 1);
  else mpfr_sqrt(r->lo, a->lo, MPFR_RNDD);
  mpfr_sqrt(r->hi, a->hi, MPFR_RNDU);
}

pf_status pf_adam_step_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const size_t n = c->shape[0];
  const int master = out->n == 4 * n;
  const int l2 = pf_case_param(c, "mode") == 1;
  const int algo = pf_case_algo(c);
  const int eps_inside = algo == PF_ADAM_EPS_INSIDE;
  const int nobc = algo == PF_ADAM_NO_BIAS_CORRECTION;
  const int torch = pf_adam_is_torch(algo);
  const pf_dtype st = torch || algo == PF_ADAM_STATE_LOWP ? c->dtype : PF_FP32;
  const pf_dtype pt = master ? PF_FP32 : c->dtype;
  const double lr = pf_case_param(c, "lr"), b1 = pf_case_param(c, "beta1"), b2 = pf_case_param(c, "beta2"),
               eps = pf_case_param(c, "eps"), wd = pf_case_param(c, "wd");
  const unsigned long t = (unsigned long)pf_case_param(c, "step");
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  /* the fused kernels' grad_scale S: the step takes g / S, exactly; found_inf: no step at all */
  const double gs = pf_case_param(c, "grad_scale");
  const int skip = pf_case_param(c, "found_inf") != 0;
  out->max_prec = prec0;
  if (skip) { /* p, m, v exactly as they were */
    mpfr_t x;
    mpfr_init2(x, 64);
    for (size_t i = 0; i < n; i++) {
      const double was[3] = {in[2].data[i], in[3].data[i], in[0].data[i]};
      const pf_dtype dt[3] = {st, st, pt};
      for (int k = 0; k < 3; k++) {
        if (!isfinite(was[k])) {
          pf_oracle_set_undefined(out, (size_t)k * n + i, opts->keep_hex);
          continue;
        }
        mpfr_set_d(x, was[k], MPFR_RNDN);
        pf_oracle_settle(out, (size_t)k * n + i, x, x, dt[k], 1, opts->keep_hex);
        out->mpfr_units++;
      }
    }
    mpfr_clear(x);
    return PF_OK;
  }
  /* a power-of-two scale divides exactly in binary64 (the quotient stays far above binary64's
   * subnormals), so the fast path takes the quotients; any other goes to MPFR */
  int e2;
  const int pow2 = frexp(gs, &e2) == 0.5;
  double *gq = NULL;
  if (gs != 1 && pow2) {
    if (!(gq = malloc((n ? n : 1) * sizeof *gq))) return pf_error(PF_ERR_NOMEM, "adam oracle: out of memory");
    for (size_t i = 0; i < n; i++) gq[i] = in[1].data[i] / gs;
  }
  const double *gin = gq ? gq : in[1].data;
  const pf_mpfr_range saved = pf_mpfr_range_widen();
  /* the fast path first (adam_fast.c), element by element; not when the exact values are
   * asked for in hex */
  const int fast = !opts->mpfr_only && !opts->keep_hex && (gs == 1 || pow2);
  pf_adam_fast f;
  if (fast) pf_adam_fast_init(&f, c, master, st, pt);
  int lanes = 0; /* the current block of four: the elements pf_adam_fast_4 settled */
  for (size_t i = 0; i < n; i++) {
    /* four at a time with AVX2 where it can; the elements it leaves come one by one below */
    if (i % 4 == 0) lanes = 0;
    if (fast && i % 4 == 0 && i + 4 <= n) {
      const int done = pf_adam_fast_4(&f, i, n, in[0].data + i, gin + i, in[2].data + i, in[3].data + i, out);
      out->fast_units += (size_t)__builtin_popcount((unsigned)done);
      if (done == 15) {
        i += 3;
        continue;
      }
      lanes = done;
    }
    if (lanes >> (i % 4) & 1) continue;
    const double p0 = in[0].data[i], g0 = gin[i], m0 = in[2].data[i], v0 = in[3].data[i];
    if (!isfinite(p0) || !isfinite(g0) || !isfinite(m0) || !isfinite(v0)) {
      for (size_t k = 0; k < (master ? 4u : 3u); k++) pf_oracle_set_undefined(out, k * n + i, opts->keep_hex);
      continue;
    }
    if (fast && pf_adam_fast_element(&f, i, n, p0, g0, m0, v0, out)) {
      out->fast_units++;
      continue;
    }
    out->mpfr_units++;
    for (long prec = prec0;; prec *= 2) {
      const int final = prec * 2 > opts->prec_max;
      pf_iv p, g, m, v, k1, k2, bc1, bc2, x, y, d;
      pf_iv *all[] = {&p, &g, &m, &v, &k1, &k2, &bc1, &bc2, &x, &y, &d};
      for (size_t a = 0; a < sizeof all / sizeof all[0]; a++) iv_init(all[a], prec);
      mpfr_t t1, t2;
      mpfr_inits2(prec, t1, t2, (mpfr_ptr)0);
      iv_set_d(&p, p0);
      iv_set_d(&g, g0);
      if (gs != 1 && !pow2) { /* g / S, S > 0 */
        iv_set_d(&x, gs);
        iv_div_pos(&g, &g, &x, t1);
      }
      iv_set_d(&m, m0);
      iv_set_d(&v, v0);
      if (l2) { /* g' = g + wd p */
        iv_set_d(&x, wd);
        iv_mul(&y, &x, &p, t1, t2);
        iv_add(&g, &g, &y);
      }
      /* m' = b1 m + (1 - b1) g' */
      iv_set_d(&k1, b1);
      iv_mul(&x, &k1, &m, t1, t2);
      mpfr_ui_sub(k2.lo, 1, k1.hi, MPFR_RNDD);
      mpfr_ui_sub(k2.hi, 1, k1.lo, MPFR_RNDU);
      iv_mul(&y, &k2, &g, t1, t2);
      iv_add(&m, &x, &y);
      /* v' = b2 v + (1 - b2) g'^2 */
      iv_set_d(&k1, b2);
      iv_mul(&x, &k1, &v, t1, t2);
      mpfr_ui_sub(k2.lo, 1, k1.hi, MPFR_RNDD);
      mpfr_ui_sub(k2.hi, 1, k1.lo, MPFR_RNDU);
      iv_mul(&y, &g, &g, t1, t2);
      iv_mul(&d, &k2, &y, t1, t2);
      iv_add(&v, &x, &d);
      if (mpfr_sgn(v.lo) < 0) mpfr_set_zero(v.lo, 1); /* a square and a nonnegative state */
      int settled = pf_oracle_settle(out, i, m.lo, m.hi, st, final, opts->keep_hex);
      settled &= pf_oracle_settle(out, n + i, v.lo, v.hi, st, final, opts->keep_hex);
      /* bias corrections 1 - b^t (b >= 0: b^t is monotone in b) */
      if (nobc) {
        iv_set_d(&bc1, 1);
        iv_set_d(&bc2, 1);
      } else {
        mpfr_set_d(t1, b1, MPFR_RNDN);
        mpfr_pow_ui(t2, t1, t, MPFR_RNDU);
        mpfr_ui_sub(bc1.lo, 1, t2, MPFR_RNDD);
        mpfr_pow_ui(t2, t1, t, MPFR_RNDD);
        mpfr_ui_sub(bc1.hi, 1, t2, MPFR_RNDU);
        mpfr_set_d(t1, b2, MPFR_RNDN);
        mpfr_pow_ui(t2, t1, t, MPFR_RNDU);
        mpfr_ui_sub(bc2.lo, 1, t2, MPFR_RNDD);
        mpfr_pow_ui(t2, t1, t, MPFR_RNDD);
        mpfr_ui_sub(bc2.hi, 1, t2, MPFR_RNDU);
      }
      /* d = sqrt(v'/bc2) + eps, or sqrt(v'/bc2 + eps) */
      iv_div_pos(&x, &v, &bc2, t1);
      iv_set_d(&y, eps);
      if (eps_inside) {
        iv_add(&x, &x, &y);
        iv_sqrt(&d, &x);
      } else {
        iv_sqrt(&d, &x);
        iv_add(&d, &d, &y);
      }
      const int defined = mpfr_sgn(d.lo) > 0;
      if (defined) {
        iv_div_pos(&x, &m, &bc1, t1); /* m hat */
        iv_div_pos(&y, &x, &d, t1);   /* m hat / d */
        if (!l2) {
          iv_set_d(&k1, wd);
          iv_mul(&x, &k1, &p, t1, t2);
          iv_add(&y, &y, &x);
        }
        iv_set_d(&k1, lr);
        iv_mul(&x, &k1, &y, t1, t2);
        iv_sub(&y, &p, &x, t1); /* p' */
        settled &= pf_oracle_settle(out, 2 * n + i, y.lo, y.hi, pt, final, opts->keep_hex);
        if (master) settled &= pf_oracle_settle(out, 3 * n + i, y.lo, y.hi, c->dtype, final, opts->keep_hex);
      } else {
        pf_oracle_set_undefined(out, 2 * n + i, opts->keep_hex);
        if (master) pf_oracle_set_undefined(out, 3 * n + i, opts->keep_hex);
      }
      for (size_t a = 0; a < sizeof all / sizeof all[0]; a++) iv_clear(all[a]);
      mpfr_clears(t1, t2, (mpfr_ptr)0);
      if (prec > out->max_prec) out->max_prec = prec;
      if (settled) break;
    }
  }
  pf_mpfr_range_restore(saved);
  free(gq);
  return PF_OK;
}
