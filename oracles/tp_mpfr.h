/* The tp_diff oracle (tp_mpfr.c): the sets of legitimate TP=1 and TP=2 step results; its operation's pf_op.oracle. */
#ifndef PF_ORACLE_TP_MPFR_H
#define PF_ORACLE_TP_MPFR_H

#include "core/case.h"
#include "core/tensor.h"
#include "core/oracle.h"

pf_status pf_tp_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
