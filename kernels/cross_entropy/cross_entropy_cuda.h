/* Cross-entropy's fused and chunked variants on the GPU (cross_entropy.cu), callable from C.
 * Available when PF_HAVE_CUDA. */
#ifndef PF_CROSS_ENTROPY_CUDA_H
#define PF_CROSS_ENTROPY_CUDA_H

#include <stddef.h>

#include "core/dtype_math.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What cross_entropy.cu receives for a case (cross_entropy_cpu.c makes it): the scalars as the
 * emulation sets them up on the host, values of acc (eps, z: the parameters rounded to acc;
 * ceps = fl(eps / C); g = fl(1 / nc) for the mean, else 1; nc the rows the mean counts). */
typedef struct {
  size_t rows, cols, chunk; /* chunk: cols for fused */
  int faults, mean, reduce; /* PF_CE_F_*; the mean (else the sum); a reduced loss at all */
  pf_dtype t, acc;
  double eps, z, ceps, g, nc;
  size_t microbatches; /* the reduced loss: each micro-batch's sum (divided by nc for the mean), added */
} pf_ce_launch;

/* x: rows*cols logits (values of t); target: rows class indices, -1 for an ignored row; out:
 * the case's outputs (rows losses, the reduced loss when reduce, rows*cols dlogits). */
pf_status pf_cross_entropy_cuda(const pf_ce_launch *L, const double *x, const long *target, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
