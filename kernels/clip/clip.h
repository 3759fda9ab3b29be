/* Gradient clipping's case-to-launch translation (clip_cpu.c), for clip.cu and the tests. */
#ifndef PF_CLIP_H
#define PF_CLIP_H

#include "core/case.h"
#include "kernels/clip/clip_math.h"

pf_clip_launch pf_clip_launch_of(const pf_case *c);

#endif
