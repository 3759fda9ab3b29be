/* Loss scaling's case-to-launch translation (loss_scale_cpu.c), for loss_scale.cu and the tests. */
#ifndef PF_LOSS_SCALE_H
#define PF_LOSS_SCALE_H

#include "core/case.h"
#include "kernels/loss_scale/loss_scale_math.h"

pf_ls_launch pf_loss_scale_launch_of(const pf_case *c);

#endif
