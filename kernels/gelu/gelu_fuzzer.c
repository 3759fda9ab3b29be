/* gelu_fuzzer: bytes -> a GELU case -> kernel vs oracle; aborts on a finding inside the
 * contract's domain.
 *
 * Layout: [variant][dtype][flags: bit 0 the tanh form][rows][cols*][mode] then
 *   mode even: raw bit patterns of x (2 bytes per fp16/bf16 element, 4 per fp32; missing ones
 *              are 0), so NaNs, infinities, subnormals and the far negative tail occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] for x.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches 8192 columns. */
#include <math.h>
#include <stdint.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

int pf_decode_gelu_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 6) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  pf_fuzz_begin("gelu", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.accum = PF_FP32;
  pf_case_set_param(&c, "approximate", pf_bytes_u8(&b) & 1);
  c.shape[0] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[1] = pf_fuzz_dim(&b, 64, 8192);
  if (c.shape[1] > 64) c.shape[0] = 1; /* a long row: one (the oracle's cost) */
  const uint8_t mode = pf_bytes_u8(&b);
  if (mode % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, c.shape[0] * c.shape[1]);
  } else {
    c.inputs[0].seed = pf_bytes_u64(&b);
    c.inputs[0].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 16) - 8);
  }
  *out = c;
  return 1;
}
