// The device a CUDA run uses (backend.h): checked once, described for the results.
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "harness/backend.h"
#include "harness/cuda_check.h"

extern "C" pf_status pf_cuda_describe(char *buf, size_t len) {
  if (len) buf[0] = 0;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    return pf_error(PF_ERR_NODEVICE, "--backend cuda: no CUDA device (%s)",
                    e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
  cudaDeviceProp p;
  PF_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  int rt = 0, drv = 0, blas = 0, major = 0, minor = 0, patch = 0;
  PF_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  PF_CUDA_CHECK(cudaDriverGetVersion(&drv));
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    blas = major * 10000 + minor * 100 + patch;
  snprintf(buf, len, "%s, sm_%d%d, CUDA runtime %d, driver %d, cuBLAS %d (CUBLAS_DEFAULT_MATH: no TF32)", p.name,
           p.major, p.minor, rt, drv, blas);
  return PF_OK;
}
