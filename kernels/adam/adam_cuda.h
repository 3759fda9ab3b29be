/* CUDA Adam step (adam.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_ADAM_CUDA_H
#define PF_ADAM_CUDA_H

#include <stddef.h>

#include "harness/status.h"
#include "kernels/adam/adam_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One step over n elements, one thread each: p, m, v updated in place (values of their dtypes). */
pf_status pf_adam_step_cuda(int variant, int mode, pf_dtype pt, pf_dtype st, const pf_adam_hyper *h, double *p,
                            const double *g, double *m, double *v, size_t n, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
