/* Shared by the contract-soundness tests: run a generated case and fail, with the finding
 * described, if the kernel breaks its contract inside the contract's domain. Returns whether
 * the case was in the domain; frees the case. */
#ifndef PF_CONTRACT_CHECK_H
#define PF_CONTRACT_CHECK_H

#include "core/runner.h"

static int pf_check_contract(pf_case *c, const char *label) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  if (pf_run_case(c, &o, &r)) fail_msg("%s: run failed: %s", label, pf_error_message());
  const int in = r.in_domain;
  if (in && pf_verdict_is_finding(r.cmp.verdict)) {
    char d[512];
    pf_run_describe(c, &r, d, sizeof d);
    fail_msg("%s %s/%s %s/%s: %s", label, c->kernel, c->variant, pf_dtype_name(c->dtype), pf_dtype_name(c->accum), d);
  }
  pf_run_free(&r);
  pf_case_free(c);
  return in;
}

#endif
