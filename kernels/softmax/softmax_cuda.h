/* CUDA softmax (softmax.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_SOFTMAX_CUDA_H
#define PF_SOFTMAX_CUDA_H

#include <stddef.h>

#include "harness/dtype_math.h"
#include "harness/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: rows*cols values of the storage dtype; y: outputs; fe: events ORed over all rows.
 * algo, mask, maskval as in softmax_math.h; alpha_acc already rounded to acc. */
pf_status pf_softmax_fwd_cuda(const double *x, double *y, size_t rows, size_t cols, int algo, int no_max,
                              pf_dtype acc, pf_dtype out_t, double alpha_acc, int mask, double maskval,
                              unsigned *fe);

/* "name, sm_XY" of device 0, or PF_ERR_NODEVICE with a clear message. */
pf_status pf_cuda_device_name(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
