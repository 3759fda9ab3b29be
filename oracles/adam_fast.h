/* The Adam oracle's fast path (adam_fast.c); adam_mpfr.c calls it first for every element. */
#ifndef PF_ADAM_FAST_H
#define PF_ADAM_FAST_H

#include "core/kernel.h"
#include "oracles/dd.h"

/* The case's hyperparameters as the fast path uses them, made once per case. */
typedef struct {
  double lr, b1, b2, eps, wd;
  pf_dd k1, k2;       /* 1 - b1, 1 - b2, exact */
  pf_dd bc1, bc2;     /* 1 - b^t (1 without bias correction), within 2^-105 relative */
  int l2, eps_inside, master;
  int avx2;           /* pf_avx2() when the case began: pf_adam_fast_4 may run */
  pf_dtype st, pt, t; /* the state's, the updated parameter's and the case's dtypes */
} pf_adam_fast;

void pf_adam_fast_init(pf_adam_fast *f, const pf_case *c, int master, pf_dtype st, pf_dtype pt);
/* Element i of n (finite p, g, m, v): 1 when all its outputs were settled into out (m', v',
 * p', and p' in the case's dtype with a master copy), else 0 and the element is MPFR's. */
int pf_adam_fast_element(const pf_adam_fast *f, size_t i, size_t n, double p, double g, double m, double v,
                         pf_oracle_result *out);

/* Elements i..i+3 (p, g, m, v point at element i of each) four at a time with AVX2: a bit mask
 * of the elements settled into out, the same values pf_adam_fast_element gives; 0 without AVX2
 * (or PRECFUZZ_SIMD=off). The caller takes the other elements one by one. */
int pf_adam_fast_4(const pf_adam_fast *f, size_t i, size_t n, const double *p, const double *g, const double *m,
                   const double *v, pf_oracle_result *out);

#endif
