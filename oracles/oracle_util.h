/* Helpers the MPFR oracles share: correct rounding to a dtype, and the interval test that
 * tells whether a result can be trusted. Nothing here is shared with the kernels' emulation. */
#ifndef PF_ORACLE_UTIL_H
#define PF_ORACLE_UTIL_H

#include <mpfr.h>

#include "core/parallel.h"
#include "core/kernel.h"

/* x correctly rounded (nearest, ties to even) to dtype t, with t's subnormals and overflow
 * to +-inf; returned as a double (exact). */
double pf_mpfr_round_dtype(mpfr_srcptr x, pf_dtype t);

/* Given an enclosure [lo, hi] of the exact value, fill element i of r: NUMBER when both ends
 * round to the same value of t (the rounding is then certain), else returns 0 so that the
 * caller raises its precision; when final (at the precision limit) records a TIE. */
int pf_oracle_settle(pf_oracle_result *r, size_t i, mpfr_srcptr lo, mpfr_srcptr hi, pf_dtype t, int final,
                     int keep_hex);
void pf_oracle_set_undefined(pf_oracle_result *r, size_t i, int keep_hex);
/* Element i's exact value is 0 by definition (a row the causal mask hides whole). */
void pf_oracle_set_zero(pf_oracle_result *r, size_t i, pf_dtype t, int keep_hex);
/* Element i's exact value is nonzero but below MPFR's exponent range, under 2^(emin + 256) in
 * magnitude (emin: MPFR's least exponent): it rounds to 0 in every dtype (PF_ORACLE_TINY). */
void pf_oracle_set_tiny(pf_oracle_result *r, size_t i, pf_dtype t, int keep_hex);

/* An oracle that settles its rows, then its columns (a norm's backward: dx per row, dgamma per
 * column): the rows as pf_oracle_by_rows does (fast_row first where allowed, else mpfr_row); the
 * columns by fast_cols (columns [begin, end): left[j] = 1 where it could not settle column j;
 * not called with --oracle mpfr or hex, every column then left), then, where any is left,
 * prepare (rows [begin, end): what the columns' MPFR pass needs that the rows' fast path did not
 * compute) and mpfr_cols (the left columns), each thread's highest precision in max_prec[thread].
 * Fills fast_units, mpfr_units (rows and columns) and max_prec. PF_ERR_NOMEM with one line. */
typedef void (*pf_oracle_range_fn)(void *ctx, int thread, size_t begin, size_t end);
pf_status pf_oracle_rows_then_columns(size_t rows, size_t cols, const pf_oracle_opts *opts, pf_oracle_result *out,
                                      void *ctx, int (*fast_row)(const void *, size_t, pf_oracle_result *),
                                      void (*mpfr_row)(const void *, size_t, long *), pf_oracle_range_fn fast_cols,
                                      pf_oracle_range_fn prepare, pf_oracle_range_fn mpfr_cols, unsigned char *left,
                                      long *max_prec);

/* Exact arithmetic (for an oracle that forms integers-times-powers-of-two exactly before its one
 * irrational step): each result is given the precision that holds it, from its operands'
 * exponents and lowest set bits. r = a + s b (s = +1 or -1; r may be a); r = a b (r neither a
 * nor b); r = a d for a double d (t: a scratch variable). */
void pf_mpfr_exact_add(mpfr_ptr r, mpfr_srcptr a, mpfr_srcptr b, int s);
void pf_mpfr_exact_mul(mpfr_ptr r, mpfr_srcptr a, mpfr_srcptr b);
void pf_mpfr_exact_mul_d(mpfr_ptr r, mpfr_srcptr a, double d, mpfr_ptr t);

/* The oracles compute in MPFR's widest exponent range; these save and restore the caller's. */
typedef struct {
  mpfr_exp_t emin, emax;
} pf_mpfr_range;
pf_mpfr_range pf_mpfr_range_widen(void);
void pf_mpfr_range_restore(pf_mpfr_range r);

/* pf_parallel_for (core/parallel.h) with MPFR's widest exponent range in every thread (MPFR
 * keeps it per thread). */
void pf_oracle_parallel(size_t n, int threads, void (*fn)(void *ctx, int thread, size_t begin, size_t end),
                        void *ctx);

/* An oracle that settles a case row by row, rows in parallel (row_cost: a row's rough cost, for
 * pf_parallel_threads): row i by fast(ctx, i, out) where the options allow a fast path (not
 * --oracle mpfr, no hex) and it settles the row (returns 1), else by mpfr(ctx, i, &max_prec);
 * fills out's fast_units, mpfr_units and max_prec. PF_ERR_NOMEM with one line. */
pf_status pf_oracle_by_rows(size_t rows, double row_cost, const pf_oracle_opts *opts, pf_oracle_result *out,
                            const void *ctx, int (*fast)(const void *ctx, size_t row, pf_oracle_result *out),
                            void (*mpfr)(const void *ctx, size_t row, long *max_prec));

#endif
