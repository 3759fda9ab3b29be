/* Attention's case-to-launch translation (attention_cpu.c), for attention.cu and the tests. */
#ifndef PF_ATTENTION_H
#define PF_ATTENTION_H

#include "core/case.h"
#include "kernels/attention/attention_math.h"

pf_attn_launch pf_attention_launch_of(const pf_case *c, unsigned *fe);

#endif
