/* The softmax oracle: the exact row softmax of the actual stored inputs, by interval
 * arithmetic in MPFR (every operation rounded down for the lower end, up for the upper),
 * so the enclosure is rigorous. The precision doubles until every element's enclosure
 * rounds to one value of the output dtype (the rounding is then certain), up to
 * opts->prec_max bits, beyond which the element is recorded as a TIE.
 *
 * Definition (independent of every kernel variant):
 *   t_j = alpha * x_j (exact), or the mask sentinel itself (-inf, -10000, lowest finite of
 *   the storage dtype) at masked positions; y_j = exp(t_j) / sum_k exp(t_k).
 * Undefined rows (all outputs NaN): a NaN or +inf score, or every score -inf. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"
#include "oracles/oracle_util.h"
#include "oracles/softmax_fast.h"

/* What a masked position holds, computed here without the kernel's helpers. */
static double pf_oracle_mask_value(int choice, pf_dtype storage) {
  if (choice == 1) return -10000.0;
  if (choice == 2) {
    const pf_format f = pf_format_of(storage);
    return -ldexp(2.0 - ldexp(1.0, 1 - f.prec), f.emax);
  }
  return -INFINITY;
}

typedef struct {
  mpfr_t *t, *elo, *ehi, z, slo, shi, ylo, yhi, m;
  size_t cols;
  long prec;
} pf_sm_work;

static void pf_sm_work_init(pf_sm_work *w, size_t cols, long prec) {
  w->cols = cols;
  w->prec = prec;
  w->t = malloc(cols * sizeof(mpfr_t));
  w->elo = malloc(cols * sizeof(mpfr_t));
  w->ehi = malloc(cols * sizeof(mpfr_t));
  for (size_t j = 0; j < cols; j++) {
    mpfr_init2(w->t[j], 128); /* alpha (53 bits) * x (24 bits) is exact in 77 bits */
    mpfr_init2(w->elo[j], prec);
    mpfr_init2(w->ehi[j], prec);
  }
  mpfr_inits2(prec, w->z, w->slo, w->shi, w->ylo, w->yhi, (mpfr_ptr)0);
  mpfr_init2(w->m, 128);
}

static void pf_sm_work_prec(pf_sm_work *w, long prec) {
  w->prec = prec;
  for (size_t j = 0; j < w->cols; j++) {
    mpfr_set_prec(w->elo[j], prec);
    mpfr_set_prec(w->ehi[j], prec);
  }
  mpfr_set_prec(w->z, prec);
  mpfr_set_prec(w->slo, prec);
  mpfr_set_prec(w->shi, prec);
  mpfr_set_prec(w->ylo, prec);
  mpfr_set_prec(w->yhi, prec);
}

static void pf_sm_work_free(pf_sm_work *w) {
  for (size_t j = 0; j < w->cols; j++) {
    mpfr_clear(w->t[j]);
    mpfr_clear(w->elo[j]);
    mpfr_clear(w->ehi[j]);
  }
  free(w->t);
  free(w->elo);
  free(w->ehi);
  mpfr_clears(w->z, w->slo, w->shi, w->ylo, w->yhi, w->m, (mpfr_ptr)0);
}

/* Returns 1 when the row is defined (t, m filled). */
static int pf_sm_scores(pf_sm_work *w, const pf_case *c, const double *x, size_t row) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double alpha = pf_case_param(c, "alpha");
  const int mask = (int)pf_case_param(c, "mask");
  const double sentinel = pf_oracle_mask_value((int)pf_case_param(c, "mask_value"), c->dtype);
  int any_finite = 0;
  for (size_t j = 0; j < cols; j++) {
    const int masked = pf_oracle_masked(mask, row, j, rows, cols);
    if (masked) {
      mpfr_set_d(w->t[j], sentinel, MPFR_RNDN);
    } else {
      mpfr_set_d(w->t[j], x[j], MPFR_RNDN);
      mpfr_mul_d(w->t[j], w->t[j], alpha, MPFR_RNDN); /* exact: 24 x 53 bits in 128 */
    }
    if (mpfr_nan_p(w->t[j]) || (mpfr_inf_p(w->t[j]) && mpfr_sgn(w->t[j]) > 0)) return 0;
    if (!mpfr_inf_p(w->t[j])) {
      if (!any_finite || mpfr_greater_p(w->t[j], w->m)) mpfr_set(w->m, w->t[j], MPFR_RNDN);
      any_finite = 1;
    }
  }
  return any_finite;
}

pf_status pf_softmax_fwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                              pf_oracle_result *out) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  /* the fast path first (softmax_fast.c), row by row; not when the exact values are asked
   * for in hex (>= 160 bits) */
  const int fast = !opts->mpfr_only && !opts->keep_hex;
  pf_dd *fw = fast ? malloc(2 * cols * sizeof *fw) : NULL;
  if (fast && !fw) return pf_error(PF_ERR_NOMEM, "softmax oracle: cannot allocate a row of %zu", cols);
  const double alpha = pf_case_param(c, "alpha");
  const int mask = (int)pf_case_param(c, "mask");
  const double sentinel = pf_oracle_mask_value((int)pf_case_param(c, "mask_value"), c->dtype);
  const pf_mpfr_range saved = pf_mpfr_range_widen();
  pf_sm_work w;
  int have_w = 0; /* made for the first row the fast path leaves: 3 cols MPFR numbers cost more
                     than the fast path's whole row */
  out->max_prec = prec0;
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols;
    if (fast && pf_softmax_fast(c, x, i, alpha, mask, sentinel, out, fw)) {
      out->fast_units++;
      continue;
    }
    out->mpfr_units++;
    if (!have_w) pf_sm_work_init(&w, cols, prec0), have_w = 1;
    if (!pf_sm_scores(&w, c, x, i)) {
      for (size_t j = 0; j < cols; j++) pf_oracle_set_undefined(out, i * cols + j, opts->keep_hex);
      continue;
    }
    for (long prec = prec0;; prec *= 2) {
      if (prec != w.prec) pf_sm_work_prec(&w, prec);
      const int final = prec * 2 > opts->prec_max;
      mpfr_set_zero(w.slo, 1);
      mpfr_set_zero(w.shi, 1);
      for (size_t j = 0; j < cols; j++) {
        if (mpfr_inf_p(w.t[j])) { /* -inf: exp is exactly 0 */
          mpfr_set_zero(w.elo[j], 1);
          mpfr_set_zero(w.ehi[j], 1);
          continue;
        }
        mpfr_sub(w.z, w.t[j], w.m, MPFR_RNDD);
        mpfr_exp(w.elo[j], w.z, MPFR_RNDD);
        mpfr_sub(w.z, w.t[j], w.m, MPFR_RNDU);
        mpfr_exp(w.ehi[j], w.z, MPFR_RNDU);
        mpfr_add(w.slo, w.slo, w.elo[j], MPFR_RNDD);
        mpfr_add(w.shi, w.shi, w.ehi[j], MPFR_RNDU);
      }
      int settled = 1;
      for (size_t j = 0; j < cols && settled; j++) {
        mpfr_div(w.ylo, w.elo[j], w.shi, MPFR_RNDD);
        mpfr_div(w.yhi, w.ehi[j], w.slo, MPFR_RNDU);
        settled = pf_oracle_settle(out, i * cols + j, w.ylo, w.yhi, c->dtype, final, opts->keep_hex);
      }
      if (prec > out->max_prec) out->max_prec = prec;
      if (settled) break;
    }
  }
  if (have_w) pf_sm_work_free(&w);
  free(fw);
  pf_mpfr_range_restore(saved);
  return PF_OK;
}
