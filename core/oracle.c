/* The oracle's results (oracle.h): large ones on huge pages where allowed (core/bigmem.h). */
#include "core/oracle.h"

#include <stdlib.h>
#include <string.h>

#include "core/bigmem.h"

pf_status pf_oracle_result_alloc(pf_oracle_result *r, size_t n, int keep_hex) {
  memset(r, 0, sizeof *r);
  r->n = n;
  size_t m = n ? n : 1;
  r->exact = pf_big_zalloc(m, sizeof(double)); /* large cases: on huge pages where allowed */
  r->rounded = pf_big_zalloc(m, sizeof(double));
  r->rounded_alt = pf_big_zalloc(m, sizeof(double));
  r->status = pf_big_zalloc(m, 1);
  r->dtype = pf_big_zalloc(m, 1);
  if (r->dtype) memset(r->dtype, PF_NDTYPES, m);
  if (keep_hex) r->hex = calloc(m, sizeof(char *));
  if (!r->exact || !r->rounded || !r->rounded_alt || !r->status || !r->dtype || (keep_hex && !r->hex)) {
    pf_oracle_result_free(r);
    return pf_error(PF_ERR_NOMEM, "cannot allocate oracle results for %zu elements", n);
  }
  return PF_OK;
}

void pf_oracle_result_free(pf_oracle_result *r) {
  if (r->hex)
    for (size_t i = 0; i < r->n; i++) free(r->hex[i]);
  free(r->hex);
  pf_big_free(r->exact);
  pf_big_free(r->rounded);
  pf_big_free(r->rounded_alt);
  pf_big_free(r->status);
  pf_big_free(r->dtype);
  memset(r, 0, sizeof *r);
}
