/* The SwiGLU oracle: the exact y = a b / (1 + e^(-a)) of every element (swiglu_spec.h), rounded
 * correctly to the storage dtype.
 *
 * Fast path, element by element in double words: sigma(a) = 1 / (1 + E), E = e^(-a), for a >= 0,
 * and E / (1 + E), E = e^a, below (so that the exponent is in [-600, 0], pf_dd_exp's range, and
 * nothing cancels); a b exact (two_prod); y = (a b) sigma. Budget: exp within 2^-87 relative,
 * which sigma carries at most twice; 1 + E (DWPlusFP, 2u^2), the division (9.8u^2), the product
 * (5u^2): within 2^-85 |y| all told. |a| > 600 (sigma within e^-600 of 0 or 1) goes to MPFR.
 * MPFR, at a precision that doubles until the enclosure rounds to one value: e^(-a) with both
 * roundings, y = a b / (1 + e^(-a)) by interval arithmetic (a b exact). y is 0 exactly where a or
 * b is; where e^(-a) is beyond MPFR's exponent range (a below -3e18) y is below it too (TINY). */
#include "oracles/swiglu_mpfr.h"

#include <math.h>

#include "core/kernel.h"
#include "kernels/swiglu/swiglu_spec.h"
#include "oracles/dd.h"
#include "oracles/oracle_util.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
} pf_swiglu_oracle;

static PF_DD_CLONES int pf_swiglu_fast_row(const void *ctx, size_t i, pf_oracle_result *out) {
  const pf_swiglu_oracle *o = ctx;
  const size_t cols = o->c->shape[1];
  const pf_dtype t = o->c->dtype;
  for (size_t j = 0; j < cols; j++) {
    const size_t q = i * cols + j;
    const double a = o->in[PF_SWIGLU_IN_A].data[q], b = o->in[PF_SWIGLU_IN_B].data[q];
    if (!isfinite(a) || !isfinite(b) || fabs(a) > 600) return 0;
    if (a == 0 || b == 0) {
      pf_oracle_set_zero(out, q, t, 0);
      continue;
    }
    const pf_dd E = pf_dd_exp((pf_dd){-fabs(a), 0}), den = pf_dd_add_d(E, 1);
    const pf_dd sig = pf_dd_div(a >= 0 ? (pf_dd){1, 0} : E, den);
    const pf_dd y = pf_dd_mul(pf_two_prod(a, b), sig);
    if (!pf_fast_settle(out, q, y, fabs(y.hi) * 0x1p-85, t)) return 0;
  }
  return 1;
}

static void pf_swiglu_mpfr_row(const void *ctx, size_t i, long *max_prec) {
  const pf_swiglu_oracle *o = ctx;
  const pf_case *c = o->c;
  const size_t cols = c->shape[1];
  const int hex = o->opts->keep_hex;
  const long prec0 = o->opts->prec < 64 ? 64 : o->opts->prec;
  mpfr_t ab;
  mpfr_init2(ab, 128); /* a b exact */
  for (size_t j = 0; j < cols; j++) {
    const size_t q = i * cols + j;
    const double a = o->in[PF_SWIGLU_IN_A].data[q], b = o->in[PF_SWIGLU_IN_B].data[q];
    if (!isfinite(a) || !isfinite(b)) {
      pf_oracle_set_undefined(o->out, q, hex);
      continue;
    }
    if (a == 0 || b == 0) {
      pf_oracle_set_zero(o->out, q, c->dtype, hex);
      continue;
    }
    mpfr_set_d(ab, a, MPFR_RNDN);
    mpfr_mul_d(ab, ab, b, MPFR_RNDN);
    for (long w = prec0;; w *= 2) {
      const int final = w * 2 > o->opts->prec_max;
      mpfr_t dlo, dhi, lo, hi;
      mpfr_inits2(w, dlo, dhi, lo, hi, (mpfr_ptr)0);
      mpfr_set_d(dlo, -a, MPFR_RNDN); /* exact */
      mpfr_exp(dhi, dlo, MPFR_RNDU);
      mpfr_exp(dlo, dlo, MPFR_RNDD);
      int settled = 1;
      if (mpfr_inf_p(dlo)) { /* e^(-a) beyond MPFR's range: y below it */
        pf_oracle_set_tiny(o->out, q, c->dtype, hex);
      } else {
        mpfr_add_ui(dlo, dlo, 1, MPFR_RNDD);
        mpfr_add_ui(dhi, dhi, 1, MPFR_RNDU);
        const int pos = mpfr_sgn(ab) > 0; /* y = ab / D, D in [dlo, dhi], D > 1 */
        mpfr_div(lo, ab, pos ? dhi : dlo, MPFR_RNDD);
        mpfr_div(hi, ab, pos ? dlo : dhi, MPFR_RNDU);
        settled = pf_oracle_settle(o->out, q, lo, hi, c->dtype, final, hex);
      }
      mpfr_clears(dlo, dhi, lo, hi, (mpfr_ptr)0);
      if (w > *max_prec) *max_prec = w;
      if (settled || final) break;
    }
  }
  mpfr_clear(ab);
}

pf_status pf_swiglu_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const pf_swiglu_oracle o = {c, in, opts, out};
  return pf_oracle_by_rows(c->shape[0], 100.0 * (double)c->shape[1], opts, out, &o, pf_swiglu_fast_row,
                           pf_swiglu_mpfr_row);
}
