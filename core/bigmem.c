/* bigmem.h: a 64-byte header before each array says how it was made (and the mapping's
 * length), so that one free serves both kinds. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include "bigmem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define PF_BIG_HEAD 64
#define PF_BIG_MIN ((size_t)8 << 20) /* below this, calloc */
enum { PF_BIG_CALLOC = 0x63616c6c, PF_BIG_MAPPED = 0x6d6d6170 };

typedef struct {
  uint32_t kind;
  size_t len; /* the mapping's length */
} pf_big_head;

/* glibc maps a block above its threshold (128 KiB, raised by each such free) afresh and gives
 * the top of its heap back beyond twice that: a case's oracle results of a few hundred KiB were
 * page-faulted in anew every case, costing as much as the oracle (100 us of 200 for a small TP
 * step). Blocks below PF_BIG_MIN now come from the heap, and up to 64 MiB of it is kept. */
static void pf_big_malloc_settings(void) {
#if defined(__GLIBC__) && defined(M_TRIM_THRESHOLD)
  mallopt(M_MMAP_THRESHOLD, (int)PF_BIG_MIN);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

void *pf_big_zalloc(size_t n, size_t size) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, pf_big_malloc_settings);
  if (size && n > (SIZE_MAX - PF_BIG_HEAD) / size) return NULL;
  const size_t bytes = n * size + PF_BIG_HEAD;
  unsigned char *p;
  pf_big_head h;
  if (bytes < PF_BIG_MIN) {
    if (!(p = calloc(1, bytes))) return NULL;
    h = (pf_big_head){PF_BIG_CALLOC, 0};
  } else {
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* zero pages */
    if (m == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(m, bytes, MADV_HUGEPAGE); /* a hint: without huge pages, 4 KiB ones */
#endif
    p = m;
    h = (pf_big_head){PF_BIG_MAPPED, bytes};
  }
  *(pf_big_head *)p = h;
  return p + PF_BIG_HEAD;
}

void pf_big_free(void *q) {
  if (!q) return;
  unsigned char *p = (unsigned char *)q - PF_BIG_HEAD;
  const pf_big_head h = *(pf_big_head *)p;
  if (h.kind == PF_BIG_MAPPED) munmap(p, h.len);
  else free(p);
}
