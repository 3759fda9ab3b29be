/* The clipping oracle: the exact global norm of the stored gradients (sqrt of the sum of
 * squares, or max |g|), coef = max_norm / (norm + 1e-6), and every gradient times
 * min(1, coef), by interval arithmetic in MPFR, rounded to the outputs' dtypes (the norm in
 * fp32, or in the gradient dtype for torch). */
#include "oracles/clip_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clip/clip_spec.h" /* the variants' PF_CLIP_* values */
#include "core/kernel.h"
#include "oracles/clip_fast.h"
#include "oracles/oracle_util.h"

pf_status pf_clip_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const size_t kn = c->shape[0] * c->shape[1];
  const double *g = in[0].data;
  const int inf_norm = pf_case_algo(c) == PF_CLIP_INF;
  const pf_dtype norm_t = pf_case_algo(c) == PF_CLIP_TORCH ? c->dtype : PF_FP32;
  const double max_norm = pf_case_param(c, "max_norm");
  for (size_t x = 0; x < kn; x++)
    if (!isfinite(g[x])) {
      for (size_t i = 0; i <= kn; i++) pf_oracle_set_undefined(out, i, opts->keep_hex);
      return PF_OK;
    }
  /* the fast path first (clip_fast.c); not when the exact values are asked for in hex */
  if (!opts->mpfr_only && !opts->keep_hex && pf_clip_fast(g, kn, inf_norm, norm_t, c->dtype, max_norm, out)) {
    out->fast_units = 1;
    return PF_OK;
  }
  out->mpfr_units = 1;
  const pf_mpfr_range saved = pf_mpfr_range_widen();
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  for (long prec = prec0;; prec *= 2) {
    const int final = prec * 2 > opts->prec_max;
    mpfr_t lo, hi, t, flo, fhi, a, b;
    mpfr_inits2(prec, lo, hi, t, flo, fhi, a, b, (mpfr_ptr)0);
    mpfr_set_zero(lo, 1);
    mpfr_set_zero(hi, 1);
    for (size_t x = 0; x < kn; x++) {
      if (inf_norm) {
        mpfr_set_d(t, fabs(g[x]), MPFR_RNDN); /* exact */
        if (mpfr_greater_p(t, lo)) {
          mpfr_set(lo, t, MPFR_RNDN);
          mpfr_set(hi, t, MPFR_RNDN);
        }
        continue;
      }
      mpfr_set_d(t, g[x], MPFR_RNDN);
      mpfr_sqr(a, t, MPFR_RNDD);
      mpfr_add(lo, lo, a, MPFR_RNDD);
      mpfr_sqr(a, t, MPFR_RNDU);
      mpfr_add(hi, hi, a, MPFR_RNDU);
    }
    if (!inf_norm) {
      mpfr_sqrt(lo, lo, MPFR_RNDD);
      mpfr_sqrt(hi, hi, MPFR_RNDU);
    }
    int settled = pf_oracle_settle(out, 0, lo, hi, norm_t, final, opts->keep_hex);
    /* factor = min(1, max_norm / (norm + 1e-6)), decreasing in the norm */
    mpfr_add_d(a, hi, 1e-6, MPFR_RNDU);
    mpfr_d_div(flo, max_norm, a, MPFR_RNDD);
    mpfr_add_d(b, lo, 1e-6, MPFR_RNDD);
    mpfr_d_div(fhi, max_norm, b, MPFR_RNDU);
    if (mpfr_cmp_ui(flo, 1) > 0) mpfr_set_ui(flo, 1, MPFR_RNDN);
    if (mpfr_cmp_ui(fhi, 1) > 0) mpfr_set_ui(fhi, 1, MPFR_RNDN);
    for (size_t x = 0; x < kn; x++) {
      mpfr_mul_d(a, g[x] >= 0 ? flo : fhi, g[x], MPFR_RNDD);
      mpfr_mul_d(b, g[x] >= 0 ? fhi : flo, g[x], MPFR_RNDU);
      settled &= pf_oracle_settle(out, 1 + x, a, b, c->dtype, final, opts->keep_hex);
    }
    mpfr_clears(lo, hi, t, flo, fhi, a, b, (mpfr_ptr)0);
    if (prec > out->max_prec) out->max_prec = prec;
    if (settled) break;
  }
  pf_mpfr_range_restore(saved);
  return PF_OK;
}
