#include "core/parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int pf_avx2_ok = -1; /* -1: not probed (threads racing to probe write the same) */
int pf_avx2(void) {
  if (pf_avx2_ok < 0) {
    const char *s = getenv("PRECFUZZ_SIMD");
    int ok = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    pf_avx2_ok = ok && !(s && strcmp(s, "off") == 0);
  }
  return pf_avx2_ok;
}
void pf_avx2_reprobe(void) { pf_avx2_ok = -1; }

pf_status pf_simd_setting_check(void) {
  const char *s = getenv("PRECFUZZ_SIMD");
  if (!s || !*s || strcmp(s, "on") == 0 || strcmp(s, "off") == 0) return PF_OK;
  return pf_error(PF_ERR_ARG, "PRECFUZZ_SIMD: '%s' is not on or off", s);
}

static int pf_threads_setting; /* 0: one per processor */

void pf_parallel_set_threads(int n) { pf_threads_setting = n < 0 ? 0 : n; }

int pf_parallel_threads(size_t units, double flops) {
  if ((double)units * flops < 0x1p24) return 1; /* threads would cost more than they give */
  long t = pf_threads_setting;
  if (t <= 0) t = sysconf(_SC_NPROCESSORS_ONLN);
  if (t < 1) t = 1;
  if (t > PF_MAX_THREADS) t = PF_MAX_THREADS;
  if ((size_t)t > units) t = (long)(units ? units : 1);
  return (int)t;
}

typedef struct {
  void (*fn)(void *, int, size_t, size_t);
  void *ctx;
  int t;
  size_t b, e;
} pf_chunk;

static void *pf_chunk_run(void *p) {
  const pf_chunk *k = p;
  k->fn(k->ctx, k->t, k->b, k->e);
  return NULL;
}

void pf_parallel_for(size_t n, int threads, void (*fn)(void *ctx, int thread, size_t begin, size_t end), void *ctx) {
  if (threads < 1) threads = 1;
  if (threads > PF_MAX_THREADS) threads = PF_MAX_THREADS;
  if ((size_t)threads > n) threads = n ? (int)n : 1;
  pf_chunk ks[PF_MAX_THREADS];
  pthread_t ids[PF_MAX_THREADS];
  int started[PF_MAX_THREADS] = {0};
  for (int t = 0; t < threads; t++)
    ks[t] = (pf_chunk){fn, ctx, t, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads};
  for (int t = 1; t < threads; t++) started[t] = pthread_create(&ids[t], NULL, pf_chunk_run, &ks[t]) == 0;
  pf_chunk_run(&ks[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t]) pthread_join(ids[t], NULL);
    else pf_chunk_run(&ks[t]);
  }
}
