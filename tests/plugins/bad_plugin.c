/* Libraries that --kernels must refuse with one line (tests/plugin.sh), one per PF_BAD_*:
 * no pf_plugin_init, an init that registers nothing, a kernel of another ABI, an init that fails,
 * and tables with one field wrong (PF_BAD_TABLE_*: a copy of softmax/safe and its op, broken;
 * 12-15 its parameter ranges). */
#include "core/case.h"
#include "core/kernel.h"

#if defined(PF_BAD_NO_INIT)
int pf_plugin_something_else(void) { return 0; }
#elif defined(PF_BAD_EMPTY)
pf_status pf_plugin_init(void) { return PF_OK; }
#elif defined(PF_BAD_ABI)
static pf_kernel k;
pf_status pf_plugin_init(void) {
  k = *pf_kernel_find("softmax", "safe");
  k.abi = 99;
  k.variant = "other-abi";
  return pf_kernel_register(&k);
}
#elif defined(PF_BAD_STACK)
/* not bad: a kernel, its variant and summary registered from the init's stack frame (the
 * registry copies them; only the op must live on) */
#include <stdio.h>
pf_status pf_plugin_init(void) {
  pf_kernel k = *pf_kernel_find("softmax", "safe");
  char variant[16], summary[64];
  snprintf(variant, sizeof variant, "from-stack");
  snprintf(summary, sizeof summary, "softmax/safe registered from a stack frame");
  k.variant = variant, k.summary = summary, k.like = "safe";
  return pf_kernel_register(&k);
}
#elif defined(PF_BAD_RUN_FAILS)
/* a kernel whose run_cpu fails on every case without a message: each case's verdict is
 * "failed", the run goes on */
static pf_kernel k;
static pf_status fails(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  (void)c, (void)in, (void)out, (void)fe;
  return PF_ERR_ARG;
}
pf_status pf_plugin_init(void) {
  k = *pf_kernel_find("softmax", "safe");
  k.variant = "run-fails";
  k.like = "safe";
  k.run_cpu = fails;
  return pf_kernel_register(&k);
}
#elif defined(PF_BAD_NARROW)
/* not bad: variants that narrow their operation's parameters, with defaults of their own, and
 * a user's check after its like's. softmax/narrow: safe's contract, alpha 1/8 only (the
 * operation's default is 1), any mask, causal by default (the operation's is none). attention/
 * small-d: post-scale's contract (whose check refuses layer != 1), head_dim 8 at most (its
 * own check). */
#include <stdio.h>
static pf_kernel sm, at;
static const pf_param_range sm_params[] = {{"alpha", 0.125, 0.125, 0, 0.125}, {"mask", 0, 0, 7, 1}, {NULL, 0, 0, 0, 0}};
static pf_status small_d(const pf_case *c) {
  if (c->shape[4] > 8) return pf_error(PF_ERR_UNSUPPORTED, "attention/small-d takes head_dim 8 at most, not %zu", c->shape[4]);
  return PF_OK;
}
pf_status pf_plugin_init(void) {
  pf_status st = pf_kernel_like(&sm, "softmax", "safe");
  if (st) return st;
  sm.variant = "narrow", sm.summary = "softmax/safe at alpha 1/8 under a causal mask";
  sm.run_cpu = pf_kernel_find("softmax", "safe")->run_cpu;
  sm.params = sm_params;
  if ((st = pf_kernel_register(&sm))) return st;
  if ((st = pf_kernel_like(&at, "attention", "post-scale"))) return st;
  at.variant = "small-d", at.summary = "attention/post-scale for head_dim <= 8";
  at.run_cpu = pf_kernel_find("attention", "post-scale")->run_cpu;
  at.check = small_d; /* post-scale's check still applies */
  return pf_kernel_register(&at);
}
#elif defined(PF_BAD_TABLE)
static pf_kernel k;
static pf_op op;
pf_status pf_plugin_init(void) {
  k = *pf_kernel_find("softmax", "safe");
  op = *k.op;
  op.name = "softmax-copy";
  k.op = &op;
  k.variant = "broken";
  switch (PF_BAD_TABLE) {
  case 1: op.summary = NULL; break;
  case 2: op.ndims = 99; break;
  case 3: op.oracle = NULL; break;
  case 4: op.name = NULL; break;
  case 5: k.variant = "../escape"; break;
  case 6: k.variant = ""; break;
  case 7: op.name = "softmax"; break; /* a second op of that name, with another table */
  case 8: k.dtypes = 0; break;
  case 9: op.input_count = NULL; break;
  case 10: k.variant = "v23456789012345678901234567890123456789012345678"; break; /* 48: a case holds 47 */
  case 11: op.name = "softmax", k.op = pf_kernel_find("softmax", "safe")->op, k.like = "nonexistent"; break;
  case 12: { /* parameter ranges: a name the operation does not have */
    static const pf_param_range r[] = {{"beta", 0, 1, 0, 0}, {NULL, 0, 0, 0, 0}};
    k.params = r;
    break;
  }
  case 13: { /* a default outside the range */
    static const pf_param_range r[] = {{"alpha", 0.5, 2, 0, 4}, {NULL, 0, 0, 0, 0}};
    k.params = r;
    break;
  }
  case 14: { /* a choice the parameter does not have (mask has 3) */
    static const pf_param_range r[] = {{"mask", 0, 0, 8, 3}, {NULL, 0, 0, 0, 0}};
    k.params = r;
    break;
  }
  case 15: { /* beyond the operation's range (alpha in [0, 2^64]) */
    static const pf_param_range r[] = {{"alpha", 1, 1e300, 0, 1}, {NULL, 0, 0, 0, 0}};
    k.params = r;
    break;
  }
  }
  return pf_kernel_register(&k);
}
#else
pf_status pf_plugin_init(void) { return pf_error(PF_ERR_ARG, "this library refuses to register"); }
#endif
