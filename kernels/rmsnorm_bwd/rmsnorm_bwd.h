/* RMSNorm backward's case-to-launch translation and whole-case computation (rmsnorm_bwd_cpu.c),
 * for the tests. */
#ifndef PF_RMSNORM_BWD_H
#define PF_RMSNORM_BWD_H

#include "core/case.h"
#include "core/tensor.h"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd_math.h"

/* What a case computes with (faults: PF_RMSB_F_* bits, 0 for the contract's computation). */
pf_rmsb_launch pf_rmsb_launch_of(const pf_case *c, int faults);

/* Every output of the case (x, dy, gamma in in[0..2]) into out, in the layout of
 * rmsnorm_bwd_spec.h, each rounded to its dtype; where e is not NULL, each one's running bound
 * before that rounding. PF_ERR_NOMEM when its working rows cannot be had. */
pf_status pf_rmsb_compute(const pf_rmsb_launch *L, const pf_tensor *in, double *out, double *e, unsigned *fe);

#endif
