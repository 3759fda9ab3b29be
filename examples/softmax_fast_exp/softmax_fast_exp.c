/* A user's kernel as a shared object: softmax with a fast exp, as a fused kernel might write it
 * for speed: exp(d) = 2^(d log2 e), the power of two split into 2^k 2^f and 2^f taken from a
 * cubic polynomial (relative error up to 1.05e-4) instead of expf. It is registered as the
 * softmax variant "fast-exp" and judged by softmax's MPFR oracle under the contract of the
 * built-in "safe" variant, whose bound and domain it reuses.
 *
 *   precfuzz --kernels build/lib/softmax_fast_exp.so run -k softmax -v fast-exp -t fp32
 *
 * finds it inaccurate (a 1e-4 error is about 1700 fp32 ulps); in bf16 only where the exact
 * value lies within 1e-4 of a rounding midpoint. Build: examples/softmax_fast_exp/ is part of
 * the CMake build (a MODULE library); a kernel of your own needs only core/kernel.h and
 * core/dtype_math.h (header-only arithmetic in a dtype), and calls back into precfuzz for
 * pf_kernel_like, pf_kernel_register, pf_case_param and pf_error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype_math.h"
#include "core/case.h"
#include "core/kernel.h"

/* 2^f for f in [0, 1): 1 + f (a + f (b + f c)) with a + b + c = 1, so that 2^1 = 2 */
static double fast_exp2_frac(double f, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  double p = pf_round(F, 0.0782);
  p = pf_add(F, pf_round(F, 0.2264), pf_mul(F, f, p, fe), fe);
  p = pf_add(F, pf_round(F, 0.6954), pf_mul(F, f, p, fe), fe);
  return pf_add(F, 1.0, pf_mul(F, f, p, fe), fe);
}

/* exp(d) for d <= 0 (a shifted score) in fp32 */
static double fast_exp(double d, unsigned *fe) {
  if (d == -INFINITY) return 0;
  const double y = pf_mul(PF_FP32, d, pf_round(PF_FP32, 1.4426950408889634) /* log2 e */, fe);
  const double k = floor(y);
  const double f = y - k; /* exact: y and k are fp32 numbers of the same binade or k = y */
  if (k < -160) return 0;
  return pf_round_fe(PF_FP32, ldexp(fast_exp2_frac(f, fe), (int)k), fe);
}

/* rows x cols: max, shifted exps, their sum, one division per element, all in fp32 */
static pf_status fast_exp_softmax_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const pf_dtype F = PF_FP32;
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols;
    double *y = out + i * cols;
    double m = -INFINITY, sum = 0;
    for (size_t j = 0; j < cols; j++) m = x[j] > m ? x[j] : m;
    for (size_t j = 0; j < cols; j++) {
      y[j] = fast_exp(pf_sub(F, x[j], m, fe), fe);
      sum = pf_add(F, sum, y[j], fe);
    }
    for (size_t j = 0; j < cols; j++) y[j] = pf_round_fe(c->dtype, pf_div(F, y[j], sum, fe), fe);
  }
  return PF_OK;
}

/* what it takes of softmax's parameters: alpha 1 and no mask (it applies neither), each its
 * default; precfuzz refuses other cases (exit 2) and the fuzz drivers fit their inputs here */
static const pf_param_range fast_exp_params[] = {
    {"alpha", 1, 1, 0, 1}, {"mask", 0, 0, 1u << 0 /* none */, 0}, {NULL, 0, 0, 0, 0}};

static const char *const no_faults[] = {NULL};
static pf_kernel fast_exp_kernel;

pf_status pf_plugin_init(void) {
  /* safe's contract: its operation (oracle), algorithm, bound and domain */
  pf_status st = pf_kernel_like(&fast_exp_kernel, "softmax", "safe");
  if (st) return st;
  fast_exp_kernel.variant = "fast-exp";
  fast_exp_kernel.summary = "safe softmax with exp = 2^k times a cubic for 2^f (an example plugin)";
  fast_exp_kernel.accums = PF_DT(PF_FP32);
  fast_exp_kernel.faults = no_faults;
  fast_exp_kernel.run_cpu = fast_exp_softmax_cpu;
  fast_exp_kernel.params = fast_exp_params;
  return pf_kernel_register(&fast_exp_kernel);
}
