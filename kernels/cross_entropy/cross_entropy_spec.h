/* What a case of the cross-entropy family means, for its emulation (cross_entropy_math.h) and
 * its oracle alike: the variants' algorithm numbers (pf_kernel.algo) and the choices of its
 * reduction parameter, in the order of its table (cross_entropy_cpu.c). */
#ifndef PF_CROSS_ENTROPY_SPEC_H
#define PF_CROSS_ENTROPY_SPEC_H

enum { PF_CE_LOGSOFTMAX = 0, PF_CE_FUSED = 1, PF_CE_CHUNKED = 2, PF_CE_LOGSOFTMAX_CPU = 3 };
enum { PF_CE_MEAN = 0, PF_CE_SUM = 1, PF_CE_NONE = 2 };

#endif
