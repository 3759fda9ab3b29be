/* What a case of the attention family means, for its emulation (attention_math.h) and its
 * oracle alike: the variants' algorithm numbers (pf_kernel.algo). */
#ifndef PF_ATTENTION_SPEC_H
#define PF_ATTENTION_SPEC_H

enum { PF_ATTN_POST_SCALE = 0, PF_ATTN_INWARD = 1, PF_ATTN_LAYER_SCALED = 2, PF_ATTN_FLASH = 3 };

#endif
