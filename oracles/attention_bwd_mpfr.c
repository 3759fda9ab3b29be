/* The attention backward oracle: for each head, the exact
 *
 *   s_ij = q_i . k_j / sqrt(d) (masked: P_ij = 0),  P = softmax(s) by row,
 *   dP_ij = dO_i . v_j,  dS_ij = P_ij (dP_ij - D_i),  D_i = sum_j P_ij dP_ij,
 *   dV_j = sum_i P_ij dO_i,  dQ_i = sum_j dS_ij k_j / sqrt(d),  dK_j = sum_i dS_ij q_i / sqrt(d)
 *
 * of the stored inputs, by interval arithmetic in MPFR (lower ends rounded down, upper ends up),
 * the precision doubled until every element of the head rounds to one value of the storage
 * dtype, up to opts->prec_max (then a TIE). Since sum_j P_ij = 1 and sum_j dS_ij = 0 exactly,
 * dP_ij - D_i is taken as w_ij - sum_k P_ik w_ik with w_ij = dO_i . (v_j - v_c), and dQ_i as
 * sum_j dS_ij (k_j - k_c) / sqrt(d), c the row's largest score: a row of equal values of v (or
 * a column of equal values of k) gives an exact 0, which an interval around a difference would
 * never prove. A head that reads a NaN or an infinity is undefined. dP and dS are outputs of
 * the standard variant only (its stored intermediates). A fast path (attention_bwd_fast.c)
 * settles most heads first; what it cannot decide is computed here. */
#include "oracles/attention_bwd_mpfr.h"

#include <math.h>
#include <stdlib.h>

#include "core/case.h"
#include "oracles/attention_bwd_fast.h"
#include "oracles/oracle_util.h"
#include "oracles/softmax_fast.h" /* pf_oracle_masked: causal bottom right, causal-top-left */

enum { D_B = 0, D_H, D_LQ, D_LK, D_D };
enum { P_MASK = 0 }; /* kernels/attention_bwd: the parameters' order */


typedef struct {
  mpfr_t *plo, *phi, *slo, *shi, *wlo, *whi;
  mpfr_t alo, ahi, a, b, lo, hi, Zlo, Zhi, Dlo, Dhi, t1, t2, t3, t4;
  size_t n, nw;
  long prec;
} pf_abo_work;

#define PF_ABO_SCALARS(w) \
  w->alo, w->ahi, w->a, w->b, w->lo, w->hi, w->Zlo, w->Zhi, w->Dlo, w->Dhi, w->t1, w->t2, w->t3, w->t4

static int pf_abo_init(pf_abo_work *w, size_t n, size_t nw, long prec) {
  w->n = n, w->nw = nw, w->prec = prec;
  mpfr_t **arrs[] = {&w->plo, &w->phi, &w->slo, &w->shi, &w->wlo, &w->whi};
  for (int a = 0; a < 6; a++) *arrs[a] = NULL;
  for (int a = 0; a < 6; a++) {
    const size_t m = a < 4 ? n : nw;
    if (!(*arrs[a] = malloc((m ? m : 1) * sizeof(mpfr_t)))) {
      for (int b = 0; b < a; b++) {
        for (size_t j = 0; j < (b < 4 ? n : nw); j++) mpfr_clear((*arrs[b])[j]);
        free(*arrs[b]);
      }
      return 0;
    }
    for (size_t j = 0; j < m; j++) mpfr_init2((*arrs[a])[j], prec);
  }
  mpfr_inits2(prec, PF_ABO_SCALARS(w), (mpfr_ptr)0);
  return 1;
}

static void pf_abo_prec(pf_abo_work *w, long prec) {
  if (prec == w->prec) return;
  w->prec = prec;
  mpfr_t *arrs[] = {w->plo, w->phi, w->slo, w->shi, w->wlo, w->whi};
  for (int a = 0; a < 6; a++)
    for (size_t j = 0; j < (a < 4 ? w->n : w->nw); j++) mpfr_set_prec(arrs[a][j], prec);
  mpfr_ptr all[] = {PF_ABO_SCALARS(w)};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mpfr_set_prec(all[k], prec);
}

static void pf_abo_free(pf_abo_work *w) {
  mpfr_t *arrs[] = {w->plo, w->phi, w->slo, w->shi, w->wlo, w->whi};
  for (int a = 0; a < 6; a++) {
    for (size_t j = 0; j < (a < 4 ? w->n : w->nw); j++) mpfr_clear(arrs[a][j]);
    free(arrs[a]);
  }
  mpfr_clears(PF_ABO_SCALARS(w), (mpfr_ptr)0);
}

/* [lo, hi] += [alo, ahi] * [blo, bhi], any signs (t1..t4 scratch) */
static void pf_abo_addmul(pf_abo_work *w, mpfr_ptr lo, mpfr_ptr hi, mpfr_srcptr alo, mpfr_srcptr ahi, mpfr_srcptr blo,
                          mpfr_srcptr bhi) {
  mpfr_mul(w->t1, alo, blo, MPFR_RNDD), mpfr_mul(w->t2, alo, bhi, MPFR_RNDD);
  mpfr_mul(w->t3, ahi, blo, MPFR_RNDD), mpfr_mul(w->t4, ahi, bhi, MPFR_RNDD);
  mpfr_min(w->t1, w->t1, w->t2, MPFR_RNDD), mpfr_min(w->t3, w->t3, w->t4, MPFR_RNDD), mpfr_min(w->t1, w->t1, w->t3, MPFR_RNDD);
  mpfr_add(lo, lo, w->t1, MPFR_RNDD);
  mpfr_mul(w->t1, alo, blo, MPFR_RNDU), mpfr_mul(w->t2, alo, bhi, MPFR_RNDU);
  mpfr_mul(w->t3, ahi, blo, MPFR_RNDU), mpfr_mul(w->t4, ahi, bhi, MPFR_RNDU);
  mpfr_max(w->t1, w->t1, w->t2, MPFR_RNDU), mpfr_max(w->t3, w->t3, w->t4, MPFR_RNDU), mpfr_max(w->t1, w->t1, w->t3, MPFR_RNDU);
  mpfr_add(hi, hi, w->t1, MPFR_RNDU);
}

/* [lo, hi] += x * (y - z) for doubles (the difference enclosed first: exactly 0 when y == z) */
static void pf_abo_addmul_diff(pf_abo_work *w, mpfr_ptr lo, mpfr_ptr hi, double x, double y, double z) {
  mpfr_set_d(w->a, y, MPFR_RNDN), mpfr_set_d(w->b, y, MPFR_RNDN);
  mpfr_sub_d(w->a, w->a, z, MPFR_RNDD), mpfr_sub_d(w->b, w->b, z, MPFR_RNDU);
  if (x >= 0) mpfr_mul_d(w->a, w->a, x, MPFR_RNDD), mpfr_mul_d(w->b, w->b, x, MPFR_RNDU);
  else mpfr_swap(w->a, w->b), mpfr_mul_d(w->a, w->a, x, MPFR_RNDD), mpfr_mul_d(w->b, w->b, x, MPFR_RNDU);
  mpfr_add(lo, lo, w->a, MPFR_RNDD), mpfr_add(hi, hi, w->b, MPFR_RNDU);
}

/* the result [lo, hi] of output element i: tiny, settled, or not (0) */
static int pf_abo_settle(pf_oracle_result *out, size_t i, mpfr_srcptr lo, mpfr_srcptr hi, pf_dtype t, int final,
                         int hex) {
  const mpfr_exp_t top = mpfr_get_emin() + 256;
  if (!(mpfr_zero_p(lo) && mpfr_zero_p(hi)) && (mpfr_zero_p(lo) || mpfr_get_exp(lo) <= top) &&
      (mpfr_zero_p(hi) || mpfr_get_exp(hi) <= top)) {
    pf_oracle_set_tiny(out, i, t, hex);
    return 1;
  }
  return pf_oracle_settle(out, i, lo, hi, t, final, hex);
}

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  int standard;
  long max_prec[PF_MAX_THREADS];
  size_t fast[PF_MAX_THREADS]; /* heads the fast path settled */
  int nomem[PF_MAX_THREADS];
} pf_abo_case;

/* head h at the working precision: 1 when every element settled (or final) */
static int pf_abo_head(pf_abo_work *w, const pf_abo_case *k, size_t h, int final) {
  const pf_case *c = k->c;
  const size_t H = c->shape[D_B] * c->shape[D_H], Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const size_t qn = H * Lq * d, kn = H * Lk * d, sn = H * Lq * Lk;
  const double *q = k->in[0].data + h * Lq * d, *K = k->in[1].data + h * Lk * d, *v = k->in[2].data + h * Lk * d,
               *dO = k->in[3].data + h * Lq * d;
  const int mask = (int)c->params[P_MASK], hex = k->opts->keep_hex;
  const pf_dtype t = c->dtype;
  pf_oracle_result *out = k->out;
  int ok = 1;
  /* alpha = 1/sqrt(d) */
  mpfr_set_ui(w->alo, (unsigned long)d, MPFR_RNDN), mpfr_rec_sqrt(w->alo, w->alo, MPFR_RNDD);
  mpfr_set_ui(w->ahi, (unsigned long)d, MPFR_RNDN), mpfr_rec_sqrt(w->ahi, w->ahi, MPFR_RNDU);
  size_t *cref = malloc((Lq ? Lq : 1) * sizeof(size_t));
  if (!cref) return -1;
  for (size_t i = 0; i < Lq; i++) {
    mpfr_t *plo = w->plo + i * Lk, *phi = w->phi + i * Lk, *slo = w->slo + i * Lk, *shi = w->shi + i * Lk;
    /* scores, in P's row for now; the reference m and c: the largest score in binary64 */
    double m = -INFINITY;
    size_t jc = 0;
    for (size_t j = 0; j < Lk; j++) {
      if (pf_oracle_masked(mask, i, j, Lq, Lk)) continue;
      double sd = 0;
      mpfr_set_zero(w->lo, 1), mpfr_set_zero(w->hi, 1);
      for (size_t e = 0; e < d; e++) {
        mpfr_set_d(w->a, q[i * d + e], MPFR_RNDN);
        mpfr_mul_d(w->b, w->a, K[j * d + e], MPFR_RNDD), mpfr_add(w->lo, w->lo, w->b, MPFR_RNDD);
        mpfr_mul_d(w->b, w->a, K[j * d + e], MPFR_RNDU), mpfr_add(w->hi, w->hi, w->b, MPFR_RNDU);
        sd += q[i * d + e] * K[j * d + e];
      }
      mpfr_mul(plo[j], w->lo, mpfr_sgn(w->lo) >= 0 ? w->alo : w->ahi, MPFR_RNDD);
      mpfr_mul(phi[j], w->hi, mpfr_sgn(w->hi) >= 0 ? w->ahi : w->alo, MPFR_RNDU);
      if (sd > m || m == -INFINITY) m = sd, jc = j;
    }
    cref[i] = jc;
    m = mpfr_get_d(plo[jc], MPFR_RNDN);
    /* P = exp(s - m) / sum */
    mpfr_set_zero(w->Zlo, 1), mpfr_set_zero(w->Zhi, 1);
    for (size_t j = 0; j < Lk; j++) {
      if (pf_oracle_masked(mask, i, j, Lq, Lk)) {
        mpfr_set_zero(plo[j], 1), mpfr_set_zero(phi[j], 1);
        continue;
      }
      mpfr_sub_d(plo[j], plo[j], m, MPFR_RNDD), mpfr_exp(plo[j], plo[j], MPFR_RNDD);
      mpfr_sub_d(phi[j], phi[j], m, MPFR_RNDU), mpfr_exp(phi[j], phi[j], MPFR_RNDU);
      mpfr_add(w->Zlo, w->Zlo, plo[j], MPFR_RNDD), mpfr_add(w->Zhi, w->Zhi, phi[j], MPFR_RNDU);
    }
    /* a query the causal mask hides from every key: P = 0 by definition (0/0 otherwise) */
    for (size_t j = 0; j < Lk && !pf_oracle_hidden(mask, i, Lq, Lk); j++)
      mpfr_div(plo[j], plo[j], w->Zhi, MPFR_RNDD), mpfr_div(phi[j], phi[j], w->Zlo, MPFR_RNDU);
    /* w_j = dO_i . (v_j - v_c), D' = sum_j P_j w_j; dP_j itself for the standard variant */
    mpfr_set_zero(w->Dlo, 1), mpfr_set_zero(w->Dhi, 1);
    for (size_t j = 0; j < Lk; j++) {
      mpfr_set_zero(w->wlo[j], 1), mpfr_set_zero(w->whi[j], 1);
      for (size_t e = 0; e < d; e++) pf_abo_addmul_diff(w, w->wlo[j], w->whi[j], dO[i * d + e], v[j * d + e], v[jc * d + e]);
      pf_abo_addmul(w, w->Dlo, w->Dhi, plo[j], phi[j], w->wlo[j], w->whi[j]);
      if (k->standard && ok) {
        mpfr_set_zero(w->lo, 1), mpfr_set_zero(w->hi, 1);
        for (size_t e = 0; e < d; e++) pf_abo_addmul_diff(w, w->lo, w->hi, dO[i * d + e], v[j * d + e], 0);
        ok = pf_abo_settle(out, qn + 2 * kn + h * Lq * Lk + i * Lk + j, w->lo, w->hi, t, final, hex);
      }
    }
    /* dS_j = P_j (w_j - D') */
    for (size_t j = 0; j < Lk; j++) {
      mpfr_sub(w->lo, w->wlo[j], w->Dhi, MPFR_RNDD), mpfr_sub(w->hi, w->whi[j], w->Dlo, MPFR_RNDU);
      mpfr_set_zero(slo[j], 1), mpfr_set_zero(shi[j], 1);
      pf_abo_addmul(w, slo[j], shi[j], plo[j], phi[j], w->lo, w->hi);
      if (k->standard && ok) ok = pf_abo_settle(out, qn + 2 * kn + sn + h * Lq * Lk + i * Lk + j, slo[j], shi[j], t, final, hex);
    }
  }
  /* dV_j = sum_i P_ij dO_i; dK_j = alpha sum_i dS_ij q_i */
  for (size_t j = 0; j < Lk && ok; j++)
    for (size_t e = 0; e < d && ok; e++) {
      mpfr_set_zero(w->lo, 1), mpfr_set_zero(w->hi, 1);
      for (size_t i = 0; i < Lq; i++) {
        const double g = dO[i * d + e];
        mpfr_mul_d(w->a, g >= 0 ? w->plo[i * Lk + j] : w->phi[i * Lk + j], g, MPFR_RNDD), mpfr_add(w->lo, w->lo, w->a, MPFR_RNDD);
        mpfr_mul_d(w->a, g >= 0 ? w->phi[i * Lk + j] : w->plo[i * Lk + j], g, MPFR_RNDU), mpfr_add(w->hi, w->hi, w->a, MPFR_RNDU);
      }
      ok = pf_abo_settle(out, qn + kn + h * Lk * d + j * d + e, w->lo, w->hi, t, final, hex);
      if (!ok) break;
      mpfr_set_zero(w->Dlo, 1), mpfr_set_zero(w->Dhi, 1);
      for (size_t i = 0; i < Lq; i++) {
        mpfr_set_d(w->Zlo, q[i * d + e], MPFR_RNDN);
        pf_abo_addmul(w, w->Dlo, w->Dhi, w->slo[i * Lk + j], w->shi[i * Lk + j], w->Zlo, w->Zlo);
      }
      mpfr_set_zero(w->lo, 1), mpfr_set_zero(w->hi, 1);
      pf_abo_addmul(w, w->lo, w->hi, w->Dlo, w->Dhi, w->alo, w->ahi);
      ok = pf_abo_settle(out, qn + h * Lk * d + j * d + e, w->lo, w->hi, t, final, hex);
    }
  /* dQ_i = alpha sum_j dS_ij (k_j - k_c) */
  for (size_t i = 0; i < Lq && ok; i++)
    for (size_t e = 0; e < d && ok; e++) {
      mpfr_set_zero(w->Dlo, 1), mpfr_set_zero(w->Dhi, 1);
      for (size_t j = 0; j < Lk; j++) {
        mpfr_set_d(w->Zlo, K[j * d + e], MPFR_RNDN), mpfr_set_d(w->Zhi, K[j * d + e], MPFR_RNDN);
        mpfr_sub_d(w->Zlo, w->Zlo, K[cref[i] * d + e], MPFR_RNDD), mpfr_sub_d(w->Zhi, w->Zhi, K[cref[i] * d + e], MPFR_RNDU);
        pf_abo_addmul(w, w->Dlo, w->Dhi, w->slo[i * Lk + j], w->shi[i * Lk + j], w->Zlo, w->Zhi);
      }
      mpfr_set_zero(w->lo, 1), mpfr_set_zero(w->hi, 1);
      pf_abo_addmul(w, w->lo, w->hi, w->Dlo, w->Dhi, w->alo, w->ahi);
      ok = pf_abo_settle(out, h * Lq * d + i * d + e, w->lo, w->hi, t, final, hex);
    }
  free(cref);
  return ok;
}

static void pf_abo_heads(void *ctx, int th, size_t begin, size_t end) {
  pf_abo_case *k = ctx;
  const pf_case *c = k->c;
  const size_t H = c->shape[D_B] * c->shape[D_H], Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const size_t qn = H * Lq * d, kn = H * Lk * d, sn = H * Lq * Lk;
  const long prec0 = k->opts->prec < 64 ? 64 : k->opts->prec;
  pf_abo_work w;
  /* the fast path unless MPFR alone is asked for, or the exact values' hex digits (its exact
   * value is the binary64 one) */
  const int fast = !k->opts->mpfr_only && !k->opts->keep_hex;
  pf_abf_work fw = {0};
  if ((fast && !pf_abf_work_init(&fw, Lq, Lk)) || !pf_abo_init(&w, Lq * Lk, Lk, prec0)) {
    pf_abf_work_free(&fw);
    k->nomem[th] = 1;
    return;
  }
  k->max_prec[th] = prec0;
  for (size_t h = begin; h < end; h++) {
    int defined = 1;
    for (int t = 0; t < 4; t++) {
      const size_t n = (t == 0 || t == 3 ? Lq : Lk) * d;
      for (size_t x = 0; x < n; x++) defined &= isfinite(k->in[t].data[h * n + x]);
    }
    if (!defined) {
      const size_t idx[][2] = {{h * Lq * d, Lq * d}, {qn + h * Lk * d, Lk * d}, {qn + kn + h * Lk * d, Lk * d},
                               {qn + 2 * kn + h * Lq * Lk, Lq * Lk}, {qn + 2 * kn + sn + h * Lq * Lk, Lq * Lk}};
      for (int s = 0; s < (k->standard ? 5 : 3); s++)
        for (size_t x = 0; x < idx[s][1]; x++) pf_oracle_set_undefined(k->out, idx[s][0] + x, k->opts->keep_hex);
      continue;
    }
    if (fast && pf_attention_bwd_fast_head(c, k->in, h, k->standard, k->out, &fw)) {
      k->fast[th]++;
      continue;
    }
    for (long prec = prec0;; prec *= 2) {
      pf_abo_prec(&w, prec);
      const int final = prec * 2 > k->opts->prec_max;
      if (prec > k->max_prec[th]) k->max_prec[th] = prec;
      const int r = pf_abo_head(&w, k, h, final);
      if (r < 0) {
        k->nomem[th] = 1;
        break;
      }
      if (r) break;
    }
  }
  pf_abo_free(&w);
  pf_abf_work_free(&fw);
}

pf_status pf_attention_bwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                                pf_oracle_result *out) {
  const size_t H = c->shape[D_B] * c->shape[D_H];
  pf_abo_case *k = calloc(1, sizeof *k);
  if (!k) return pf_error(PF_ERR_NOMEM, "attention_bwd oracle: out of memory");
  *k = (pf_abo_case){.c = c, .in = in, .opts = opts, .out = out};
  pf_stage st[PF_MAX_STAGES];
  k->standard = pf_case_stages(c, st) == 5; /* the standard variant's stages: dP, dS, dV, dQ, dK */
  const int threads = pf_parallel_threads(H, 100.0 * (double)(c->shape[D_LQ] * c->shape[D_LK] * c->shape[D_D])); /* the fast path's work */
  pf_oracle_parallel(H, threads, pf_abo_heads, k);
  out->max_prec = opts->prec < 64 ? 64 : opts->prec;
  out->fast_units = 0;
  int nomem = 0;
  for (int t = 0; t < threads; t++) {
    out->fast_units += k->fast[t];
    if (k->max_prec[t] > out->max_prec) out->max_prec = k->max_prec[t];
    nomem |= k->nomem[t];
  }
  out->mpfr_units = H - out->fast_units;
  free(k);
  if (nomem) return pf_error(PF_ERR_NOMEM, "attention_bwd oracle: cannot allocate a head of %zu x %zu", c->shape[D_LQ],
                             c->shape[D_LK]);
  return PF_OK;
}
