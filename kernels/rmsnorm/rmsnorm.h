/* RMSNorm's case-to-launch translation and row (rmsnorm_cpu.c), for the tests. */
#ifndef PF_RMSNORM_H
#define PF_RMSNORM_H

#include "core/case.h"
#include "kernels/rmsnorm/rmsnorm_math.h"

/* What a case computes with (faults: PF_RMS_F_* bits, 0 for the contract's computation). */
pf_rms_launch pf_rms_launch_of(const pf_case *c, int faults);

/* One row of x (L->cols values) with gamma g: rstd with its running bound; when y is not NULL,
 * the outputs rounded to the storage dtype, and when ey is not NULL each one's bound before that
 * rounding. work: 2 L->cols doubles. */
void pf_rms_row(const pf_rms_launch *L, const double *x, const double *g, pf_ln_val *rstd, double *y, double *ey,
                double *work, unsigned *fe);

#endif
