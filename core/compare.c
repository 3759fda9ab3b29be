#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pf_allowed_interval(pf_dtype t, double E, double rounded, double rounded_alt, pf_bound b, double *lo,
                         double *hi) {
  if (!(b.rel < INFINITY) || !(b.abs < INFINITY)) {
    *lo = -INFINITY;
    *hi = INFINITY;
    return;
  }
  /* E is the exact value to within 2^-53 relative; widen for that and for this arithmetic. */
  const double w = (b.rel * fabs(E) + b.abs) * (1 + 0x1p-49) + fabs(E) * 0x1p-50 + 0x1p-1074;
  /* Rounding to nearest is monotone: every value within w of E rounds into this interval. */
  *lo = pf_round(t, E - w);
  *hi = pf_round(t, E + w);
  if (rounded < *lo) *lo = rounded;
  if (rounded_alt < *lo) *lo = rounded_alt;
  if (rounded > *hi) *hi = rounded;
  if (rounded_alt > *hi) *hi = rounded_alt;
}

pf_verdict pf_element_verdict(pf_dtype t, double y, unsigned char ostatus, double rounded, double lo,
                              double hi, unsigned fe) {
  if (ostatus == PF_ORACLE_UNDEFINED || isinf(rounded)) return PF_V_RANGE;
  if (isnan(y)) {
    if (fe & PF_FE_OVERFLOW) return PF_V_OVERFLOW;
    if (fe & PF_FE_UNDERFLOW) return PF_V_UNDERFLOW;
    return PF_V_NAN;
  }
  if (isinf(y)) return PF_V_OVERFLOW;
  const int r_normal = fabs(rounded) >= pf_min_normal(t);
  if (y >= lo && y <= hi) return PF_V_OK;
  if (fe & PF_FE_OVERFLOW) return PF_V_OVERFLOW; /* the bound assumes no overflow on the way */
  if (r_normal && fabs(y) < pf_min_normal(t)) return PF_V_UNDERFLOW; /* a normal number lost to 0 or subnormals */
  return PF_V_INACCURATE;
}

pf_status pf_compare(pf_dtype t, const double *y, size_t n, const pf_oracle_result *o, const pf_bound *b,
                     unsigned fe, pf_comparison *cmp) {
  memset(cmp, 0, sizeof *cmp);
  const size_t m = n ? n : 1;
  cmp->elem = malloc(m * sizeof *cmp->elem);
  cmp->ulps = malloc(m * sizeof *cmp->ulps);
  cmp->allowed = malloc(m * sizeof *cmp->allowed);
  if (!cmp->elem || !cmp->ulps || !cmp->allowed) {
    pf_comparison_free(cmp);
    return pf_error(PF_ERR_NOMEM, "cannot allocate the comparison of %zu elements", n);
  }
  cmp->verdict = PF_V_OK;
  const pf_dtype t0 = t;
  for (size_t i = 0; i < n; i++) {
    t = pf_oracle_dtype_of(o, i, t0); /* this element's dtype */
    double lo = -INFINITY, hi = INFINITY;
    const int defined = o->status[i] != PF_ORACLE_UNDEFINED;
    if (defined) pf_allowed_interval(t, o->exact[i], o->rounded[i], o->rounded_alt[i], b[i], &lo, &hi);
    const pf_verdict v = pf_element_verdict(t, y[i], o->status[i], o->rounded[i], lo, hi, fe);
    cmp->elem[i] = v;
    cmp->counts[v]++;
    if (v > cmp->verdict) {
      cmp->verdict = v;
      cmp->first_bad = i;
    }
    int64_t d = INT64_MAX, allowed = INT64_MAX;
    if (defined) {
      const int64_t d1 = pf_ulp_distance(t, y[i], o->rounded[i]);
      const int64_t d2 = pf_ulp_distance(t, y[i], o->rounded_alt[i]);
      d = d1 < d2 ? d1 : d2;
      if (o->status[i] == PF_ORACLE_SET && y[i] >= o->rounded[i] && y[i] <= o->rounded_alt[i]) d = 0;
      if (isfinite(lo) && isfinite(hi)) {
        /* on the output's side of the correctly rounded value (the interval, symmetric in value,
         * need not be in ulps: one side may cross a binade or zero), from the rounding d is
         * measured from there: d <= allowed exactly when the output is inside the interval */
        const double rmin = fmin(o->rounded[i], o->rounded_alt[i]), rmax = fmax(o->rounded[i], o->rounded_alt[i]);
        const int64_t a1 = pf_ulp_distance(t, lo, rmin), a2 = pf_ulp_distance(t, hi, rmax);
        allowed = y[i] > rmax ? a2 : y[i] < rmin ? a1 : (a1 > a2 ? a1 : a2);
      }
      if (d != INT64_MAX && (d > cmp->max_ulps)) {
        cmp->max_ulps = d;
        cmp->max_ulps_at = i;
      }
      const double E = o->exact[i];
      /* relative error where it means something: exact results in t's normal range */
      if (isfinite(y[i]) && isfinite(E) && fabs(o->rounded[i]) >= pf_min_normal(t) && o->status[i] != PF_ORACLE_SET) {
        const double rel = E != 0 ? fabs(y[i] - E) / fabs(E) : (y[i] != 0 ? INFINITY : 0);
        if (rel > cmp->max_rel) cmp->max_rel = rel;
      }
    }
    cmp->ulps[i] = d;
    cmp->allowed[i] = allowed;
  }
  return PF_OK;
}

pf_status pf_compare_ulps(pf_dtype t, const double *y, size_t n, const pf_oracle_result *o, long ulps,
                          pf_comparison *cmp) {
  /* a bound of zero allows the correctly rounded value (and the other one at a tie) ... */
  pf_bound *b = calloc(n ? n : 1, sizeof *b);
  if (!b) return pf_error(PF_ERR_NOMEM, "cannot allocate %zu bounds", n);
  pf_status st = pf_compare(t, y, n, o, b, 0, cmp);
  free(b);
  if (st) return st;
  /* ... then ulps steps either way over the values of t */
  memset(cmp->counts, 0, sizeof cmp->counts);
  cmp->verdict = PF_V_OK;
  cmp->first_bad = 0;
  for (size_t i = 0; i < n; i++) {
    const pf_dtype ti = pf_oracle_dtype_of(o, i, t);
    pf_verdict v = cmp->elem[i];
    if (o->status[i] != PF_ORACLE_UNDEFINED && !isinf(o->rounded[i])) {
      const double a = fmin(o->rounded[i], o->rounded_alt[i]), z = fmax(o->rounded[i], o->rounded_alt[i]);
      const double lo = pf_from_ordinal(ti, pf_ordinal(ti, a) - ulps), hi = pf_from_ordinal(ti, pf_ordinal(ti, z) + ulps);
      v = pf_element_verdict(ti, y[i], o->status[i], o->rounded[i], lo, hi, 0);
      cmp->allowed[i] = ulps;
    }
    cmp->elem[i] = v;
    cmp->counts[v]++;
    if (v > cmp->verdict) cmp->verdict = v, cmp->first_bad = i;
  }
  return PF_OK;
}

void pf_comparison_free(pf_comparison *cmp) {
  free(cmp->elem);
  free(cmp->ulps);
  free(cmp->allowed);
  cmp->elem = NULL;
  cmp->ulps = cmp->allowed = NULL;
}
