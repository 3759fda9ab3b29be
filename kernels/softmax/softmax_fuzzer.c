/* softmax_fuzzer: bytes -> a softmax case -> kernel vs oracle; aborts on a finding.
 *
 * Layout: [variant][dtype][flags: accum, mask, mask value, bit 7 top-left mask][rows][cols*][alpha][mode] then
 *   mode even: raw element bit patterns (2 bytes per fp16/bf16 element, 4 per fp32; missing
 *              ones are 0), so NaNs, infinities and subnormals occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent][special rate] for the generator.
 * $PF_FUZZ_FAULT switches a fault on (only variants that honour it are chosen).
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

int pf_decode_softmax_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 7) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("softmax", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t flags = pf_bytes_u8(&b);
  c.accum = (flags & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  pf_case_set_param(&c, "mask", (flags >> 1) & 1 ? 1 + (flags >> 7) : 0); /* bit 7: causal-top-left */
  pf_case_set_param(&c, "mask_value", ((flags >> 2) & 3) % 3);
  c.shape[0] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[1] = pf_fuzz_dim(&b, 64, 4096);
  if (c.shape[1] > 64) c.shape[0] = 1; /* a long row: one of them (the oracle's cost) */
  const uint8_t a = pf_bytes_u8(&b);
  /* alpha: 1, a power of two, or (1 + k/8) times one; always a binary32 value */
  pf_case_set_param(&c, "alpha", a < 64 ? 1.0 : ldexp(1.0 + (a >> 4 & 7) / 8.0, (a & 15) - 8));
  const uint8_t mode = pf_bytes_u8(&b);
  const size_t n = c.shape[0] * c.shape[1];
  pf_gen *g = &c.inputs[0];
  if (mode % 2 == 0) {
    pf_fuzz_raw_values(&b, g, c.dtype, n);
  } else {
    g->seed = pf_bytes_u64(&b);
    g->dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    g->scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 20);
    g->special_rate = pf_bytes_u8(&b) / 1024.0;
  }
  *out = c;
  return 1;
}

