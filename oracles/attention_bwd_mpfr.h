/* The attention backward oracle (kernels/attention_bwd): exact dQ, dK, dV (and dP, dS). */
#ifndef PF_ATTENTION_BWD_MPFR_H
#define PF_ATTENTION_BWD_MPFR_H

#include "core/kernel.h"

pf_status pf_attention_bwd_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                                pf_oracle_result *out);

#endif
