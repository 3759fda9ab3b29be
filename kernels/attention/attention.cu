// Attention on the GPU.
//   post-scale, inward, layer-scaled: the two GEMMs through cuBLAS
//     (cublasGemmStridedBatchedEx, one batch entry per head; operands and results in the
//     storage dtype, compute type CUBLAS_COMPUTE_32F for fp32 accumulation and
//     CUBLAS_COMPUTE_16F for fp16 accumulation, default math mode: no TF32), with the fused
//     safe softmax between them run by the emulation's own row routine (softmax_math.h), one
//     thread per query row. cuBLAS sums in its own order, so S and O may differ from the
//     emulation's in the last bits; both are judged by the same oracle and bound (the
//     contract's bound holds for any summation order).
//   flash: our kernel, one thread per query row running pf_attn_flash_row, the emulation's
//     own routine: the same bits as the CPU.
// Events: the softmax and flash kernels report theirs; cuBLAS reports none, so an infinite
// score or output from finite inputs is recorded as an overflow (underflow inside a GEMM is
// not seen).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

#include "core/cuda_check.h"
#include "kernels/attention/attention_cuda.h"
#include "core/cuda_module.h"

__global__ void pf_attn_to_storage(const double *x, void *y, size_t n, pf_dtype t) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (t == PF_FP32) ((float *)y)[i] = (float)x[i]; /* x holds values of t: exact */
  else if (t == PF_FP16) ((__half *)y)[i] = __double2half(x[i]);
  else ((__nv_bfloat16 *)y)[i] = __float2bfloat16((float)x[i]);
}

__global__ void pf_attn_from_storage(const void *y, double *x, size_t n, pf_dtype t) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (t == PF_FP32) x[i] = ((const float *)y)[i];
  else if (t == PF_FP16) x[i] = __half2float(((const __half *)y)[i]);
  else x[i] = __bfloat162float(((const __nv_bfloat16 *)y)[i]);
}

/* the fused scale-mask-softmax on one stored score row (the emulation's routine) */
__global__ void pf_attn_softmax_rows(pf_attn_launch L, const double *S, double *P, double *scratch, unsigned *fe_out) {
  const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= L.heads * L.lq) return;
  unsigned fe = 0;
  const size_t i = r % L.lq;
  pf_softmax_row(PF_SOFTMAX_SAFE, L.no_max, L.smacc, L.t, S + r * L.lk, i, L.lq, L.lk, L.sigma_acc, L.mask, L.maskval,
                 P + r * L.lk, scratch + r * L.lk, &fe);
  if (fe) atomicOr(fe_out, fe);
}

__global__ void pf_attn_flash_rows(pf_attn_launch L, const double *q, const double *k, const double *v, double *O,
                                   double *scratch, unsigned *fe_out) {
  const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= L.heads * L.lq) return;
  unsigned fe = 0;
  const size_t h = r / L.lq, i = r % L.lq, w = 2 * L.block + L.d;
  double *s = scratch + r * w;
  pf_attn_flash_row(&L, q + r * L.d, k + h * L.lk * L.d, v + h * L.lk * L.d, i, O + r * L.d, s, s + L.block,
                    s + 2 * L.block, &fe);
  if (fe) atomicOr(fe_out, fe);
}

#define PF_BLAS(stmt)                                                                                      \
  do {                                                                                                     \
    cublasStatus_t b_ = (stmt);                                                                            \
    if (b_ != CUBLAS_STATUS_SUCCESS) {                                                                     \
      st = pf_error(PF_ERR_CUDA, "%s failed: cuBLAS status %d (%s:%d)", #stmt, (int)b_, __FILE__, __LINE__); \
      goto done;                                                                                           \
    }                                                                                                      \
  } while (0)

static unsigned pf_blocks(size_t n) { return (unsigned)((n + 255) / 256); }

static pf_status pf_attention_flash_cuda(const pf_attn_launch *L, const double *q, const double *k, const double *v,
                                         double *out, unsigned *fe) {
  const size_t nq = L->heads * L->lq * L->d, nk = L->heads * L->lk * L->d, rows = L->heads * L->lq;
  double *dq = NULL, *dk = NULL, *dv = NULL, *dO = NULL, *dw = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  PF_CUDA_TRY(cudaMalloc(&dq, nq * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dk, nk * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dv, nk * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dO, nq * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dw, rows * (2 * L->block + L->d) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dq, q, nq * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dk, k, nk * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dv, v, nk * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  pf_attn_flash_rows<<<pf_blocks(rows), 256>>>(*L, dq, dk, dv, dO, dw, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, dO, nq * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dO);
  cudaFree(dw);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_attention_cuda(const pf_attn_launch *L, const double *q, const double *k, const double *v,
                                       double *out, unsigned *fe) {
  if (L->algo == PF_ATTN_FLASH) return pf_attention_flash_cuda(L, q, k, v, out, fe);
  if (L->acc != PF_FP32 && !(L->acc == PF_FP16 && L->t == PF_FP16))
    return pf_error(PF_ERR_UNSUPPORTED, "--backend cuda: attention with %s accumulation: cuBLAS has no such compute "
                                        "type (CUBLAS_COMPUTE_16F takes fp16 operands only)",
                    L->acc == PF_BF16 ? "bf16" : "this");
  const size_t H = L->heads, Lq = L->lq, Lk = L->lk, d = L->d;
  const size_t nq = H * Lq * d, nk = H * Lk * d, ns = H * Lq * Lk;
  const size_t esz = L->t == PF_FP32 ? 4 : 2;
  const cudaDataType dt = L->t == PF_FP32 ? CUDA_R_32F : L->t == PF_FP16 ? CUDA_R_16F : CUDA_R_16BF;
  const cublasComputeType_t ct = L->acc == PF_FP32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_16F;
  const float alpha_f = (float)L->alpha_acc, one_f = 1, zero_f = 0;
  const __half alpha_h = __double2half(L->alpha_acc), one_h = __double2half(1.0), zero_h = __double2half(0.0);
  const void *alpha = ct == CUBLAS_COMPUTE_32F ? (const void *)&alpha_f : (const void *)&alpha_h;
  const void *one = ct == CUBLAS_COMPUTE_32F ? (const void *)&one_f : (const void *)&one_h;
  const void *zero = ct == CUBLAS_COMPUTE_32F ? (const void *)&zero_f : (const void *)&zero_h;
  double *hq = NULL, *hk = NULL, *dd = NULL, *dS = NULL, *dP = NULL, *dO = NULL, *dw = NULL;
  void *tq = NULL, *tk = NULL, *tv = NULL, *tS = NULL, *tP = NULL, *tO = NULL;
  unsigned *dfe = NULL, hfe = 0;
  cublasHandle_t h = NULL;
  pf_status st = PF_OK;
  int finite = 1;
  /* inward scales Q and K by fl32(d^-1/4) into the storage dtype first, as the emulation does */
  hq = (double *)malloc(nq * sizeof(double));
  hk = (double *)malloc(nk * sizeof(double));
  if (!hq || !hk) {
    st = pf_error(PF_ERR_NOMEM, "attention: cannot allocate %zu values", nq + nk);
    goto done;
  }
  for (size_t x = 0; x < nq; x++) hq[x] = L->algo == PF_ATTN_INWARD ? pf_round_fe(L->t, q[x] * L->qscale, fe) : q[x];
  for (size_t x = 0; x < nk; x++) hk[x] = L->algo == PF_ATTN_INWARD ? pf_round_fe(L->t, k[x] * L->qscale, fe) : k[x];
  for (size_t x = 0; x < nq && finite; x++) finite = isfinite(q[x]);
  for (size_t x = 0; x < nk && finite; x++) finite = isfinite(k[x]) && isfinite(v[x]);
  PF_CUDA_TRY(cudaMalloc(&dd, (nq > nk ? nq : nk) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&tq, nq * esz));
  PF_CUDA_TRY(cudaMalloc(&tk, nk * esz));
  PF_CUDA_TRY(cudaMalloc(&tv, nk * esz));
  PF_CUDA_TRY(cudaMalloc(&tS, ns * esz));
  PF_CUDA_TRY(cudaMalloc(&tP, ns * esz));
  PF_CUDA_TRY(cudaMalloc(&tO, nq * esz));
  PF_CUDA_TRY(cudaMalloc(&dS, ns * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dP, ns * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dO, nq * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dw, ns * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dd, hq, nq * sizeof(double), cudaMemcpyHostToDevice));
  pf_attn_to_storage<<<pf_blocks(nq), 256>>>(dd, tq, nq, L->t);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(dd, hk, nk * sizeof(double), cudaMemcpyHostToDevice));
  pf_attn_to_storage<<<pf_blocks(nk), 256>>>(dd, tk, nk, L->t);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(dd, v, nk * sizeof(double), cudaMemcpyHostToDevice));
  pf_attn_to_storage<<<pf_blocks(nk), 256>>>(dd, tv, nk, L->t);
  PF_CUDA_TRY(cudaGetLastError());
  PF_BLAS(cublasCreate(&h));
  PF_BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  /* row-major S (Lq x Lk) = Q K^T is column-major S^T (Lk x Lq) = K Q^T */
  PF_BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)Lk, (int)Lq, (int)d, alpha, tk, dt, (int)d,
                                     (long long)(Lk * d), tq, dt, (int)d, (long long)(Lq * d), zero, tS, dt, (int)Lk,
                                     (long long)(Lq * Lk), (int)H, ct, CUBLAS_GEMM_DEFAULT));
  pf_attn_from_storage<<<pf_blocks(ns), 256>>>(tS, dS, ns, L->t);
  PF_CUDA_TRY(cudaGetLastError());
  pf_attn_softmax_rows<<<pf_blocks(H * Lq), 256>>>(*L, dS, dP, dw, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  pf_attn_to_storage<<<pf_blocks(ns), 256>>>(dP, tP, ns, L->t);
  PF_CUDA_TRY(cudaGetLastError());
  /* row-major O (Lq x d) = P V is column-major O^T (d x Lq) = V^T-as-stored times P^T-as-stored */
  PF_BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)d, (int)Lq, (int)Lk, one, tv, dt, (int)d,
                                     (long long)(Lk * d), tP, dt, (int)Lk, (long long)(Lq * Lk), zero, tO, dt, (int)d,
                                     (long long)(Lq * d), (int)H, ct, CUBLAS_GEMM_DEFAULT));
  pf_attn_from_storage<<<pf_blocks(nq), 256>>>(tO, dO, nq, L->t);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, dO, nq * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(out + nq, dS, ns * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(out + nq + ns, dP, ns * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
  if (finite)
    for (size_t x = 0; x < nq + ns; x++)
      if (isinf(out[x])) *fe |= PF_FE_OVERFLOW; /* cuBLAS rounded a finite result to inf */
done:
  if (h) cublasDestroy(h);
  free(hq);
  free(hk);
  cudaFree(dd);
  cudaFree(tq);
  cudaFree(tk);
  cudaFree(tv);
  cudaFree(tS);
  cudaFree(tP);
  cudaFree(tO);
  cudaFree(dS);
  cudaFree(dP);
  cudaFree(dO);
  cudaFree(dw);
  cudaFree(dfe);
  return st;
}

// the module's entry point for the host side (kernels/attention/attention_cpu.c)
PF_CUDA_ENTRY(pf_attention_cuda)
