/* The SwiGLU oracle (swiglu_mpfr.c): the exact y of every element; its operation's pf_op.oracle. */
#ifndef PF_ORACLE_SWIGLU_MPFR_H
#define PF_ORACLE_SWIGLU_MPFR_H

#include "core/case.h"
#include "core/oracle.h"
#include "core/tensor.h"

pf_status pf_swiglu_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
