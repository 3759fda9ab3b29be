/* Running error bounds: a value paired with a bound on how far a kernel's computed value can
 * be from it. Each operation propagates the operands' bounds (exactly, not to first order)
 * and adds the rounding of the dtype it is done in: u |z| for a normal result, half a
 * subnormal step otherwise. The value itself is the exact quantity evaluated in binary64;
 * the slack added at the end covers that evaluation (pf_eb_bound). Used to state a kernel's
 * contract from its sequence of operations (an optimizer step, a norm). */
#ifndef PF_ERRBOUND_H
#define PF_ERRBOUND_H

#include <math.h>

#include "dtype.h"
#include "core/kernel.h"

typedef struct {
  double v; /* the exact quantity (binary64) */
  double e; /* |computed - exact| <= e */
} pf_eb;

/* The rounding of a result of magnitude up to z into t; infinite where it could overflow
 * (the bound, and with it the contract's domain, ends there). */
static inline double pf_eb_round_err(pf_dtype t, double z) {
  if (!(fabs(z) < pf_max_finite(t) * (1 - pf_unit_roundoff(t)))) return INFINITY;
  return pf_unit_roundoff(t) * fabs(z) + pf_min_subnormal(t) / 2;
}

/* An input known exactly, or a constant the kernel holds rounded to t. */
static inline pf_eb pf_eb_exact(double x) { return (pf_eb){x, 0}; }
static inline pf_eb pf_eb_const(pf_dtype t, double x) { return (pf_eb){x, fabs(pf_round(t, x) - x)}; }

static inline pf_eb pf_eb_add(pf_dtype t, pf_eb a, pf_eb b) {
  const double z = a.v + b.v;
  return (pf_eb){z, a.e + b.e + pf_eb_round_err(t, fabs(z) + a.e + b.e)};
}
static inline pf_eb pf_eb_sub(pf_dtype t, pf_eb a, pf_eb b) {
  b.v = -b.v;
  return pf_eb_add(t, a, b);
}
static inline pf_eb pf_eb_mul(pf_dtype t, pf_eb a, pf_eb b) {
  const double z = a.v * b.v;
  const double e = fabs(a.v) * b.e + fabs(b.v) * a.e + a.e * b.e;
  return (pf_eb){z, e + pf_eb_round_err(t, fabs(z) + e)};
}
/* a b + c rounded once (a fused multiply-add) */
static inline pf_eb pf_eb_fma(pf_dtype t, pf_eb a, pf_eb b, pf_eb c) {
  const double z = a.v * b.v + c.v;
  const double e = fabs(a.v) * b.e + fabs(b.v) * a.e + a.e * b.e + c.e;
  return (pf_eb){z, e + pf_eb_round_err(t, fabs(z) + e)};
}
/* Division: unbounded (inf) when the divisor's bound reaches 0. */
static inline pf_eb pf_eb_div(pf_dtype t, pf_eb a, pf_eb b) {
  const double z = a.v / b.v;
  if (!(fabs(b.v) > b.e)) return (pf_eb){z, INFINITY};
  const double e = (a.e + fabs(z) * b.e) / (fabs(b.v) - b.e);
  return (pf_eb){z, e + pf_eb_round_err(t, fabs(z) + e)};
}
/* sqrt of a nonnegative quantity: |sqrt(x') - sqrt(x)| <= min(sqrt(e), e / sqrt(x)). */
static inline pf_eb pf_eb_sqrt(pf_dtype t, pf_eb a) {
  const double x = a.v > 0 ? a.v : 0, z = sqrt(x);
  double e = sqrt(a.e);
  if (x > 0 && a.e / z < e) e = a.e / z;
  return (pf_eb){z, e + pf_eb_round_err(t, z + e)};
}
/* exp of a quantity, computed as binary32 expf (within 2 ulps, CUDA's bound; glibc's is
 * tighter) and rounded to t: the operand's error moves exp by at most exp(v)(e^e - 1); expf
 * adds 2 ulps relative and, in binary32's subnormal range, 2 of its least subnormals; the
 * binary64 exp(v) standing for the exact one is within |v| 2^-52 + 2^-52 of it, relatively. */
#define PF_EB_EXPF_REL 0x1p-22
#define PF_EB_LOGF_REL 0x1p-22 /* binary32 logf: CUDA's 1 ulp, glibc's less; 2 ulps relative */
static inline pf_eb pf_eb_exp(pf_dtype t, pf_eb a) {
  const double z = exp(a.v);
  double e = z * expm1(a.e) + z * (fabs(a.v) + 1) * 0x1p-52;
  e += PF_EB_EXPF_REL * (z + e) + 0x1p-148;
  if (!(z + e < pf_max_finite(PF_FP32))) return (pf_eb){z, INFINITY};
  if (t != PF_FP32) e += pf_eb_round_err(t, z + e);
  return (pf_eb){z, e};
}
/* log of a positive quantity (its bound below its value), as binary32 logf rounded to t:
 * the operand's error moves log by at most -log1p(-e/v); logf adds 2 ulps relative. */
static inline pf_eb pf_eb_log(pf_dtype t, pf_eb a) {
  const double z = log(a.v);
  if (!(a.v > a.e)) return (pf_eb){z, INFINITY};
  double e = -log1p(-a.e / a.v) + fabs(z) * 0x1p-52;
  e += PF_EB_LOGF_REL * (fabs(z) + e) + 0x1p-149;
  if (t != PF_FP32) e += pf_eb_round_err(t, fabs(z) + e);
  return (pf_eb){z, e};
}
/* Rounding a value into t (a store). */
static inline pf_eb pf_eb_store(pf_dtype t, pf_eb a) {
  return (pf_eb){a.v, a.e + pf_eb_round_err(t, fabs(a.v) + a.e)};
}

/* The contract for an output whose last operation is the final rounding to the output
 * dtype: pass the bound before that rounding. Slack covers the binary64 evaluation. */
static inline pf_bound pf_eb_bound(pf_eb a) {
  if (!isfinite(a.e) || !isfinite(a.v)) return (pf_bound){INFINITY, INFINITY};
  return (pf_bound){0x1p-45, a.e * (1 + 0x1p-20) + 0x1p-1074};
}

#endif
