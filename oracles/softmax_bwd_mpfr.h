/* The softmax backward oracle (softmax_bwd_mpfr.c): the exact gradient of the row softmax at x
 * applied to dy; its operation's pf_op.oracle. */
#ifndef PF_ORACLE_SOFTMAX_BWD_MPFR_H
#define PF_ORACLE_SOFTMAX_BWD_MPFR_H

#include "core/case.h"
#include "core/tensor.h"
#include "core/oracle.h"

pf_status pf_softmax_bwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
