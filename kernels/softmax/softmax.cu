// Softmax forward on the GPU: the same row code as softmax_cpu.c (pf_softmax_row in
// softmax_math.h), one thread per row in column order, with the project's binary32 exp
// (core/expf.h, not the device's expf): the CPU's bits exactly. A first, simple kernel: the CUDA
// backend proper (launch shapes, cuBLAS, --backend cuda) is built on it later.
#include <cuda_runtime.h>
#include <stdio.h>

#include "core/cuda_check.h"
#include "kernels/softmax/softmax_cuda.h"
#include "kernels/softmax/softmax_math.h"
#include "core/cuda_module.h"

__global__ void pf_softmax_fwd_kernel(const double *x, double *y, double *tmp, size_t rows, size_t cols,
                                      int algo, int no_max, pf_dtype acc, pf_dtype out_t, double alpha_acc,
                                      int mask, double maskval, unsigned *fe_out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  unsigned fe = 0;
  pf_softmax_row(algo, no_max, acc, out_t, x + i * cols, i, rows, cols, alpha_acc, mask, maskval, y + i * cols,
                 tmp + i * cols, &fe);
  if (fe) atomicOr(fe_out, fe);
}

extern "C" pf_status pf_softmax_fwd_cuda(const pf_softmax_launch *L, const double *x, double *y, unsigned *fe) {
  const size_t rows = L->rows, cols = L->cols, n = rows * cols, bytes = n * sizeof(double);
  double *dx = NULL, *dy = NULL, *dt = NULL;
  unsigned *dfe = NULL;
  pf_status st = PF_OK;
  PF_CUDA_TRY(cudaMalloc(&dx, bytes));
  PF_CUDA_TRY(cudaMalloc(&dy, bytes));
  PF_CUDA_TRY(cudaMalloc(&dt, bytes));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  {
    const unsigned threads = 128, blocks = (unsigned)((rows + threads - 1) / threads);
    pf_softmax_fwd_kernel<<<blocks, threads>>>(dx, dy, dt, rows, cols, L->algo, L->no_max, L->acc, L->out_t,
                                               L->alpha_acc, L->mask, L->maskval, dfe);
  }
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost));
  unsigned hfe;
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dt);
  cudaFree(dfe);
  return st;
}

// the module's entry point for the host side (kernels/softmax/softmax_cpu.c)
PF_CUDA_ENTRY(pf_softmax_fwd_cuda)
