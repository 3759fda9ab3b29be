/* The LayerNorm backward oracle's fast path: the definition of layernorm_bwd_spec.h in
 * double-word arithmetic (dd.h) with a proven error bound, trusted only where the bound decides
 * an output (pf_fast_settle); layernorm_bwd_mpfr.c calls it first and takes what it leaves.
 * RMSNorm's backward (rmsnorm_bwd_spec.h, rmsnorm_bwd_mpfr.c) is the same without the mean: its
 * statistics from rmsnorm_fast.c's pf_rms_fast_stats (mean 0 exactly), no mean term, no dbeta.
 *
 * Error budget (u = 2^-53; every bound an absolute one on a computed double word, carried
 * beside it and enlarged by 2^-40 of itself for its own rounding in binary64):
 *   statistics   -mean within em and rstd r within rr r (layernorm_fast.c's pf_ln_fast_stats)
 *   d_j          x_j - mean (DWPlusFP): within em + 2u^2 |d_j|
 *   xhat_j       d_j r (DWTimesDW3, 5u^2): |xh| (rr + 5u^2)(1 + 2 rr) + r (1 + rr) e_d
 *   a_j          g'_j dy_j, g' = g or 1 + g (exact by TwoSum), dy a double: 5u^2 |a|
 *   A, C         sum a_j and sum a_j xhat_j of N double-word terms t_k: their high parts by TwoSum
 *                into s, the TwoSum errors q_k and the low parts into one double c (Sum2 with the
 *                low parts joining the errors): s + c is off the exact sum by
 *                gamma_2N (sum |q_k| + |lo_k|) <= gamma_2N u (N + 1)(1 + gamma_N) M, M = sum |hi_k|,
 *                plus the terms' own bounds; the products by DWTimesDW3:
 *                |a| e_xh + |xh| e_a + e_a e_xh + 5u^2 |a xh|
 *   dx_j         r (a_j - A / n - xhat_j C / n): the quotients by DWDivDW3 (9.8u^2), the product
 *                and the two subtractions as above, then times r: r e_q + (|q| + e_q) rr r + 5u^2
 *   dgamma_j     sum over the rows of dy xhat (DWTimesDW3 and the sum of A and C)
 *   dbeta_j      sum over the rows of dy by DWPlusFP (2u^2 of each partial sum)
 * The row statistics bound every operand away from binary64's underflow and overflow (checked:
 * values and sums within 2^+-300). */
#include "oracles/layernorm_bwd_fast.h"

#include <math.h>
#include <stdlib.h>

#include "oracles/dd.h"
#include "oracles/layernorm_fast.h"
#include "oracles/rmsnorm_fast.h"

#define PF_U2 0x1p-106 /* u^2 */
#define PF_SLACK (1 + 0x1p-40)

/* a double word within e of its value, e's own rounding included */
typedef struct {
  pf_dd v;
  double e;
} pf_lnbf;

static inline double pf_lnbf_abs(pf_dd x) { return fabs(x.hi) + fabs(x.lo); }
static inline pf_lnbf pf_lnbf_add(pf_lnbf a, pf_lnbf b) {
  const pf_dd s = pf_dd_add(a.v, b.v);
  return (pf_lnbf){s, (a.e + b.e + 3.01 * PF_U2 * pf_lnbf_abs(s)) * PF_SLACK};
}
static inline pf_lnbf pf_lnbf_mul(pf_lnbf a, pf_lnbf b) {
  const pf_dd p = pf_dd_mul(a.v, b.v);
  const double ma = pf_lnbf_abs(a.v), mb = pf_lnbf_abs(b.v);
  return (pf_lnbf){p, (ma * b.e + mb * a.e + a.e * b.e + 5.01 * PF_U2 * pf_lnbf_abs(p)) * PF_SLACK};
}
/* a / n, n a positive integer below 2^53 (exact in binary64) */
static inline pf_lnbf pf_lnbf_div_n(pf_lnbf a, double n) {
  const pf_dd q = pf_dd_div(a.v, (pf_dd){n, 0});
  return (pf_lnbf){q, (a.e / n + 9.81 * PF_U2 * pf_lnbf_abs(q)) * PF_SLACK};
}
static inline pf_lnbf pf_lnbf_neg(pf_lnbf a) { return (pf_lnbf){pf_dd_neg(a.v), a.e}; }

/* A running sum of double words (the bound above): s + c, the terms' bounds e, sum |hi| m. */
typedef struct {
  double s, c, m, e;
  size_t n;
} pf_lnbf_acc;

static inline void pf_lnbf_acc_add(pf_lnbf_acc *a, pf_lnbf t) {
  const pf_dd q = pf_two_sum(a->s, t.v.hi);
  a->s = q.hi;
  a->c += q.lo + t.v.lo;
  a->m += fabs(t.v.hi);
  a->e += t.e;
  a->n++;
}

static inline pf_lnbf pf_lnbf_acc_total(const pf_lnbf_acc *a) {
  const double N = (double)a->n, gN = N * 0x1p-53 / (1 - N * 0x1p-53), g2N = 2 * N * 0x1p-53 / (1 - 2 * N * 0x1p-53);
  const double es = g2N * 0x1p-53 * (N + 1) * (1 + gN) * (a->m * (1 + gN));
  return (pf_lnbf){pf_two_sum(a->s, a->c), (a->e * (1 + gN) + es) * PF_SLACK};
}

/* every value finite and within 2^+-300 of 1 (or 0) */
static int pf_lnbf_tame(const double *v, size_t n, size_t stride) {
  for (size_t k = 0; k < n; k++) {
    const double a = fabs(v[k * stride]);
    if (!(a <= 0x1p300) || (a != 0 && a < 0x1p-300)) return 0;
  }
  return 1;
}

int pf_lnb_fast_stats(const pf_lnb_fast_params *p, const double *x, pf_lnb_fast_row_stats *st) {
  if (p->rms) {
    const pf_rms_fast_params fp = {p->cols, p->dtype, p->dtype, p->eps, 0, 0};
    st->nm = (pf_dd){0, 0}, st->em = 0;
    st->ok = pf_lnbf_tame(x, p->cols, 1) && pf_rms_fast_stats(&fp, x, &st->r, &st->rr);
    return st->ok;
  }
  const pf_ln_fast_params fp = {p->cols, p->dtype, p->dtype, p->eps, 0, 0, 0, 0};
  st->ok = pf_lnbf_tame(x, p->cols, 1) && pf_ln_fast_stats(&fp, x, &st->nm, &st->em, &st->r, &st->rr);
  return st->ok;
}

/* xhat_j of a row */
static inline pf_lnbf pf_lnbf_xhat(const pf_lnb_fast_row_stats *st, double x) {
  const pf_dd d = pf_dd_add_d(st->nm, x);
  const double ed = (st->em + 2.02 * PF_U2 * fabs(d.hi)) * PF_SLACK;
  const pf_dd xh = pf_dd_mul(d, st->r);
  const double e =
      (pf_lnbf_abs(xh) * (st->rr + 5.01 * PF_U2) * (1 + 2 * st->rr) + fabs(st->r.hi) * (1 + 2 * st->rr) * ed) * PF_SLACK;
  return (pf_lnbf){xh, e};
}

/* a_j = g'_j dy_j */
static inline pf_lnbf pf_lnbf_a(const pf_lnb_fast_params *p, double g, double dy) {
  const pf_dd gg = p->zero_centered ? pf_two_sum(1.0, g) : (pf_dd){g, 0};
  const pf_dd a = pf_dd_mul(gg, (pf_dd){dy, 0});
  return (pf_lnbf){a, 5.01 * PF_U2 * pf_lnbf_abs(a) * PF_SLACK};
}

PF_DD_CLONES int pf_lnb_fast_dx(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x,
                                const double *dy, const double *g, size_t i, pf_oracle_result *out) {
  const size_t n = p->cols;
  if (!st->ok || n >= ((size_t)1 << 26) || !pf_lnbf_tame(dy, n, 1) || !pf_lnbf_tame(g, n, 1)) return 0;
  pf_lnbf *w = malloc(2 * n * sizeof *w); /* a_j, then xhat_j */
  if (!w) return 0;
  pf_lnbf_acc sa = {0, 0, 0, 0, 0}, sc = {0, 0, 0, 0, 0};
  for (size_t j = 0; j < n; j++) {
    w[j] = pf_lnbf_a(p, g[j], dy[j]);
    w[n + j] = pf_lnbf_xhat(st, x[j]);
    pf_lnbf_acc_add(&sa, w[j]);
    pf_lnbf_acc_add(&sc, pf_lnbf_mul(w[j], w[n + j]));
  }
  const double dn = (double)n;
  const pf_lnbf mA = pf_lnbf_neg(pf_lnbf_div_n(pf_lnbf_acc_total(&sa), dn)), mC = pf_lnbf_div_n(pf_lnbf_acc_total(&sc), dn);
  const double rabs = fabs(st->r.hi) + fabs(st->r.lo);
  int ok = 1;
  for (size_t j = 0; j < n && ok; j++) {
    const pf_lnbf am = p->rms ? w[j] : pf_lnbf_add(w[j], mA); /* a_j - A / n (RMSNorm: no mean term) */
    const pf_lnbf q = pf_lnbf_add(am, pf_lnbf_neg(pf_lnbf_mul(w[n + j], mC)));
    const pf_dd dx = pf_dd_mul(st->r, q.v);
    const double e = (rabs * q.e + (pf_lnbf_abs(q.v) + q.e) * st->rr * rabs * (1 + 2 * st->rr) +
                      5.01 * PF_U2 * pf_lnbf_abs(dx)) *
                     PF_SLACK;
    ok = dx.hi != 0 && fabs(dx.hi) >= 0x1p-900 && pf_fast_settle(out, i * n + j, dx, e, p->dtype);
  }
  free(w);
  return ok;
}

PF_DD_CLONES int pf_lnb_fast_column(const pf_lnb_fast_params *p, const pf_lnb_fast_row_stats *st, const double *x,
                                    const double *dy, size_t j, pf_oracle_result *out) {
  const size_t n = p->cols, rows = p->rows;
  if (!pf_lnbf_tame(dy + j, rows, n)) return 0;
  pf_lnbf_acc sg = {0, 0, 0, 0, 0};
  pf_dd B = {0, 0};
  double sb = 0;
  for (size_t i = 0; i < rows; i++) {
    if (!st[i].ok) return 0;
    const double d = dy[i * n + j];
    pf_lnbf_acc_add(&sg, pf_lnbf_mul((pf_lnbf){{d, 0}, 0}, pf_lnbf_xhat(&st[i], x[i * n + j])));
    B = pf_dd_add_d(B, d);
    sb += 2.02 * PF_U2 * pf_lnbf_abs(B);
  }
  const pf_lnbf G = pf_lnbf_acc_total(&sg);
  const size_t og = rows * n + j, ob = rows * n + n + j;
  /* an exact 0 (every dy 0 in the column) is MPFR's: the settle test wants a nonzero value */
  if (!p->rms && (B.hi == 0 || fabs(B.hi) < 0x1p-900 || !pf_fast_settle(out, ob, B, sb * PF_SLACK, p->weights)))
    return 0;
  if (G.v.hi == 0 || fabs(G.v.hi) < 0x1p-900 || !pf_fast_settle(out, og, G.v, G.e, p->weights)) return 0;
  return 1;
}
