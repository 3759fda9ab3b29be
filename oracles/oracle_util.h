/* Helpers the MPFR oracles share: correct rounding to a dtype, and the interval test that
 * tells whether a result can be trusted. Nothing here is shared with the kernels' emulation. */
#ifndef PF_ORACLE_UTIL_H
#define PF_ORACLE_UTIL_H

#include <mpfr.h>

#include "kernels/kernel.h"

/* x correctly rounded (nearest, ties to even) to dtype t, with t's subnormals and overflow
 * to +-inf; returned as a double (exact). */
double pf_mpfr_round_dtype(mpfr_srcptr x, pf_dtype t);

/* Given an enclosure [lo, hi] of the exact value, fill element i of r: NUMBER when both ends
 * round to the same value of t (the rounding is then certain), else returns 0 so that the
 * caller raises its precision; when final (at the precision limit) records a TIE. */
int pf_oracle_settle(pf_oracle_result *r, size_t i, mpfr_srcptr lo, mpfr_srcptr hi, pf_dtype t, int final,
                     int keep_hex);
void pf_oracle_set_undefined(pf_oracle_result *r, size_t i, int keep_hex);

/* The oracles compute in MPFR's widest exponent range; these save and restore the caller's. */
typedef struct {
  mpfr_exp_t emin, emax;
} pf_mpfr_range;
pf_mpfr_range pf_mpfr_range_widen(void);
void pf_mpfr_range_restore(pf_mpfr_range r);

/* One case judged by several threads: fn(ctx, thread, begin, end) runs on contiguous chunks of
 * the units [0, n) (rows, heads), thread t of `threads` taking the t-th chunk. Every unit writes
 * only its own outputs, so the result does not depend on the thread count; fn keeps its
 * counters per thread. Each thread runs with MPFR's widest exponent range (MPFR keeps it per
 * thread). Falls back to one thread when threads cannot be started. */
void pf_oracle_parallel(size_t n, int threads, void (*fn)(void *ctx, int thread, size_t begin, size_t end),
                        void *ctx);
/* How many threads a case of `units` units of `flops` work each gets: opts->threads (0: the
 * machine's processors), one for cases below a few milliseconds of work. */
int pf_oracle_threads(const pf_oracle_opts *opts, size_t units, double flops);

#endif
