/* What an oracle answers and how it is asked: the exact values of a case's outputs, their
 * correct roundings and status (pf_oracle_result), and the options of the run (pf_oracle_opts).
 * Each operation's oracle is oracles/<op>_mpfr.c (its prototype in oracles/<op>_mpfr.h), the
 * pf_op.oracle of its operation (core/kernel.h). */
#ifndef PF_ORACLE_H
#define PF_ORACLE_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/status.h"

/* What the oracle says of one output element. */
enum {
  PF_ORACLE_NUMBER = 0,    /* exact value known, its rounding to the output dtype certain */
  PF_ORACLE_UNDEFINED = 1, /* the mathematical result is undefined (NaN input, +inf, 0/0) */
  PF_ORACLE_TIE = 2,       /* the exact value could not be separated from a rounding midpoint
                              at the precision limit: both neighbours are correct roundings */
  PF_ORACLE_TINY = 3,      /* the exact value is nonzero but below MPFR's exponent range
                              (|E| < 2^-(2^62)): it rounds to 0 in every dtype; exact is 0 and
                              the JSON gives the bound */
  PF_ORACLE_SET = 4,       /* every value of the dtype in [rounded, rounded_alt] is a legitimate
                              result (a differential's proven set); exact is a value inside */
};

typedef struct {
  size_t n;
  double *exact;         /* exact result rounded to binary64 (nearest) */
  double *rounded;       /* exact result correctly rounded to the output dtype (nearest even) */
  double *rounded_alt;   /* PF_ORACLE_TIE: the other neighbour; else equal to rounded */
  unsigned char *status; /* PF_ORACLE_* */
  unsigned char *dtype;  /* the dtype element i was rounded to (PF_NDTYPES: the case's dtype) */
  char **hex;            /* optional: exact value as hex text with >= 160 bits (see opts) */
  long max_prec;         /* the highest MPFR precision the oracle needed, in bits */
  /* an oracle with a fast path (oracles/softmax_fast.c): the units (rows) it settled, and
   * those it left to MPFR because its enclosure did not decide them */
  size_t fast_units, mpfr_units;
} pf_oracle_result;
/* The dtype output i was rounded to: the oracle's word for it, else t (the case's dtype). */
static inline pf_dtype pf_oracle_dtype_of(const pf_oracle_result *o, size_t i, pf_dtype t) {
  return o->dtype && o->dtype[i] < PF_NDTYPES ? (pf_dtype)o->dtype[i] : t;
}

typedef struct {
  long prec;      /* starting MPFR precision in bits (>= 64; default 256) */
  long prec_max;  /* give up separating from a midpoint beyond this (default 16384) */
  int keep_hex;   /* fill pf_oracle_result.hex */
  int domain_only; /* runner: stop before the kernel when the case is outside the domain */
  int backend;     /* runner: PF_BACKEND_CPU (the emulation) or PF_BACKEND_CUDA (the kernel's run_cuda) */
  const struct pf_hazard_limits *hazard_limits; /* runner: hazard thresholds (NULL: the defaults;
                                                   pf_oracle_opts_default: the command line's) */
  int mpfr_only;   /* 1: no fast path, every element by MPFR (--oracle mpfr, the reference) */
} pf_oracle_opts;

/* The results of n outputs, zeroed (every dtype PF_NDTYPES: the case's); keep_hex: with the
 * hex array. PF_ERR_NOMEM with one line. */
pf_status pf_oracle_result_alloc(pf_oracle_result *r, size_t n, int keep_hex);
void pf_oracle_result_free(pf_oracle_result *r);

#endif
