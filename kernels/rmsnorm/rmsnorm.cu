// RMSNorm forward on the GPU in native types: x and y in the storage dtype (float, __half,
// __nv_bfloat16), gamma in the weights' (the storage type or float), the sum of squares, rstd and
// the products in the accumulation type (float, or the storage type with the device's own
// correctly rounded half and bfloat16 operations, core/cuda_native.cuh). One thread per row, in
// the order of the CPU loop (rmsnorm_math.h), so both backends compute the same bits and the
// contract's running bound holds for it as for the emulation; sqrt is binary32's correctly
// rounded sqrtf rounded to the accumulation type (an innocuous double rounding). fused only:
// PyTorch's composite (torch) has no CUDA side here.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/rmsnorm/rmsnorm_cuda.h"

template <typename A, typename S> __device__ __forceinline__ A pf_rmc_cvt(S v) { return pf_nat_to<A>(pf_nat_f(v)); }

// one row's rstd in the type its squares are summed in (Q: A, or T under rms-sum-in-storage)
template <typename Q, typename T> __device__ Q pf_rmc_rstd(const T *xr, size_t n, double eps, unsigned *fe) {
  Q s = pf_nat_to<Q>(0.0f);
  for (size_t k = 0; k < n; k++) {
    const Q xv = pf_rmc_cvt<Q>(xr[k]);
    s = pf_nat_add_ev(s, pf_nat_mul_ev(xv, xv, fe), fe);
  }
  const Q ms = pf_nat_div_ev(s, pf_nat_to<Q>((float)n), fe);
  const Q w = pf_nat_add_ev(ms, pf_nat_to<Q>((float)eps), fe); // eps is a binary32 value
  const Q den = pf_nat_to<Q>(sqrtf(pf_nat_f(w)));
  return pf_nat_div_ev(pf_nat_to<Q>(1.0f), den, fe);
}

template <typename T, typename A, typename W>
__global__ void pf_rmc_rows(pf_rms_launch L, const T *x, const W *g, T *y, double *rstd, unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= L.rows) return;
  const size_t n = L.cols;
  const T *xr = x + i * n;
  unsigned fe = 0;
  const A r = (L.faults & PF_RMS_F_SUM_IN_STORAGE) ? pf_rmc_cvt<A>(pf_rmc_rstd<T, T>(xr, n, L.eps, &fe))
                                                   : pf_rmc_rstd<A, T>(xr, n, L.eps, &fe);
  rstd[i] = pf_nat_f(r);
  for (size_t j = 0; j < n; j++) {
    A ga;
    if (!L.zero_centered) ga = pf_rmc_cvt<A>(g[j]);
    else if (L.faults & PF_RMS_F_1P_IN_STORAGE) /* 1 + g rounded once to T (float's sum first: innocuous) */
      ga = pf_rmc_cvt<A>(pf_nat_to<T>(1.0f + pf_nat_f(g[j])));
    else ga = pf_rmc_cvt<A>(pf_nat_add_ev(pf_nat_to<W>(1.0f), g[j], &fe));
    const A o = pf_nat_mul_ev(pf_nat_mul_ev(pf_rmc_cvt<A>(xr[j]), r, &fe), ga, &fe);
    const T t = pf_nat_to<T>(pf_nat_f(o));
    if (isinf(pf_nat_f(t)) && isfinite(pf_nat_f(o))) fe |= PF_FE_OVERFLOW;
    y[i * n + j] = t;
  }
  if (fe) atomicOr(fe_out, fe);
}

template <typename T, typename A, typename W>
static pf_status pf_rmc_run(const pf_rms_launch *L, const double *x, const double *g, double *out, unsigned *fe) {
  const size_t n = L->rows * L->cols;
  double *d64 = NULL, *drstd = NULL;
  T *dx = NULL, *dy = NULL;
  W *dg = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  const unsigned blocks = (unsigned)((n + 255) / 256), wblocks = (unsigned)((L->cols + 255) / 256);
  PF_CUDA_TRY(cudaMalloc(&d64, (n > L->cols ? n : L->cols) * sizeof(double) + sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&drstd, (L->rows + 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dg, (L->cols ? L->cols : 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, dx, n);
  PF_CUDA_TRY(cudaMemcpy(d64, g, L->cols * sizeof(double), cudaMemcpyHostToDevice));
  if (L->cols) pf_nat_narrow<W><<<wblocks, 256>>>(d64, dg, L->cols);
  if (L->rows) pf_rmc_rows<T, A, W><<<(unsigned)((L->rows + 127) / 128), 128>>>(*L, dx, dg, dy, drstd, dfe);
  if (n) pf_nat_widen<T><<<blocks, 256>>>(dy, d64, n);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, drstd, L->rows * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(out + L->rows, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(drstd);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dg);
  cudaFree(dfe);
  return st;
}

template <typename T>
static pf_status pf_rmc_typed(const pf_rms_launch *L, const double *x, const double *g, double *out, unsigned *fe) {
  const int sa = L->accum == L->dtype, sw = L->weights == L->dtype;
  if (sa && sw) return pf_rmc_run<T, T, T>(L, x, g, out, fe);
  if (sa) return pf_rmc_run<T, T, float>(L, x, g, out, fe);
  if (sw) return pf_rmc_run<T, float, T>(L, x, g, out, fe);
  return pf_rmc_run<T, float, float>(L, x, g, out, fe);
}

extern "C" pf_status pf_rmsnorm_cuda(const pf_rms_launch *L, const double *x, const double *g, double *out,
                                     unsigned *fe) {
  if (L->algo == PF_RMS_TORCH) return pf_error(PF_ERR_UNSUPPORTED, "rmsnorm/torch has no CUDA kernel (PyTorch's CPU composite)");
  if (L->rows > 0x7fffffffull * 128) return pf_error(PF_ERR_ARG, "rmsnorm on CUDA: too many rows");
  switch (L->dtype) {
  case PF_FP32: return pf_rmc_run<float, float, float>(L, x, g, out, fe);
  case PF_FP16: return pf_rmc_typed<__half>(L, x, g, out, fe);
  case PF_BF16: return pf_rmc_typed<__nv_bfloat16>(L, x, g, out, fe);
  default: return pf_error(PF_ERR_ARG, "rmsnorm on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/rmsnorm/rmsnorm_cpu.c)
PF_CUDA_ENTRY(pf_rmsnorm_cuda)
