/* CUDA dynamic loss scaling (loss_scale.cu), callable from C. Available when PF_HAVE_CUDA. */
#ifndef PF_LOSS_SCALE_CUDA_H
#define PF_LOSS_SCALE_CUDA_H

#include "core/status.h"
#include "kernels/loss_scale/loss_scale_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* g: steps*n true gradients (fp32); out: loss_scale_cpu.c's layout (applied gradients, the
 * statuses, the scales); fe: events ORed over all steps. */
pf_status pf_loss_scale_cuda(const pf_ls_launch *L, const double *g, double *out, unsigned *fe);

#ifdef __cplusplus
}
#endif
#endif
