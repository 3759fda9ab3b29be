/* The clip oracle (clip_mpfr.c): the exact global norm and clipped gradients; its operation's pf_op.oracle. */
#ifndef PF_ORACLE_CLIP_MPFR_H
#define PF_ORACLE_CLIP_MPFR_H

#include "core/case.h"
#include "core/tensor.h"
#include "core/oracle.h"

pf_status pf_clip_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
