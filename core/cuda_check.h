/* Check macros for CUDA runtime, cuBLAS and cuRAND calls: record the statement, file and
 * line in pf_error() and return PF_ERR_CUDA from the enclosing function. */
#ifndef PF_CUDA_CHECK_H
#define PF_CUDA_CHECK_H

#include "status.h"

#define PF_CUDA_CHECK(stmt)                                                                        \
  do {                                                                                             \
    cudaError_t pf_e_ = (stmt);                                                                    \
    if (pf_e_ != cudaSuccess)                                                                      \
      return pf_error(pf_e_ == cudaErrorNoDevice || pf_e_ == cudaErrorInsufficientDriver           \
                          ? PF_ERR_NODEVICE : PF_ERR_CUDA,                                         \
                      "%s failed: %s (%s:%d)", #stmt, cudaGetErrorString(pf_e_), __FILE__, __LINE__); \
  } while (0)

/* In a function holding a pf_status st and a done: label that frees its resources: record a
 * failed CUDA call in st (PF_ERR_NODEVICE when no device or driver can be used) and jump there. */
#define PF_CUDA_TRY(stmt)                                                                          \
  do {                                                                                             \
    cudaError_t pf_e_ = (stmt);                                                                    \
    if (pf_e_ != cudaSuccess) {                                                                    \
      st = pf_error(pf_e_ == cudaErrorNoDevice || pf_e_ == cudaErrorInsufficientDriver             \
                        ? PF_ERR_NODEVICE : PF_ERR_CUDA,                                           \
                    "%s failed: %s (%s:%d)", #stmt, cudaGetErrorString(pf_e_), __FILE__, __LINE__); \
      goto done;                                                                                   \
    }                                                                                              \
  } while (0)

#define PF_CURAND_CHECK(stmt)                                                                      \
  do {                                                                                             \
    int pf_e_ = (int)(stmt);                                                                       \
    if (pf_e_ != 0)                                                                                \
      return pf_error(PF_ERR_CUDA, "%s failed: curandStatus %d (%s:%d)", #stmt, pf_e_, __FILE__, __LINE__); \
  } while (0)

#endif
