// Gradient clipping on the GPU: one thread per tensor for its part of the norm (its elements
// in order, as the emulation sums them), one thread for the global norm and the coefficient
// (tensors in order), then one thread per element for the clipped gradient. The order is the
// emulation's, so the two backends compute the same bits (the device's sqrt and division are
// IEEE-exact under -prec-sqrt=true -prec-div=true, which the build sets).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/clip/clip_cuda.h"
#include "core/cuda_module.h"

__global__ void pf_clip_part_kernel(pf_clip_launch L, const double *g, double *part, unsigned *fe_out) {
  const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= L.tensors) return;
  unsigned fe = 0;
  part[t] = pf_clip_tensor_part(L.variant, L.dtype, L.accum, g + t * L.n, L.n, &fe);
  if (fe) atomicOr(fe_out, fe);
}

__global__ void pf_clip_norm_kernel(pf_clip_launch L, const double *part, double *norm_coef, unsigned *fe_out) {
  unsigned fe = 0;
  const double norm = pf_clip_norm_of(L.variant, L.dtype, part, L.tensors, &fe);
  norm_coef[0] = norm;
  norm_coef[1] = pf_clip_coef(L.variant, L.dtype, L.max_norm, norm, &fe);
  if (fe) atomicOr(fe_out, fe);
}

__global__ void pf_clip_apply_kernel(pf_clip_launch L, const double *g, const double *norm_coef, double *out,
                                     unsigned *fe_out) {
  const size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x == 0) out[0] = norm_coef[0];
  if (x >= L.tensors * L.n) return;
  unsigned fe = 0;
  out[1 + x] = pf_clip_apply(L.variant, L.dtype, g[x], norm_coef[1], &fe);
  if (fe) atomicOr(fe_out, fe);
}

extern "C" pf_status pf_clip_cuda(const pf_clip_launch *L, const double *g, double *out, unsigned *fe) {
  const size_t N = L->tensors * L->n;
  double *dg = NULL, *dpart = NULL, *dnc = NULL, *dout = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  PF_CUDA_TRY(cudaMalloc(&dg, (N ? N : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dpart, (L->tensors ? L->tensors : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dnc, 2 * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dout, (N + 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dg, g, N * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  pf_clip_part_kernel<<<(unsigned)((L->tensors + 127) / 128), 128>>>(*L, dg, dpart, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  pf_clip_norm_kernel<<<1, 1>>>(*L, dpart, dnc, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  pf_clip_apply_kernel<<<(unsigned)((N + 256) / 256), 256>>>(*L, dg, dnc, dout, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, dout, (N + 1) * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dg);
  cudaFree(dpart);
  cudaFree(dnc);
  cudaFree(dout);
  cudaFree(dfe);
  return st;
}

// the module's entry point for the host side (kernels/clip/clip_cpu.c)
PF_CUDA_ENTRY(pf_clip_cuda)
