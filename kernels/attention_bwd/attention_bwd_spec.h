/* What a case of the attention backward means, for its emulation (attention_bwd_math.h) and its
 * oracle alike: the variants' algorithm numbers (pf_kernel.algo). */
#ifndef PF_ATTENTION_BWD_SPEC_H
#define PF_ATTENTION_BWD_SPEC_H

enum { PF_ATTN_BWD_STANDARD = 0, PF_ATTN_BWD_FLASH = 1, PF_ATTN_BWD_FLASH_PDP = 2 };

#endif
