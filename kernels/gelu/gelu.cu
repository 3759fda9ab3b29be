// GELU on the GPU in native types, as PyTorch's CUDA kernel computes it (opmath float): x and y
// as float, __half or __nv_bfloat16, erff or tanhf of fp32 (CUDA's, within 2 ulps: the contract's
// U = 2), the products and sums in binary32 rounded one by one, y rounded once to the storage
// type. One thread per element. fused only: ATen's CPU kernel (torch) has no CUDA side here.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/gelu/gelu_cuda.h"

template <typename T> __global__ void pf_geluc_apply(pf_gelu_launch L, const T *x, T *y, unsigned *fe_out) {
  const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= L.n) return;
  const float v = pf_nat_f(x[e]);
  float r;
  if (L.approximate == PF_GELU_TANH || (L.faults & PF_GELU_F_TANH_FOR_ERF)) {
    const float beta = (float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5), kappa = (float)PF_GELU_KAPPA;
    const float cube = __fmul_rn(__fmul_rn(v, v), v), inner = __fmul_rn(beta, __fadd_rn(v, __fmul_rn(kappa, cube)));
    r = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
  } else if (L.faults & PF_GELU_F_ERF_IN_STORAGE) {
    const T a = pf_nat_to<T>(__fmul_rn(v, (float)0.70710678118654752440));
    const T er = pf_nat_to<T>(erff(pf_nat_f(a)));
    const T s = pf_nat_to<T>(__fadd_rn(1.0f, pf_nat_f(er)));
    r = __fmul_rn(pf_nat_f(pf_nat_to<T>(__fmul_rn(v, 0.5f))), pf_nat_f(s));
  } else {
    r = __fmul_rn(__fmul_rn(v, 0.5f), __fadd_rn(1.0f, erff(__fmul_rn(v, (float)0.70710678118654752440))));
  }
  const T o = pf_nat_to<T>(r);
  unsigned fe = 0;
  if (isinf(pf_nat_f(o)) && isfinite(v)) fe |= PF_FE_OVERFLOW;
  y[e] = o;
  if (fe) atomicOr(fe_out, fe);
}

template <typename T> static pf_status pf_geluc_run(const pf_gelu_launch *L, const double *x, double *out, unsigned *fe) {
  const size_t n = L->n;
  double *d64 = NULL;
  T *dx = NULL, *dy = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  const unsigned blocks = (unsigned)((n + 255) / 256);
  PF_CUDA_TRY(cudaMalloc(&d64, (n ? n : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) {
    pf_nat_narrow<T><<<blocks, 256>>>(d64, dx, n);
    pf_geluc_apply<T><<<blocks, 256>>>(*L, dx, dy, dfe);
    pf_nat_widen<T><<<blocks, 256>>>(dy, d64, n);
  }
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_gelu_cuda(const pf_gelu_launch *L, const double *x, double *out, unsigned *fe) {
  if (L->algo == PF_GELU_TORCH) return pf_error(PF_ERR_UNSUPPORTED, "gelu/torch has no CUDA kernel (ATen's CPU kernel)");
  if (L->n > 0x7fffffffull * 256) return pf_error(PF_ERR_ARG, "gelu on CUDA: too many elements");
  switch (L->dtype) {
  case PF_FP32: return pf_geluc_run<float>(L, x, out, fe);
  case PF_FP16: return pf_geluc_run<__half>(L, x, out, fe);
  case PF_BF16: return pf_geluc_run<__nv_bfloat16>(L, x, out, fe);
  default: return pf_error(PF_ERR_ARG, "gelu on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/gelu/gelu_cpu.c)
PF_CUDA_ENTRY(pf_gelu_cuda)
