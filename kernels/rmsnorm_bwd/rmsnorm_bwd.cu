// RMSNorm backward on the GPU in native types: x, dy and dx in the storage dtype (float, __half,
// __nv_bfloat16), gamma and dgamma in the weights' (the storage type or float), the row's
// arithmetic and the per-block partial sums in the accumulation type (float, or the storage type
// with the device's own correctly rounded half and bfloat16 operations, core/cuda_native.cuh).
// Three kernels, as a fused backward splits its work: one thread per row (rstd from the squares
// summed in order, the row's sum of a xhat, dx), one thread per block of tokens and column
// (dgamma's partial sums), one thread per column (the partials added in float). Each thread
// follows the order of the CPU loops (rmsnorm_bwd_math.h's fused row), so both backends compute
// the same bits and the contract's running bound holds for this kernel as for the emulation.
// fused only; PyTorch's composite (torch) has no CUDA side here.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd_cuda.h"

template <typename A, typename S> __device__ __forceinline__ A pf_rmsbc_cvt(S v) { return pf_nat_to<A>(pf_nat_f(v)); }

// g' as the backward applies it, in the weights' type W
template <typename W> __device__ __forceinline__ W pf_rmsbc_gamma(const pf_rmsb_launch &L, W g, unsigned *fe) {
  const int one_plus = L.fwd.zero_centered && !(L.faults & PF_RMSB_F_1P_IGNORED);
  return one_plus ? pf_nat_add_ev(pf_nat_to<W>(1.0f), g, fe) : g;
}

template <typename T, typename A, typename W>
__global__ void pf_rmsbc_rows(pf_rmsb_launch L, const T *x, const T *dy, const W *g, T *dx, float *rstd,
                              unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= L.rows) return;
  const size_t n = L.cols;
  const T *xr = x + i * n, *dr = dy + i * n;
  unsigned fe = 0;
  // rstd as the forward's fused kernel (rmsnorm.cu): the squares summed in order
  A S = pf_nat_to<A>(0.0f);
  for (size_t k = 0; k < n; k++) {
    const A xv = pf_rmsbc_cvt<A>(xr[k]);
    S = pf_nat_add_ev(S, pf_nat_mul_ev(xv, xv, &fe), &fe);
  }
  const A nt = pf_nat_to<A>((float)n);
  const A ms = pf_nat_div_ev(S, nt, &fe);
  const A den = pf_nat_to<A>(sqrtf(pf_nat_f(pf_nat_add_ev(ms, pf_nat_to<A>((float)L.fwd.eps), &fe))));
  const A r = pf_nat_div_ev(pf_nat_to<A>(1.0f), den, &fe);
  rstd[i] = pf_nat_f(r);
  A s2 = pf_nat_to<A>(0.0f);
  for (size_t j = 0; j < n; j++) {
    const A xh = pf_nat_mul_ev(pf_rmsbc_cvt<A>(xr[j]), r, &fe);
    const A a = pf_nat_mul_ev(pf_rmsbc_cvt<A>(pf_rmsbc_gamma(L, g[j], &fe)), pf_rmsbc_cvt<A>(dr[j]), &fe);
    s2 = pf_nat_add_ev(s2, pf_nat_mul_ev(a, xh, &fe), &fe);
  }
  const A term = pf_nat_mul_ev(pf_nat_div_ev(pf_nat_to<A>(1.0f), nt, &fe), r, &fe);
  for (size_t j = 0; j < n; j++) {
    const A xh = pf_nat_mul_ev(pf_rmsbc_cvt<A>(xr[j]), r, &fe);
    const A a = pf_nat_mul_ev(pf_rmsbc_cvt<A>(pf_rmsbc_gamma(L, g[j], &fe)), pf_rmsbc_cvt<A>(dr[j]), &fe);
    A t = pf_nat_mul_ev(nt, a, &fe);
    if (!(L.faults & PF_RMSB_F_VAR_DROPPED)) t = pf_nat_sub_ev(t, pf_nat_mul_ev(xh, s2, &fe), &fe);
    const A o = pf_nat_mul_ev(term, t, &fe);
    const T q = pf_nat_to<T>(pf_nat_f(o));
    if (isinf(pf_nat_f(q)) && isfinite(pf_nat_f(o))) fe |= PF_FE_OVERFLOW;
    dx[i * n + j] = q;
  }
  if (fe) atomicOr(fe_out, fe);
}

// block t's partial sums of column j: sum dy xhat over its rows, in R (the accumulation type,
// or the storage type under the fault partials-in-storage)
template <typename T, typename A, typename R>
__global__ void pf_rmsbc_partials(pf_rmsb_launch L, size_t nb, const T *x, const T *dy, const float *rstd, float *pg,
                                  unsigned *fe_out) {
  const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n = L.cols;
  if (k >= nb * n) return;
  const size_t t = k / n, j = k % n;
  size_t b, e;
  pf_lnb_block_rows(L.rows, L.blocks, t, &b, &e);
  unsigned fe = 0;
  R sg = pf_nat_to<R>(0.0f);
  for (size_t i = b; i < e; i++) {
    const A xh = pf_nat_mul_ev(pf_rmsbc_cvt<A>(x[i * n + j]), pf_nat_to<A>(rstd[i]), &fe);
    sg = pf_nat_add_ev(sg, pf_nat_mul_ev(pf_rmsbc_cvt<R>(dy[i * n + j]), pf_rmsbc_cvt<R>(xh), &fe), &fe);
  }
  pg[k] = pf_nat_f(sg);
  if (fe) atomicOr(fe_out, fe);
}

// column j: the blocks' partials added in float, in block order, rounded to W
template <typename W>
__global__ void pf_rmsbc_totals(size_t n, size_t nb, const float *pg, W *dg, unsigned *fe_out) {
  const size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  unsigned fe = 0;
  float sg = 0.0f;
  for (size_t t = 0; t < nb; t++) sg = pf_nat_add_ev(sg, pg[t * n + j], &fe);
  const W qg = pf_nat_to<W>(sg);
  if (isinf(pf_nat_f(qg)) && isfinite(sg)) fe |= PF_FE_OVERFLOW;
  dg[j] = qg;
  if (fe) atomicOr(fe_out, fe);
}

template <typename T, typename A, typename W>
static pf_status pf_rmsbc_run(const pf_rmsb_launch *L, const double *x, const double *dy, const double *g, double *out,
                              unsigned *fe) {
  const size_t n = L->rows * L->cols, nb = L->blocks < L->rows ? L->blocks : L->rows;
  const size_t np = nb * L->cols, big = n > L->cols ? n : L->cols;
  double *d64 = NULL;
  float *dstats = NULL, *dpart = NULL;
  T *dx = NULL, *ddy = NULL, *ddx = NULL;
  W *dg = NULL, *dsum = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  const unsigned blocks = (unsigned)((n + 255) / 256), wblocks = (unsigned)((L->cols + 255) / 256);
  PF_CUDA_TRY(cudaMalloc(&d64, big * sizeof(double) + sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dstats, (L->rows + 1) * sizeof(float)));
  PF_CUDA_TRY(cudaMalloc(&dpart, (np + 1) * sizeof(float)));
  PF_CUDA_TRY(cudaMalloc(&dx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&ddy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&ddx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dg, (L->cols ? L->cols : 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&dsum, (L->cols + 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, dx, n);
  PF_CUDA_TRY(cudaMemcpy(d64, dy, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, ddy, n);
  PF_CUDA_TRY(cudaMemcpy(d64, g, L->cols * sizeof(double), cudaMemcpyHostToDevice));
  if (L->cols) pf_nat_narrow<W><<<wblocks, 256>>>(d64, dg, L->cols);
  if (L->rows) pf_rmsbc_rows<T, A, W><<<(unsigned)((L->rows + 127) / 128), 128>>>(*L, dx, ddy, dg, ddx, dstats, dfe);
  if (np) {
    const unsigned pb = (unsigned)((np + 127) / 128);
    if (L->red == L->accum) pf_rmsbc_partials<T, A, A><<<pb, 128>>>(*L, nb, dx, ddy, dstats, dpart, dfe);
    else pf_rmsbc_partials<T, A, T><<<pb, 128>>>(*L, nb, dx, ddy, dstats, dpart, dfe);
  }
  if (L->cols) pf_rmsbc_totals<W><<<wblocks, 256>>>(L->cols, nb, dpart, dsum, dfe);
  if (n) pf_nat_widen<T><<<blocks, 256>>>(ddx, d64, n);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  if (L->cols) pf_nat_widen<W><<<wblocks, 256>>>(dsum, d64, L->cols);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out + n, d64, L->cols * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(dstats);
  cudaFree(dpart);
  cudaFree(dx);
  cudaFree(ddy);
  cudaFree(ddx);
  cudaFree(dg);
  cudaFree(dsum);
  cudaFree(dfe);
  return st;
}

// T the storage type; A float or T; W float or T
template <typename T>
static pf_status pf_rmsbc_typed(const pf_rmsb_launch *L, const double *x, const double *dy, const double *g, double *out,
                               unsigned *fe) {
  const int sa = L->accum == L->dtype, sw = L->weights == L->dtype;
  if (sa && sw) return pf_rmsbc_run<T, T, T>(L, x, dy, g, out, fe);
  if (sa) return pf_rmsbc_run<T, T, float>(L, x, dy, g, out, fe);
  if (sw) return pf_rmsbc_run<T, float, T>(L, x, dy, g, out, fe);
  return pf_rmsbc_run<T, float, float>(L, x, dy, g, out, fe);
}

extern "C" pf_status pf_rmsnorm_bwd_cuda(const pf_rmsb_launch *L, const double *x, const double *dy, const double *g,
                                         double *out, unsigned *fe) {
  if (L->algo != PF_RMSB_FUSED)
    return pf_error(PF_ERR_UNSUPPORTED, "rmsnorm_bwd/torch has no CUDA kernel (PyTorch's CPU composite)");
  if (L->rows > 0x7fffffffull * 128) return pf_error(PF_ERR_ARG, "rmsnorm_bwd on CUDA: too many rows");
  switch (L->dtype) {
  case PF_FP32: return pf_rmsbc_run<float, float, float>(L, x, dy, g, out, fe);
  case PF_FP16: return pf_rmsbc_typed<__half>(L, x, dy, g, out, fe);
  case PF_BF16: return pf_rmsbc_typed<__nv_bfloat16>(L, x, dy, g, out, fe);
  default: return pf_error(PF_ERR_ARG, "rmsnorm_bwd on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/rmsnorm_bwd/rmsnorm_bwd_cpu.c)
PF_CUDA_ENTRY(pf_rmsnorm_bwd_cuda)
