/* attention_bwd_fuzzer: bytes -> an attention backward case -> kernel vs oracle; aborts on a
 * finding inside the contract's domain.
 * Layout: [variant][dtype][accum][heads][q_len][k_len*][head_dim][mask][block][mode] then
 *   mode even: raw bit patterns of q, k, v, dO (2 bytes per fp16/bf16 element, 4 per fp32;
 *              missing ones are 0), so subnormals, infinities and NaNs occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] for each of q, k, v, dO.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

int pf_decode_attention_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 10) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("attention_bwd", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.accum = (pf_bytes_u8(&b) & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  c.shape[0] = 1;
  c.shape[1] = 1 + pf_bytes_u8(&b) % 2;
  c.shape[2] = 1 + pf_bytes_u8(&b) % 12;
  c.shape[3] = pf_fuzz_dim(&b, 12, 64); /* more costs the oracle more than it finds */
  c.shape[4] = 1 + pf_bytes_u8(&b) % 16;
  pf_case_set_param(&c, "mask", pf_bytes_u8(&b) % 3);
  const uint8_t block = pf_bytes_u8(&b);
  if (k->algo != 0) pf_case_set_param(&c, "block", 1 + block % 8); /* flash and flash-pdp's */
  const size_t nq = c.shape[1] * c.shape[2] * c.shape[4], nk = c.shape[1] * c.shape[3] * c.shape[4];
  if (pf_bytes_u8(&b) % 2 == 0) {
    for (int t = 0; t < 4; t++) pf_fuzz_raw_values(&b, &c.inputs[t], c.dtype, t == 0 || t == 3 ? nq : nk);
  } else {
    for (int t = 0; t < 4; t++) {
      c.inputs[t].seed = pf_bytes_u64(&b);
      c.inputs[t].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
      c.inputs[t].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 24) - 12);
    }
  }
  *out = c;
  return 1;
}
