/* What a case of the softmax family means, for its emulation (softmax_math.h) and its oracle
 * alike: the variants' algorithm numbers (pf_kernel.algo) and the choices of its mask and
 * mask_value parameters, in the order of their tables (softmax_cpu.c). */
#ifndef PF_SOFTMAX_SPEC_H
#define PF_SOFTMAX_SPEC_H

enum { PF_SOFTMAX_NAIVE = 0, PF_SOFTMAX_SAFE = 1, PF_SOFTMAX_ONLINE = 2 };
enum { PF_MASK_NONE = 0, PF_MASK_CAUSAL = 1, PF_MASK_CAUSAL_TOP_LEFT = 2 };
enum { PF_MASKVAL_NEG_INF = 0, PF_MASKVAL_NEG_10000 = 1, PF_MASKVAL_LOWEST = 2 };

#endif
