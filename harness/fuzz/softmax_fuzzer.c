/* softmax_fuzzer: bytes -> a softmax case -> kernel vs oracle; aborts on a finding.
 *
 * Layout: [variant][dtype][flags: accum, mask, mask value][rows][cols][alpha][mode] then
 *   mode even: raw element bit patterns (2 bytes per fp16/bf16 element, 4 per fp32; missing
 *              ones are 0), so NaNs, infinities and subnormals occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent][special rate] for the generator.
 * $PF_FUZZ_FAULT switches a fault on (only variants that honour it are chosen). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/fuzz_common.h"
#include "kernels/kernel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 7) return 0;
  pf_bytes b = {data, size, 0};
  const char *fault = pf_fuzz_fault();
  const pf_kernel *cands[16];
  size_t nc = 0;
  for (size_t i = 0; i < pf_kernel_count() && nc < 16; i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, "softmax") == 0 && (!fault || pf_kernel_has_fault(k, fault))) cands[nc++] = k;
  }
  if (!nc) abort(); /* PF_FUZZ_FAULT names no softmax fault */
  const pf_kernel *k = cands[pf_bytes_u8(&b) % nc];
  pf_case c;
  if (pf_case_init(&c, "softmax", k->variant, 0)) abort();
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t flags = pf_bytes_u8(&b);
  c.accum = (flags & 1) ? c.dtype : PF_FP32;
  pf_case_set_param(&c, "mask", (flags >> 1) & 1);
  pf_case_set_param(&c, "mask_value", ((flags >> 2) & 3) % 3);
  c.shape[0] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[1] = 1 + pf_bytes_u8(&b) % 64;
  const uint8_t a = pf_bytes_u8(&b);
  /* alpha: 1, a power of two, or (1 + k/8) times one; always a binary32 value */
  pf_case_set_param(&c, "alpha", a < 64 ? 1.0 : ldexp(1.0 + (a >> 4 & 7) / 8.0, (a & 15) - 8));
  const uint8_t mode = pf_bytes_u8(&b);
  const size_t n = c.shape[0] * c.shape[1];
  pf_gen *g = &c.inputs[0];
  if (mode % 2 == 0) {
    const size_t w = c.dtype == PF_FP32 ? 4 : 2;
    g->dist = PF_DIST_VALUES;
    g->values = malloc(n * sizeof(double));
    g->nvalues = n;
    for (size_t i = 0; i < n; i++) {
      uint32_t bits = 0;
      for (size_t k2 = 0; k2 < w; k2++) bits = bits << 8 | pf_bytes_u8(&b);
      g->values[i] = pf_decode(c.dtype, bits);
    }
  } else {
    g->seed = pf_bytes_u64(&b);
    g->dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    g->scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 20);
    g->special_rate = pf_bytes_u8(&b) / 1024.0;
  }
  pf_fuzz_run_case("softmax_fuzzer", &c);
  pf_case_free(&c);
  return 0;
}
