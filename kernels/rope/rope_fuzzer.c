/* rope_fuzzer: bytes -> a rotary-embedding case -> kernel vs oracle; aborts on a finding inside
 * the contract's domain.
 *
 * Layout: [variant][dtype][flags: bit 0 accum in storage, 1-2 scaling (none, linear, ntk, none),
 *   3 layout interleaved, 4-5 base (10^4, 5 10^5, 10^6, 2)][factor][offset: bits, 3 bytes]
 *   [positions*][heads][dim*][mode] then
 *   mode even: raw bit patterns of t (2 bytes per fp16/bf16 element, 4 per fp32; missing ones
 *              are 0), so NaNs, infinities and subnormals occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] for t.
 * The offset is a random number of `bits` bits (0 to 24): positions spread log-uniformly to 1.7e7.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches 4096 positions
 * or head dimensions of 512. A parameter the variant does not take is left at its default. */
#include <math.h>
#include <stdint.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"
#include "core/rng.h"

int pf_decode_rope_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 10) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("rope", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t flags = pf_bytes_u8(&b);
  c.accum = (flags & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  static const double bases[4] = {1e4, 5e5, 1e6, 2};
  static const int scalings[4] = {0, 1, 2, 0};
  const int scaling = scalings[(flags >> 1) & 3];
  pf_case_set_param(&c, "scaling", scaling);
  pf_case_set_param(&c, "layout", (flags >> 3) & 1);
  pf_case_set_param(&c, "base", bases[(flags >> 4) & 3]);
  const uint8_t fb = pf_bytes_u8(&b);
  if (scaling) pf_case_set_param(&c, "factor", 1 + fb % 64);
  const unsigned bits = pf_bytes_u8(&b) % 25;
  uint32_t off = (uint32_t)pf_bytes_u8(&b) | (uint32_t)pf_bytes_u8(&b) << 8 | (uint32_t)pf_bytes_u8(&b) << 16;
  pf_case_set_param(&c, "offset", bits ? (double)(off & ((1u << bits) - 1)) : 0);
  c.shape[0] = pf_fuzz_dim(&b, 16, 4096);
  c.shape[1] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[2] = 2 * pf_fuzz_dim(&b, 32, 256);
  if (scaling == 2 && c.shape[2] < 4) c.shape[2] = 4;
  if (c.shape[0] > 16) c.shape[1] = 1; /* many positions: one head (the oracle's cost) */
  const uint8_t mode = pf_bytes_u8(&b);
  const size_t n = c.shape[0] * c.shape[1] * c.shape[2];
  if (mode % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, n);
  } else {
    c.inputs[0].seed = pf_bytes_u64(&b);
    c.inputs[0].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 24);
  }
  *out = c;
  return 1;
}
