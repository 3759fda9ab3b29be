/* The loss_scale oracle (loss_scale_ref.c): the loss scalers' reference runs on exact overflow tests; its operation's pf_op.oracle. */
#ifndef PF_ORACLE_LOSS_SCALE_REF_H
#define PF_ORACLE_LOSS_SCALE_REF_H

#include "core/case.h"
#include "core/tensor.h"
#include "core/oracle.h"

pf_status pf_loss_scale_ref(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

#endif
