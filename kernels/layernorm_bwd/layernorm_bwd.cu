// LayerNorm backward on the GPU in native types: x, dy and dx in the storage dtype (float, __half,
// __nv_bfloat16), gamma, dgamma and dbeta in the weights' (the storage type or float), the row's
// arithmetic and the per-block partial sums in the accumulation type (float, or the storage type
// with the device's own correctly rounded half and bfloat16 operations, core/cuda_native.cuh).
// Three kernels, as a fused backward splits its work: one thread per row (the statistics by
// Welford, the row's sums, dx), one thread per block of tokens and column (dgamma's and dbeta's
// partial sums), one thread per column (the partials added in float). Each thread follows the
// order of the CPU loops (layernorm_bwd_math.h's fused row), so both backends compute the same
// bits and the contract's running bound holds for this kernel as for the emulation. fused only;
// PyTorch's CPU backward (torch) has no CUDA side.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/layernorm_bwd/layernorm_bwd_cuda.h"

template <typename A, typename S> __device__ __forceinline__ A pf_lnbc_cvt(S v) { return pf_nat_to<A>(pf_nat_f(v)); }

// g' as the backward applies it, in the weights' type W
template <typename W> __device__ __forceinline__ W pf_lnbc_gamma(const pf_lnb_launch &L, W g, unsigned *fe) {
  const int one_plus = L.fwd.zero_centered && !(L.faults & PF_LNB_F_1P_IGNORED);
  return one_plus ? pf_nat_add_ev(pf_nat_to<W>(1.0f), g, fe) : g;
}

template <typename T, typename A, typename W>
__global__ void pf_lnbc_rows(pf_lnb_launch L, const T *x, const T *dy, const W *g, T *dx, float *mean, float *rstd,
                             unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= L.rows) return;
  const size_t n = L.cols;
  const T *xr = x + i * n, *dr = dy + i * n;
  unsigned fe = 0;
  // the statistics, as the forward's Welford (layernorm.cu)
  A m = pf_nat_to<A>(0.0f), M2 = pf_nat_to<A>(0.0f);
  for (size_t k = 0; k < n; k++) {
    const A xv = pf_lnbc_cvt<A>(xr[k]), kt = pf_nat_to<A>((float)(k + 1));
    const A d = pf_nat_sub_ev(xv, m, &fe);
    m = pf_nat_add_ev(m, pf_nat_div_ev(d, kt, &fe), &fe);
    M2 = pf_nat_add_ev(M2, pf_nat_mul_ev(d, pf_nat_sub_ev(xv, m, &fe), &fe), &fe);
  }
  const A nt = pf_nat_to<A>((float)n);
  const A var = pf_nat_div_ev(M2, nt, &fe);
  const A den = pf_nat_to<A>(sqrtf(pf_nat_f(pf_nat_add_ev(var, pf_nat_to<A>((float)L.fwd.eps), &fe))));
  const A r = pf_nat_div_ev(pf_nat_to<A>(1.0f), den, &fe);
  mean[i] = pf_nat_f(m);
  rstd[i] = pf_nat_f(r);
  // s1 = sum a, s2 = sum a xhat
  A s1 = pf_nat_to<A>(0.0f), s2 = pf_nat_to<A>(0.0f);
  for (size_t j = 0; j < n; j++) {
    const A xh = pf_nat_mul_ev(pf_nat_sub_ev(pf_lnbc_cvt<A>(xr[j]), m, &fe), r, &fe);
    const A a = pf_nat_mul_ev(pf_lnbc_cvt<A>(pf_lnbc_gamma(L, g[j], &fe)), pf_lnbc_cvt<A>(dr[j]), &fe);
    s1 = pf_nat_add_ev(s1, a, &fe);
    s2 = pf_nat_add_ev(s2, pf_nat_mul_ev(a, xh, &fe), &fe);
  }
  const A term = pf_nat_mul_ev(pf_nat_div_ev(pf_nat_to<A>(1.0f), nt, &fe), r, &fe);
  for (size_t j = 0; j < n; j++) {
    const A xh = pf_nat_mul_ev(pf_nat_sub_ev(pf_lnbc_cvt<A>(xr[j]), m, &fe), r, &fe);
    const A a = pf_nat_mul_ev(pf_lnbc_cvt<A>(pf_lnbc_gamma(L, g[j], &fe)), pf_lnbc_cvt<A>(dr[j]), &fe);
    A t = pf_nat_mul_ev(nt, a, &fe);
    if (!(L.faults & PF_LNB_F_MEAN_DROPPED)) t = pf_nat_sub_ev(t, s1, &fe);
    if (!(L.faults & PF_LNB_F_VAR_DROPPED)) t = pf_nat_sub_ev(t, pf_nat_mul_ev(xh, s2, &fe), &fe);
    const A o = pf_nat_mul_ev(term, t, &fe);
    const T q = pf_nat_to<T>(pf_nat_f(o));
    if (isinf(pf_nat_f(q)) && isfinite(pf_nat_f(o))) fe |= PF_FE_OVERFLOW;
    dx[i * n + j] = q;
  }
  if (fe) atomicOr(fe_out, fe);
}

// block t's partial sums of column j: sum dy xhat and sum dy over its rows, in A
template <typename T, typename A>
__global__ void pf_lnbc_partials(pf_lnb_launch L, size_t nb, const T *x, const T *dy, const float *mean,
                                 const float *rstd, float *pg, float *pb, unsigned *fe_out) {
  const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n = L.cols;
  if (k >= nb * n) return;
  const size_t t = k / n, j = k % n;
  size_t b, e;
  pf_lnb_block_rows(L.rows, L.blocks, t, &b, &e);
  unsigned fe = 0;
  A sg = pf_nat_to<A>(0.0f), sb = pf_nat_to<A>(0.0f);
  for (size_t i = b; i < e; i++) {
    const A m = pf_nat_to<A>(mean[i]), r = pf_nat_to<A>(rstd[i]), d = pf_lnbc_cvt<A>(dy[i * n + j]);
    const A xh = pf_nat_mul_ev(pf_nat_sub_ev(pf_lnbc_cvt<A>(x[i * n + j]), m, &fe), r, &fe);
    sg = pf_nat_add_ev(sg, pf_nat_mul_ev(d, xh, &fe), &fe);
    sb = pf_nat_add_ev(sb, d, &fe);
  }
  pg[k] = pf_nat_f(sg);
  pb[k] = pf_nat_f(sb);
  if (fe) atomicOr(fe_out, fe);
}

// column j: the blocks' partials added in float, in block order, rounded to W
template <typename W>
__global__ void pf_lnbc_totals(size_t n, size_t nb, const float *pg, const float *pb, W *dg, W *db, unsigned *fe_out) {
  const size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  unsigned fe = 0;
  float sg = 0.0f, sb = 0.0f;
  for (size_t t = 0; t < nb; t++) {
    sg = pf_nat_add_ev(sg, pg[t * n + j], &fe);
    sb = pf_nat_add_ev(sb, pb[t * n + j], &fe);
  }
  const W qg = pf_nat_to<W>(sg), qb = pf_nat_to<W>(sb);
  if ((isinf(pf_nat_f(qg)) && isfinite(sg)) || (isinf(pf_nat_f(qb)) && isfinite(sb))) fe |= PF_FE_OVERFLOW;
  dg[j] = qg;
  db[j] = qb;
  if (fe) atomicOr(fe_out, fe);
}

template <typename T, typename A, typename W>
static pf_status pf_lnbc_run(const pf_lnb_launch *L, const double *x, const double *dy, const double *g, double *out,
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
  PF_CUDA_TRY(cudaMalloc(&dstats, (2 * L->rows + 1) * sizeof(float)));
  PF_CUDA_TRY(cudaMalloc(&dpart, (2 * np + 1) * sizeof(float)));
  PF_CUDA_TRY(cudaMalloc(&dx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&ddy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&ddx, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dg, (L->cols ? L->cols : 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&dsum, (2 * L->cols + 1) * sizeof(W)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, dx, n);
  PF_CUDA_TRY(cudaMemcpy(d64, dy, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) pf_nat_narrow<T><<<blocks, 256>>>(d64, ddy, n);
  PF_CUDA_TRY(cudaMemcpy(d64, g, L->cols * sizeof(double), cudaMemcpyHostToDevice));
  if (L->cols) pf_nat_narrow<W><<<wblocks, 256>>>(d64, dg, L->cols);
  if (L->rows)
    pf_lnbc_rows<T, A, W><<<(unsigned)((L->rows + 127) / 128), 128>>>(*L, dx, ddy, dg, ddx, dstats, dstats + L->rows, dfe);
  if (np)
    pf_lnbc_partials<T, A><<<(unsigned)((np + 127) / 128), 128>>>(*L, nb, dx, ddy, dstats, dstats + L->rows, dpart,
                                                                   dpart + np, dfe);
  if (L->cols) pf_lnbc_totals<W><<<wblocks, 256>>>(L->cols, nb, dpart, dpart + np, dsum, dsum + L->cols, dfe);
  if (n) pf_nat_widen<T><<<blocks, 256>>>(ddx, d64, n);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  if (L->cols) pf_nat_widen<W><<<(unsigned)((2 * L->cols + 255) / 256), 256>>>(dsum, d64, 2 * L->cols);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out + n, d64, 2 * L->cols * sizeof(double), cudaMemcpyDeviceToHost));
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
static pf_status pf_lnbc_typed(const pf_lnb_launch *L, const double *x, const double *dy, const double *g, double *out,
                               unsigned *fe) {
  const int sa = L->accum == L->dtype, sw = L->weights == L->dtype;
  if (sa && sw) return pf_lnbc_run<T, T, T>(L, x, dy, g, out, fe);
  if (sa) return pf_lnbc_run<T, T, float>(L, x, dy, g, out, fe);
  if (sw) return pf_lnbc_run<T, float, T>(L, x, dy, g, out, fe);
  return pf_lnbc_run<T, float, float>(L, x, dy, g, out, fe);
}

extern "C" pf_status pf_layernorm_bwd_cuda(const pf_lnb_launch *L, const double *x, const double *dy, const double *g,
                                           double *out, unsigned *fe) {
  if (L->algo != PF_LNB_FUSED)
    return pf_error(PF_ERR_UNSUPPORTED, "layernorm_bwd/torch has no CUDA kernel (PyTorch's CPU backward)");
  if (L->rows > 0x7fffffffull * 128) return pf_error(PF_ERR_ARG, "layernorm_bwd on CUDA: too many rows");
  switch (L->dtype) {
  case PF_FP32: return pf_lnbc_run<float, float, float>(L, x, dy, g, out, fe);
  case PF_FP16: return pf_lnbc_typed<__half>(L, x, dy, g, out, fe);
  case PF_BF16: return pf_lnbc_typed<__nv_bfloat16>(L, x, dy, g, out, fe);
  default: return pf_error(PF_ERR_ARG, "layernorm_bwd on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/layernorm_bwd/layernorm_bwd_cpu.c)
PF_CUDA_ENTRY(pf_layernorm_bwd_cuda)
