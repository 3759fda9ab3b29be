// Dynamic loss scaling on the GPU, step by step as a training loop does it: a kernel scales the
// step's gradients into the gradient dtype and flags an overflow, the host's scaler (the same
// pf_ls_update as the emulation) decides, and a second kernel unscales in fp32 (or writes 0
// for a skipped step). The element operations are loss_scale_math.h's, so both backends
// compute the same bits.
#include <cuda_runtime.h>

#include "harness/cuda_check.h"
#include "kernels/loss_scale/loss_scale_cuda.h"

__global__ void pf_ls_scale_kernel(const double *g, double *h, size_t n, pf_dtype t, double S, int *overflow,
                                   unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned fe = 0;
  int of = 0;
  h[i] = pf_ls_scale_elem(t, g[i], S, &of, &fe);
  if (of) atomicOr(overflow, 1);
  if (fe) atomicOr(fe_out, fe);
}

__global__ void pf_ls_unscale_kernel(const double *h, double *out, size_t n, double inv, int applied,
                                     unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned fe = 0;
  out[i] = pf_ls_unscale_elem(h[i], inv, applied, &fe);
  if (fe) atomicOr(fe_out, fe);
}

extern "C" pf_status pf_loss_scale_cuda(const pf_ls_launch *L, const double *g, double *out, unsigned *fe) {
  const size_t T = L->steps, n = L->n, N = T * n;
  double *dg = NULL, *dh = NULL, *dout = NULL;
  int *dof = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  pf_ls_state s = L->start;
  const unsigned blocks = (unsigned)((n + 255) / 256);
  PF_CUDA_TRY(cudaMalloc(&dg, (N ? N : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dh, (n ? n : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dout, (N ? N : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dof, sizeof(int)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dg, g, N * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  for (size_t t = 0; t < T; t++) {
    const double S = s.scale;
    int overflow = 0;
    PF_CUDA_TRY(cudaMemset(dof, 0, sizeof(int)));
    if (n) pf_ls_scale_kernel<<<blocks, 256>>>(dg + t * n, dh, n, L->dtype, S, dof, dfe);
    PF_CUDA_TRY(cudaGetLastError());
    PF_CUDA_TRY(cudaMemcpy(&overflow, dof, sizeof(int), cudaMemcpyDeviceToHost));
    const int status = pf_ls_update(L->variant, &s, overflow);
    const double inv = pf_round(PF_FP32, 1.0 / S);
    const int applied = status == PF_LS_APPLIED || (L->no_skip && status == PF_LS_SKIPPED);
    if (n) pf_ls_unscale_kernel<<<blocks, 256>>>(dh, dout + t * n, n, inv, applied, dfe);
    PF_CUDA_TRY(cudaGetLastError());
    out[N + t] = status;
    out[N + T + t] = s.scale;
  }
  PF_CUDA_TRY(cudaMemcpy(out, dout, N * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dg);
  cudaFree(dh);
  cudaFree(dout);
  cudaFree(dof);
  cudaFree(dfe);
  return st;
}
