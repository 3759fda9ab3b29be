/* CUDA softmax (softmax.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_SOFTMAX_CUDA_H
#define PF_SOFTMAX_CUDA_H

#include <stddef.h>

#include "core/dtype_math.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What softmax.cu receives for a case: the values the CPU loop uses (pf_softmax_launch_of in
 * softmax_cpu.c makes it; algo, mask and maskval as in softmax_math.h). */
typedef struct {
  size_t rows, cols;
  int algo, no_max, mask;
  pf_dtype acc, out_t;
  double alpha_acc; /* alpha rounded to acc */
  double maskval;   /* what a masked position holds, in the storage dtype */
} pf_softmax_launch;

/* x: rows*cols values of the storage dtype; y: outputs; fe: events ORed over all rows. */
pf_status pf_softmax_fwd_cuda(const pf_softmax_launch *L, const double *x, double *y, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
