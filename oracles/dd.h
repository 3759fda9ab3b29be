/* Double-word (double-double) arithmetic with rigorous relative error bounds, for the
 * oracles' fast path. The algorithms and their bounds are those of Joldes, Muller and Popescu,
 * "Tight and rigorous error bounds for basic building blocks of double-word arithmetic", ACM
 * TOMS 44(2), 2017 (u = 2^-53, round to nearest, no underflow or overflow):
 *   pf_dd_add  (AccurateDWPlusDW, Alg. 6)  |err| <= 3u^2 / (1 - 4u) |x + y|
 *   pf_dd_add_d (DWPlusFP, Alg. 4)         |err| <= 2u^2 |x + y|   (y a double)
 *   pf_dd_mul  (DWTimesDW3, Alg. 12)       |err| <= 5u^2 |x y|
 *   pf_dd_div  (DWDivDW3, Alg. 18)         |err| <= 9.8u^2 |x / y|
 * A result's bound is the caller's to carry: these functions only compute. Every caller keeps
 * its values far from binary64's underflow (a double word's low part must be a normal number
 * for the bounds to hold) and checks so. */
#ifndef PF_DD_H
#define PF_DD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/kernel.h"

typedef struct {
  double hi, lo; /* hi = RN(hi + lo) */
} pf_dd;

/* On a function that does double-word arithmetic: a second copy compiled for processors with
 * FMA, chosen when the program loads, so that fma() is one instruction, not a call (the same
 * bits either way: fma is correctly rounded). GCC on x86-64 only. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define PF_DD_CLONES __attribute__((target_clones("fma", "default")))
#else
#define PF_DD_CLONES
#endif

static inline pf_dd pf_two_sum(double a, double b) {
  const double s = a + b, bp = s - a, ap = s - bp;
  return (pf_dd){s, (a - ap) + (b - bp)};
}
static inline pf_dd pf_fast_two_sum(double a, double b) { /* |a| >= |b| */
  const double s = a + b;
  return (pf_dd){s, b - (s - a)};
}
static inline pf_dd pf_two_prod(double a, double b) {
  const double p = a * b;
  return (pf_dd){p, fma(a, b, -p)};
}
static inline pf_dd pf_dd_add(pf_dd x, pf_dd y) {
  const pf_dd s = pf_two_sum(x.hi, y.hi), t = pf_two_sum(x.lo, y.lo);
  const pf_dd v = pf_fast_two_sum(s.hi, s.lo + t.hi);
  return pf_fast_two_sum(v.hi, t.lo + v.lo);
}
static inline pf_dd pf_dd_add_d(pf_dd x, double y) {
  const pf_dd s = pf_two_sum(x.hi, y);
  return pf_fast_two_sum(s.hi, x.lo + s.lo);
}
static inline pf_dd pf_dd_neg(pf_dd x) { return (pf_dd){-x.hi, -x.lo}; }
static inline pf_dd pf_dd_mul(pf_dd x, pf_dd y) {
  const pf_dd c = pf_two_prod(x.hi, y.hi);
  const double tl0 = x.lo * y.lo, tl1 = fma(x.hi, y.lo, tl0), cl2 = fma(x.lo, y.hi, tl1), cl3 = c.lo + cl2;
  return pf_fast_two_sum(c.hi, cl3);
}
static inline pf_dd pf_dd_div(pf_dd x, pf_dd y) {
  /* DWDivDW3: 1/y by Newton-Raphson, then x (1/y) */
  const double th = 1.0 / y.hi, rh = fma(-y.hi, th, 1.0), rl = -y.lo * th;
  const pf_dd e = pf_fast_two_sum(rh, rl), d = pf_dd_mul((pf_dd){th, 0}, e);
  const pf_dd m = pf_dd_add((pf_dd){th, 0}, d);
  return pf_dd_mul(x, m);
}
/* sqrt(x) for x > 0 (normal, with room for its square root's square): x.hi's binary64 root r
 * (within 2^-52 of sqrt(x)), then one Newton step r + (x - r^2) / (2r) with r^2 split exactly
 * by an FMA. The step squares r's error (2^-105) and computes a correction of 2^-51 r to
 * three roundings (2^-103.4 r): |err| <= 2^-102 |sqrt(x)| with room (not in Joldes et al.;
 * test_oracle_fast measures it against MPFR). */
static inline pf_dd pf_dd_sqrt(pf_dd x) {
  const double r = sqrt(x.hi);
  const pf_dd p = pf_two_prod(r, r);
  const double d = ((x.hi - p.hi) - p.lo) + x.lo; /* x.hi - p.hi exact: they are close */
  return pf_fast_two_sum(r, d / (2 * r));
}
/* The sum of the squares of n values of fp32, fp16 or bf16 (their squares exact in binary64,
 * multiples of 2^-298) as a double word: a compensated sum (Sum2, Ogita, Rump and Oishi 2005,
 * Prop. 4.5) within *rel = gamma_n^2 of the sum, relative (gamma_n = n u / (1 - n u); the terms
 * are positive). n u < 1. */
static inline pf_dd pf_dd_sum_squares(const double *x, size_t n, double *rel) {
  double s = 0, c = 0;
  for (size_t i = 0; i < n; i++) {
    const double y = x[i] * x[i], u = s + y, bp = u - s, ap = u - bp;
    c += (s - ap) + (y - bp);
    s = u;
  }
  const double gam = (double)n * 0x1p-53 / (1 - (double)n * 0x1p-53);
  *rel = gam * gam;
  return pf_two_sum(s, c);
}
/* x 2^k for 2^k a normal binary64 number and the products normal (or zero): exact */
static inline pf_dd pf_dd_ldexp(pf_dd x, int k) {
  const uint64_t b = (uint64_t)(k + 1023) << 52;
  double s;
  memcpy(&s, &b, sizeof s);
  return (pf_dd){x.hi * s, x.lo * s};
}
/* x < y as exact values (hi parts first: both normalized) */
static inline int pf_dd_less(pf_dd x, pf_dd y) { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo); }

/* exp(z) for -600 <= z <= 0, within 2^-87 relative (dd.c's budget). */
pf_dd pf_dd_exp(pf_dd z);
/* pf_dd_exp's constants, made on first use, for a vector copy of it (dd_avx2.h): ln 2 / 256 in
 * three parts, 2^(j/256) for j = 0..255, 1/6. */
void pf_dd_exp_tables(const double **l256, const pf_dd **exp2_tab, pf_dd *sixth);
/* RN (ties to even) of the double word x = hi + lo to dtype t, |x| below t's largest finite. */
double pf_dd_round_dtype(pf_dd x, pf_dtype t);

/* 1, and *r the value of t that every point of [y - w, y + w] rounds to, when a cheap test
 * shows that the interval holds no rounding boundary of t and none of binary64 (y.hi is then
 * the binary64 nearest every point of it); 0 when the test cannot tell (the caller takes the
 * exact path). y.hi nonzero, below t's largest finite. Inline: the fast paths ask it per output. */
static inline int pf_dd_decided(pf_dd y, double w, pf_dtype t, double *r) {
  const double a = fabs(y.hi), reach = (fabs(y.lo) + w) * (1 + 0x1p-50);
  /* binary64: half the spacing at y.hi, a quarter below a power of two (the smaller side) */
  const uint64_t b = pf_bits_of_double(a);
  const int he = (int)(b >> 52) - ((b & 0xfffffffffffffull) ? 53 : 54); /* the biased exponent of hs */
  if (he < 1) return 0; /* near binary64's underflow: the exact path */
  const double hs = pf_double_of_bits((uint64_t)he << 52);
  if (!(reach < hs)) return 0;
  /* t: r's rounding region reaches half the spacing q at y.hi's exponent on y.hi's side of r,
   * and at least q / 4 on the other (spacings halve at most, below a power of two) */
  *r = pf_round(t, y.hi);
  const double q = pf_quantum(t, y.hi), d = fabs(y.hi - *r), m1 = q * 0.5 - d, m2 = q * 0.25 + d;
  return (m1 < m2 ? m1 : m2) > reach + a * 0x1p-100;
}

/* pf_fast_settle's rare path (dd.c): the enclosure's ends, each rounded as a double word, agree
 * (1, *a their value) or not (0) */
int pf_fast_settle_ends(pf_dd x, double err, pf_dtype t, double *a);

/* Settles output i from the enclosure [x - err, x + err] of its exact value: 1 when the
 * enclosure is within 2^-56 of x (the comparison takes the exact value to 2^-50) and rounds to
 * one value of t, else 0 (nothing written that counts: the caller leaves the unit to MPFR).
 * Inline, as pf_dd_decided. */
static inline int pf_fast_settle(pf_oracle_result *out, size_t i, pf_dd x, double err, pf_dtype t) {
  /* the bound tight enough for the comparison, which takes the exact value to 2^-50 (x.hi is
   * then within 2^-53 + 2^-56), far from binary64's underflow (low parts normal) and below
   * t's largest finite */
  if (!(err <= 0x1p-56 * fabs(x.hi))) return 0;
  if (x.hi != 0 && fabs(x.hi) < 0x1p-900) return 0;
  if (!(fabs(x.hi) * (1 + 0x1p-59) < pf_max_finite(t))) return 0;
  double a;
  if ((x.hi == 0 || !pf_dd_decided(x, err, t, &a)) && !pf_fast_settle_ends(x, err, t, &a)) return 0;
  out->dtype[i] = (unsigned char)t;
  out->exact[i] = x.hi;
  out->rounded[i] = out->rounded_alt[i] = a;
  out->status[i] = PF_ORACLE_NUMBER;
  return 1;
}
/* Settles output i whose exact value is the double word x itself (computed without any error):
 * its rounding to t, ties to even; 0 where x is 0, near binary64's underflow or t's overflow. */
int pf_fast_settle_exact(pf_oracle_result *out, size_t i, pf_dd x, pf_dtype t);
/* Output i is exp(z) / sum with exp(z) below 2^-1076 of sum (z < -746): 0 in binary64 and every
 * dtype, TINY below MPFR's exponent range as MPFR says; 0 within a hair of that edge. */
int pf_fast_negligible(pf_oracle_result *out, size_t i, pf_dtype t, double z, double sum);

#endif
