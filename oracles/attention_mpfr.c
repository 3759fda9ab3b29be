/* The attention oracle: exact attention on the stored Q, K, V by interval arithmetic in MPFR
 * (lower ends rounded down, upper ends up), per query row, raising the precision until every
 * element of the row's output O, scores S and probabilities P rounds unambiguously to the
 * storage dtype (oracle_util.c). The definition is the same for every variant:
 *
 *   s_j = q . k_j / sqrt(d)   (the mask sentinel replaces masked scores in the softmax)
 *   p_j = exp(s_j) / sum_k exp(s_k),   o = sum_j p_j v_j
 *
 * The stored scores S are s_j / L for layer-scaled (what that variant stores) and s_j
 * otherwise; flash stores no S or P. A row that reads a NaN or an infinity is undefined. */
#include "oracles/attention_mpfr.h"
#include "oracles/softmax_fast.h" /* pf_oracle_masked */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention/attention_spec.h" /* the variants' PF_ATTN_* values */
#include "core/kernel.h"
#include "oracles/attention_fast.h"
#include "oracles/oracle_util.h"

typedef struct {
  mpfr_t *slo, *shi, *elo, *ehi, *plo, *phi;
  mpfr_t a_lo, a_hi, dlo, dhi, t, M, Slo, Shi, olo, ohi, x;
  size_t n;
} pf_at_work;

static void pf_at_init(pf_at_work *w, size_t n, long prec) {
  w->n = n;
  mpfr_t **arrs[] = {&w->slo, &w->shi, &w->elo, &w->ehi, &w->plo, &w->phi};
  for (int a = 0; a < 6; a++) {
    *arrs[a] = malloc(n * sizeof(mpfr_t));
    for (size_t j = 0; j < n; j++) mpfr_init2((*arrs[a])[j], prec);
  }
  mpfr_inits2(prec, w->a_lo, w->a_hi, w->dlo, w->dhi, w->t, w->M, w->Slo, w->Shi, w->olo, w->ohi, w->x, (mpfr_ptr)0);
}

static void pf_at_prec(pf_at_work *w, long prec) {
  mpfr_t *arrs[] = {w->slo, w->shi, w->elo, w->ehi, w->plo, w->phi};
  for (int a = 0; a < 6; a++)
    for (size_t j = 0; j < w->n; j++) mpfr_set_prec(arrs[a][j], prec);
  mpfr_ptr s[] = {w->a_lo, w->a_hi, w->dlo, w->dhi, w->t, w->M, w->Slo, w->Shi, w->olo, w->ohi, w->x};
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) mpfr_set_prec(s[i], prec);
}

static void pf_at_free(pf_at_work *w) {
  mpfr_t *arrs[] = {w->slo, w->shi, w->elo, w->ehi, w->plo, w->phi};
  for (int a = 0; a < 6; a++) {
    for (size_t j = 0; j < w->n; j++) mpfr_clear(arrs[a][j]);
    free(arrs[a]);
  }
  mpfr_clears(w->a_lo, w->a_hi, w->dlo, w->dhi, w->t, w->M, w->Slo, w->Shi, w->olo, w->ohi, w->x, (mpfr_ptr)0);
}

/* [lo, hi] += a * b for an exact a (a double) and an interval b = [blo, bhi]. */
static void pf_at_add_scaled(mpfr_t lo, mpfr_t hi, double a, mpfr_srcptr blo, mpfr_srcptr bhi, mpfr_t tmp) {
  if (a >= 0) {
    mpfr_mul_d(tmp, blo, a, MPFR_RNDD);
    mpfr_add(lo, lo, tmp, MPFR_RNDD);
    mpfr_mul_d(tmp, bhi, a, MPFR_RNDU);
    mpfr_add(hi, hi, tmp, MPFR_RNDU);
  } else {
    mpfr_mul_d(tmp, bhi, a, MPFR_RNDD);
    mpfr_add(lo, lo, tmp, MPFR_RNDD);
    mpfr_mul_d(tmp, blo, a, MPFR_RNDU);
    mpfr_add(hi, hi, tmp, MPFR_RNDU);
  }
}

static double pf_at_sentinel(int choice, pf_dtype storage) {
  if (choice == 1) return -10000.0;
  if (choice == 2) {
    const pf_format f = pf_format_of(storage);
    return -ldexp(2.0 - ldexp(1.0, 1 - f.prec), f.emax);
  }
  return -INFINITY;
}

/* What every row of one case shares. */
typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  size_t heads, Lq, Lk, d, no, ns;
  int store_sp, mask, fast;
  double sentinel, Lstore;
  const unsigned char *finite_kv; /* per head */
  pf_attn_fast fp;
  size_t fast_units[PF_MAX_THREADS], mpfr_units[PF_MAX_THREADS];
  long max_prec[PF_MAX_THREADS];
} pf_at_case;

/* A row that reads a NaN or an infinity is undefined (every row sees key 0, whatever the
 * mask): 1 when row i of head h is (its outputs set so). */
static int pf_at_row_undefined(const pf_at_case *k, size_t h, size_t i) {
  const size_t Lq = k->Lq, Lk = k->Lk, d = k->d, no = k->no, ns = k->ns;
  const double *q = k->in[0].data + (h * Lq + i) * d;
  int finite = k->finite_kv[h];
  for (size_t m = 0; m < d; m++) finite &= isfinite(q[m]);
  if (finite) return 0;
  const int hex = k->opts->keep_hex;
  for (size_t e = 0; e < d; e++) pf_oracle_set_undefined(k->out, (h * Lq + i) * d + e, hex);
  if (k->store_sp)
    for (size_t j = 0; j < Lk; j++) {
      pf_oracle_set_undefined(k->out, no + (h * Lq + i) * Lk + j, hex);
      pf_oracle_set_undefined(k->out, no + ns + (h * Lq + i) * Lk + j, hex);
    }
  return 1;
}

/* Query row i of head h by MPFR, the precision doubled until every output settles. */
static void pf_at_row_mpfr(const pf_at_case *k, pf_at_work *w, long *prec_now, long *max_prec, size_t h, size_t i) {
  const pf_case *c = k->c;
  const pf_oracle_opts *opts = k->opts;
  pf_oracle_result *out = k->out;
  const size_t Lq = k->Lq, Lk = k->Lk, d = k->d, no = k->no, ns = k->ns;
  const int store_sp = k->store_sp, mask = k->mask;
  const double sentinel = k->sentinel, Lstore = k->Lstore;
  const double *Q = k->in[0].data + h * Lq * d, *K = k->in[1].data + h * Lk * d, *V = k->in[2].data + h * Lk * d;
  const long prec0 = opts->prec < 64 ? 64 : opts->prec;
  const double *q = Q + i * d;
  for (long prec = prec0;; prec *= 2) {
    if (prec != *prec_now) {
      pf_at_prec(w, prec);
      *prec_now = prec;
    }
    const int final = prec * 2 > opts->prec_max;
    int settled = 1;
    mpfr_set_ui(w->t, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(w->a_lo, w->t, MPFR_RNDD);
    mpfr_rec_sqrt(w->a_hi, w->t, MPFR_RNDU);
    /* scores: s = alpha * dot, an interval; the stored S is s / Lstore */
    int have_max = 0;
    for (size_t j = 0; j < Lk; j++) {
      mpfr_set_zero(w->dlo, 1);
      mpfr_set_zero(w->dhi, 1);
      for (size_t m = 0; m < d; m++) {
        mpfr_set_d(w->x, q[m], MPFR_RNDN); /* exact */
        mpfr_mul_d(w->t, w->x, K[j * d + m], MPFR_RNDD);
        mpfr_add(w->dlo, w->dlo, w->t, MPFR_RNDD);
        mpfr_mul_d(w->t, w->x, K[j * d + m], MPFR_RNDU);
        mpfr_add(w->dhi, w->dhi, w->t, MPFR_RNDU);
      }
      mpfr_mul(w->slo[j], w->dlo, mpfr_sgn(w->dlo) >= 0 ? w->a_lo : w->a_hi, MPFR_RNDD);
      mpfr_mul(w->shi[j], w->dhi, mpfr_sgn(w->dhi) >= 0 ? w->a_hi : w->a_lo, MPFR_RNDU);
      if (store_sp) {
        mpfr_div_d(w->olo, w->slo[j], Lstore, MPFR_RNDD);
        mpfr_div_d(w->ohi, w->shi[j], Lstore, MPFR_RNDU);
        settled &= pf_oracle_settle(out, no + (h * Lq + i) * Lk + j, w->olo, w->ohi, c->dtype, final, opts->keep_hex);
      }
      if (pf_oracle_masked(mask, i, j, Lq, Lk)) { /* the softmax sees the sentinel here */
        mpfr_set_d(w->slo[j], sentinel, MPFR_RNDN);
        mpfr_set_d(w->shi[j], sentinel, MPFR_RNDN);
      }
      if (!mpfr_inf_p(w->slo[j]) && (!have_max || mpfr_greater_p(w->slo[j], w->M))) {
        mpfr_set(w->M, w->slo[j], MPFR_RNDN);
        have_max = 1;
      }
    }
    /* probabilities */
    mpfr_set_zero(w->Slo, 1);
    mpfr_set_zero(w->Shi, 1);
    for (size_t j = 0; j < Lk; j++) {
      if (mpfr_inf_p(w->slo[j])) {
        mpfr_set_zero(w->elo[j], 1);
        mpfr_set_zero(w->ehi[j], 1);
        continue;
      }
      mpfr_sub(w->t, w->slo[j], w->M, MPFR_RNDD);
      mpfr_exp(w->elo[j], w->t, MPFR_RNDD);
      mpfr_sub(w->t, w->shi[j], w->M, MPFR_RNDU);
      mpfr_exp(w->ehi[j], w->t, MPFR_RNDU);
      mpfr_add(w->Slo, w->Slo, w->elo[j], MPFR_RNDD);
      mpfr_add(w->Shi, w->Shi, w->ehi[j], MPFR_RNDU);
    }
    for (size_t j = 0; j < Lk; j++) {
      if (!have_max) { /* every key masked by -inf (the causal mask hides the query): 0 by definition */
        mpfr_set_zero(w->plo[j], 1);
        mpfr_set_zero(w->phi[j], 1);
      } else {
        mpfr_div(w->plo[j], w->elo[j], w->Shi, MPFR_RNDD);
        mpfr_div(w->phi[j], w->ehi[j], w->Slo, MPFR_RNDU);
      }
      if (mpfr_cmp_ui(w->phi[j], 1) > 0) mpfr_set_ui(w->phi[j], 1, MPFR_RNDN); /* p <= 1 */
      if (store_sp)
        settled &= pf_oracle_settle(out, no + ns + (h * Lq + i) * Lk + j, w->plo[j], w->phi[j], c->dtype, final,
                                    opts->keep_hex);
    }
    /* output */
    for (size_t e = 0; e < d; e++) {
      mpfr_set_zero(w->olo, 1);
      mpfr_set_zero(w->ohi, 1);
      for (size_t j = 0; j < Lk; j++)
        if (!mpfr_zero_p(w->phi[j])) pf_at_add_scaled(w->olo, w->ohi, V[j * d + e], w->plo[j], w->phi[j], w->t);
      settled &= pf_oracle_settle(out, (h * Lq + i) * d + e, w->olo, w->ohi, c->dtype, final, opts->keep_hex);
    }
    if (prec > *max_prec) *max_prec = prec;
    if (settled) break;
  }
}

static void pf_at_rows(void *ctx, int t, size_t begin, size_t end) {
  pf_at_case *k = ctx;
  const long prec0 = k->opts->prec < 64 ? 64 : k->opts->prec;
  pf_at_work w;
  int have_w = 0;
  long prec_now = prec0;
  pf_attn_fast_work fw = {0};
  const int fast = k->fast && pf_attn_fast_work_init(&fw, &k->fp) == PF_OK;
  k->max_prec[t] = prec0;
  for (size_t u = begin; u < end; u++) {
    const size_t h = u / k->Lq, i = u % k->Lq;
    if (pf_at_row_undefined(k, h, i)) { /* by rule: counted with the path that is on */
      (fast ? k->fast_units : k->mpfr_units)[t]++;
      continue;
    }
    if (fast && pf_attn_fast_row(&k->fp, h, i, k->out, &fw)) {
      k->fast_units[t]++;
      continue;
    }
    k->mpfr_units[t]++;
    if (!have_w) {
      pf_at_init(&w, k->Lk, prec0);
      have_w = 1;
    }
    pf_at_row_mpfr(k, &w, &prec_now, &k->max_prec[t], h, i);
  }
  if (have_w) pf_at_free(&w);
  if (fast) pf_attn_fast_work_free(&fw);
}

pf_status pf_attention_fwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                                pf_oracle_result *out) {
  pf_at_case *k = calloc(1, sizeof *k);
  if (!k) return pf_error(PF_ERR_NOMEM, "attention oracle: out of memory");
  k->c = c;
  k->in = in;
  k->opts = opts;
  k->out = out;
  k->heads = c->shape[0] * c->shape[1];
  k->Lq = c->shape[2];
  k->Lk = c->shape[3];
  k->d = c->shape[4];
  k->store_sp = out->n > k->heads * k->Lq * k->d;
  k->no = k->heads * k->Lq * k->d;
  k->ns = k->heads * k->Lq * k->Lk;
  k->mask = (int)pf_case_param(c, "mask");
  k->sentinel = pf_at_sentinel((int)pf_case_param(c, "mask_value"), c->dtype);
  k->Lstore = pf_case_algo(c) == PF_ATTN_LAYER_SCALED ? pf_case_param(c, "layer") : 1.0;
  unsigned char *finite_kv = malloc(k->heads ? k->heads : 1);
  if (!finite_kv) {
    free(k);
    return pf_error(PF_ERR_NOMEM, "attention oracle: out of memory");
  }
  for (size_t h = 0; h < k->heads; h++) {
    const double *K = in[1].data + h * k->Lk * k->d, *V = in[2].data + h * k->Lk * k->d;
    int f = 1;
    for (size_t x = 0; x < k->Lk * k->d; x++) f &= isfinite(K[x]) && isfinite(V[x]);
    finite_kv[h] = (unsigned char)f;
  }
  k->finite_kv = finite_kv;
  /* the fast path first (attention_fast.c), row by row; not when the exact values are asked
   * for in hex (>= 160 bits) */
  k->fast = !opts->mpfr_only && !opts->keep_hex &&
            pf_attn_fast_init(&k->fp, c, in, k->store_sp, k->mask, k->sentinel, k->Lstore) == PF_OK;
  const size_t rows = k->heads * k->Lq;
  const int threads = pf_parallel_threads(rows, 20.0 * (double)k->Lk * (double)k->d);
  pf_oracle_parallel(rows, threads, pf_at_rows, k);
  out->max_prec = opts->prec < 64 ? 64 : opts->prec;
  for (int t = 0; t < threads; t++) {
    out->fast_units += k->fast_units[t];
    out->mpfr_units += k->mpfr_units[t];
    if (k->max_prec[t] > out->max_prec) out->max_prec = k->max_prec[t];
  }
  if (k->fast) pf_attn_fast_free(&k->fp);
  free(finite_kv);
  free(k);
  return PF_OK;
}
