/* Outputs made elsewhere (a framework's, a kernel process's, a GPU run's saved tensors) placed
 * into a case's output layout: what judge and the kernel processes share, below the runner. */
#ifndef PF_OUTPUTS_H
#define PF_OUTPUTS_H

#include <stddef.h>

#include "case.h"
#include "status.h"

struct pf_tensorfile;
/* Outputs made elsewhere (a framework's, a kernel process's) as named tensors -> the case's
 * output layout. Either one unnamed tensor (.npy) or a tensor per output stage, named by the
 * stage ("output" for an operation of one stage): one tensor of all the outputs, or of the
 * stage "output" only; stages not given are marked 0 in given (NULL: all must be given).
 * A stage's tensor must be of the stage's dtype (pf_stage_dtype), and with exact_shape 1 of its
 * shape (pf_stage_shape); with 0 either of its shape or flat (one dimension, or none, of as many
 * values: a 2x1 tensor for a 1x2 stage is a mistake, not a layout). PF_ERR_ARG with one line
 * naming the tensor otherwise. */
pf_status pf_outputs_from_tensors(const pf_case *c, const struct pf_tensorfile *ts, size_t nt, double *out, size_t nout,
                                  unsigned char *given, int exact_shape);

#endif
