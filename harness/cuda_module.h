/* The CUDA kernels as a module (precfuzz-cuda.so: the kernels' .cu files and harness/cuda_device.cu),
 * loaded when a run first uses the CUDA backend (cuda_module.c), so that runs on the CPU do not
 * load the CUDA libraries. The module hands the executable this table; the executable hands the
 * module pf_error and pf_adam_chunks (it exports its symbols). */
#ifndef PF_CUDA_MODULE_H
#define PF_CUDA_MODULE_H

#include <stddef.h>

#include "harness/status.h"
#include "kernels/adam/adam_cuda.h"
#include "kernels/attention/attention_cuda.h"
#include "kernels/clip/clip_cuda.h"
#include "kernels/loss_scale/loss_scale_cuda.h"
#include "kernels/softmax/softmax_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever an entry's signature or the launch structures change: a module from another
 * build is refused, not called. */
#define PF_CUDA_MODULE_ABI 1

typedef struct {
  int abi;
  pf_status (*describe)(char *buf, size_t len);
  pf_status (*softmax_fwd)(const pf_softmax_launch *L, const double *x, double *y, unsigned *fe);
  pf_status (*attention)(const pf_attn_launch *L, const double *q, const double *k, const double *v, double *out,
                         unsigned *fe);
  pf_status (*adam_step)(int variant, int mode, pf_dtype pt, pf_dtype st, const pf_adam_hyper *h,
                         const pf_adam_tensor *tensors, size_t ntensors, unsigned *fe);
  pf_status (*clip)(const pf_clip_launch *L, const double *g, double *out, unsigned *fe);
  pf_status (*loss_scale)(const pf_ls_launch *L, const double *g, double *out, unsigned *fe);
} pf_cuda_module;

/* The module's one exported symbol. */
const pf_cuda_module *pf_cuda_module_get(void);

#ifdef __cplusplus
}
#endif
#endif
