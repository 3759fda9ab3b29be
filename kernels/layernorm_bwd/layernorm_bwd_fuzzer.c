/* layernorm_bwd_fuzzer: bytes -> a LayerNorm backward case -> kernel vs oracle; aborts on a
 * finding inside the contract's domain. RMSNorm's backward (rmsnorm_bwd_fuzzer.c) takes the same
 * inputs and parameters and decodes them here too.
 *
 * Layout: [variant][dtype][flags: bit 0 accum in storage, 1 fp32 weights, 2 zero-centred gamma,
 *   3-4 eps (1e-5, 1e-6, 1e-12, 0), 5-7 blocks (1, 2, 4, ... 128)][rows*][cols*][mode] then
 *   mode even: raw bit patterns of x, then dy, then gamma (2 bytes per fp16/bf16 element, 4 per
 *              fp32; missing ones are 0), so NaNs, infinities, subnormals and constant rows occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent][offset exponent, sign] for x, [dist][scale
 *              exponent] for dy (gamma drawn from the seed at scale 1).
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches 16384 rows (the
 * token reduction over a batch) or a row of 16384 (today's hidden sizes); a case holds at most
 * 2^17 elements (the oracle's cost under the sanitizers: 16384 tokens come with rows of 8, a row
 * of 16384 with 8 tokens).
 * A parameter the variant does not take is left at its default. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"
#include "core/rng.h"
#include "kernels/layernorm_bwd/layernorm_bwd.h"

int pf_decode_norm_bwd(const char *op, const uint8_t *data, size_t size, pf_case *out) {
  if (size < 7) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin(op, &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t flags = pf_bytes_u8(&b);
  c.accum = (flags & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  static const double eps[4] = {1e-5, 1e-6, 1e-12, 0};
  pf_case_set_param(&c, "eps", pf_round(PF_FP32, eps[(flags >> 3) & 3]));
  pf_case_set_param(&c, "weights", (flags >> 1) & 1);
  pf_case_set_param(&c, "zero_centered_gamma", (flags >> 2) & 1);
  pf_case_set_param(&c, "blocks", (double)(1u << (flags >> 5)));
  pf_fuzz_fit_param(k, &c, "zero_centered_gamma");
  pf_fuzz_fit_param(k, &c, "blocks");
  c.shape[0] = pf_fuzz_dim(&b, 64, 16384);
  c.shape[1] = pf_fuzz_dim(&b, 64, 16384);
  if (c.shape[0] * c.shape[1] > ((size_t)1 << 17)) c.shape[0] = ((size_t)1 << 17) / c.shape[1];
  const uint8_t mode = pf_bytes_u8(&b);
  const pf_dtype wt = (flags >> 1) & 1 ? PF_FP32 : c.dtype;
  if (mode % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, c.shape[0] * c.shape[1]);
    pf_fuzz_raw_values(&b, &c.inputs[1], c.dtype, c.shape[0] * c.shape[1]);
    pf_fuzz_raw_values(&b, &c.inputs[2], wt, c.shape[1]);
  } else {
    const uint64_t seed = pf_bytes_u64(&b);
    pf_gen *g = &c.inputs[0];
    g->seed = seed;
    g->dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    g->scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 24);
    const uint8_t o = pf_bytes_u8(&b);
    g->offset = o < 128 ? 0 : ((o & 1) ? -1 : 1) * ldexp(1.0, (int)((o >> 1) % 24) - 4);
    pf_gen *d = &c.inputs[1];
    d->seed = pf_seed_mix(seed, 1);
    d->dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    d->scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 24);
    c.inputs[2].seed = pf_seed_mix(seed, 2);
  }
  *out = c;
  return 1;
}

int pf_decode_layernorm_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  return pf_decode_norm_bwd("layernorm_bwd", data, size, out);
}
