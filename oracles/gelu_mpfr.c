/* The GELU oracle: the exact y of every element (gelu_spec.h's definition), rounded correctly to
 * the storage dtype, by interval arithmetic at a precision that doubles until the enclosure
 * rounds to one value:
 *   erf form:  y = (x / 2) erfc(-x / sqrt 2), the same function as (x / 2)(1 + erf(x / sqrt 2))
 *              without its cancellation for negative x (erfc is decreasing: its ends from the
 *              argument's);
 *   tanh form: y = (x / 2) g(w), g(w) = 1 + tanh(w) = 2 / (1 + e^(-2w)) (increasing, no
 *              cancellation), w = sqrt(2/pi) (x + 0.044715 x^3) with x^3 exact and 0.044715 as
 *              44715 / 10^6.
 * y is 0 exactly where x is; a non-finite x is undefined. Row by row, rows in parallel; no fast
 * path yet. */
#include "oracles/gelu_mpfr.h"

#include <math.h>

#include "core/kernel.h"
#include "kernels/gelu/gelu_spec.h"
#include "oracles/oracle_util.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
} pf_gelu_oracle;

/* [glo, ghi] encloses erfc(-x / sqrt 2) or g(w) at precision w's */
static void pf_gelu_factor(int tanh_form, double x, mpfr_ptr glo, mpfr_ptr ghi, mpfr_ptr a, mpfr_ptr b, mpfr_ptr x3) {
  if (!tanh_form) {
    /* z = -x / sqrt 2: its ends from sqrt 2's */
    mpfr_sqrt_ui(a, 2, MPFR_RNDD);
    mpfr_sqrt_ui(b, 2, MPFR_RNDU);
    /* -x / s is increasing in s when x > 0, decreasing when x < 0 */
    mpfr_d_div(glo, -x, x > 0 ? a : b, MPFR_RNDD); /* z's lower end */
    mpfr_d_div(ghi, -x, x > 0 ? b : a, MPFR_RNDU); /* z's upper end */
    mpfr_erfc(a, ghi, MPFR_RNDD);                  /* erfc decreasing */
    mpfr_erfc(b, glo, MPFR_RNDU);
    mpfr_set(glo, a, MPFR_RNDD);
    mpfr_set(ghi, b, MPFR_RNDU);
    return;
  }
  /* u = x + 44715 x^3 / 10^6, x^3 exact (x3's precision holds it) */
  mpfr_set_d(x3, x, MPFR_RNDN);
  mpfr_mul_d(x3, x3, x, MPFR_RNDN);
  mpfr_mul_d(x3, x3, x, MPFR_RNDN);
  mpfr_mul_ui(x3, x3, 44715, MPFR_RNDN); /* exact: 16 more bits held */
  mpfr_div_ui(a, x3, 1000000, MPFR_RNDD);
  mpfr_div_ui(b, x3, 1000000, MPFR_RNDU);
  mpfr_add_d(a, a, x, MPFR_RNDD);
  mpfr_add_d(b, b, x, MPFR_RNDU);
  /* w = sqrt(2 / pi) u: sqrt(2/pi)'s ends, times u's by sign */
  mpfr_const_pi(glo, MPFR_RNDU);
  mpfr_ui_div(glo, 2, glo, MPFR_RNDD);
  mpfr_sqrt(glo, glo, MPFR_RNDD); /* beta's lower end */
  mpfr_const_pi(ghi, MPFR_RNDD);
  mpfr_ui_div(ghi, 2, ghi, MPFR_RNDU);
  mpfr_sqrt(ghi, ghi, MPFR_RNDU); /* beta's upper end */
  /* u's ends have x's sign (x + 0.044715 x^3 keeps it): w's ends */
  if (mpfr_sgn(a) >= 0) mpfr_mul(a, a, glo, MPFR_RNDD), mpfr_mul(b, b, ghi, MPFR_RNDU);
  else mpfr_mul(a, a, ghi, MPFR_RNDD), mpfr_mul(b, b, glo, MPFR_RNDU);
  /* g(w) = 2 / (1 + exp(-2w)), increasing */
  mpfr_mul_si(a, a, -2, MPFR_RNDU); /* -2 w_lo, rounded up */
  mpfr_exp(a, a, MPFR_RNDU);
  mpfr_add_ui(a, a, 1, MPFR_RNDU);
  mpfr_ui_div(glo, 2, a, MPFR_RNDD);
  mpfr_mul_si(b, b, -2, MPFR_RNDD);
  mpfr_exp(b, b, MPFR_RNDD);
  mpfr_add_ui(b, b, 1, MPFR_RNDD);
  mpfr_ui_div(ghi, 2, b, MPFR_RNDU);
}

static void pf_gelu_mpfr_row(const void *ctx, size_t i, long *max_prec) {
  const pf_gelu_oracle *o = ctx;
  const pf_case *c = o->c;
  const size_t cols = c->shape[1];
  const int tanh_form = (int)c->params[PF_GELU_P_APPROXIMATE] == PF_GELU_TANH;
  const long prec0 = o->opts->prec < 64 ? 64 : o->opts->prec;
  mpfr_t x3;
  mpfr_init2(x3, 200); /* x^3 44715: 3 53 + 16 bits */
  for (size_t j = 0; j < cols; j++) {
    const size_t q = i * cols + j;
    const double x = o->in[0].data[q];
    if (!isfinite(x)) {
      pf_oracle_set_undefined(o->out, q, o->opts->keep_hex);
      continue;
    }
    if (x == 0) {
      pf_oracle_set_zero(o->out, q, c->dtype, o->opts->keep_hex);
      continue;
    }
    for (long w = prec0;; w *= 2) {
      const int final = w * 2 > o->opts->prec_max;
      mpfr_t glo, ghi, a, b;
      mpfr_inits2(w, glo, ghi, a, b, (mpfr_ptr)0);
      pf_gelu_factor(tanh_form, x, glo, ghi, a, b, x3);
      /* y = (x / 2) g: g > 0, so its ends follow x's sign */
      mpfr_mul_d(a, x > 0 ? glo : ghi, x / 2, MPFR_RNDD);
      mpfr_mul_d(b, x > 0 ? ghi : glo, x / 2, MPFR_RNDU);
      const int settled = pf_oracle_settle(o->out, q, a, b, c->dtype, final, o->opts->keep_hex);
      mpfr_clears(glo, ghi, a, b, (mpfr_ptr)0);
      if (w > *max_prec) *max_prec = w;
      if (settled || final) break;
    }
  }
  mpfr_clear(x3);
}

pf_status pf_gelu_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const pf_gelu_oracle o = {c, in, opts, out};
  return pf_oracle_by_rows(c->shape[0], 4000.0 * (double)c->shape[1], opts, out, &o, NULL, pf_gelu_mpfr_row);
}
