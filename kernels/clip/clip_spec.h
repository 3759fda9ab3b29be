/* What a case of the gradient-clipping family means, for its emulation (clip_math.h) and its
 * oracle alike: the variants' algorithm numbers (pf_kernel.algo). */
#ifndef PF_CLIP_SPEC_H
#define PF_CLIP_SPEC_H

enum { PF_CLIP_MEGATRON = 0, PF_CLIP_TORCH = 1, PF_CLIP_INF = 2 };

#endif
