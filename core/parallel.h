/* How one large case uses the machine: its vector units (pf_avx2) and its processors. Work is
 * split over threads in contiguous chunks of independent units (rows,
 * heads), each writing only its own outputs, so that results never depend on the thread
 * count. Small cases (a fuzz loop's) stay on the calling thread. */
#ifndef PF_PARALLEL_H
#define PF_PARALLEL_H

#include <stddef.h>

#include "core/status.h"

#define PF_MAX_THREADS 256

/* fn(ctx, thread, begin, end) over [0, n): thread t of `threads` takes the t-th chunk; the
 * calling thread runs chunk 0, and any chunk whose thread cannot be started. */
void pf_parallel_for(size_t n, int threads, void (*fn)(void *ctx, int thread, size_t begin, size_t end), void *ctx);
/* How many threads `units` units of about `flops` operations each get: 1 below about 2^24
 * operations in all, else the process's setting (pf_parallel_set_threads; 0: one per
 * processor), at most the units and PF_MAX_THREADS. */
int pf_parallel_threads(size_t units, double flops);
/* The command line's --threads N (0: one per processor, the default). */
void pf_parallel_set_threads(int n);

/* 1 when the AVX2 and FMA loops may run: the processor has them and PRECFUZZ_SIMD is not "off"
 * (the plain C loops do lane for lane the same operations, so results are the same bits;
 * "off" is how the tests show it). */
int pf_avx2(void);
void pf_avx2_reprobe(void); /* read PRECFUZZ_SIMD again (tests) */
/* PRECFUZZ_SIMD unset, empty, on or off; anything else is PF_ERR_ARG naming it (checked with
 * every case, as PRECFUZZ_MEMORY_BYTES is). */
pf_status pf_simd_setting_check(void);

#endif
