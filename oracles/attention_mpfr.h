/* The attention oracle (attention_mpfr.c): exact attention (output, and the stored scores and probabilities); its operation's pf_op.oracle. */
#ifndef PF_ORACLE_ATTENTION_MPFR_H
#define PF_ORACLE_ATTENTION_MPFR_H

#include "core/case.h"
#include "core/tensor.h"
#include "core/oracle.h"

pf_status pf_attention_fwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
