/* LayerNorm backward's case-to-launch translation and whole-case computation
 * (layernorm_bwd_cpu.c), for the tests. */
#ifndef PF_LAYERNORM_BWD_H
#define PF_LAYERNORM_BWD_H

#include <stdint.h>

#include "core/case.h"
#include "core/kernel.h"
#include "core/tensor.h"
#include "kernels/layernorm_bwd/layernorm_bwd_math.h"

/* What a case computes with (faults: PF_LNB_F_* bits, 0 for the contract's computation). */
pf_lnb_launch pf_lnb_launch_of(const pf_case *c, int faults);

/* Every output of the case (x, dy, gamma in in[0..2]) into out, in the layout of
 * layernorm_bwd_spec.h, each rounded to its dtype; where e is not NULL, each one's running bound
 * before that rounding. PF_ERR_NOMEM when its working rows cannot be had. */
pf_status pf_lnb_compute(const pf_lnb_launch *L, const pf_tensor *in, double *out, double *e, unsigned *fe);

/* The contract's side shared with RMSNorm's backward: f(c, in, v, e) computes every output's
 * value and running bound (no faults); pf_norm_bwd_bound turns the bounds into the no outputs'
 * pf_bound, pf_norm_bwd_in_domain checks the inputs finite and every bound finite and inside its
 * dtype (dx the storage dtype, the rest weights), naming the outputs outs (dx first, then the
 * per-column ones). */
typedef pf_status (*pf_norm_bwd_values)(const pf_case *c, const pf_tensor *in, double *v, double *e);
void pf_norm_bwd_bound(const pf_case *c, const pf_tensor *in, pf_bound *out, size_t no, pf_norm_bwd_values f);
int pf_norm_bwd_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len, size_t no, pf_dtype weights,
                          const char *const *outs, pf_norm_bwd_values f);

/* A LayerNorm or RMSNorm backward case (op: "layernorm_bwd" or "rmsnorm_bwd": x, dy and gamma,
 * eps, weights, zero_centered_gamma, blocks) from a fuzz driver's bytes (layernorm_bwd_fuzzer.c's
 * layout); 0 when there are too few. */
int pf_decode_norm_bwd(const char *op, const uint8_t *data, size_t size, pf_case *out);

#endif
