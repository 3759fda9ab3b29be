/* What a case of the GELU family means, for its emulation (gelu_math.h) and its oracle alike: the
 * variants' algorithm numbers (pf_kernel.algo) and the parameters' indices.
 *
 * Input x (rows x cols, elementwise), output y of the same shape and dtype:
 *   approximate none: y = x Phi(x) = (x / 2) (1 + erf(x / sqrt 2))
 *   approximate tanh: y = (x / 2) (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
 * each exactly as written, with real constants: the tanh form is a function of its own (what
 * F.gelu(approximate='tanh') promises), not an approximation the oracle would judge against erf. */
#ifndef PF_GELU_SPEC_H
#define PF_GELU_SPEC_H

#include "core/case.h"

enum { PF_GELU_TORCH = 0, PF_GELU_FUSED = 1 };
enum { PF_GELU_P_APPROXIMATE = 0, PF_GELU_NPARAMS = 1 };
enum { PF_GELU_ERF = 0, PF_GELU_TANH = 1 };
#define PF_GELU_KAPPA 0.044715 /* the tanh form's cubic coefficient, a decimal: exact only as a real */

#endif
