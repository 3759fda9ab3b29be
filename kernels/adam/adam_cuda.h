/* Adam on the GPU (adam.cu), callable from C: one launch over a list of tensors, as apex's
 * multi_tensor_apply and PyTorch's fused _fused_adamw_ do. The chunk table is plain C
 * (adam_cpu.c) so that it is tested without a device; the launch needs PF_HAVE_CUDA. */
#ifndef PF_ADAM_CUDA_H
#define PF_ADAM_CUDA_H

#include <stddef.h>

#include "core/status.h"
#include "kernels/adam/adam_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor of the list: its parameter (the fp32 master, or the parameter in T), gradient
 * and state, n elements each; p, m and v are updated in place (values of their dtypes). */
typedef struct {
  double *p;
  const double *g;
  double *m, *v;
  size_t n;
} pf_adam_tensor;

/* Block b of the launch runs elements [start, start + count) of tensor `tensor`. */
typedef struct {
  size_t tensor, start, count;
} pf_adam_chunk;

/* apex's chunk size (2048 * 32 elements). */
enum { PF_ADAM_CHUNK = 65536 };

/* The launch's chunks: every tensor cut into pieces of at most `chunk` elements, in tensor
 * order, empty tensors taking none. Writes at most cap of them to out (out may be NULL with
 * cap 0) and returns how many there are. */
size_t pf_adam_chunks(const size_t *sizes, size_t ntensors, size_t chunk, pf_adam_chunk *out, size_t cap);

/* One step over every element of every tensor: one kernel launch, one copy each way. */
pf_status pf_adam_step_cuda(int variant, int mode, pf_dtype pt, pf_dtype st, const pf_adam_hyper *h,
                            const pf_adam_tensor *tensors, size_t ntensors, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
