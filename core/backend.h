/* Where a kernel runs: the CPU emulation (always) or the GPU (CUDA builds, with a device).
 * The runner calls the kernel's run_cpu or run_cuda; everything else (inputs, oracle, bound,
 * verdicts) is the same for both. */
#ifndef PF_BACKEND_H
#define PF_BACKEND_H

#include <stddef.h>

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { PF_BACKEND_CPU = 0, PF_BACKEND_CUDA = 1 };

const char *pf_backend_name(int backend);            /* "cpu", "cuda" */
pf_status pf_backend_parse(const char *s, int *out); /* PF_ERR_ARG: "--backend: 'x' is not cpu or cuda" */

/* The GPU a CUDA run would use: "NVIDIA H100 80GB HBM3, sm_90, CUDA runtime 13000, driver
 * 13000, cuBLAS 130000 (CUBLAS_DEFAULT_MATH: no TF32)". PF_ERR_NODEVICE with one line when there is none: a build without
 * CUDA, no driver, or no device (CUDA_VISIBLE_DEVICES= hides them all). */
pf_status pf_cuda_describe(char *buf, size_t len);

/* What to add to "X has no CUDA implementation": where to look, or that the build has none. */
const char *pf_cuda_missing_hint(void);

/* Two backends' outputs of one case: how many of the n elements are bitwise equal (NaN equal
 * to NaN), and the largest distance in ulps of the element's dtype (dt[i], or the pf_dtype t
 * when dt is NULL or dt[i] == PF_NDTYPES); INT64_MAX where one is NaN and the other not. */
void pf_backend_diff(int t, const unsigned char *dt, const double *a, const double *b, size_t n, size_t *equal,
                     int64_t *max_ulps);

#ifdef __cplusplus
}
#endif
#endif
