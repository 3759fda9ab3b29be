// Dynamic loss scaling on the GPU: a case's whole run of steps in one launch. One block walks
// the steps in order: its threads scale the step's gradients into the gradient dtype and flag
// an overflow, thread 0 runs the scaler's update (the same pf_ls_update as the emulation: a
// pure function of the state and the flag, so where it runs cannot change a bit; PyTorch's
// GradScaler also updates on the device, DeepSpeed and Megatron on the host), and the threads
// unscale in fp32 (or write 0 for a skipped step). A host round trip per step would make a
// case of T steps cost 2T launches and T synchronisations. The element operations are
// loss_scale_math.h's, so both backends compute the same bits.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/loss_scale/loss_scale_cuda.h"
#include "core/cuda_module.h"

__global__ void pf_ls_steps_kernel(pf_ls_launch L, const double *g, double *out, unsigned *fe_out) {
  __shared__ pf_ls_state s;
  __shared__ int overflow, applied;
  __shared__ double inv;
  const size_t T = L.steps, n = L.n;
  unsigned fe = 0;
  if (threadIdx.x == 0) s = L.start;
  for (size_t t = 0; t < T; t++) {
    if (threadIdx.x == 0) overflow = 0;
    __syncthreads(); /* the state after step t - 1, the flag cleared */
    const double S = s.scale;
    int of = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
      out[t * n + i] = pf_ls_scale_elem(L.dtype, g[t * n + i], S, &of, &fe); /* h, unscaled below */
    if (of) atomicOr(&overflow, 1);
    __syncthreads(); /* every element's flag is in */
    if (threadIdx.x == 0) {
      const int status = pf_ls_update(L.variant, &s, overflow);
      inv = pf_round(PF_FP32, 1.0 / (L.unscale_after ? s.scale : S));
      applied = status == PF_LS_APPLIED || (L.no_skip && status == PF_LS_SKIPPED);
      out[T * n + t] = status;
      out[T * n + T + t] = s.scale;
    }
    __syncthreads(); /* the step's decision is made */
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) out[t * n + i] = pf_ls_unscale_elem(out[t * n + i], inv, applied, &fe);
  }
  if (fe) atomicOr(fe_out, fe);
}

extern "C" pf_status pf_loss_scale_cuda(const pf_ls_launch *L, const double *g, double *out, unsigned *fe) {
  const size_t T = L->steps, n = L->n, N = T * n;
  double *dg = NULL, *dout = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  /* one block: a warp for small steps, up to 1024 threads for large ones */
  const unsigned threads = n >= 1024 ? 1024 : n <= 32 ? 32 : (unsigned)((n + 31) / 32 * 32);
  PF_CUDA_TRY(cudaMalloc(&dg, (N ? N : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dout, (N + 2 * T ? N + 2 * T : 1) * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dg, g, N * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  pf_ls_steps_kernel<<<1, threads>>>(*L, dg, dout, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(out, dout, (N + 2 * T) * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dg);
  cudaFree(dout);
  cudaFree(dfe);
  return st;
}

// the module's entry point for the host side (kernels/loss_scale/loss_scale_cpu.c)
PF_CUDA_ENTRY(pf_loss_scale_cuda)
