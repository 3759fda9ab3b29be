/* The attention oracle's fast path (attention_fast.c): compensated dot products and
 * double-word softmax with a proven error bound, trusted only where its enclosure decides the
 * result; attention_mpfr.c calls it first for every query row and leaves to MPFR the rows it
 * cannot decide. */
#ifndef PF_ATTENTION_FAST_H
#define PF_ATTENTION_FAST_H

#include "core/kernel.h"
#include "oracles/dd.h"

/* What every row of one case shares, made once (pf_attn_fast_init) and only read afterwards,
 * by any number of threads. */
typedef struct {
  size_t heads, Lq, Lk, d;
  const double *Q;
  float *KT;              /* per head, K transposed (d x Lk): the stored values, exact in float */
  float *V;               /* V (Lk x d per head), exact in float */
  double *knorm;          /* per head and key: an upper bound of the Euclidean norm of k_j */
  double *vmax, *vmin;    /* per head and column: the largest |v|; per head: the smallest nonzero |v| */
  unsigned char *head_ok; /* per head: K and V finite and exact in float */
  pf_dd alpha;            /* 1/sqrt(d) to within 2^-105 relative */
  double gamma2;          /* the bound of a compensated dot product of d terms, relative to the norms */
  double norm_up;         /* sqrt of a sum of d squares in binary64 times this bounds the norm */
  int mask, store_sp, avx2;
  double sentinel, Lstore;
  pf_dtype dt;
} pf_attn_fast;

/* Per thread: scratch for one row. */
typedef struct {
  double *sh, *sl, *er; /* scores (double words) and their absolute error bounds, Lk each */
  pf_dd *e;             /* exp(s_j - m), then p_j, Lk */
  double *oh, *ol, *ow; /* the output row and sum_j p_j |v_je|, d each */
} pf_attn_fast_work;

pf_status pf_attn_fast_init(pf_attn_fast *f, const pf_case *c, const pf_tensor *in, int store_sp, int mask,
                            double sentinel, double Lstore);
void pf_attn_fast_free(pf_attn_fast *f);
pf_status pf_attn_fast_work_init(pf_attn_fast_work *w, const pf_attn_fast *f);
void pf_attn_fast_work_free(pf_attn_fast_work *w);

/* Query row i of head h: 1 when every output of the row (O, and S and P when stored) was
 * settled into out, else 0 and the row is MPFR's (nothing of it to trust). */
int pf_attn_fast_row(const pf_attn_fast *f, size_t h, size_t i, pf_oracle_result *out, pf_attn_fast_work *w);

#endif
