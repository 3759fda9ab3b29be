#include "dtype.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const char *const pf_dtype_names[PF_NDTYPES] = {"fp32", "fp16", "bf16"};

const char *pf_dtype_name(pf_dtype t) {
  return (unsigned)t < PF_NDTYPES ? pf_dtype_names[t] : "?";
}

pf_status pf_dtype_parse(const char *s, pf_dtype *out) {
  for (int i = 0; i < PF_NDTYPES; i++) {
    if (s && strcmp(s, pf_dtype_names[i]) == 0) { *out = (pf_dtype)i; return PF_OK; }
  }
  return PF_ERR_UNKNOWN;
}

int pf_dtype_holds(pf_dtype t, double x) {
  if (isnan(x)) return 1;
  return pf_round(t, x) == x;
}

pf_fpclass pf_classify(pf_dtype t, double x) {
  if (isnan(x)) return PF_CLASS_NAN;
  if (isinf(x)) return PF_CLASS_INF;
  if (x == 0) return PF_CLASS_ZERO;
  return fabs(x) < pf_min_normal(t) ? PF_CLASS_SUBNORMAL : PF_CLASS_NORMAL;
}

double pf_max_finite(pf_dtype t) {
  pf_format f = pf_format_of(t);
  return ldexp(2.0 - ldexp(1.0, 1 - f.prec), f.emax);
}
double pf_min_normal(pf_dtype t) { return ldexp(1.0, pf_format_of(t).emin); }
double pf_min_subnormal(pf_dtype t) {
  pf_format f = pf_format_of(t);
  return ldexp(1.0, f.emin - f.prec + 1);
}
double pf_unit_roundoff(pf_dtype t) { return ldexp(1.0, -pf_format_of(t).prec); }

double pf_ulp(pf_dtype t, double x) { return pf_quantum(t, x); }

int64_t pf_ordinal(pf_dtype t, double x) {
  uint32_t b = pf_encode(t, x, PF_RN, 0);
  int bits = pf_format_of(t).bits;
  uint32_t sign = 1u << (bits - 1);
  int64_t mag = (int64_t)(b & (sign - 1u));
  return (b & sign) ? -mag : mag;
}

int64_t pf_ulp_distance(pf_dtype t, double a, double b) {
  if (isnan(a) || isnan(b)) return INT64_MAX;
  int64_t d = pf_ordinal(t, a) - pf_ordinal(t, b);
  return d < 0 ? -d : d;
}

double pf_from_ordinal(pf_dtype t, int64_t o) {
  int bits = pf_format_of(t).bits;
  uint32_t sign = 1u << (bits - 1);
  uint32_t b = o < 0 ? (sign | (uint32_t)(-o)) : (uint32_t)o;
  return pf_decode(t, b);
}

double pf_next_up(pf_dtype t, double x) {
  if (isnan(x) || (isinf(x) && x > 0)) return x;
  return pf_from_ordinal(t, pf_ordinal(t, x) + 1);
}

double pf_next_down(pf_dtype t, double x) {
  if (isnan(x) || (isinf(x) && x < 0)) return x;
  return pf_from_ordinal(t, pf_ordinal(t, x) - 1);
}
