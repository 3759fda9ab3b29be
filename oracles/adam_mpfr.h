/* The adam oracle (adam_mpfr.c): one exact Adam step; its operation's pf_op.oracle. */
#ifndef PF_ORACLE_ADAM_MPFR_H
#define PF_ORACLE_ADAM_MPFR_H

#include "core/case.h"
#include "core/tensor.h"
#include "core/oracle.h"

pf_status pf_adam_step_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
