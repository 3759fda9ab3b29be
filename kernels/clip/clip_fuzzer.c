/* clip_fuzzer: bytes -> gradient clipping by global norm -> kernel vs oracle; aborts on a
 * finding inside the contract's domain.
 * Layout: [variant][dtype][accum][tensors][n*][max_norm exponent][mode] then
 *   mode even: raw bit patterns of the gradients (2 bytes fp16/bf16, 4 fp32; missing: 0);
 *   mode odd:  [seed: 8 bytes][dist][scale exponent].
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

int pf_decode_clip_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 8) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("clip", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t acc = pf_bytes_u8(&b);
  c.accum = (acc & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  c.shape[0] = 1 + pf_bytes_u8(&b) % 8;
  c.shape[1] = pf_fuzz_dim(&b, 64, 4096);
  if (c.shape[1] > 64) c.shape[0] = 1; /* a long row: one of them (the oracle's cost) */
  pf_case_set_param(&c, "max_norm", ldexp(1.0, (int)(pf_bytes_u8(&b) % 32) - 16));
  const size_t n = c.shape[0] * c.shape[1];
  if (pf_bytes_u8(&b) % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, n);
  } else {
    c.inputs[0].seed = pf_bytes_u64(&b);
    c.inputs[0].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 48) - 24);
  }
  *out = c;
  return 1;
}

