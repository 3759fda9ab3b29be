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
#include "oracles/softmax_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "oracles/oracle_util.h"
#include "oracles/softmax_fast.h"

/* What a masked position holds, computed here without the kernel's helpers. */
static double pf_oracle_mask_value(int choice, pf_dtype storage) {
  if (choice == PF_MASKVAL_NEG_10000) return -10000.0;
  if (choice == PF_MASKVAL_LOWEST) {
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

/* What every row shares, and per thread what it counted. */
typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  int fast, mask;
  double alpha, sentinel;
  size_t fast_units[PF_MAX_THREADS], mpfr_units[PF_MAX_THREADS];
  long max_prec[PF_MAX_THREADS];
  int nomem[PF_MAX_THREADS];
} pf_sm_case;

static void pf_sm_rows(void *ctx, int t, size_t begin, size_t end) {
  pf_sm_case *k = ctx;
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t cols = c->shape[1];
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  pf_dd *fw = k->fast ? malloc(2 * cols * sizeof *fw) : NULL;
  if (k->fast && !fw) {
    k->nomem[t] = 1;
    return;
  }
  pf_sm_work w;
  int have_w = 0; /* made for the first row the fast path leaves: 3 cols MPFR numbers cost more
                     than the fast path's whole row */
  k->max_prec[t] = prec0;
  for (size_t i = begin; i < end; i++) {
    const double *x = k->in[0].data + i * cols;
    if (k->sentinel == -INFINITY && pf_oracle_hidden(k->mask, i, c->shape[0], cols)) {
      for (size_t j = 0; j < cols; j++) pf_oracle_set_zero(out, i * cols + j, c->dtype, opts->keep_hex);
      continue;
    }
    if (k->fast && pf_softmax_fast(c, x, i, k->alpha, k->mask, k->sentinel, out, fw)) {
      k->fast_units[t]++;
      continue;
    }
    k->mpfr_units[t]++;
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
      if (prec > k->max_prec[t]) k->max_prec[t] = prec;
      if (settled) break;
    }
  }
  if (have_w) pf_sm_work_free(&w);
  free(fw);
}

pf_status pf_softmax_fwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                              pf_oracle_result *out) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  pf_sm_case *k = calloc(1, sizeof *k);
  if (!k) return pf_error(PF_ERR_NOMEM, "softmax oracle: out of memory");
  /* the fast path first (softmax_fast.c), row by row; not when the exact values are asked
   * for in hex (>= 160 bits) */
  *k = (pf_sm_case){.c = c, .in = in, .opts = opts, .out = out, .fast = !opts->mpfr_only && !opts->keep_hex,
                    .mask = (int)pf_case_param(c, "mask"), .alpha = pf_case_param(c, "alpha"),
                    .sentinel = pf_oracle_mask_value((int)pf_case_param(c, "mask_value"), c->dtype)};
  const int threads = pf_parallel_threads(rows, 200.0 * (double)cols);
  pf_oracle_parallel(rows, threads, pf_sm_rows, k);
  out->max_prec = opts->prec < 64 ? 64 : opts->prec;
  int nomem = 0;
  for (int t = 0; t < threads; t++) {
    out->fast_units += k->fast_units[t];
    out->mpfr_units += k->mpfr_units[t];
    if (k->max_prec[t] > out->max_prec) out->max_prec = k->max_prec[t];
    nomem |= k->nomem[t];
  }
  free(k);
  if (nomem) return pf_error(PF_ERR_NOMEM, "softmax oracle: cannot allocate a row of %zu", cols);
  return PF_OK;
}
