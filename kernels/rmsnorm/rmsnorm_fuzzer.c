/* rmsnorm_fuzzer: bytes -> an RMSNorm case -> kernel vs oracle; aborts on a finding inside the
 * contract's domain.
 *
 * Layout: [variant][dtype][flags: bit 0 accum in storage, 1 fp32 weights, 2 zero-centred gamma,
 *   4-5 eps (1e-5, 1e-6, 2^-23, 0)][rows][cols*][mode] then
 *   mode even: raw bit patterns of x, then gamma (2 bytes per fp16/bf16 element, 4 per fp32;
 *              missing ones are 0), so NaNs, infinities, subnormals and rows of zeros occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] for x (gamma drawn from the seed at scale 1).
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches rows of 16384.
 * A parameter the variant does not take is left at its default. */
#include <math.h>
#include <stdint.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"
#include "core/rng.h"

int pf_decode_rmsnorm_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 7) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("rmsnorm", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t flags = pf_bytes_u8(&b);
  c.accum = (flags & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  static const double eps[4] = {1e-5, 1e-6, 0x1p-23, 0};
  pf_case_set_param(&c, "eps", pf_round(PF_FP32, eps[(flags >> 4) & 3]));
  pf_case_set_param(&c, "weights", (flags >> 1) & 1);
  pf_case_set_param(&c, "zero_centered_gamma", (flags >> 2) & 1);
  pf_fuzz_fit_param(k, &c, "zero_centered_gamma");
  c.shape[0] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[1] = pf_fuzz_dim(&b, 64, 16384);
  if (c.shape[1] > 64) c.shape[0] = 1; /* a long row: one of them (the oracle's cost) */
  const uint8_t mode = pf_bytes_u8(&b);
  if (mode % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, c.shape[0] * c.shape[1]);
    pf_fuzz_raw_values(&b, &c.inputs[1], (flags >> 1) & 1 ? PF_FP32 : c.dtype, c.shape[1]);
  } else {
    const uint64_t seed = pf_bytes_u64(&b);
    c.inputs[0].seed = seed;
    c.inputs[0].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 24);
    c.inputs[1].seed = pf_seed_mix(seed, 1);
  }
  *out = c;
  return 1;
}
