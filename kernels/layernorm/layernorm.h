/* LayerNorm's case-to-launch translation and row (layernorm_cpu.c), for the tests and the
 * backward family. */
#ifndef PF_LAYERNORM_H
#define PF_LAYERNORM_H

#include "core/case.h"
#include "kernels/layernorm/layernorm_math.h"

/* What a case computes with (faults: PF_LN_F_* bits, 0 for the contract's computation). */
pf_ln_launch pf_ln_launch_of(const pf_case *c, int faults);

/* One row of x (L->cols values) with gamma g and beta b: mean and rstd with their running
 * bounds; when y is not NULL, the outputs rounded to the storage dtype, and when ey is not NULL
 * each one's bound before that rounding. */
void pf_ln_row(const pf_ln_launch *L, const double *x, const double *g, const double *b, pf_ln_val *mean,
               pf_ln_val *rstd, double *y, double *ey, unsigned *fe);

#endif
