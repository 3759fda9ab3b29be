/* Backends (backend.h). The device probe itself is CUDA code (cuda_device.cu) in CUDA builds. */
#include "backend.h"

#include "dtype.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *pf_backend_name(int backend) { return backend == PF_BACKEND_CUDA ? "cuda" : "cpu"; }

pf_status pf_backend_parse(const char *s, int *out) {
  if (strcmp(s, "cpu") == 0) *out = PF_BACKEND_CPU;
  else if (strcmp(s, "cuda") == 0) *out = PF_BACKEND_CUDA;
  else return pf_error(PF_ERR_ARG, "--backend: '%s' is not cpu or cuda", s);
  return PF_OK;
}

const char *pf_cuda_missing_hint(void) {
#ifdef PF_HAVE_CUDA
  return " (precfuzz list shows which variants have one)";
#else
  return " in this build (no CUDA)";
#endif
}

void pf_backend_diff(int t, const unsigned char *dt, const double *a, const double *b, size_t n, size_t *equal,
                     int64_t *max_ulps) {
  *equal = 0;
  *max_ulps = 0;
  for (size_t i = 0; i < n; i++) {
    const int nan_a = a[i] != a[i], nan_b = b[i] != b[i];
    if ((nan_a && nan_b) || (!nan_a && !nan_b && a[i] == b[i] && signbit(a[i]) == signbit(b[i]))) {
      (*equal)++;
      continue;
    }
    const pf_dtype ti = dt && dt[i] < PF_NDTYPES ? (pf_dtype)dt[i] : (pf_dtype)t;
    const int64_t d = nan_a || nan_b ? INT64_MAX : pf_ulp_distance(ti, a[i], b[i]);
    if (d > *max_ulps) *max_ulps = d;
  }
}

#ifndef PF_HAVE_CUDA
pf_status pf_cuda_describe(char *buf, size_t len) {
  if (len) buf[0] = 0;
  return pf_error(PF_ERR_NODEVICE, "--backend cuda: this build has no CUDA (nvcc was not found when it was configured; "
                                   "see PF_ENABLE_CUDA)");
}
#endif
