/* What a case of the SwiGLU family means, for its emulation (swiglu_math.h) and its oracle alike:
 * the variants' algorithm numbers (pf_kernel.algo).
 *
 * Inputs a (the gate projection) and b (the up projection), rows x cols each; output
 *   y = silu(a) b = a b / (1 + e^(-a)),
 * the gated unit of Llama's and Megatron's MLP (Shazeer 2020): y is 0 exactly where a or b is. */
#ifndef PF_SWIGLU_SPEC_H
#define PF_SWIGLU_SPEC_H

#include "core/case.h"

enum { PF_SWIGLU_TORCH = 0, PF_SWIGLU_FUSED = 1 };
enum { PF_SWIGLU_IN_A = 0, PF_SWIGLU_IN_B = 1 };

#endif
