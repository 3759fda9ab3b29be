// Adam / AdamW step on the GPU over a list of tensors in one launch, as apex's
// multi_tensor_apply (FusedAdam) and PyTorch's _fused_adamw_ do: the tensors lie back to
// back in one device arena, the host cuts them into chunks (pf_adam_chunks) and block b runs
// chunk b, each element through the same scalar step as the CPU emulation (pf_adam_step,
// adam_math.h). Elementwise, so CPU and GPU results differ only where the device's sqrt or
// division would differ from the host's (both IEEE-exact under -prec-div=true
// -prec-sqrt=true, which the build sets), and the chunking cannot change a bit.
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_check.h"
#include "kernels/adam/adam_cuda.h"
#include "core/cuda_module.h"

__global__ void pf_adam_multi_tensor_kernel(int variant, int mode, pf_dtype pt, pf_dtype st, pf_adam_hyper h,
                                            double *p, double *m, double *v, const double *g, const size_t *base,
                                            const pf_adam_chunk *chunks, unsigned *fe_out) {
  const pf_adam_chunk c = chunks[blockIdx.x];
  const size_t at = base[c.tensor] + c.start;
  unsigned fe = 0;
  for (size_t i = threadIdx.x; i < c.count; i += blockDim.x)
    pf_adam_step(variant, mode, pt, st, &h, &p[at + i], g[at + i], &m[at + i], &v[at + i], &fe);
  if (fe) atomicOr(fe_out, fe);
}

extern "C" pf_status pf_adam_step_cuda(int variant, int mode, pf_dtype pt, pf_dtype sdt, const pf_adam_hyper *h,
                                       const pf_adam_tensor *ts, size_t nt, unsigned *fe) {
  pf_status st = PF_OK;
  size_t total = 0, nchunks = 0;
  size_t *sizes = (size_t *)malloc((nt ? nt : 1) * sizeof(size_t));
  size_t *base = (size_t *)malloc((nt ? nt : 1) * sizeof(size_t));
  pf_adam_chunk *chunks = NULL;
  double *host = NULL, *arena = NULL;
  size_t *dbase = NULL;
  pf_adam_chunk *dchunks = NULL;
  unsigned *dfe = NULL, hfe = 0;
  if (!sizes || !base) {
    st = pf_error(PF_ERR_NOMEM, "adam: cannot allocate the list of %zu tensors", nt);
    goto done;
  }
  for (size_t t = 0; t < nt; t++) {
    sizes[t] = ts[t].n;
    base[t] = total;
    total += ts[t].n;
  }
  nchunks = pf_adam_chunks(sizes, nt, PF_ADAM_CHUNK, NULL, 0);
  if (!nchunks) goto done; /* nothing to update */
  if (nchunks > 0x7fffffffu) {
    st = pf_error(PF_ERR_ARG, "adam: %zu chunks exceed one launch's grid", nchunks);
    goto done;
  }
  chunks = (pf_adam_chunk *)malloc(nchunks * sizeof *chunks);
  host = (double *)malloc(4 * total * sizeof(double)); /* p | m | v | g */
  if (!chunks || !host) {
    st = pf_error(PF_ERR_NOMEM, "adam: cannot allocate the staging of %zu elements", total);
    goto done;
  }
  pf_adam_chunks(sizes, nt, PF_ADAM_CHUNK, chunks, nchunks);
  for (size_t t = 0; t < nt; t++) {
    const size_t b = base[t], bytes = ts[t].n * sizeof(double);
    if (!bytes) continue;
    memcpy(host + b, ts[t].p, bytes);
    memcpy(host + total + b, ts[t].m, bytes);
    memcpy(host + 2 * total + b, ts[t].v, bytes);
    memcpy(host + 3 * total + b, ts[t].g, bytes);
  }
  PF_CUDA_TRY(cudaMalloc(&arena, 4 * total * sizeof(double)));
  PF_CUDA_TRY(cudaMalloc(&dbase, nt * sizeof(size_t)));
  PF_CUDA_TRY(cudaMalloc(&dchunks, nchunks * sizeof *dchunks));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemcpy(arena, host, 4 * total * sizeof(double), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dbase, base, nt * sizeof(size_t), cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemcpy(dchunks, chunks, nchunks * sizeof *dchunks, cudaMemcpyHostToDevice));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  pf_adam_multi_tensor_kernel<<<(unsigned)nchunks, 256>>>(variant, mode, pt, sdt, *h, arena, arena + total,
                                                          arena + 2 * total, arena + 3 * total, dbase, dchunks, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  PF_CUDA_TRY(cudaMemcpy(host, arena, 3 * total * sizeof(double), cudaMemcpyDeviceToHost));
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (size_t t = 0; t < nt; t++) {
    const size_t b = base[t], bytes = ts[t].n * sizeof(double);
    if (!bytes) continue;
    memcpy(ts[t].p, host + b, bytes);
    memcpy(ts[t].m, host + total + b, bytes);
    memcpy(ts[t].v, host + 2 * total + b, bytes);
  }
  *fe |= hfe;
done:
  cudaFree(arena);
  cudaFree(dbase);
  cudaFree(dchunks);
  cudaFree(dfe);
  free(host);
  free(chunks);
  free(base);
  free(sizes);
  return st;
}

// the module's entry point for the host side (kernels/adam/adam_cpu.c)
PF_CUDA_ENTRY(pf_adam_step_cuda)
