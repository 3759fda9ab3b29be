/* Shared by the gpu-labelled tests: the device's name, or exit 77 (ctest: skipped) when the
 * build has no CUDA or no device can be used. */
#ifndef PF_GPU_SKIP_H
#define PF_GPU_SKIP_H

#include <stdio.h>
#include <stdlib.h>

#include "core/backend.h"

static void pf_require_gpu(void) {
#ifndef PF_HAVE_CUDA
  printf("built without CUDA: skipped\n");
  exit(77);
#else
  char name[256];
  if (pf_cuda_describe(name, sizeof name) != PF_OK) {
    printf("skipped: %s\n", pf_error_message());
    exit(77);
  }
  printf("device: %s\n", name);
#endif
}

#endif
