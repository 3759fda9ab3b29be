// LayerNorm forward on the GPU in native types: x and y in the storage dtype (float, __half,
// __nv_bfloat16), gamma and beta in the weights' (the storage type or float), the statistics in
// the accumulation type (float, or the storage type with the device's own correctly rounded half
// and bfloat16 operations, core/cuda_native.cuh). One thread per row, in the order of the CPU
// loop (layernorm_math.h), so both backends compute the same bits and the contract's running
// bound, taken along that order, holds for this kernel as it does for the emulation; sqrt is
// binary32's correctly rounded sqrtf (-prec-sqrt=true) rounded to the accumulation type, which
// is the correctly rounded root in each (a double rounding from 24 bits to 11 or 8 is innocuous).
// welford, two-pass and moments; PyTorch's CPU kernel (torch) has no CUDA side.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/layernorm/layernorm_cuda.h"

template <typename A> __device__ __forceinline__ A pf_lnc_from(float v) { return pf_nat_to<A>(v); }

// x converted to A (exact from T, or rounded from float weights)
template <typename A, typename S> __device__ __forceinline__ A pf_lnc_cvt(S v) { return pf_nat_to<A>(pf_nat_f(v)); }

template <typename T, typename A, typename W>
__global__ void pf_lnc_rows(pf_ln_launch L, const T *x, const W *g, const W *b, T *y, double *mean, double *rstd,
                            unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= L.rows) return;
  const size_t n = L.cols;
  const T *xr = x + i * n;
  unsigned fe = 0;
  A m = pf_lnc_from<A>(0.0f), v;
  if (L.algo == PF_LN_WELFORD) {
    A M2 = pf_lnc_from<A>(0.0f);
    for (size_t k = 0; k < n; k++) {
      const A xv = pf_lnc_cvt<A>(xr[k]), kt = pf_lnc_from<A>((float)(k + 1));
      const A d = pf_nat_sub_ev(xv, m, &fe);
      m = pf_nat_add_ev(m, pf_nat_div_ev(d, kt, &fe), &fe);
      M2 = pf_nat_add_ev(M2, pf_nat_mul_ev(d, pf_nat_sub_ev(xv, m, &fe), &fe), &fe);
    }
    v = M2;
  } else {
    A S = pf_lnc_from<A>(0.0f), Q = pf_lnc_from<A>(0.0f);
    for (size_t k = 0; k < n; k++) S = pf_nat_add_ev(S, pf_lnc_cvt<A>(xr[k]), &fe);
    m = pf_nat_div_ev(S, pf_lnc_from<A>((float)n), &fe);
    for (size_t k = 0; k < n; k++) {
      const A xv = pf_lnc_cvt<A>(xr[k]);
      if (L.algo == PF_LN_TWO_PASS) {
        const A d = pf_nat_sub_ev(xv, m, &fe);
        Q = pf_nat_add_ev(Q, pf_nat_mul_ev(d, d, &fe), &fe);
      } else {
        Q = pf_nat_add_ev(Q, pf_nat_mul_ev(xv, xv, &fe), &fe);
      }
    }
    v = Q;
  }
  // the variance: M2 / n (n - 1 under the unbiased fault); moments: max(Q/n - m^2, 0)
  const float div = (L.faults & PF_LN_F_UNBIASED) && n > 1 ? (float)(n - 1) : (float)n;
  A var = pf_nat_div_ev(v, pf_lnc_from<A>(div), &fe);
  if (L.algo == PF_LN_MOMENTS) {
    var = pf_nat_sub_ev(var, pf_nat_mul_ev(m, m, &fe), &fe);
    if (pf_nat_f(var) < 0) var = pf_lnc_from<A>(0.0f);
  }
  const A eps = pf_lnc_from<A>((float)L.eps); // eps is a binary32 value
  A den;
  if (L.eps_outside || (L.faults & PF_LN_F_EPS_OUTSIDE)) {
    den = pf_nat_add_ev(pf_lnc_from<A>(sqrtf(pf_nat_f(var))), eps, &fe);
  } else {
    den = pf_lnc_from<A>(sqrtf(pf_nat_f(pf_nat_add_ev(var, eps, &fe))));
  }
  const A r = pf_nat_div_ev(pf_lnc_from<A>(1.0f), den, &fe);
  mean[i] = pf_nat_f(m);
  rstd[i] = pf_nat_f(r);
  const int one_plus = L.zero_centered && !(L.faults & PF_LN_F_1P_IGNORED);
  for (size_t j = 0; j < n; j++) {
    const W gw = one_plus ? pf_nat_add_ev(pf_nat_to<W>(1.0f), g[j], &fe) : g[j];
    const A ga = pf_lnc_cvt<A>(gw), ba = pf_lnc_cvt<A>(b[j]);
    const A d = pf_nat_sub_ev(pf_lnc_cvt<A>(xr[j]), m, &fe);
    const A o = pf_nat_add_ev(pf_nat_mul_ev(pf_nat_mul_ev(d, r, &fe), ga, &fe), ba, &fe);
    const T t = pf_nat_to<T>(pf_nat_f(o));
    if (isinf(pf_nat_f(t)) && isfinite(pf_nat_f(o))) fe |= PF_FE_OVERFLOW;
    y[i * n + j] = t;
  }
  if (fe) atomicOr(fe_out, fe);
}

template <typename T, typename A, typename W>
static pf_status pf_lnc_run(const pf_ln_launch *L, const double *x, const double *g, const double *b, double *out,
                            unsigned *fe) {
  const size_t n = L->rows * L->cols;
  double *d64 = NULL, *dstats = NULL;
  T *dx = NULL, *dy = NULL;
  W *dg = NULL, *db = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  const unsigned blocks = (unsigned)((n + 255) / 256), wblocks = (unsigned)((L->cols + 255) / 256);
  PF_CUDA_TRY(cudaMalloc(&d64, (n > L->cols ? n : L->cols) * sizeof(double) + sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dstats, (2 * L->rows + 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dg, (L->cols ? L->cols : 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&db, (L->cols ? L->cols : 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, dx, n);
  PF_CUDA_TRY(cudaMemcpy(d64, g, L->cols * sizeof(double), cudaMemcpyHostToDevice));
  if (L->cols) pf_nat_narrow<W><<<wblocks, 256>>>(d64, dg, L->cols);
  PF_CUDA_TRY(cudaMemcpy(d64, b, L->cols * sizeof(double), cudaMemcpyHostToDevice));
  if (L->cols) pf_nat_narrow<W><<<wblocks, 256>>>(d64, db, L->cols);
  if (L->rows)
    pf_lnc_rows<T, A, W><<<(unsigned)((L->rows + 127) / 128), 128>>>(*L, dx, dg, db, dy, dstats, dstats + L->rows, dfe);
  if (n) pf_nat_widen<T><<<blocks, 256>>>(dy, d64, n);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, dstats, 2 * L->rows * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(out + 2 * L->rows, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(dstats);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dg);
  cudaFree(db);
  cudaFree(dfe);
  return st;
}

// T the storage type; A float or T; W float or T
template <typename T>
static pf_status pf_lnc_typed(const pf_ln_launch *L, const double *x, const double *g, const double *b, double *out,
                              unsigned *fe) {
  const int sa = L->accum == L->dtype, sw = L->weights == L->dtype;
  if (sa && sw) return pf_lnc_run<T, T, T>(L, x, g, b, out, fe);
  if (sa) return pf_lnc_run<T, T, float>(L, x, g, b, out, fe);
  if (sw) return pf_lnc_run<T, float, T>(L, x, g, b, out, fe);
  return pf_lnc_run<T, float, float>(L, x, g, b, out, fe);
}

extern "C" pf_status pf_layernorm_cuda(const pf_ln_launch *L, const double *x, const double *g, const double *b,
                                       double *out, unsigned *fe) {
  if (L->algo == PF_LN_TORCH) return pf_error(PF_ERR_UNSUPPORTED, "layernorm/torch has no CUDA kernel (PyTorch's CPU kernel)");
  if (L->rows > 0x7fffffffull * 128) return pf_error(PF_ERR_ARG, "layernorm on CUDA: too many rows");
  switch (L->dtype) {
  case PF_FP32: return pf_lnc_run<float, float, float>(L, x, g, b, out, fe);
  case PF_FP16: return pf_lnc_typed<__half>(L, x, g, b, out, fe);
  case PF_BF16: return pf_lnc_typed<__nv_bfloat16>(L, x, g, b, out, fe);
  default: return pf_error(PF_ERR_ARG, "layernorm on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/layernorm/layernorm_cpu.c)
PF_CUDA_ENTRY(pf_layernorm_cuda)
