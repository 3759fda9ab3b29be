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

extern "C" pf_status pf_adam_step_cuda(int variant, int mode, pf_dtype pt, pf_dtype st, const pf_adam_hyper *h,
                                       double *p, const double *g, double *m, double *v, size_t n, unsigned *fe) {
  const size_t bytes = n * sizeof(double);
  double *dp = NULL, *dg = NULL, *dm = NULL, *dv = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st_ = PF_OK;
#define PF_TRY(stmt)                                                                                 \
  do {                                                                                               \
    cudaError_t e_ = (stmt);                                                                         \
    if (e_ != cudaSuccess) {                                                                         \
      st_ = pf_error(e_ == cudaErrorNoDevice || e_ == cudaErrorInsufficientDriver ? PF_ERR_NODEVICE  \
                                                                                  : PF_ERR_CUDA,     \
                     "%s failed: %s (%s:%d)", #stmt, cudaGetErrorString(e_), __FILE__, __LINE__);    \
      goto done;                                                                                     \
    }                                                                                                \
  } while (0)
  PF_TRY(cudaMalloc(&dp, bytes));
  PF_TRY(cudaMalloc(&dg, bytes));
  PF_TRY(cudaMalloc(&dm, bytes));
  PF_TRY(cudaMalloc(&dv, bytes));
  PF_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_TRY(cudaMemcpy(dp, p, bytes, cudaMemcpyHostToDevice));
  PF_TRY(cudaMemcpy(dg, g, bytes, cudaMemcpyHostToDevice));
  PF_TRY(cudaMemcpy(dm, m, bytes, cudaMemcpyHostToDevice));
  PF_TRY(cudaMemcpy(dv, v, bytes, cudaMemcpyHostToDevice));
  PF_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  pf_adam_step_kernel<<<(unsigned)((n + 255) / 256), 256>>>(variant, mode, pt, st, *h, dp, dg, dm, dv, n, dfe);
  PF_TRY(cudaGetLastError());
  PF_TRY(cudaMemcpy(p, dp, bytes, cudaMemcpyDeviceToHost));
  PF_TRY(cudaMemcpy(m, dm, bytes, cudaMemcpyDeviceToHost));
  PF_TRY(cudaMemcpy(v, dv, bytes, cudaMemcpyDeviceToHost));
  PF_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dp);
  cudaFree(dg);
  cudaFree(dm);
  cudaFree(dv);
  cudaFree(dfe);
  return st_;
#undef PF_TRY
}
