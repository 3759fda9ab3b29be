/* The rotary-embedding oracle's fast path (rope_fast.c): e^(i theta) for every (position, k) as
 * the product of two table entries made by MPFR, the rotation in double words with a proven
 * error bound, trusted only where its enclosure decides every output of the row;
 * rope_mpfr.c calls it first. */
#ifndef PF_ROPE_FAST_H
#define PF_ROPE_FAST_H

#include "core/case.h"
#include "core/kernel.h"
#include <mpfr.h>

#include "oracles/dd.h"

typedef struct {
  size_t positions, heads, dim, half; /* half = dim / 2 frequencies */
  int layout;
  pf_dtype dtype;
  size_t b, nm; /* row i = m b + r: e^(i theta) = far[k][m] near[k][r] */
  pf_dd *near, *far; /* [k][r][re, im], [k][m][re, im] */
  double err;        /* the bound on y per unit of |t_j| + |t_j'| (rope_fast.c) */
} pf_rope_fast;

/* The tables of case c (positions, heads, dim, the angle's parameters); PF_ERR_NOMEM with one
 * line. threads: pf_oracle_parallel's. */
pf_status pf_rope_fast_init(pf_rope_fast *f, const pf_case *c, int threads);
void pf_rope_fast_free(pf_rope_fast *f);

/* Row i (t: its heads x dim values): 1 when every y of the row was settled into out, else 0 and
 * nothing of the row to trust. */
int pf_rope_fast_row(const pf_rope_fast *f, const double *t, size_t i, pf_oracle_result *out);

/* The step angle phi_k = theta_{p,k} / p (omega_k, or omega_k / f under linear scaling) to
 * prec bits, rounded to nearest (a few ulps of prec: rope_fast.c's budget). Also MPFR's path. */
void pf_rope_mpfr_phi(mpfr_ptr phi, const pf_case *c, size_t k);

#endif
