/* swiglu_fuzzer: bytes -> a SwiGLU case -> kernel vs oracle; aborts on a finding inside the
 * contract's domain.
 *
 * Layout: [variant][dtype][rows][cols*][mode] then
 *   mode even: raw bit patterns of a, then b (2 bytes per fp16/bf16 element, 4 per fp32; missing
 *              ones are 0), so NaNs, infinities, subnormals and the far tails occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] for a (b drawn from the seed at that scale).
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches 8192 columns. */
#include <math.h>
#include <stdint.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"
#include "core/rng.h"

int pf_decode_swiglu_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 5) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  pf_fuzz_begin("swiglu", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.accum = PF_FP32;
  c.shape[0] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[1] = pf_fuzz_dim(&b, 64, 8192);
  if (c.shape[1] > 64) c.shape[0] = 1;
  const uint8_t mode = pf_bytes_u8(&b);
  const size_t n = c.shape[0] * c.shape[1];
  if (mode % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, n);
    pf_fuzz_raw_values(&b, &c.inputs[1], c.dtype, n);
  } else {
    const uint64_t seed = pf_bytes_u64(&b);
    c.inputs[0].seed = seed;
    c.inputs[0].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 20) - 8);
    c.inputs[1].seed = pf_seed_mix(seed, 1);
    c.inputs[1].dist = c.inputs[0].dist;
    c.inputs[1].scale = c.inputs[0].scale;
  }
  *out = c;
  return 1;
}
