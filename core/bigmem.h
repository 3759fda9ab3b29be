/* Zeroed arrays of many megabytes on transparent huge pages where the system allows them
 * (madvise): first touching 100 MB in 4 KiB pages costs tens of milliseconds of page faults,
 * as much as a large case's fast oracle. Smaller arrays come from calloc, from a heap that is
 * kept between cases (bigmem.c). */
#ifndef PF_BIGMEM_H
#define PF_BIGMEM_H

#include <stddef.h>

/* n elements of size bytes, zeroed; NULL when out of memory (or n * size overflows). */
void *pf_big_zalloc(size_t n, size_t size);
/* Frees what pf_big_zalloc gave (NULL: nothing). */
void pf_big_free(void *p);

#endif
