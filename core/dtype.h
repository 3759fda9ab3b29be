/* dtypes: names, classification, ulps, neighbours. The rounding itself is in dtype_math.h. */
#ifndef PF_DTYPE_H
#define PF_DTYPE_H

#include <stdint.h>

#include "dtype_math.h"
#include "status.h"

typedef enum {
  PF_CLASS_ZERO,
  PF_CLASS_SUBNORMAL,
  PF_CLASS_NORMAL,
  PF_CLASS_INF,
  PF_CLASS_NAN,
} pf_fpclass;

const char *pf_dtype_name(pf_dtype t);              /* "fp32", "fp16", "bf16" */
pf_status pf_dtype_parse(const char *s, pf_dtype *out); /* PF_ERR_UNKNOWN if not a dtype */

/* x must be a value of t (or any double for pf_dtype_holds). */
int pf_dtype_holds(pf_dtype t, double x);           /* x is exactly representable in t */
pf_fpclass pf_classify(pf_dtype t, double x);
double pf_max_finite(pf_dtype t);
double pf_min_normal(pf_dtype t);
double pf_min_subnormal(pf_dtype t);
double pf_unit_roundoff(pf_dtype t);                /* u = 2^-p */

/* ulp(x): the spacing of t at |x| (the quantum of x's binade; the subnormal quantum
 * below 2^emin). For |x| >= 2^(emax+1) or non-finite x: the quantum of the top binade. */
double pf_ulp(pf_dtype t, double x);

/* Bits as an ordered integer: a < b (as values) iff ord(a) < ord(b); +0 and -0 map to 0. */
int64_t pf_ordinal(pf_dtype t, double x);
double pf_from_ordinal(pf_dtype t, int64_t o); /* its inverse (beyond the largest finite: inf, then NaNs) */
/* Number of representable values of t stepped over from a to b; NaN gives INT64_MAX. */
int64_t pf_ulp_distance(pf_dtype t, double a, double b);
double pf_next_up(pf_dtype t, double x);
double pf_next_down(pf_dtype t, double x);

#endif
