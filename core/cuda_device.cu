// The device a CUDA run uses (backend.h): checked once, described for the results; and the
// table of the module these kernels are built into (cuda_module.h).
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/cuda_module.h"

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

// The entry points the kernels' .cu files add (PF_CUDA_ENTRY): constant-initialized, so that
// the order in which the files' initializers run does not matter.
static struct {
  const char *name;
  void *fn;
} pf_cuda_entries[64];
static int pf_cuda_nentries;

extern "C" int pf_cuda_module_add(const char *name, void *fn) {
  if (pf_cuda_nentries < (int)(sizeof pf_cuda_entries / sizeof pf_cuda_entries[0]))
    pf_cuda_entries[pf_cuda_nentries++] = {name, fn};
  return 0;
}

static void *pf_cuda_module_entry(const char *name) {
  for (int i = 0; i < pf_cuda_nentries; i++)
    if (strcmp(pf_cuda_entries[i].name, name) == 0) return pf_cuda_entries[i].fn;
  return NULL;
}

// The table the executable loads this module for (cuda_module.h): the only symbol it exports.
extern "C" __attribute__((visibility("default"))) const pf_cuda_module *pf_cuda_module_get(void) {
  static const pf_cuda_module m = {PF_CUDA_MODULE_ABI, pf_cuda_describe, pf_cuda_module_entry};
  return &m;
}
