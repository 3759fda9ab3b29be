/* The attention backward oracle's fast path (attention_bwd_fast.c): one head in double-word
 * arithmetic with a proven error bound, trusted only where it decides every output of the
 * head; attention_bwd_mpfr.c calls it first. */
#ifndef PF_ATTENTION_BWD_FAST_H
#define PF_ATTENTION_BWD_FAST_H

#include "core/kernel.h"
#include "oracles/dd.h"

/* Per thread: scratch for one head of Lq x Lk scores. */
typedef struct {
  pf_dd *P, *dS;     /* Lq x Lk */
  double *eS;        /* dS's absolute error bounds, Lq x Lk */
  double *rP, *Z;    /* per row: P's relative error bound, the sum of exp(s_j - m) */
  unsigned char *nz; /* P's state: 0 masked (exactly 0), 1 a number, 2 negligible (below 2^-1076) */
  pf_dd *s, *w;      /* one row: scores, w_j = dO_i . (v_j - v_c) */
  double *es, *ew;   /* their absolute error bounds */
  size_t *cref;      /* per row: the reference key c (the largest score) */
  size_t Lq, Lk;
} pf_abf_work;

/* 0 when out of memory */
int pf_abf_work_init(pf_abf_work *w, size_t Lq, size_t Lk);
void pf_abf_work_free(pf_abf_work *w);

/* Head h of case c (inputs q, k, v, dO all finite; standard: dP and dS are outputs too): 1
 * when every output of the head was settled into out, else 0 and nothing of the head to trust
 * (the caller's MPFR path writes it all). */
int pf_attention_bwd_fast_head(const pf_case *c, const pf_tensor *in, size_t h, int standard, pf_oracle_result *out,
                               pf_abf_work *w);

#endif
