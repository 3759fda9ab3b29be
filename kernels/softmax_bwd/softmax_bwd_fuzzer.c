/* softmax_bwd_fuzzer: bytes -> a softmax backward case -> kernel vs oracle; aborts on a finding
 * inside the contract's domain.
 * Layout: [variant][dtype][accum][rows][cols*][mode] then
 *   mode even: raw bit patterns of x, then of dy (2 bytes per fp16/bf16 element, 4 per fp32;
 *              missing ones are 0), so subnormals, infinities and NaNs occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] for x, the same for dy.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

int pf_decode_softmax_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 6) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("softmax_bwd", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.accum = (pf_bytes_u8(&b) & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  c.shape[0] = 1 + pf_bytes_u8(&b) % 4;
  c.shape[1] = pf_fuzz_dim(&b, 64, 4096);
  if (c.shape[1] > 64) c.shape[0] = 1; /* a long row: one of them (the oracle's cost) */
  const size_t n = c.shape[0] * c.shape[1];
  if (pf_bytes_u8(&b) % 2 == 0) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, n);
    pf_fuzz_raw_values(&b, &c.inputs[1], c.dtype, n);
  } else {
    for (int t = 0; t < 2; t++) {
      c.inputs[t].seed = pf_bytes_u64(&b);
      c.inputs[t].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
      c.inputs[t].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 48) - 24);
    }
  }
  *out = c;
  return 1;
}
