/* The rotary-embedding oracle: the exact y of every element (rope_spec.h's definition: the real
 * angle p phi_k, phi_k = B^(-2k/dim) [/ f]), rounded correctly to the storage dtype.
 *
 * By rows (positions), the fast path first (rope_fast.c). MPFR's path, at a precision w that
 * doubles until every element's enclosure rounds to one value: phi_k to w bits (rope_fast.c's
 * pf_rope_mpfr_phi, within 2^-(w-2) relative), theta = p phi_k within |theta| 2^-(w-3), its cos
 * and sin to nearest (half an ulp of w bits) widened by that radius and the ulp, then
 * y_j = t_j [cos] + s t_j' [sin] by interval arithmetic. y is 0 exactly only where t_j and t_j'
 * are (cos and sin of a nonzero algebraic angle are transcendental). */
#include "oracles/rope_mpfr.h"

#include <math.h>
#include <stdlib.h>

#include "core/kernel.h"
#include "kernels/rope/rope_spec.h"
#include "oracles/oracle_util.h"
#include "oracles/rope_fast.h"

typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  const pf_oracle_opts *opts;
  pf_oracle_result *out;
  pf_rope_fast fast;
} pf_rope_oracle;

/* v's enclosure [lo, hi] from its nearest value v at w bits and a radius rad (both ends rounded
 * outward) */
static void pf_rope_widen(mpfr_ptr lo, mpfr_ptr hi, mpfr_srcptr v, mpfr_srcptr rad, mpfr_ptr tmp) {
  const long w = (long)mpfr_get_prec(v);
  if (mpfr_zero_p(v)) mpfr_set_ui_2exp(tmp, 1, -w, MPFR_RNDU);
  else mpfr_set_ui_2exp(tmp, 1, mpfr_get_exp(v) - w, MPFR_RNDU); /* >= half an ulp */
  mpfr_add(tmp, tmp, rad, MPFR_RNDU);
  mpfr_sub(lo, v, tmp, MPFR_RNDD);
  mpfr_add(hi, v, tmp, MPFR_RNDU);
}

/* [lo, hi] += x [a, b] for a double x (directed) */
static void pf_rope_acc(mpfr_ptr lo, mpfr_ptr hi, double x, mpfr_srcptr a, mpfr_srcptr b, mpfr_ptr tmp) {
  if (x == 0) return;
  mpfr_mul_d(tmp, x > 0 ? a : b, x, MPFR_RNDD);
  mpfr_add(lo, lo, tmp, MPFR_RNDD);
  mpfr_mul_d(tmp, x > 0 ? b : a, x, MPFR_RNDU);
  mpfr_add(hi, hi, tmp, MPFR_RNDU);
}

static void pf_rope_mpfr_row(const void *ctx, size_t i, long *max_prec) {
  const pf_rope_oracle *o = ctx;
  const pf_case *c = o->c;
  const size_t heads = c->shape[PF_ROPE_D_HEADS], dim = c->shape[PF_ROPE_D_DIM], half = dim / 2, n = heads * dim;
  const int layout = (int)c->params[PF_ROPE_P_LAYOUT];
  const double p = c->params[PF_ROPE_P_OFFSET] + (double)i;
  const double *t = o->in[0].data + i * n;
  for (size_t q = 0; q < n; q++)
    if (!isfinite(t[q])) { /* an undefined pair: both of its elements */
      size_t k, partner;
      int sign;
      pf_rope_pair(layout, dim, q % dim, &k, &partner, &sign);
      pf_oracle_set_undefined(o->out, i * n + q, o->opts->keep_hex);
      pf_oracle_set_undefined(o->out, i * n + q - q % dim + partner, o->opts->keep_hex);
    }
  mpfr_t *tab = malloc(4 * half * sizeof(mpfr_t)); /* per k: cos lo, hi, sin lo, hi */
  if (!tab) { /* no memory: every element left undecided is a tie at its best guess, which the
                 runner cannot make, so say undefined rather than guess */
    for (size_t q = 0; q < n; q++) pf_oracle_set_undefined(o->out, i * n + q, o->opts->keep_hex);
    return;
  }
  const long prec0 = o->opts->prec < 64 ? 64 : o->opts->prec;
  for (long w = prec0;; w *= 2) {
    const int final = w * 2 > o->opts->prec_max;
    mpfr_t phi, th, rad, s, co, tmp, lo, hi;
    mpfr_inits2(w, phi, th, rad, s, co, tmp, lo, hi, (mpfr_ptr)0);
    for (size_t q = 0; q < 4 * half; q++) mpfr_init2(tab[q], w);
    for (size_t k = 0; k < half; k++) {
      if (p == 0) { /* theta = 0 exactly */
        mpfr_set_ui(tab[4 * k], 1, MPFR_RNDN), mpfr_set_ui(tab[4 * k + 1], 1, MPFR_RNDN);
        mpfr_set_zero(tab[4 * k + 2], 1), mpfr_set_zero(tab[4 * k + 3], 1);
        continue;
      }
      pf_rope_mpfr_phi(phi, c, k);
      mpfr_mul_d(th, phi, p, MPFR_RNDN);
      mpfr_mul_2si(rad, th, -(w - 3), MPFR_RNDU);
      mpfr_sin_cos(s, co, th, MPFR_RNDN);
      pf_rope_widen(tab[4 * k], tab[4 * k + 1], co, rad, tmp);
      pf_rope_widen(tab[4 * k + 2], tab[4 * k + 3], s, rad, tmp);
    }
    int settled = 1;
    for (size_t h = 0; h < heads; h++)
      for (size_t j = 0; j < dim; j++) {
        const size_t at = i * n + h * dim + j;
        size_t k, q;
        int sign;
        pf_rope_pair(layout, dim, j, &k, &q, &sign);
        const double a = t[h * dim + j], b = sign * t[h * dim + q];
        if (!isfinite(a) || !isfinite(b)) continue;
        mpfr_set_zero(lo, 1), mpfr_set_zero(hi, 1);
        pf_rope_acc(lo, hi, a, tab[4 * k], tab[4 * k + 1], tmp);
        pf_rope_acc(lo, hi, b, tab[4 * k + 2], tab[4 * k + 3], tmp);
        settled &= pf_oracle_settle(o->out, at, lo, hi, c->dtype, final, o->opts->keep_hex);
      }
    for (size_t q = 0; q < 4 * half; q++) mpfr_clear(tab[q]);
    mpfr_clears(phi, th, rad, s, co, tmp, lo, hi, (mpfr_ptr)0);
    if (w > *max_prec) *max_prec = w;
    if (settled || final) break;
  }
  free(tab);
}

static int pf_rope_fast_of(const void *ctx, size_t i, pf_oracle_result *out) {
  const pf_rope_oracle *o = ctx;
  return pf_rope_fast_row(&o->fast, o->in[0].data + i * o->fast.heads * o->fast.dim, i, out);
}

pf_status pf_rope_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  pf_rope_oracle o = {c, in, opts, out, {0}};
  const size_t rows = c->shape[PF_ROPE_D_POS], n = c->shape[PF_ROPE_D_HEADS] * c->shape[PF_ROPE_D_DIM];
  const int fast = !opts->mpfr_only && !opts->keep_hex;
  if (fast) {
    const pf_status st = pf_rope_fast_init(&o.fast, c, pf_parallel_threads(c->shape[PF_ROPE_D_DIM] / 2, 100.0 * sqrt((double)rows) + 30000));
    if (st) return st;
  }
  const pf_status st = pf_oracle_by_rows(rows, 30.0 * (double)n, opts, out, &o, fast ? pf_rope_fast_of : NULL,
                                         pf_rope_mpfr_row);
  if (fast) pf_rope_fast_free(&o.fast);
  return st;
}
