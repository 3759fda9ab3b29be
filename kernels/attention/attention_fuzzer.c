/* attention_fuzzer: bytes -> an attention case -> kernel vs oracle; aborts on a finding
 * inside the contract's domain.
 *
 * Layout: [variant][dtype][flags: accum, mask, mask value, softmax accum, bit 7 top-left mask][batch*heads]
 *         [q_len][k_len*][head_dim][block or layer][mode] then
 *   mode even: raw bit patterns of Q, K, V (2 bytes per fp16/bf16 element, 4 per fp32;
 *              missing ones are 0);
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
#include "kernels/attention/attention_math.h"
#include "core/kernel.h"

int pf_decode_attention_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 11) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("attention", &b, &c);
  const int flash = k->algo == PF_ATTN_FLASH, layered = k->algo == PF_ATTN_LAYER_SCALED;
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t flags = pf_bytes_u8(&b);
  c.accum = (flags & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  pf_case_set_param(&c, "mask", (flags >> 1) & 1 ? 1 + (flags >> 7) : 0); /* bit 7: causal-top-left */
  pf_case_set_param(&c, "mask_value", ((flags >> 2) & 3) % 3);
  if (!flash && !layered) pf_case_set_param(&c, "softmax_accum", (flags >> 4) & 1);
  const uint8_t bh = pf_bytes_u8(&b);
  c.shape[0] = 1 + (bh & 1);
  c.shape[1] = 1 + (bh >> 1 & 1);
  c.shape[2] = 1 + pf_bytes_u8(&b) % 8;
  c.shape[3] = pf_fuzz_dim(&b, 16, 512);
  c.shape[4] = 1 + pf_bytes_u8(&b) % 16;
  const uint8_t extra = pf_bytes_u8(&b);
  if (flash) pf_case_set_param(&c, "block", 1 + extra % 8);
  if (layered) pf_case_set_param(&c, "layer", 1 + extra % 16);
  const uint8_t mode = pf_bytes_u8(&b);
  if (mode % 2 == 0) {
    for (int t = 0; t < 3; t++) pf_fuzz_raw_values(&b, &c.inputs[t], c.dtype, k->op->input_count(&c, t));
  } else {
    const uint64_t seed = pf_bytes_u64(&b);
    const pf_dist dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    const double scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 24) - 10);
    const double special = pf_bytes_u8(&b) / 4096.0;
    for (int t = 0; t < 3; t++) {
      c.inputs[t].seed = seed + (uint64_t)t;
      c.inputs[t].dist = dist;
      c.inputs[t].scale = scale;
      c.inputs[t].special_rate = special;
    }
  }
  *out = c;
  return 1;
}

