#include "verdict.h"

#include <string.h>

static const char *const pf_verdict_names[PF_NVERDICTS] = {
    "ok", "range", "inaccurate", "underflow", "overflow", "nan", "divergent", "failed"};

const char *pf_verdict_name(pf_verdict v) {
  return (unsigned)v < PF_NVERDICTS ? pf_verdict_names[v] : "?";
}

pf_status pf_verdict_parse(const char *s, pf_verdict *out) {
  for (int i = 0; i < PF_NVERDICTS; i++)
    if (s && strcmp(s, pf_verdict_names[i]) == 0) { *out = (pf_verdict)i; return PF_OK; }
  return PF_ERR_UNKNOWN;
}

int pf_verdict_is_finding(pf_verdict v) { return v != PF_V_OK && v != PF_V_RANGE; }
