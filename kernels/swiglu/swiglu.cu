// SwiGLU on the GPU in native types, as a fused SwiGLU kernel computes it (Megatron's, Transformer
// Engine's: opmath float): a, b and y as float, __half or __nv_bfloat16, silu(a) = a / (1 +
// expf(-a)) with CUDA's expf (within 2 ulps: the contract's U = 2), the product in binary32, y
// rounded once to the storage type. One thread per element. fused only.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/swiglu/swiglu_cuda.h"

template <typename T> __global__ void pf_swigluc_apply(pf_swiglu_launch L, const T *a, const T *b, T *y, unsigned *fe_out) {
  const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= L.n) return;
  float g = pf_nat_f(a[e]), u = pf_nat_f(b[e]);
  if (L.faults & PF_SWIGLU_F_HALVES_SWAPPED) {
    const float t = g;
    g = u, u = t;
  }
  float s;
  if (L.faults & PF_SWIGLU_F_SILU_IN_STORAGE) {
    const float sig = pf_nat_f(pf_nat_to<T>(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g)))));
    s = pf_nat_f(pf_nat_to<T>(__fmul_rn(g, sig)));
  } else {
    s = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
  }
  const float v = __fmul_rn(s, u);
  const T o = pf_nat_to<T>(v);
  unsigned fe = 0;
  if (isinf(pf_nat_f(o)) && isfinite(g) && isfinite(u)) fe |= PF_FE_OVERFLOW;
  y[e] = o;
  if (fe) atomicOr(fe_out, fe);
}

template <typename T>
static pf_status pf_swigluc_run(const pf_swiglu_launch *L, const double *a, const double *b, double *out, unsigned *fe) {
  const size_t n = L->n;
  double *d64 = NULL;
  T *da = NULL, *db = NULL, *dy = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  const unsigned blocks = (unsigned)((n + 255) / 256);
  PF_CUDA_TRY(cudaMalloc(&d64, (n ? n : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&da, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&db, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, a, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, da, n);
  PF_CUDA_TRY(cudaMemcpy(d64, b, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) {
    pf_nat_narrow<T><<<blocks, 256>>>(d64, db, n);
    pf_swigluc_apply<T><<<blocks, 256>>>(*L, da, db, dy, dfe);
    pf_nat_widen<T><<<blocks, 256>>>(dy, d64, n);
  }
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dy);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_swiglu_cuda(const pf_swiglu_launch *L, const double *a, const double *b, double *out,
                                    unsigned *fe) {
  if (L->algo == PF_SWIGLU_TORCH) return pf_error(PF_ERR_UNSUPPORTED, "swiglu/torch has no CUDA kernel (ATen's CPU ops)");
  if (L->n > 0x7fffffffull * 256) return pf_error(PF_ERR_ARG, "swiglu on CUDA: too many elements");
  switch (L->dtype) {
  case PF_FP32: return pf_swigluc_run<float>(L, a, b, out, fe);
  case PF_FP16: return pf_swigluc_run<__half>(L, a, b, out, fe);
  case PF_BF16: return pf_swigluc_run<__nv_bfloat16>(L, a, b, out, fe);
  default: return pf_error(PF_ERR_ARG, "swiglu on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/swiglu/swiglu_cpu.c)
PF_CUDA_ENTRY(pf_swiglu_cuda)
