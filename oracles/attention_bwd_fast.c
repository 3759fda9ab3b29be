/* The attention backward oracle's fast path: the definition of attention_bwd_mpfr.c for one
 * head (s = alpha q k^T, P = softmax(s) by row, w_ij = dO_i . (v_j - v_c), D'_i = sum_j P_ij
 * w_ij, dS_ij = P_ij (w_ij - D'_i), dV = P^T dO, dK = alpha dS^T q, dQ_i = alpha sum_j dS_ij
 * (k_j - k_c), and the standard variant's dP = dO v^T), in double-word arithmetic (dd.h) with a
 * proven error bound per quantity, trusted only where every output's enclosure decides it (Ziv's
 * strategy); a head it cannot decide is MPFR's. The differences from the reference key c (the
 * row's largest score) are exact two-sums, and a bound is carried as a product of magnitudes,
 * so a row of equal values of v or a column of equal keys gives an exact 0 with a 0 bound, as
 * the MPFR path proves it.
 *
 * Error budget (each double-word operation taken at 2^-100 relative, twice what dd.h proves,
 * EOP; pf_dd_exp within 2^-87, EEXP; alpha = 1/sqrt(d) within 3 EOP), carried as absolute
 * bounds except P's, relative per row:
 *   q_i . k_j, dO_i . v_j  exact products (two-products of 16- or 32-bit values), each add EOP
 *                          of its operands
 *   s_ij - m_i             the two scores' bounds + the add; a term whose bound exceeds 2^-60
 *                          sends the head to MPFR (scores of 1e30 and more), a term more than
 *                          746 below the maximum is taken as 0 (below 2^-1076) and a row with a
 *                          term between 600 and 746 below goes to MPFR (dd.h's bounds end where
 *                          a low part leaves binary64's normal range)
 *   e_ij, Z_i, P_ij        EEXP + the argument's bound; Z: + n EOP; P: + 1/Z's and the product's
 *   sums of products       each product |p| (the factors' relative bounds + EOP), or 2^-945
 *                          absolute below 2^-900 (low parts possibly subnormal), each add EOP of
 *                          its operands, each negligible P its multiplier times 2^-1074
 *   every bound is widened by 1% for second-order terms and binary64's rounding of the bounds. */
#include "oracles/attention_bwd_fast.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/case.h"
#include "oracles/oracle_util.h"
#include "oracles/softmax_fast.h" /* pf_oracle_masked */

#define EOP 0x1p-100
#define EEXP 0x1p-87
#define TINY_P 0x1p-900   /* below this a product's low part may be subnormal... */
#define TINY_ERR 0x1p-945 /* ...and its error is taken as this, absolute */
#define NEGL 0x1p-1074    /* a negligible P's bound (its value is below 2^-1076) */

enum { D_B = 0, D_H, D_LQ, D_LK, D_D };
enum { P_MASK = 0 }; /* kernels/attention_bwd: the parameters' order */

/* a bound times a magnitude, rounded up and never to 0 unless a factor is 0 (binary64's
 * underflow would): a negligible P's contribution (below 2^-1076 times its multiplier) must
 * leave every bound it reaches above 0, or an output that is 0 only because such terms were
 * dropped would be taken as an exact 0 */
static inline double pf_abf_mul_up(double a, double b) { return a == 0 || b == 0 ? 0 : a * b * 1.01 + 0x1p-1074; }
/* a double-word add's rounding: EOP of the operands' magnitudes */
static inline double pf_abf_add_err(pf_dd a, pf_dd b) { return 2 * EOP * (fabs(a.hi) + fabs(b.hi)); }
/* a computed product's own error given its factors' relative bound rel */
static inline double pf_abf_prod_err(pf_dd p, double rel) {
  return fabs(p.hi) < TINY_P ? TINY_ERR : fabs(p.hi) * (rel + 2 * EOP) * 1.01;
}

int pf_abf_work_init(pf_abf_work *w, size_t Lq, size_t Lk) {
  const size_t n = (Lq ? Lq : 1) * (Lk ? Lk : 1), r = Lq ? Lq : 1, k = Lk ? Lk : 1;
  *w = (pf_abf_work){.P = malloc(n * sizeof(pf_dd)), .dS = malloc(n * sizeof(pf_dd)), .eS = malloc(n * sizeof(double)),
                     .rP = malloc(r * sizeof(double)), .Z = malloc(r * sizeof(double)), .nz = malloc(n),
                     .s = malloc(k * sizeof(pf_dd)), .w = malloc(k * sizeof(pf_dd)), .es = malloc(k * sizeof(double)),
                     .ew = malloc(k * sizeof(double)), .cref = malloc(r * sizeof(size_t)), .Lq = Lq, .Lk = Lk};
  if (w->P && w->dS && w->eS && w->rP && w->Z && w->nz && w->s && w->w && w->es && w->ew && w->cref) return 1;
  pf_abf_work_free(w);
  return 0;
}

void pf_abf_work_free(pf_abf_work *w) {
  free(w->P), free(w->dS), free(w->eS), free(w->rP), free(w->Z), free(w->nz);
  free(w->s), free(w->w), free(w->es), free(w->ew), free(w->cref);
  *w = (pf_abf_work){0};
}

/* output i from x within err; an exact x (err 0: a proven zero, an exact dot product) rounds
 * as it is, ties to even by its low part as MPFR rounds the same exact value */
static int pf_abf_settle(pf_oracle_result *out, size_t i, pf_dd x, double err, pf_dtype t) {
  if (err == 0 && (x.hi == 0 || fabs(x.hi) >= 0x1p-900) && fabs(x.hi) * (1 + 0x1p-59) < pf_max_finite(t)) {
    out->dtype[i] = (unsigned char)t;
    out->exact[i] = x.hi;
    out->rounded[i] = out->rounded_alt[i] = x.hi == 0 ? 0 : pf_dd_round_dtype(x, t);
    out->status[i] = PF_ORACLE_NUMBER;
    return 1;
  }
  return pf_fast_settle(out, i, x, err * 1.01, t);
}

/* sum_x a_x b_x of stored values (fp32, fp16, bf16: every product exact in binary64): exactly,
 * in a 64-bit integer at a common scale, when the products' bits fit in 62 (then *err = 0, so
 * that a sum on a rounding boundary of the dtype, common in low precision, is decided as MPFR
 * decides it); else summed in double words with its bound */
static pf_dd pf_abf_dot(const double *a, const double *b, size_t d, double *err) {
  double big = 0;
  for (size_t x = 0; x < d; x++) big = fmax(big, fabs(a[x] * b[x]));
  if (big == 0) {
    *err = 0;
    return (pf_dd){0, 0};
  }
  /* scale 2^k puts the largest product below 2^(61 - ceil(log2 d)): d of them sum below 2^62 */
  int lg = 0;
  while (((size_t)1 << lg) < d) lg++;
  const int k = 60 - lg - ilogb(big);
  int64_t sum = 0;
  int exact = k < 900 && k > -900;
  for (size_t x = 0; x < d && exact; x++) {
    const double p = ldexp(a[x] * b[x], k);
    if (p != nearbyint(p)) exact = 0; /* bits below the scale: not representable so */
    else sum += (int64_t)p;
  }
  if (exact) {
    *err = 0;
    const double hi = (double)sum; /* RN; the rest below 2^10 exact */
    return (pf_dd){ldexp(hi, -k), ldexp((double)(sum - (int64_t)hi), -k)};
  }
  pf_dd s = {0, 0};
  double e = 0;
  for (size_t x = 0; x < d; x++) {
    const pf_dd p = pf_two_prod(a[x], b[x]);
    if (p.hi == 0) continue;
    e += pf_abf_add_err(s, p);
    s = pf_dd_add(s, p);
  }
  *err = e;
  return s;
}

/* One row's P (into w->P row i, w->rP[i], w->nz): 0 when the head is MPFR's */
static int pf_abf_softmax_row(pf_abf_work *w, size_t i, size_t Lk, const unsigned char *masked, pf_dd alpha,
                              double ralpha, const double *q, const double *K, size_t d) {
  pf_dd *P = w->P + i * Lk, *s = w->s;
  unsigned char *nz = w->nz + i * Lk;
  double *es = w->es;
  size_t jc = Lk;
  for (size_t j = 0; j < Lk; j++) {
    if (masked[j]) continue;
    double ed;
    const pf_dd dot = pf_abf_dot(q, K + j * d, d, &ed);
    s[j] = pf_dd_mul(alpha, dot);
    es[j] = fabs(alpha.hi) * ed * 1.01 + fabs(s[j].hi) * (ralpha + 2 * EOP) * 1.01;
    if (s[j].hi != 0 && fabs(s[j].hi) < TINY_P) es[j] += TINY_ERR;
    if (jc == Lk || pf_dd_less(s[jc], s[j])) jc = j; /* the largest as exact values: every s_j - m <= 0 */
  }
  w->cref[i] = jc;
  if (jc == Lk) { /* every key masked (the causal mask hides the query): P = 0 by definition */
    for (size_t j = 0; j < Lk; j++) nz[j] = 0, P[j] = (pf_dd){0, 0};
    return 1;
  }
  const pf_dd m = s[jc];
  pf_dd Z = {0, 0};
  double re = 0, k = 0;
  for (size_t j = 0; j < Lk; j++) {
    if (masked[j]) {
      nz[j] = 0, P[j] = (pf_dd){0, 0};
      continue;
    }
    const pf_dd z = pf_dd_add(s[j], pf_dd_neg(m));
    const double ez = es[j] + es[jc] + pf_abf_add_err(s[j], m);
    if (z.hi + ez < -746) { /* below 2^-1076 of the largest term; z kept for pf_fast_negligible */
      nz[j] = 2, P[j] = (pf_dd){0, z.hi}, k += 1;
      continue;
    }
    if (z.hi < -600 || !(ez <= 0x1p-60)) return 0;
    P[j] = pf_dd_exp(z);
    nz[j] = 1;
    const double r = EEXP + ez * 1.01;
    re = r > re ? r : re;
    Z = pf_dd_add(Z, P[j]);
  }
  /* Z >= 1 (the maximum's own term is exp(0)) */
  const double dZ = re + (double)Lk * EOP + k * NEGL;
  const pf_dd inv = pf_dd_div((pf_dd){1, 0}, Z);
  const double rinv = dZ * 1.01 + 2 * EOP;
  for (size_t j = 0; j < Lk; j++)
    if (nz[j] == 1) P[j] = pf_dd_mul(P[j], inv);
  w->rP[i] = (re + rinv + 2 * EOP) * 1.01;
  w->Z[i] = Z.hi;
  return 1;
}

int pf_attention_bwd_fast_head(const pf_case *c, const pf_tensor *in, size_t h, int standard, pf_oracle_result *out,
                               pf_abf_work *w) {
  const size_t H = c->shape[D_B] * c->shape[D_H], Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const size_t qn = H * Lq * d, kn = H * Lk * d, sn = H * Lq * Lk;
  const double *q = in[0].data + h * Lq * d, *K = in[1].data + h * Lk * d, *v = in[2].data + h * Lk * d,
               *dO = in[3].data + h * Lq * d;
  const int mask = (int)c->params[P_MASK];
  const pf_dtype t = c->dtype;
  /* alpha = 1/sqrt(d): the square root within 2^-102, the quotient within 2 EOP */
  const pf_dd alpha = pf_dd_div((pf_dd){1, 0}, pf_dd_sqrt((pf_dd){(double)d, 0}));
  const double ralpha = 3 * EOP;
  for (size_t i = 0; i < Lq; i++) {
    unsigned char *nz = w->nz + i * Lk;
    for (size_t j = 0; j < Lk; j++) nz[j] = (unsigned char)pf_oracle_masked(mask, i, j, Lq, Lk);
    if (!pf_abf_softmax_row(w, i, Lk, nz, alpha, ralpha, q + i * d, K, d)) return 0;
    const pf_dd *P = w->P + i * Lk;
    const double rP = w->rP[i];
    pf_dd *dS = w->dS + i * Lk;
    double *eS = w->eS + i * Lk;
    const size_t jc = w->cref[i];
    pf_dd D = {0, 0}; /* D' = sum_j P_j w_j */
    double eD = 0;
    if (jc == Lk) { /* every key masked */
      for (size_t j = 0; j < Lk; j++) dS[j] = (pf_dd){0, 0}, eS[j] = 0;
    } else {
      /* w_j = dO_i . (v_j - v_c), and D' */
      for (size_t j = 0; j < Lk; j++) {
        if (nz[j] == 0) continue;
        pf_dd a = {0, 0};
        double ea = 0;
        for (size_t e = 0; e < d; e++) {
          const pf_dd diff = pf_two_sum(v[j * d + e], -v[jc * d + e]);
          if (diff.hi == 0 || dO[i * d + e] == 0) continue;
          const pf_dd p = pf_dd_mul(diff, (pf_dd){dO[i * d + e], 0});
          ea += pf_abf_prod_err(p, 0) + pf_abf_add_err(a, p);
          a = pf_dd_add(a, p);
        }
        w->w[j] = a, w->ew[j] = ea;
        if (nz[j] == 2) {
          eD += pf_abf_mul_up(fabs(a.hi) + ea, NEGL);
          continue;
        }
        if (a.hi == 0 && ea == 0) continue;
        const pf_dd p = pf_dd_mul(P[j], a);
        eD += pf_abf_mul_up(fabs(P[j].hi), ea) + pf_abf_prod_err(p, rP) + pf_abf_add_err(D, p);
        D = pf_dd_add(D, p);
      }
      /* dS_j = P_j (w_j - D') */
      for (size_t j = 0; j < Lk; j++) {
        if (nz[j] == 0) {
          dS[j] = (pf_dd){0, 0}, eS[j] = 0;
          continue;
        }
        const pf_dd a = pf_dd_add(w->w[j], pf_dd_neg(D));
        const double ea = w->ew[j] + eD + pf_abf_add_err(w->w[j], D);
        if (nz[j] == 2) {
          dS[j] = (pf_dd){0, 0}, eS[j] = pf_abf_mul_up(fabs(a.hi) + ea, NEGL);
          continue;
        }
        dS[j] = pf_dd_mul(P[j], a);
        eS[j] = pf_abf_mul_up(fabs(P[j].hi), ea) + (a.hi == 0 && ea == 0 ? 0 : pf_abf_prod_err(dS[j], rP));
      }
    }
    if (standard) {
      for (size_t j = 0; j < Lk; j++) {
        double e;
        const pf_dd dP = pf_abf_dot(dO + i * d, v + j * d, d, &e);
        if (!pf_abf_settle(out, qn + 2 * kn + h * Lq * Lk + i * Lk + j, dP, e, t)) return 0;
        const size_t o = qn + 2 * kn + sn + h * Lq * Lk + i * Lk + j;
        if (nz[j] == 2) {
          /* dS = P (w - D') with P below 2^-1076: 0 in binary64 and every dtype (or MPFR's
           * TINY) when w - D''s sign and size are known and below 2^20 */
          const pf_dd a = pf_dd_add(w->w[j], pf_dd_neg(D));
          const double ea = w->ew[j] + eD + pf_abf_add_err(w->w[j], D); /* as dS's was made */
          if (!(ea < 0.5 * fabs(a.hi) && fabs(a.hi) < 0x1p20)) return 0;
          if (!pf_fast_negligible(out, o, t, P[j].lo, w->Z[i] / fabs(a.hi))) return 0;
          continue;
        }
        if (!pf_abf_settle(out, o, dS[j], eS[j], t)) return 0;
      }
    }
  }
  /* dV_j = sum_i P_ij dO_i; dK_j = alpha sum_i dS_ij q_i */
  for (size_t j = 0; j < Lk; j++)
    for (size_t e = 0; e < d; e++) {
      pf_dd a = {0, 0}, b = {0, 0};
      double ea = 0, eb = 0;
      for (size_t i = 0; i < Lq; i++) {
        const unsigned char z = w->nz[i * Lk + j];
        const double g = dO[i * d + e], x = q[i * d + e];
        if (z == 0) continue;
        if (z == 2) {
          ea += pf_abf_mul_up(fabs(g), NEGL);
        } else if (g != 0) {
          const pf_dd p = pf_dd_mul(w->P[i * Lk + j], (pf_dd){g, 0});
          ea += pf_abf_prod_err(p, w->rP[i]) + pf_abf_add_err(a, p);
          a = pf_dd_add(a, p);
        }
        const pf_dd s = w->dS[i * Lk + j];
        const double es = w->eS[i * Lk + j];
        eb += pf_abf_mul_up(fabs(x), es);
        if (x != 0 && s.hi != 0) {
          const pf_dd p = pf_dd_mul(s, (pf_dd){x, 0});
          eb += pf_abf_prod_err(p, 0) + pf_abf_add_err(b, p);
          b = pf_dd_add(b, p);
        }
      }
      if (!pf_abf_settle(out, qn + kn + h * Lk * d + j * d + e, a, ea, t)) return 0;
      const pf_dd dK = pf_dd_mul(alpha, b);
      const double edK = pf_abf_mul_up(fabs(alpha.hi), eb) + (b.hi == 0 ? 0 : pf_abf_prod_err(dK, ralpha));
      if (!pf_abf_settle(out, qn + h * Lk * d + j * d + e, dK, edK, t)) return 0;
    }
  /* dQ_i = alpha sum_j dS_ij (k_j - k_c) */
  for (size_t i = 0; i < Lq; i++) {
    const size_t jc = w->cref[i];
    for (size_t e = 0; e < d; e++) {
      pf_dd a = {0, 0};
      double ea = 0;
      for (size_t j = 0; jc < Lk && j < Lk; j++) {
        const pf_dd diff = pf_two_sum(K[j * d + e], -K[jc * d + e]);
        if (diff.hi == 0) continue;
        const pf_dd s = w->dS[i * Lk + j];
        ea += pf_abf_mul_up(fabs(diff.hi) + fabs(diff.lo), w->eS[i * Lk + j]);
        if (s.hi == 0) continue;
        const pf_dd p = pf_dd_mul(s, diff);
        ea += pf_abf_prod_err(p, 0) + pf_abf_add_err(a, p);
        a = pf_dd_add(a, p);
      }
      const pf_dd dQ = pf_dd_mul(alpha, a);
      const double edQ = pf_abf_mul_up(fabs(alpha.hi), ea) + (a.hi == 0 ? 0 : pf_abf_prod_err(dQ, ralpha));
      if (!pf_abf_settle(out, h * Lq * d + i * d + e, dQ, edQ, t)) return 0;
    }
  }
  return 1;
}
