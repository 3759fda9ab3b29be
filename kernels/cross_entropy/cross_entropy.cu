// Cross-entropy's fused and chunked variants on the GPU in native types: logits and dlogits in
// the storage dtype (float, __half, __nv_bfloat16), every operation in the accumulation type
// (core/cuda_native.cuh: float, or the storage type with the device's own half and bf16
// operations), exp and log binary32 expf and logf rounded to it. One thread per row, its
// columns in order, as pf_ce_fused_row (cross_entropy_math.h) takes them: the contract's
// running error bounds follow that order, so the GPU's results are judged by the variant's own
// bound. The reduction over the rows is one thread adding the rows' losses in order; the mean's
// division is done in binary64 and rounded once to the accumulation type (a quotient of a
// value of it by an integer below 2^24 is never within 2^-53 of a midpoint it is not on, so the
// two roundings give the correctly rounded quotient).
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/cross_entropy/cross_entropy_cuda.h"
#include "kernels/cross_entropy/cross_entropy_math.h"

template <typename T, typename A>
__global__ void pf_ce_rows(pf_ce_launch L, const T *x, const long *target, A *loss, T *dx, unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= L.rows) return;
  const T *xr = x + i * L.cols;
  T *d = dx + i * L.cols;
  const long t = target[i];
  unsigned fe = 0;
  const A zero = pf_nat_to<A>(0.0f), one = pf_nat_to<A>(1.0f);
  if (t < 0) { /* ignored: loss and gradient exactly 0 */
    loss[i] = zero;
    for (size_t j = 0; j < L.cols; j++) d[j] = pf_nat_to<T>(0.0f);
    return;
  }
  /* the log-sum-exp: m and Z (pf_ce_lse_parts) */
  A M = pf_nat_to<A>(-INFINITY), Z = zero;
  for (size_t c0 = 0; c0 < L.cols; c0 += L.chunk) {
    const size_t c1 = L.cols - c0 < L.chunk ? L.cols : c0 + L.chunk;
    A mn = M;
    for (size_t j = c0; j < c1; j++) mn = pf_nat_max(mn, pf_nat_to<A>(pf_nat_f(xr[j])));
    if (L.faults & PF_CE_F_NO_MAX) mn = zero;
    A zc = zero;
    for (size_t j = c0; j < c1; j++)
      zc = pf_nat_add_ev(zc, pf_nat_exp(pf_nat_sub_ev(pf_nat_to<A>(pf_nat_f(xr[j])), mn, &fe), &fe), &fe);
    if (c0 == 0) Z = zc;
    else {
      const A r = pf_nat_f(M) == pf_nat_f(mn) || (L.faults & PF_CE_F_CHUNK_NO_RESCALE) ? one
                                                                                       : pf_nat_exp(pf_nat_sub_ev(M, mn, &fe), &fe);
      Z = pf_nat_add_ev(pf_nat_mul_ev(Z, r, &fe), zc, &fe);
    }
    M = mn;
  }
  const A m = M, lse = pf_nat_add_ev(m, pf_nat_log(Z, &fe), &fe);
  const A eps = pf_nat_to<A>((float)L.eps), z = pf_nat_to<A>((float)L.z), ceps = pf_nat_to<A>((float)L.ceps);
  const A c1 = pf_nat_sub_ev(one, eps, &fe), xt = pf_nat_to<A>(pf_nat_f(xr[t]));
  A l = pf_nat_sub_ev(lse, pf_nat_mul_ev(c1, xt, &fe), &fe);
  if (L.eps != 0) {
    A sx = zero;
    for (size_t j = 0; j < L.cols; j++) sx = pf_nat_add_ev(sx, pf_nat_to<A>(pf_nat_f(xr[j])), &fe);
    l = pf_nat_sub_ev(l, pf_nat_mul_ev(ceps, sx, &fe), &fe);
  }
  if (L.z != 0) l = pf_nat_add_ev(l, pf_nat_mul_ev(z, pf_nat_mul_ev(lse, lse, &fe), &fe), &fe);
  loss[i] = l;
  /* the gradient's factor on p: 1 + 2 z lse (2 z exact) */
  const A zf = L.z != 0 && !(L.faults & PF_CE_F_GRAD_NO_ZLOSS)
                   ? pf_nat_add_ev(one, pf_nat_mul_ev(pf_nat_to<A>((float)(2 * L.z)), lse, &fe), &fe)
                   : one;
  const A g = pf_nat_to<A>((float)L.g);
  for (size_t j = 0; j < L.cols; j++) {
    A p = pf_nat_div_ev(pf_nat_exp(pf_nat_sub_ev(pf_nat_to<A>(pf_nat_f(xr[j])), m, &fe), &fe), Z, &fe);
    if ((L.faults & PF_CE_F_GRAD_P_STORAGE) && (long)j == t) p = pf_nat_to<A>(pf_nat_f(pf_nat_to<T>(pf_nat_f(p))));
    A q = pf_nat_mul_ev(p, zf, &fe);
    if (L.eps != 0) q = pf_nat_sub_ev(q, ceps, &fe);
    if ((long)j == t) q = pf_nat_sub_ev(q, c1, &fe);
    const float r = pf_nat_f(pf_nat_mul_ev(g, q, &fe));
    d[j] = pf_nat_to<T>(r);
    if (isinf(pf_nat_f(d[j])) && isfinite(r)) fe |= PF_FE_OVERFLOW;
  }
  if (fe) atomicOr(fe_out, fe);
}

/* the losses (values of A) into the outputs, and the reduced loss: one thread, rows in order */
template <typename A> __global__ void pf_ce_reduce(pf_ce_launch L, const A *loss, double *out, unsigned *fe_out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned fe = 0;
  A total = pf_nat_to<A>(0.0f);
  for (size_t k = 0; k < L.microbatches; k++) { /* micro-batch k's sum (its mean share), added */
    A sum = pf_nat_to<A>(0.0f);
    for (size_t i = pf_ce_mb_first(L.rows, L.microbatches, k); i < pf_ce_mb_first(L.rows, L.microbatches, k + 1); i++) {
      out[i] = pf_nat_f(loss[i]);
      sum = pf_nat_add_ev(sum, loss[i], &fe);
    }
    if (L.microbatches == 1) total = sum;
    else total = pf_nat_add_ev(total, L.mean ? pf_nat_from_double<A>((double)pf_nat_f(sum) / L.nc) : sum, &fe);
  }
  if (L.reduce) {
    const A sum = total;
    const A r = L.mean && L.microbatches == 1 ? pf_nat_from_double<A>((double)pf_nat_f(sum) / L.nc) : sum;
    if (L.mean && isinf(pf_nat_f(r)) && isfinite(pf_nat_f(sum))) fe |= PF_FE_OVERFLOW;
    else if (L.mean && isnan(pf_nat_f(r)) && !isnan(pf_nat_f(sum))) fe |= PF_FE_INVALID;
    out[L.rows] = pf_nat_f(r);
  }
  if (fe) atomicOr(fe_out, fe);
}

template <typename T, typename A>
static pf_status pf_ce_run(const pf_ce_launch *L, const double *x, const long *target, double *out, unsigned *fe) {
  const size_t n = L->rows * L->cols, nout = L->rows + (L->reduce ? 1 : 0) + n;
  double *d64 = NULL;
  T *dxs = NULL, *dgrad = NULL;
  A *dloss = NULL;
  long *dt = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  if (L->mean && !(L->nc < 0x1p24)) return pf_error(PF_ERR_ARG, "cross_entropy on CUDA: the mean counts at most 2^24 - 1 rows");
  PF_CUDA_TRY(cudaMalloc(&d64, nout * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dxs, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dgrad, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dloss, (L->rows ? L->rows : 1) * sizeof(A)));
  PF_CUDA_TRY(cudaMalloc(&dt, (L->rows ? L->rows : 1) * sizeof(long)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(d64, x, n * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dt, target, L->rows * sizeof(long), cudaMemcpyHostToDevice));
  pf_nat_narrow<T><<<(unsigned)((n + 255) / 256), 256>>>(d64, dxs, n);
  pf_ce_rows<T, A><<<(unsigned)((L->rows + 127) / 128), 128>>>(*L, dxs, dt, dloss, dgrad, dfe);
  pf_ce_reduce<A><<<1, 1>>>(*L, dloss, d64, dfe);
  pf_nat_widen<T><<<(unsigned)((n + 255) / 256), 256>>>(dgrad, d64 + L->rows + (L->reduce ? 1 : 0), n);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, d64, nout * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  cudaFree(dxs);
  cudaFree(dgrad);
  cudaFree(dloss);
  cudaFree(dt);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_cross_entropy_cuda(const pf_ce_launch *L, const double *x, const long *target, double *out,
                                           unsigned *fe) {
  const int storage_acc = L->acc == L->t && L->t != PF_FP32;
  switch (L->t) {
  case PF_FP32: return pf_ce_run<float, float>(L, x, target, out, fe);
  case PF_FP16: return storage_acc ? pf_ce_run<__half, __half>(L, x, target, out, fe) : pf_ce_run<__half, float>(L, x, target, out, fe);
  case PF_BF16:
    return storage_acc ? pf_ce_run<__nv_bfloat16, __nv_bfloat16>(L, x, target, out, fe)
                       : pf_ce_run<__nv_bfloat16, float>(L, x, target, out, fe);
  default: return pf_error(PF_ERR_ARG, "cross_entropy on CUDA: no native type for dtype %d", (int)L->t);
  }
}

// the module's entry point for the host side (kernels/cross_entropy/cross_entropy_cpu.c)
PF_CUDA_ENTRY(pf_cross_entropy_cuda)
