/* The trajectory oracle: the same T steps as kernels/schedule in exact arithmetic — the
 * gradient from the exact parameter, no loss scaling (nothing overflows), a step skipped only
 * when the true gradient is not finite, exact clipping, exact AdamW with the schedule's
 * learning rate at the number of applied steps (binary64, as the schedule defines it) and
 * exact bias corrections — at 512 bits in MPFR, then each step's value rounded to the dtype
 * of the output it is compared with. The scale output is the scaler's state machine driven by
 * the exact overflows (the non-finite steps). Not an interval computation:
 * over T steps its own relative error stays below T * 2^-500, far inside any tolerance the
 * contract allows (>= 2^-60), so it cannot move a verdict. */
#include "oracles/schedule_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/schedule/schedule_spec.h"
#include "core/kernel.h"
#include "oracles/oracle_util.h"

static void pf_sched_settle_d(pf_oracle_result *out, size_t x, double v, mpfr_ptr tmp, int keep_hex) {
  if (!isfinite(v)) {
    pf_oracle_set_undefined(out, x, keep_hex);
    return;
  }
  mpfr_set_d(tmp, v, MPFR_RNDN);
  pf_oracle_settle(out, x, tmp, tmp, PF_FP32, 1, keep_hex);
}

pf_status pf_schedule_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const size_t T = c->shape[0], n = c->shape[1];
  const long prec = 512;
  const pf_lr_schedule sched = pf_schedule_lr(c);
  const double b1 = c->params[PF_SP_BETA1], b2 = c->params[PF_SP_BETA2], eps = c->params[PF_SP_EPS];
  const double wd = c->params[PF_SP_WD], max_norm = c->params[PF_SP_MAXNORM];
  const pf_dtype Dm = pf_schedule_master_dtype(c);
  const int scaler = pf_schedule_scaler(c);
  pf_ls_state ls = pf_schedule_scaler_start(c);
  const pf_mpfr_range saved = pf_mpfr_range_widen();
  mpfr_t *p = malloc(n * sizeof(mpfr_t)), *m = malloc(n * sizeof(mpfr_t)), *v = malloc(n * sizeof(mpfr_t)),
         *g = malloc(n * sizeof(mpfr_t));
  if (!p || !m || !v || !g) {
    free(p), free(m), free(v), free(g);
    pf_mpfr_range_restore(saved);
    return pf_error(PF_ERR_NOMEM, "schedule oracle: cannot allocate %zu parameters", n);
  }
  mpfr_t t1, t2, sum, bc1, bc2, lr, omb1, omb2;
  mpfr_inits2(prec, t1, t2, sum, bc1, bc2, lr, omb1, omb2, (mpfr_ptr)0);
  mpfr_set_d(omb1, b1, MPFR_RNDN);
  mpfr_ui_sub(omb1, 1, omb1, MPFR_RNDN);
  mpfr_set_d(omb2, b2, MPFR_RNDN);
  mpfr_ui_sub(omb2, 1, omb2, MPFR_RNDN);
  for (size_t i = 0; i < n; i++) {
    mpfr_inits2(prec, p[i], m[i], v[i], g[i], (mpfr_ptr)0);
    mpfr_set_d(p[i], in[0].data[i], MPFR_RNDN);
    mpfr_set_zero(m[i], 1);
    mpfr_set_zero(v[i], 1);
  }
  out->max_prec = prec;
  long applied = 0;
  for (size_t t = 0; t < T; t++) {
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(in[2].data[t * n + i]) != 0;
    if (scaler >= 0) (void)pf_ls_update(scaler, &ls, !finite);
    /* the exact run skips a non-finite step whatever the scaler (and never stops) */
    pf_sched_settle_d(out, PF_SCHED_STATUS(T) + t, finite ? PF_LS_APPLIED : PF_LS_SKIPPED, t1, opts->keep_hex);
    pf_sched_settle_d(out, PF_SCHED_SCALE(T) + t, scaler >= 0 ? ls.scale : 1, t1, opts->keep_hex);
    if (finite) {
      applied++;
      mpfr_set_zero(sum, 1);
      for (size_t i = 0; i < n; i++) {
        mpfr_mul_d(g[i], p[i], in[1].data[i], MPFR_RNDN);
        mpfr_add_d(g[i], g[i], in[2].data[t * n + i], MPFR_RNDN);
        mpfr_fma(sum, g[i], g[i], sum, MPFR_RNDN);
      }
      if (max_norm > 0) {
        mpfr_sqrt(t1, sum, MPFR_RNDN);
        mpfr_add_d(t1, t1, 1e-6, MPFR_RNDN);
        mpfr_d_div(t1, max_norm, t1, MPFR_RNDN); /* coef */
        if (mpfr_cmp_ui(t1, 1) < 0)
          for (size_t i = 0; i < n; i++) mpfr_mul(g[i], g[i], t1, MPFR_RNDN);
      }
      mpfr_set_d(t1, b1, MPFR_RNDN);
      mpfr_pow_ui(t1, t1, (unsigned long)applied, MPFR_RNDN);
      mpfr_ui_sub(bc1, 1, t1, MPFR_RNDN);
      mpfr_set_d(t1, b2, MPFR_RNDN);
      mpfr_pow_ui(t1, t1, (unsigned long)applied, MPFR_RNDN);
      mpfr_ui_sub(bc2, 1, t1, MPFR_RNDN);
      mpfr_set_d(lr, pf_lr_at(&sched, applied), MPFR_RNDN);
      for (size_t i = 0; i < n; i++) {
        /* m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2 */
        mpfr_mul_d(m[i], m[i], b1, MPFR_RNDN);
        mpfr_fma(m[i], omb1, g[i], m[i], MPFR_RNDN);
        mpfr_mul_d(v[i], v[i], b2, MPFR_RNDN);
        mpfr_sqr(t2, g[i], MPFR_RNDN);
        mpfr_fma(v[i], omb2, t2, v[i], MPFR_RNDN);
        /* p -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + wd p) */
        mpfr_div(t1, v[i], bc2, MPFR_RNDN);
        mpfr_sqrt(t1, t1, MPFR_RNDN);
        mpfr_add_d(t1, t1, eps, MPFR_RNDN);
        mpfr_div(t2, m[i], bc1, MPFR_RNDN);
        mpfr_div(t2, t2, t1, MPFR_RNDN);
        mpfr_mul_d(t1, p[i], wd, MPFR_RNDN);
        mpfr_add(t2, t2, t1, MPFR_RNDN);
        mpfr_mul(t2, t2, lr, MPFR_RNDN);
        mpfr_sub(p[i], p[i], t2, MPFR_RNDN);
      }
    }
    for (size_t i = 0; i < n; i++) {
      const size_t xm = PF_SCHED_MASTER(T, n) + t * n + i, xp = PF_SCHED_PARAMS(T, n) + t * n + i;
      /* the step stage is the run's own (judged against its values, not this trajectory) */
      pf_oracle_set_undefined(out, PF_SCHED_STEP(T) + t * n + i, opts->keep_hex);
      if (mpfr_nan_p(p[i])) {
        pf_oracle_set_undefined(out, xm, opts->keep_hex);
        pf_oracle_set_undefined(out, xp, opts->keep_hex);
      } else {
        pf_oracle_settle(out, xm, p[i], p[i], Dm, 1, opts->keep_hex);
        pf_oracle_settle(out, xp, p[i], p[i], c->dtype, 1, opts->keep_hex);
      }
      /* the exact second moment, in the state's dtype (Dm) */
      const size_t xv = PF_SCHED_V(T, n) + t * n + i;
      if (mpfr_nan_p(v[i])) pf_oracle_set_undefined(out, xv, opts->keep_hex);
      else pf_oracle_settle(out, xv, v[i], v[i], Dm, 1, opts->keep_hex);
    }
  }
  for (size_t i = 0; i < n; i++) mpfr_clears(p[i], m[i], v[i], g[i], (mpfr_ptr)0);
  free(p), free(m), free(v), free(g);
  mpfr_clears(t1, t2, sum, bc1, bc2, lr, omb1, omb2, (mpfr_ptr)0);
  pf_mpfr_range_restore(saved);
  return PF_OK;
}
