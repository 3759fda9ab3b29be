// Adam / AdamW step on the GPU: one thread per element running the same scalar step as the
// CPU emulation (pf_adam_step, adam_math.h). Elementwise, so CPU and GPU results differ
// only where the device's sqrt/division differ from the host's (they are IEEE-exact under
// -prec-div=true -prec-sqrt=true, which the build sets).
#include <cuda_runtime.h>

#include "harness/cuda_check.h"
#include "kernels/adam/adam_cuda.h"

__global__ void pf_adam_step_kernel(int variant, int mode, pf_dtype pt, pf_dtype st, pf_adam_hyper h, double *p,
                                    const double *g, double *m, double *v, size_t n, unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned fe = 0;
  pf_adam_step(variant, mode, pt, st, &h, &p[i], g[i], &m[i], &v[i], &fe);
  if (fe) atomicOr(fe_out, fe);
}

extern "C" pf_status pf_adam_step_cuda(int variant, int mode, pf_dtype pt, pf_dtype sdt, const pf_adam_hyper *h,
                                       double *p, const double *g, double *m, double *v, size_t n, unsigned *fe) {
  const size_t bytes = n * sizeof(double);
  double *dp = NULL, *dg = NULL, *dm = NULL, *dv = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  PF_CUDA_TRY(cudaMalloc(&dp, bytes));
  PF_CUDA_TRY(cudaMalloc(&dg, bytes));
  PF_CUDA_TRY(cudaMalloc(&dm, bytes));
  PF_CUDA_TRY(cudaMalloc(&dv, bytes));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dp, p, bytes, cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dg, g, bytes, cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dm, m, bytes, cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dv, v, bytes, cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  pf_adam_step_kernel<<<(unsigned)((n + 255) / 256), 256>>>(variant, mode, pt, sdt, *h, dp, dg, dm, dv, n, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(p, dp, bytes, cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(m, dm, bytes, cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(v, dv, bytes, cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dp);
  cudaFree(dg);
  cudaFree(dm);
  cudaFree(dv);
  cudaFree(dfe);
  return st;
}
