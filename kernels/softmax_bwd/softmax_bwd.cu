// Softmax backward on the GPU in native types: x, dy and dx in the storage dtype (float, __half,
// __nv_bfloat16), the arithmetic in the accumulation dtype (float, or the storage dtype with
// the device's own half and bfloat16 operations, __hadd and friends, each correctly rounded).
// One block of 256 threads per row, as PyTorch's cunn_SoftMaxBackward: the forward (safe
// softmax: max, sum of exp(x - max), quotient) and the backward S = sum dy y, dx = y (dy - S),
// the sums as a tree over the block (an order the contract's bound allows: it holds for any).
// stored rounds y to the storage dtype between the two, recompute keeps it in the accumulation
// dtype. The arithmetic, exp and the events: core/cuda_native.cuh.
#include "core/cuda_check.h"
#include "core/cuda_native.cuh"
#include "core/cuda_module.h"
#include "kernels/softmax_bwd/softmax_bwd_cuda.h"
#include "kernels/softmax_bwd/softmax_bwd_math.h"

#define PF_SBW_THREADS 256

// the block's maximum or sum of v (every thread gets it): shuffles within each warp, then the
// warps' results through shared memory
template <typename A, int MAX> __device__ A pf_sbw_reduce(A v, A *shared, unsigned *fe) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  for (int o = 16; o > 0; o /= 2) {
    const A w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? (pf_nat_f(w) > pf_nat_f(v) ? w : v) : pf_nat_add_ev(v, w, fe);
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? shared[lane] : (MAX ? pf_nat_to<A>(-INFINITY) : pf_nat_to<A>(0.0f));
    for (int o = 16; o > 0; o /= 2) {
      const A w = __shfl_xor_sync(0xffffffffu, v, o);
      v = MAX ? (pf_nat_f(w) > pf_nat_f(v) ? w : v) : pf_nat_add_ev(v, w, fe);
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
  const A d = pf_nat_sub(pf_nat_to<A>(pf_nat_f(x)), m);
  const A e = pf_nat_exp(d, fe);
  const A y = pf_nat_div(e, z);
  pf_nat_ev(pf_nat_f(y), pf_nat_f(e), pf_nat_f(z), fe);
  return stored ? pf_nat_to<A>(pf_nat_f(pf_nat_to<T>(pf_nat_f(y)))) : y;
}

template <typename T, typename A>
__global__ void pf_sbw_rows(const T *x, const T *dy, T *dx, size_t cols, int stored, int faults, unsigned *fe_out) {
  __shared__ A shared[PF_SBW_THREADS / 32];
  const T *xr = x + blockIdx.x * cols, *gr = dy + blockIdx.x * cols;
  T *out = dx + blockIdx.x * cols;
  unsigned fe = 0;
  A m = pf_nat_to<A>(-INFINITY);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const A v = pf_nat_to<A>(pf_nat_f(xr[j]));
    m = pf_nat_f(v) > pf_nat_f(m) ? v : m;
  }
  m = pf_sbw_reduce<A, 1>(m, shared, &fe);
  A z = pf_nat_to<A>(0.0f);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
    z = pf_nat_add_ev(z, pf_nat_exp(pf_nat_sub(pf_nat_to<A>(pf_nat_f(xr[j])), m), &fe), &fe);
  z = pf_sbw_reduce<A, 0>(z, shared, &fe);
  A S;
  if (faults & PF_SOFTMAX_BWD_F_SUM_IN_STORAGE) {
    // the planted fault: the sum in the storage dtype, in column order (one thread)
    float s = 0;
    if (threadIdx.x == 0)
      for (size_t j = 0; j < cols; j++) {
        const float p = pf_nat_f(pf_nat_to<T>(pf_nat_f(pf_nat_mul(pf_nat_to<A>(pf_nat_f(gr[j])), pf_sbw_y(xr[j], m, z, stored, &fe)))));
        s = pf_nat_f(pf_nat_to<T>(s + p));
      }
    if (threadIdx.x == 0) shared[0] = pf_nat_to<A>(s);
    __syncthreads();
    S = shared[0];
    __syncthreads();
  } else {
    A s = pf_nat_to<A>(0.0f);
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
      s = pf_nat_add_ev(s, pf_nat_mul_ev(pf_nat_to<A>(pf_nat_f(gr[j])), pf_sbw_y(xr[j], m, z, stored, &fe), &fe), &fe);
    S = pf_sbw_reduce<A, 0>(s, shared, &fe);
  }
  if (faults & PF_SOFTMAX_BWD_F_NO_SUM) S = pf_nat_to<A>(0.0f);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const A g = pf_nat_to<A>(pf_nat_f(gr[j])), d = pf_nat_sub(g, S);
    pf_nat_ev(pf_nat_f(d), pf_nat_f(g), pf_nat_f(S), &fe);
    const float r = pf_nat_f(pf_nat_mul_ev(pf_sbw_y(xr[j], m, z, stored, &fe), d, &fe));
    const T o = pf_nat_to<T>(r);
    if (isinf(pf_nat_f(o)) && isfinite(r)) fe |= PF_FE_OVERFLOW;
    out[j] = o;
  }
  if (fe) atomicOr(fe_out, fe);
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
  pf_nat_narrow<T><<<blocks, 256>>>(d64, dxs, n);
  PF_CUDA_TRY(cudaMemcpy(d64, dy, n * sizeof(double), cudaMemcpyHostToDevice));
  pf_nat_narrow<T><<<blocks, 256>>>(d64, dys, n);
  if (L->rows) pf_sbw_rows<T, A><<<(unsigned)L->rows, PF_SBW_THREADS>>>(dxs, dys, dout, L->cols, L->stored, L->faults, dfe);
  pf_nat_widen<T><<<blocks, 256>>>(dout, d64, n);
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
