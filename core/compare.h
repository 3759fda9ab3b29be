/* compare: per-element distance between a kernel's outputs and the oracle, and the verdicts. */
#ifndef PF_COMPARE_H
#define PF_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "core/kernel.h"
#include "verdict.h"

typedef struct {
  pf_verdict verdict;            /* the case's: most severe element verdict */
  size_t counts[PF_NVERDICTS];   /* elements per verdict */
  size_t first_bad;              /* first element with the case's verdict (if not ok) */
  int64_t max_ulps;              /* largest ulp distance to the correctly rounded result */
  size_t max_ulps_at;
  double max_rel;                /* largest |y - E| / |E| where E is in t's normal range */
  pf_verdict *elem;              /* per element */
  int64_t *ulps;                 /* per element, INT64_MAX for NaN */
  int64_t *allowed;              /* per element: ulps the bound allows (INT64_MAX: unbounded) */
} pf_comparison;

/* t: the outputs' dtype, unless the oracle recorded another for an element (o->dtype).
 * fe: the floating-point events of the run (dtype_math.h): a NaN output is attributed to an
 * overflow or a total underflow that happened on the way. */
pf_status pf_compare(pf_dtype t, const double *y, size_t n, const pf_oracle_result *o, const pf_bound *b,
                     unsigned fe, pf_comparison *cmp);
void pf_comparison_free(pf_comparison *cmp);
/* As pf_compare, with the contract "within ulps units in the last place of t of the correctly
 * rounded result" (no floating-point events known: outputs made elsewhere). */
pf_status pf_compare_ulps(pf_dtype t, const double *y, size_t n, const pf_oracle_result *o, long ulps,
                          pf_comparison *cmp);

/* One element's verdict: exposed for tests. lo, hi: the allowed interval in t. */
pf_verdict pf_element_verdict(pf_dtype t, double y, unsigned char ostatus, double rounded, double lo,
                              double hi, unsigned fe);
/* The allowed interval [lo, hi] of outputs in t for exact value E under bound b. */
void pf_allowed_interval(pf_dtype t, double E, double rounded, double rounded_alt, pf_bound b, double *lo,
                         double *hi);

#endif
