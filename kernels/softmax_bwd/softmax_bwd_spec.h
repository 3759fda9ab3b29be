/* What a case of the softmax backward means, for its emulation (softmax_bwd_math.h) and its
 * oracle alike: the variants' algorithm numbers (pf_kernel.algo). */
#ifndef PF_SOFTMAX_BWD_SPEC_H
#define PF_SOFTMAX_BWD_SPEC_H

enum { PF_SOFTMAX_BWD_STORED = 0, PF_SOFTMAX_BWD_RECOMPUTE = 1 };

#endif
