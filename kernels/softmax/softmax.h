/* Softmax pieces other kernels build on (attention runs this softmax on its scores). */
#ifndef PF_SOFTMAX_H
#define PF_SOFTMAX_H

#include "core/kernel.h"
#include "kernels/softmax/softmax_cuda.h"
#include "kernels/softmax/softmax_math.h"

/* The rigorous bound (kernel.h, pf_bound) of softmax variant algo (PF_SOFTMAX_*) on row i of
 * a rows x cols score matrix whose row holds x: scores alpha * x, masked positions holding
 * maskval, computed in acc, output in out_t. */
pf_bound pf_softmax_bound_row(int algo, pf_dtype acc, pf_dtype out_t, double alpha, const double *x, size_t i,
                              size_t rows, size_t cols, int mask, double maskval);

/* What softmax.cu is launched with for case c (fe: the events of rounding alpha). */
pf_softmax_launch pf_softmax_launch_of(const pf_case *c, unsigned *fe);

#endif
