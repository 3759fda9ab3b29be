/* The cross-entropy oracle (kernels/cross_entropy): exact losses, reduced loss and gradient. */
#ifndef PF_CROSS_ENTROPY_MPFR_H
#define PF_CROSS_ENTROPY_MPFR_H

#include "core/kernel.h"

pf_status pf_cross_entropy_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                                pf_oracle_result *out);

#endif
