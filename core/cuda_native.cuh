// Native GPU arithmetic for the kernels that compute in the storage dtype's own types: the
// storage types' conversions (float, __half, __nv_bfloat16, each exact from a double holding
// one of its values), the accumulation types' operations (float's IEEE binary32 with
// --fmad=false; __half's and __nv_bfloat16's the device's own __hadd, __hsub, __hmul, __hdiv,
// each correctly rounded), exp and log as binary32 expf and logf rounded to the accumulation
// type (as the emulation's dtype_math.h takes them), and the events a result shows: inf from
// finite operands (overflow), NaN from non-NaN ones (invalid). An underflow is not seen.
#ifndef PF_CUDA_NATIVE_CUH
#define PF_CUDA_NATIVE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "core/dtype_math.h"

__device__ __forceinline__ float pf_nat_f(float x) { return x; }
__device__ __forceinline__ float pf_nat_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float pf_nat_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T pf_nat_to(float x);
template <> __device__ __forceinline__ float pf_nat_to<float>(float x) { return x; }
template <> __device__ __forceinline__ __half pf_nat_to<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 pf_nat_to<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
/* a double rounded once to T (a quotient computed in binary64: see its users) */
template <typename T> __device__ __forceinline__ T pf_nat_from_double(double x);
template <> __device__ __forceinline__ float pf_nat_from_double<float>(double x) { return (float)x; }
template <> __device__ __forceinline__ __half pf_nat_from_double<__half>(double x) { return __double2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 pf_nat_from_double<__nv_bfloat16>(double x) { return __double2bfloat16(x); }

__device__ __forceinline__ float pf_nat_add(float a, float b) { return a + b; }
__device__ __forceinline__ float pf_nat_sub(float a, float b) { return a - b; }
__device__ __forceinline__ float pf_nat_mul(float a, float b) { return a * b; }
__device__ __forceinline__ float pf_nat_div(float a, float b) { return a / b; }
__device__ __forceinline__ __half pf_nat_add(__half a, __half b) { return __hadd(a, b); }
__device__ __forceinline__ __half pf_nat_sub(__half a, __half b) { return __hsub(a, b); }
__device__ __forceinline__ __half pf_nat_mul(__half a, __half b) { return __hmul(a, b); }
__device__ __forceinline__ __half pf_nat_div(__half a, __half b) { return __hdiv(a, b); }
__device__ __forceinline__ __nv_bfloat16 pf_nat_add(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
__device__ __forceinline__ __nv_bfloat16 pf_nat_sub(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
__device__ __forceinline__ __nv_bfloat16 pf_nat_mul(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
__device__ __forceinline__ __nv_bfloat16 pf_nat_div(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }

__device__ __forceinline__ void pf_nat_ev(float r, float a, float b, unsigned *fe) {
  if (isinf(r) && isfinite(a) && isfinite(b)) *fe |= PF_FE_OVERFLOW;
  else if (isnan(r) && !isnan(a) && !isnan(b)) *fe |= PF_FE_INVALID;
}
#define PF_NAT_EV_OP(name)                                                                      \
  template <typename A> __device__ __forceinline__ A pf_nat_##name##_ev(A a, A b, unsigned *fe) { \
    const A r = pf_nat_##name(a, b);                                                            \
    pf_nat_ev(pf_nat_f(r), pf_nat_f(a), pf_nat_f(b), fe);                                       \
    return r;                                                                                   \
  }
PF_NAT_EV_OP(add)
PF_NAT_EV_OP(sub)
PF_NAT_EV_OP(mul)
PF_NAT_EV_OP(div)
#undef PF_NAT_EV_OP

template <typename A> __device__ __forceinline__ A pf_nat_exp(A d, unsigned *fe) {
  const float e = expf(pf_nat_f(d));
  if (isinf(e) && isfinite(pf_nat_f(d))) *fe |= PF_FE_OVERFLOW;
  return pf_nat_to<A>(e);
}
template <typename A> __device__ __forceinline__ A pf_nat_log(A z, unsigned *fe) {
  const float l = logf(pf_nat_f(z));
  if (isnan(l) && !isnan(pf_nat_f(z))) *fe |= PF_FE_INVALID;
  return pf_nat_to<A>(l);
}
template <typename A> __device__ __forceinline__ A pf_nat_max(A a, A b) { return pf_nat_f(b) > pf_nat_f(a) ? b : a; }

/* a double array holding values of T, to T and back */
template <typename T> __global__ void pf_nat_narrow(const double *x, T *y, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = pf_nat_to<T>((float)x[i]);
}
template <typename T> __global__ void pf_nat_widen(const T *y, double *x, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = pf_nat_f(y[i]);
}

#endif
