// Rotary embeddings on the GPU in native types, as a fused RoPE kernel runs them (Transformer
// Engine's fused_apply_rotary_pos_emb): the fp32 angles come from the host, as the framework's
// RotaryEmbedding hands its freqs tensor to the kernel (here from the same table and product as
// the emulation, rope_math.h); on the device sincosf in fp32 (CUDA's, within 2 ulps: the
// contract's U = 2), v = t cos + t' sin as one FMA over the rounded second product, rounded once
// to the storage type. One thread per element. fused only: PyTorch's unfused composite (torch)
// has no CUDA side here.
#include <stdlib.h>

#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/rope/rope_cuda.h"

template <typename T>
__global__ void pf_ropec_apply(pf_rope_launch L, const float *theta, const T *t, T *y, unsigned *fe_out) {
  const size_t n = L.positions * L.heads * L.dim, e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const size_t j = e % L.dim, row = e / (L.heads * L.dim), base = e - j;
  size_t k, q;
  int sign;
  pf_rope_pair(L.layout, L.dim, j, &k, &q, &sign);
  float s, c;
  sincosf(theta[row * (L.dim / 2) + k], &s, &c);
  if (L.faults & PF_ROPE_F_COS_IN_STORAGE) c = pf_nat_f(pf_nat_to<T>(c)), s = pf_nat_f(pf_nat_to<T>(s));
  if (L.faults & PF_ROPE_F_SIN_SIGN) sign = -sign;
  const float tj = pf_nat_f(t[e]), tq = pf_nat_f(t[base + q]);
  const float v = __fmaf_rn(tj, c, __fmul_rn(sign < 0 ? -tq : tq, s));
  const T r = pf_nat_to<T>(v);
  unsigned fe = 0;
  if (isinf(pf_nat_f(r)) && isfinite(v)) fe |= PF_FE_OVERFLOW;
  if (isinf(v) && isfinite(tj) && isfinite(tq)) fe |= PF_FE_OVERFLOW;
  y[e] = r;
  if (fe) atomicOr(fe_out, fe);
}

template <typename T> static pf_status pf_ropec_run(const pf_rope_launch *L, const double *t, double *out, unsigned *fe) {
  const size_t n = L->positions * L->heads * L->dim, h = L->dim / 2, na = L->positions * h;
  double *d64 = NULL;
  float *dth = NULL, *hth = (float *)malloc((na ? na : 1) * sizeof(float)), *hinv = (float *)malloc((h ? h : 1) * sizeof(float));
  T *dt = NULL, *dy = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  const unsigned blocks = (unsigned)((n + 255) / 256);
  if (!hth || !hinv) {
    st = pf_error(PF_ERR_NOMEM, "rope on CUDA: no memory for the angles");
    goto done;
  }
  for (size_t k = 0; k < h; k++) hinv[k] = (float)pf_rope_inv_freq(L, k);
  for (size_t i = 0; i < L->positions; i++) { // the framework's freqs tensor (fp32)
    const double seq = pf_rope_seq(L, i, fe);
    for (size_t k = 0; k < h; k++) hth[i * h + k] = (float)pf_rope_theta(L, seq, hinv[k], fe);
  }
  PF_CUDA_TRY(cudaMalloc(&d64, (n ? n : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dth, (na ? na : 1) * sizeof(float)));
  PF_CUDA_TRY(cudaMalloc(&dt, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dy, (n ? n : 1) * sizeof(T)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dth, hth, na * sizeof(float), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(d64, t, n * sizeof(double), cudaMemcpyHostToDevice));
  if (n) {
    pf_nat_narrow<T><<<blocks, 256>>>(d64, dt, n);
    pf_ropec_apply<T><<<blocks, 256>>>(*L, dth, dt, dy, dfe);
    pf_nat_widen<T><<<blocks, 256>>>(dy, d64, n);
  }
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, d64, n * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  free(hth);
  free(hinv);
  cudaFree(d64);
  cudaFree(dth);
  cudaFree(dt);
  cudaFree(dy);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_rope_cuda(const pf_rope_launch *L, const double *t, double *out, unsigned *fe) {
  if (L->algo == PF_ROPE_TORCH) return pf_error(PF_ERR_UNSUPPORTED, "rope/torch has no CUDA kernel (PyTorch's CPU composite)");
  if (L->positions * L->heads * L->dim > 0x7fffffffull * 256) return pf_error(PF_ERR_ARG, "rope on CUDA: too many elements");
  switch (L->dtype) {
  case PF_FP32: return pf_ropec_run<float>(L, t, out, fe);
  case PF_FP16: return pf_ropec_run<__half>(L, t, out, fe);
  case PF_BF16: return pf_ropec_run<__nv_bfloat16>(L, t, out, fe);
  default: return pf_error(PF_ERR_ARG, "rope on CUDA: no native type for dtype %d", (int)L->dtype);
  }
}

// the module's entry point for the host side (kernels/rope/rope_cpu.c)
PF_CUDA_ENTRY(pf_rope_cuda)
