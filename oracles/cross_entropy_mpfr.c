/* The cross-entropy oracle: for each row with logits x, target t, label smoothing eps, z-loss
 * coefficient z, C columns, the exact
 *
 *   lse  = m + log Z,  Z = sum_j e_j,  e_j = exp(x_j - m),  m = max x
 *   loss = lse - (1 - eps) x_t - (eps / C) sum_j x_j + z lse^2
 *   dx_j = g (e_j (1 + 2 z lse) - (eps / C) Z) / Z                              (j != t)
 *   dx_t = g (e_t (1 + 2 z lse - (1 - eps)) - (1 - eps) Z_t - (eps / C) Z) / Z,  Z_t = Z - e_t
 *
 * (the target's gradient written so that p_t - 1 = -Z_t / Z is never a cancellation), g = 1 / the
 * rows counted for the mean, 1 otherwise, and the reduced loss, the mean or sum of the counted
 * rows' losses. By interval arithmetic in MPFR (lower ends rounded down, upper ends up), the
 * precision doubled until every element's enclosure rounds to one value of its dtype, up to
 * opts->prec_max (then a TIE). An ignored row's loss and gradient are exactly 0; a row with a
 * non-finite logit is undefined, and so is a reduction over it, and the mean of no rows. A row
 * goes to the fast path first (cross_entropy_fast.c, double words with a proven bound) and to
 * MPFR only where that cannot decide it (opts->mpfr_only, or keep_hex: MPFR for every row). */
#include "oracles/cross_entropy_mpfr.h"

#include <math.h>
#include <stdlib.h>

#include "core/case.h"
#include "oracles/cross_entropy_fast.h"
#include "oracles/oracle_util.h"

enum { P_EPS, P_Z, P_IGNORE, P_RED, P_CHUNK }; /* kernels/cross_entropy: the parameters' order */
enum { RED_MEAN = 0, RED_SUM = 1, RED_NONE = 2 };

typedef struct {
  mpfr_t *elo, *ehi;
  mpfr_t Zlo, Zhi, Tlo, Thi, Llo, Lhi, a, b, lo, hi, t1, t2, t3, t4, zflo, zfhi, cepslo, cepshi, c1lo, c1hi, glo, ghi;
  size_t cols;
  long prec;
} pf_ce_work;

#define PF_CE_SCALARS(w)                                                                                             \
  w->Zlo, w->Zhi, w->Tlo, w->Thi, w->Llo, w->Lhi, w->a, w->b, w->lo, w->hi, w->t1, w->t2, w->t3, w->t4, w->zflo,      \
      w->zfhi, w->cepslo, w->cepshi, w->c1lo, w->c1hi, w->glo, w->ghi

static int pf_ce_init(pf_ce_work *w, size_t cols, long prec) {
  w->cols = cols, w->prec = prec;
  w->elo = malloc((cols ? cols : 1) * sizeof(mpfr_t));
  w->ehi = malloc((cols ? cols : 1) * sizeof(mpfr_t));
  if (!w->elo || !w->ehi) {
    free(w->elo);
    free(w->ehi);
    return 0;
  }
  for (size_t j = 0; j < cols; j++) mpfr_init2(w->elo[j], prec), mpfr_init2(w->ehi[j], prec);
  mpfr_inits2(prec, PF_CE_SCALARS(w), (mpfr_ptr)0);
  return 1;
}

static void pf_ce_prec(pf_ce_work *w, long prec) {
  if (prec == w->prec) return;
  w->prec = prec;
  for (size_t j = 0; j < w->cols; j++) mpfr_set_prec(w->elo[j], prec), mpfr_set_prec(w->ehi[j], prec);
  mpfr_ptr all[] = {PF_CE_SCALARS(w)};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mpfr_set_prec(all[k], prec);
}

static void pf_ce_free(pf_ce_work *w) {
  for (size_t j = 0; j < w->cols; j++) mpfr_clear(w->elo[j]), mpfr_clear(w->ehi[j]);
  free(w->elo);
  free(w->ehi);
  mpfr_clears(PF_CE_SCALARS(w), (mpfr_ptr)0);
}

/* [lo, hi] = [alo, ahi] * [blo, bhi], any signs (t1..t4 scratch; lo, hi distinct from the operands) */
static void pf_ce_mul(pf_ce_work *w, mpfr_ptr lo, mpfr_ptr hi, mpfr_srcptr alo, mpfr_srcptr ahi, mpfr_srcptr blo,
                      mpfr_srcptr bhi) {
  mpfr_mul(w->t1, alo, blo, MPFR_RNDD), mpfr_mul(w->t2, alo, bhi, MPFR_RNDD);
  mpfr_mul(w->t3, ahi, blo, MPFR_RNDD), mpfr_mul(w->t4, ahi, bhi, MPFR_RNDD);
  mpfr_min(lo, w->t1, w->t2, MPFR_RNDD), mpfr_min(lo, lo, w->t3, MPFR_RNDD), mpfr_min(lo, lo, w->t4, MPFR_RNDD);
  mpfr_mul(w->t1, alo, blo, MPFR_RNDU), mpfr_mul(w->t2, alo, bhi, MPFR_RNDU);
  mpfr_mul(w->t3, ahi, blo, MPFR_RNDU), mpfr_mul(w->t4, ahi, bhi, MPFR_RNDU);
  mpfr_max(hi, w->t1, w->t2, MPFR_RNDU), mpfr_max(hi, hi, w->t3, MPFR_RNDU), mpfr_max(hi, hi, w->t4, MPFR_RNDU);
}

/* [lo, hi] is not [0, 0] and lies within 2^(emin + 256) of 0 */
static int pf_ce_tiny(mpfr_srcptr lo, mpfr_srcptr hi) {
  const mpfr_exp_t top = mpfr_get_emin() + 256;
  if (mpfr_zero_p(lo) && mpfr_zero_p(hi)) return 0;
  return (mpfr_zero_p(lo) || mpfr_get_exp(lo) <= top) && (mpfr_zero_p(hi) || mpfr_get_exp(hi) <= top);
}

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  pf_dtype lt;  /* the losses' dtype */
  size_t nr;    /* 1: a reduced loss follows the losses */
  double nc;    /* rows counted by the mean */
  mpfr_t *llo, *lhi; /* each row's loss enclosure, for the reduction */
  long max_prec[PF_MAX_THREADS];
  int nomem[PF_MAX_THREADS];
  size_t fast[PF_MAX_THREADS]; /* rows the fast path settled */
} pf_ce_case;

static long pf_ce_target(const pf_case *c, const pf_tensor *in, size_t i) {
  const double t = in[1].data[i];
  return t == c->params[P_IGNORE] ? -1 : (long)t;
}

/* The loss enclosure of row i into [w->lo, w->hi] (w->elo/ehi, Z, lse in Llo/Lhi filled too). */
static void pf_ce_row_loss(pf_ce_work *w, const pf_ce_case *k, const double *x, size_t t) {
  const pf_case *c = k->c;
  const size_t cols = c->shape[1];
  const double eps = c->params[P_EPS], z = c->params[P_Z];
  double m = -INFINITY;
  for (size_t j = 0; j < cols; j++) m = x[j] > m ? x[j] : m;
  mpfr_set_zero(w->Zlo, 1), mpfr_set_zero(w->Zhi, 1), mpfr_set_zero(w->Tlo, 1), mpfr_set_zero(w->Thi, 1);
  for (size_t j = 0; j < cols; j++) {
    mpfr_set_d(w->a, x[j], MPFR_RNDN);
    mpfr_sub_d(w->b, w->a, m, MPFR_RNDD);
    mpfr_exp(w->elo[j], w->b, MPFR_RNDD);
    mpfr_sub_d(w->b, w->a, m, MPFR_RNDU);
    mpfr_exp(w->ehi[j], w->b, MPFR_RNDU);
    mpfr_add(w->Zlo, w->Zlo, w->elo[j], MPFR_RNDD), mpfr_add(w->Zhi, w->Zhi, w->ehi[j], MPFR_RNDU);
    if (j != t) mpfr_add(w->Tlo, w->Tlo, w->elo[j], MPFR_RNDD), mpfr_add(w->Thi, w->Thi, w->ehi[j], MPFR_RNDU);
  }
  /* lse = m + log Z */
  mpfr_log(w->Llo, w->Zlo, MPFR_RNDD), mpfr_add_d(w->Llo, w->Llo, m, MPFR_RNDD);
  mpfr_log(w->Lhi, w->Zhi, MPFR_RNDU), mpfr_add_d(w->Lhi, w->Lhi, m, MPFR_RNDU);
  /* c1 = 1 - eps, ceps = eps / C */
  mpfr_set_d(w->a, eps, MPFR_RNDN);
  mpfr_d_sub(w->c1lo, 1.0, w->a, MPFR_RNDD), mpfr_d_sub(w->c1hi, 1.0, w->a, MPFR_RNDU);
  mpfr_div_d(w->cepslo, w->a, (double)cols, MPFR_RNDD), mpfr_div_d(w->cepshi, w->a, (double)cols, MPFR_RNDU);
  /* loss = lse - c1 x_t */
  mpfr_set_d(w->lo, x[t], MPFR_RNDN);
  pf_ce_mul(w, w->a, w->b, w->c1lo, w->c1hi, w->lo, w->lo);
  mpfr_sub(w->lo, w->Llo, w->b, MPFR_RNDD), mpfr_sub(w->hi, w->Lhi, w->a, MPFR_RNDU);
  if (eps != 0) { /* - ceps sum x */
    mpfr_set_zero(w->a, 1), mpfr_set_zero(w->b, 1);
    for (size_t j = 0; j < cols; j++) mpfr_add_d(w->a, w->a, x[j], MPFR_RNDD), mpfr_add_d(w->b, w->b, x[j], MPFR_RNDU);
    mpfr_set(w->zflo, w->a, MPFR_RNDD), mpfr_set(w->zfhi, w->b, MPFR_RNDU);
    pf_ce_mul(w, w->a, w->b, w->cepslo, w->cepshi, w->zflo, w->zfhi);
    mpfr_sub(w->lo, w->lo, w->b, MPFR_RNDD), mpfr_sub(w->hi, w->hi, w->a, MPFR_RNDU);
  }
  if (z != 0) { /* + z lse^2 */
    if (mpfr_sgn(w->Llo) >= 0) mpfr_sqr(w->a, w->Llo, MPFR_RNDD), mpfr_sqr(w->b, w->Lhi, MPFR_RNDU);
    else if (mpfr_sgn(w->Lhi) <= 0) mpfr_sqr(w->a, w->Lhi, MPFR_RNDD), mpfr_sqr(w->b, w->Llo, MPFR_RNDU);
    else {
      mpfr_set_zero(w->a, 1);
      mpfr_sqr(w->t1, w->Llo, MPFR_RNDU), mpfr_sqr(w->t2, w->Lhi, MPFR_RNDU), mpfr_max(w->b, w->t1, w->t2, MPFR_RNDU);
    }
    mpfr_mul_d(w->a, w->a, z, MPFR_RNDD), mpfr_mul_d(w->b, w->b, z, MPFR_RNDU);
    mpfr_add(w->lo, w->lo, w->a, MPFR_RNDD), mpfr_add(w->hi, w->hi, w->b, MPFR_RNDU);
  }
}

/* Row i at the working precision: 1 when every element settled (or final). */
static int pf_ce_row(pf_ce_work *w, pf_ce_case *k, size_t i, int final) {
  const pf_case *c = k->c;
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double *x = k->in[0].data + i * cols;
  const double z = c->params[P_Z];
  const size_t t = (size_t)pf_ce_target(c, k->in, i), base = rows + k->nr + i * cols;
  const int hex = k->opts->keep_hex;
  pf_ce_row_loss(w, k, x, t);
  int settled = pf_oracle_settle(k->out, i, w->lo, w->hi, k->lt, final, hex);
  if (!settled) return 0;
  mpfr_set_prec(k->llo[i], w->prec), mpfr_set_prec(k->lhi[i], w->prec);
  mpfr_set(k->llo[i], w->lo, MPFR_RNDD), mpfr_set(k->lhi[i], w->hi, MPFR_RNDU);
  /* zf = 1 + 2 z lse; g */
  mpfr_mul_d(w->zflo, w->Llo, 2 * z, MPFR_RNDD), mpfr_add_d(w->zflo, w->zflo, 1.0, MPFR_RNDD);
  mpfr_mul_d(w->zfhi, w->Lhi, 2 * z, MPFR_RNDU), mpfr_add_d(w->zfhi, w->zfhi, 1.0, MPFR_RNDU);
  if ((int)c->params[P_RED] == RED_MEAN) {
    mpfr_set_d(w->glo, 1.0, MPFR_RNDN), mpfr_div_d(w->glo, w->glo, k->nc, MPFR_RNDD);
    mpfr_set_d(w->ghi, 1.0, MPFR_RNDN), mpfr_div_d(w->ghi, w->ghi, k->nc, MPFR_RNDU);
  } else mpfr_set_d(w->glo, 1.0, MPFR_RNDN), mpfr_set_d(w->ghi, 1.0, MPFR_RNDN);
  for (size_t j = 0; j < cols && settled; j++) {
    /* numerator: e_j zf - ceps Z (j != t); e_t (zf - c1) - c1 Z_t - ceps Z */
    if (j == t) {
      mpfr_sub(w->a, w->zflo, w->c1hi, MPFR_RNDD), mpfr_sub(w->b, w->zfhi, w->c1lo, MPFR_RNDU);
      pf_ce_mul(w, w->lo, w->hi, w->elo[j], w->ehi[j], w->a, w->b);
      mpfr_mul(w->a, w->c1hi, w->Thi, MPFR_RNDU), mpfr_mul(w->b, w->c1lo, w->Tlo, MPFR_RNDD); /* c1, Z_t >= 0 */
      mpfr_sub(w->lo, w->lo, w->a, MPFR_RNDD), mpfr_sub(w->hi, w->hi, w->b, MPFR_RNDU);
    } else {
      pf_ce_mul(w, w->lo, w->hi, w->elo[j], w->ehi[j], w->zflo, w->zfhi);
    }
    mpfr_mul(w->a, w->cepshi, w->Zhi, MPFR_RNDU), mpfr_mul(w->b, w->cepslo, w->Zlo, MPFR_RNDD); /* >= 0 */
    mpfr_sub(w->lo, w->lo, w->a, MPFR_RNDD), mpfr_sub(w->hi, w->hi, w->b, MPFR_RNDU);
    /* / Z (> 0): each end by the divisor that keeps it on its side */
    mpfr_div(w->a, w->lo, mpfr_sgn(w->lo) >= 0 ? w->Zhi : w->Zlo, MPFR_RNDD);
    mpfr_div(w->b, w->hi, mpfr_sgn(w->hi) >= 0 ? w->Zlo : w->Zhi, MPFR_RNDU);
    /* * g (> 0) */
    mpfr_mul(w->lo, w->a, mpfr_sgn(w->a) >= 0 ? w->glo : w->ghi, MPFR_RNDD);
    mpfr_mul(w->hi, w->b, mpfr_sgn(w->b) >= 0 ? w->ghi : w->glo, MPFR_RNDU);
    if (pf_ce_tiny(w->lo, w->hi)) {
      pf_oracle_set_tiny(k->out, base + j, c->dtype, hex);
      continue;
    }
    settled = pf_oracle_settle(k->out, base + j, w->lo, w->hi, c->dtype, final, hex);
  }
  return settled;
}

static void pf_ce_zero(pf_oracle_result *out, size_t i, pf_dtype t, mpfr_ptr zero, int hex) {
  mpfr_set_zero(zero, 1);
  pf_oracle_settle(out, i, zero, zero, t, 1, hex);
}

static void pf_ce_rows(void *ctx, int th, size_t begin, size_t end) {
  pf_ce_case *k = ctx;
  const pf_case *c = k->c;
  const size_t rows = c->shape[0], cols = c->shape[1];
  const long prec0 = k->opts->prec < 64 ? 64 : k->opts->prec;
  const int hex = k->opts->keep_hex;
  pf_ce_work w;
  /* the fast path unless MPFR alone is asked for, or the exact values' hex digits (its exact
   * value is the binary64 one) */
  const int fast = !k->opts->mpfr_only && !k->opts->keep_hex;
  pf_dd *e = fast ? malloc((cols ? cols : 1) * sizeof(pf_dd)) : NULL;
  if ((fast && !e) || !pf_ce_init(&w, cols, prec0)) {
    free(e);
    k->nomem[th] = 1;
    return;
  }
  k->max_prec[th] = prec0;
  for (size_t i = begin; i < end; i++) {
    const double *x = k->in[0].data + i * cols;
    const size_t base = rows + k->nr + i * cols;
    int defined = 1;
    for (size_t j = 0; j < cols; j++) defined &= isfinite(x[j]);
    if (pf_ce_target(c, k->in, i) < 0) { /* ignored: exactly 0 */
      pf_ce_zero(k->out, i, k->lt, w.a, hex);
      for (size_t j = 0; j < cols; j++) pf_ce_zero(k->out, base + j, c->dtype, w.a, hex);
      mpfr_set_zero(k->llo[i], 1), mpfr_set_zero(k->lhi[i], 1);
      continue;
    }
    if (!defined) {
      pf_oracle_set_undefined(k->out, i, hex);
      for (size_t j = 0; j < cols; j++) pf_oracle_set_undefined(k->out, base + j, hex);
      mpfr_set_nan(k->llo[i]), mpfr_set_nan(k->lhi[i]);
      continue;
    }
    /* the fast path first (cross_entropy_fast.c); the loss's enclosure kept for the reduction */
    pf_dd loss;
    double lerr;
    if (e && pf_ce_fast_row(x, cols, (size_t)pf_ce_target(c, k->in, i), c->params[P_EPS], c->params[P_Z],
                            (int)c->params[P_RED] == RED_MEAN ? k->nc : 0, k->out, i, k->lt, base, c->dtype, e, &loss,
                            &lerr)) {
      mpfr_set_prec(k->llo[i], 128), mpfr_set_prec(k->lhi[i], 128);
      mpfr_set_d(k->llo[i], loss.hi, MPFR_RNDN), mpfr_add_d(k->llo[i], k->llo[i], loss.lo, MPFR_RNDD);
      mpfr_sub_d(k->llo[i], k->llo[i], lerr, MPFR_RNDD);
      mpfr_set_d(k->lhi[i], loss.hi, MPFR_RNDN), mpfr_add_d(k->lhi[i], k->lhi[i], loss.lo, MPFR_RNDU);
      mpfr_add_d(k->lhi[i], k->lhi[i], lerr, MPFR_RNDU);
      k->fast[th]++;
      continue;
    }
    for (long prec = prec0;; prec *= 2) {
      pf_ce_prec(&w, prec);
      const int final = prec * 2 > k->opts->prec_max;
      if (prec > k->max_prec[th]) k->max_prec[th] = prec;
      if (pf_ce_row(&w, k, i, final)) break;
    }
  }
  free(e);
  pf_ce_free(&w);
}

/* The reduced loss from the rows' loss enclosures; where they do not decide it, every row's
 * loss again at twice the precision. */
static int pf_ce_reduce(pf_ce_case *k) {
  const pf_case *c = k->c;
  const size_t rows = c->shape[0], cols = c->shape[1];
  const int mean = (int)c->params[P_RED] == RED_MEAN, hex = k->opts->keep_hex;
  long prec = k->opts->prec < 64 ? 64 : k->opts->prec;
  for (size_t i = 0; i < rows; i++) {
    if (mpfr_nan_p(k->llo[i]) || (mean && k->nc == 0)) {
      pf_oracle_set_undefined(k->out, rows, hex);
      return 1;
    }
    if (mpfr_get_prec(k->llo[i]) > prec) prec = mpfr_get_prec(k->llo[i]);
  }
  pf_ce_work w;
  if (!pf_ce_init(&w, cols, prec)) return 0;
  for (int again = 0;; again = 1, prec *= 2) {
    pf_ce_prec(&w, prec);
    mpfr_t slo, shi;
    mpfr_inits2(prec + 32, slo, shi, (mpfr_ptr)0);
    mpfr_set_zero(slo, 1), mpfr_set_zero(shi, 1);
    for (size_t i = 0; i < rows; i++) {
      const long t = pf_ce_target(c, k->in, i);
      if (t < 0) continue;
      if (again) {
        pf_ce_row_loss(&w, k, k->in[0].data + i * cols, (size_t)t);
        mpfr_add(slo, slo, w.lo, MPFR_RNDD), mpfr_add(shi, shi, w.hi, MPFR_RNDU);
      } else mpfr_add(slo, slo, k->llo[i], MPFR_RNDD), mpfr_add(shi, shi, k->lhi[i], MPFR_RNDU);
    }
    if (mean) mpfr_div_d(slo, slo, k->nc, MPFR_RNDD), mpfr_div_d(shi, shi, k->nc, MPFR_RNDU);
    const int final = prec * 2 > k->opts->prec_max;
    const int done = pf_oracle_settle(k->out, rows, slo, shi, k->lt, final, hex);
    mpfr_clears(slo, shi, (mpfr_ptr)0);
    if (done) break;
  }
  if (prec > k->out->max_prec) k->out->max_prec = prec;
  pf_ce_free(&w);
  return 1;
}

pf_status pf_cross_entropy_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                                pf_oracle_result *out) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  pf_ce_case *k = calloc(1, sizeof *k);
  if (!k) return pf_error(PF_ERR_NOMEM, "cross_entropy oracle: out of memory");
  *k = (pf_ce_case){.c = c, .in = in, .opts = opts, .out = out};
  pf_stage st[PF_MAX_STAGES];
  pf_case_stages(c, st);
  k->lt = pf_stage_dtype(c, &st[0]); /* the losses' dtype, as the variant holds them (stage "loss") */
  k->nr = (int)c->params[P_RED] == RED_NONE ? 0 : 1;
  for (size_t i = 0; i < rows; i++) k->nc += pf_ce_target(c, in, i) >= 0;
  k->llo = malloc(rows * sizeof(mpfr_t));
  k->lhi = malloc(rows * sizeof(mpfr_t));
  if (!k->llo || !k->lhi) {
    free(k->llo), free(k->lhi), free(k);
    return pf_error(PF_ERR_NOMEM, "cross_entropy oracle: out of memory for %zu rows", rows);
  }
  for (size_t i = 0; i < rows; i++) mpfr_init2(k->llo[i], 64), mpfr_init2(k->lhi[i], 64);
  const int threads = pf_parallel_threads(rows, 3000.0 * (double)cols);
  pf_oracle_parallel(rows, threads, pf_ce_rows, k);
  out->max_prec = opts->prec < 64 ? 64 : opts->prec;
  out->fast_units = 0;
  int nomem = 0;
  for (int t = 0; t < threads; t++) {
    if (k->max_prec[t] > out->max_prec) out->max_prec = k->max_prec[t];
    nomem |= k->nomem[t];
    out->fast_units += k->fast[t];
  }
  out->mpfr_units = rows - out->fast_units;
  if (!nomem && k->nr) {
    const pf_mpfr_range saved = pf_mpfr_range_widen();
    nomem = !pf_ce_reduce(k);
    pf_mpfr_range_restore(saved);
  }
  for (size_t i = 0; i < rows; i++) mpfr_clear(k->llo[i]), mpfr_clear(k->lhi[i]);
  free(k->llo), free(k->lhi), free(k);
  if (nomem) return pf_error(PF_ERR_NOMEM, "cross_entropy oracle: cannot allocate a row of %zu", cols);
  return PF_OK;
}
