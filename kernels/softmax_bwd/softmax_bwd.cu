// Softmax backward on the GPU in native types: x, dy and dx in the storage dtype (float, __half,
// __nv_bfloat16), the arithmetic in the accumulation dtype (float, or the storage dtype with
// the device's own half and bfloat16 operations, __hadd and friends, each correctly rounded).
// One block of 256 threads per row, as PyTorch's cunn_SoftMaxBackward: the forward (safe
// softmax: max, sum of exp(x - max), quotient) and the backward S = sum dy y, dx = y (dy - S),
// the sums as a tree over the block (an order the contract's bound allows: it holds for any).
// stored rounds y to the storage dtype between the two, recompute keeps it in the accumulation
// dtype. exp is binary32 expf rounded to the accumulation dtype, as the emulation's. Events: a
// result that is inf from finite operands (overflow) or NaN from non-NaN ones (invalid); an
// underflow inside the kernel is not seen.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "harness/cuda_check.h"
#include "harness/cuda_module.h"
#include "kernels/softmax_bwd/softmax_bwd_cuda.h"
#include "kernels/softmax_bwd/softmax_bwd_math.h"

#define PF_SBW_THREADS 256

// the storage types' conversions
__device__ __forceinline__ float sbw_f(float x) { return x; }
__device__ __forceinline__ float sbw_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float sbw_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T sbw_to(float x);
template <> __device__ __forceinline__ float sbw_to<float>(float x) { return x; }
template <> __device__ __forceinline__ __half sbw_to<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 sbw_to<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// the accumulation type's operations (float's are IEEE binary32: --fmad=false keeps them apart)
__device__ __forceinline__ float sbw_add(float a, float b) { return a + b; }
__device__ __forceinline__ float sbw_sub(float a, float b) { return a - b; }
__device__ __forceinline__ float sbw_mul(float a, float b) { return a * b; }
__device__ __forceinline__ float sbw_div(float a, float b) { return a / b; }
__device__ __forceinline__ __half sbw_add(__half a, __half b) { return __hadd(a, b); }
__device__ __forceinline__ __half sbw_sub(__half a, __half b) { return __hsub(a, b); }
__device__ __forceinline__ __half sbw_mul(__half a, __half b) { return __hmul(a, b); }
__device__ __forceinline__ __half sbw_div(__half a, __half b) { return __hdiv(a, b); }
__device__ __forceinline__ __nv_bfloat16 sbw_add(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
__device__ __forceinline__ __nv_bfloat16 sbw_sub(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
__device__ __forceinline__ __nv_bfloat16 sbw_mul(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
__device__ __forceinline__ __nv_bfloat16 sbw_div(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }

// an event of r computed from a and b (as floats)
__device__ __forceinline__ void sbw_ev(float r, float a, float b, unsigned *fe) {
  if (isinf(r) && isfinite(a) && isfinite(b)) *fe |= PF_FE_OVERFLOW;
  else if (isnan(r) && !isnan(a) && !isnan(b)) *fe |= PF_FE_INVALID;
}
template <typename A> __device__ __forceinline__ A sbw_add_ev(A a, A b, unsigned *fe) {
  const A r = sbw_add(a, b);
  sbw_ev(sbw_f(r), sbw_f(a), sbw_f(b), fe);
  return r;
}
template <typename A> __device__ __forceinline__ A sbw_mul_ev(A a, A b, unsigned *fe) {
  const A r = sbw_mul(a, b);
  sbw_ev(sbw_f(r), sbw_f(a), sbw_f(b), fe);
  return r;
}

// the block's maximum or sum of v (every thread gets it): shuffles within each warp, then the
// warps' results through shared memory
template <typename A, int MAX> __device__ A sbw_reduce(A v, A *shared, unsigned *fe) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  for (int o = 16; o > 0; o /= 2) {
    const A w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? (sbw_f(w) > sbw_f(v) ? w : v) : sbw_add_ev(v, w, fe);
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? shared[lane] : (MAX ? sbw_to<A>(-INFINITY) : sbw_to<A>(0.0f));
    for (int o = 16; o > 0; o /= 2) {
      const A w = __shfl_xor_sync(0xffffffffu, v, o);
      v = MAX ? (sbw_f(w) > sbw_f(v) ? w : v) : sbw_add_ev(v, w, fe);
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

// y_j of the forward: exp(x_j - m) / z in A, rounded to T when stored
template <typename T, typename A> __device__ __forceinline__ A pf_sbw_y(T x, A m, A z, int stored, unsigned *fe) {
  const A d = sbw_sub(sbw_to<A>(sbw_f(x)), m);
  const A e = sbw_to<A>(expf(sbw_f(d)));
  const A y = sbw_div(e, z);
  sbw_ev(sbw_f(y), sbw_f(e), sbw_f(z), fe);
  return stored ? sbw_to<A>(sbw_f(sbw_to<T>(sbw_f(y)))) : y;
}

template <typename T, typename A>
__global__ void pf_sbw_rows(const T *x, const T *dy, T *dx, size_t cols, int stored, int faults, unsigned *fe_out) {
  __shared__ A shared[PF_SBW_THREADS / 32];
  const T *xr = x + blockIdx.x * cols, *gr = dy + blockIdx.x * cols;
  T *out = dx + blockIdx.x * cols;
  unsigned fe = 0;
  A m = sbw_to<A>(-INFINITY);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const A v = sbw_to<A>(sbw_f(xr[j]));
    m = sbw_f(v) > sbw_f(m) ? v : m;
  }
  m = sbw_reduce<A, 1>(m, shared, &fe);
  A z = sbw_to<A>(0.0f);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
    z = sbw_add_ev(z, sbw_to<A>(expf(sbw_f(sbw_sub(sbw_to<A>(sbw_f(xr[j])), m)))), &fe);
  z = sbw_reduce<A, 0>(z, shared, &fe);
  A S;
  if (faults & PF_SOFTMAX_BWD_F_SUM_IN_STORAGE) {
    // the planted fault: the sum in the storage dtype, in column order (one thread)
    float s = 0;
    if (threadIdx.x == 0)
      for (size_t j = 0; j < cols; j++) {
        const float p = sbw_f(sbw_to<T>(sbw_f(sbw_mul(sbw_to<A>(sbw_f(gr[j])), pf_sbw_y(xr[j], m, z, stored, &fe)))));
        s = sbw_f(sbw_to<T>(s + p));
      }
    if (threadIdx.x == 0) shared[0] = sbw_to<A>(s);
    __syncthreads();
    S = shared[0];
    __syncthreads();
  } else {
    A s = sbw_to<A>(0.0f);
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
      s = sbw_add_ev(s, sbw_mul_ev(sbw_to<A>(sbw_f(gr[j])), pf_sbw_y(xr[j], m, z, stored, &fe), &fe), &fe);
    S = sbw_reduce<A, 0>(s, shared, &fe);
  }
  if (faults & PF_SOFTMAX_BWD_F_NO_SUM) S = sbw_to<A>(0.0f);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const A g = sbw_to<A>(sbw_f(gr[j])), d = sbw_sub(g, S);
    sbw_ev(sbw_f(d), sbw_f(g), sbw_f(S), &fe);
    const float r = sbw_f(sbw_mul_ev(pf_sbw_y(xr[j], m, z, stored, &fe), d, &fe));
    const T o = sbw_to<T>(r);
    if (isinf(sbw_f(o)) && isfinite(r)) fe |= PF_FE_OVERFLOW;
    out[j] = o;
  }
  if (fe) atomicOr(fe_out, fe);
}

template <typename T> __global__ void pf_sbw_narrow(const double *x, T *y, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = sbw_to<T>((float)x[i]); /* x holds values of T: exact */
}
template <typename T> __global__ void pf_sbw_widen(const T *y, double *x, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = sbw_f(y[i]);
}

template <typename T, typename A>
static pf_status pf_sbw_run(const pf_softmax_bwd_launch *L, const double *x, const double *dy, double *dx, unsigned *fe) {
  const size_t n = L->rows * L->cols;
  const unsigned blocks = (unsigned)((n + 255) / 256);
  double *d64 = NULL;
  T *dxs = NULL, *dys = NULL, *dout = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  if (L->rows > 0x7fffffffu) return pf_error(PF_ERR_ARG, "softmax_bwd on CUDA: at most 2^31 - 1 rows (one block each)");
  PF_CUDA_TRY(cudaMalloc(&d64, (n ? n : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dxs, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dys, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dout, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  pf_sbw_narrow<T><<<blocks, 256>>>(d64, dxs, n);
  PF_CUDA_TRY(cudaMemcpy(d64, dy, n * sizeof(double), cudaMemcpyHostToDevice));
  pf_sbw_narrow<T><<<blocks, 256>>>(d64, dys, n);
  if (L->rows) pf_sbw_rows<T, A><<<(unsigned)L->rows, PF_SBW_THREADS>>>(dxs, dys, dout, L->cols, L->stored, L->faults, dfe);
  pf_sbw_widen<T><<<blocks, 256>>>(dout, d64, n);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(dx, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(dxs);
  cudaFree(dys);
  cudaFree(dout);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_softmax_bwd_cuda(const pf_softmax_bwd_launch *L, const double *x, const double *dy, double *dx,
                                         unsigned *fe) {
  const int storage_acc = L->acc == L->t && L->t != PF_FP32;
  switch (L->t) {
  case PF_FP32: return pf_sbw_run<float, float>(L, x, dy, dx, fe);
  case PF_FP16: return storage_acc ? pf_sbw_run<__half, __half>(L, x, dy, dx, fe) : pf_sbw_run<__half, float>(L, x, dy, dx, fe);
  case PF_BF16:
    return storage_acc ? pf_sbw_run<__nv_bfloat16, __nv_bfloat16>(L, x, dy, dx, fe)
                       : pf_sbw_run<__nv_bfloat16, float>(L, x, dy, dx, fe);
  default: return pf_error(PF_ERR_ARG, "softmax_bwd on CUDA: no native type for dtype %d", (int)L->t);
  }
}

// the module's entry point for the host side (kernels/softmax_bwd/softmax_bwd_cpu.c)
PF_CUDA_ENTRY(pf_softmax_bwd_cuda)
