/* loss_scale_fuzzer: bytes -> a gradient stream under a loss scaler -> kernel vs the
 * reference scalers; aborts on a finding inside the contract's domain.
 *
 * Layout: [variant][dtype][steps][n*][scale0 exponent][window][hysteresis][decay][spike step]
 *         [spike exponent][non-finite from][mode] then
 *   mode even: raw binary32 bit patterns of the true gradients (4 bytes each; missing: 0);
 *   mode odd:  [seed: 8 bytes][dist][scale exponent].
 * $PF_FUZZ_FAULT=loss-scale-no-skip applies overflowed steps.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

static const double decays[] = {1.0, 1.0, 0.5, 0.9, 2.0, 0.99, 1.1, 0.0};

int pf_decode_loss_scale_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 12) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  pf_fuzz_begin("loss_scale", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.shape[0] = 1 + pf_bytes_u8(&b) % 64;
  c.shape[1] = pf_fuzz_dim(&b, 16, 4096);
  if (c.shape[1] > 16 && c.shape[0] > 8) c.shape[0] = 8; /* a large step: a few of them (the oracle's cost) */
  pf_case_set_param(&c, "scale0", ldexp(1.0, pf_bytes_u8(&b) % 41));
  pf_case_set_param(&c, "window", 1 + pf_bytes_u8(&b) % 16);
  pf_case_set_param(&c, "hysteresis", 1 + pf_bytes_u8(&b) % 4);
  pf_case_set_param(&c, "decay", decays[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "spike_step", pf_bytes_u8(&b) % 65);
  pf_case_set_param(&c, "spike_mag", ldexp(1.0, pf_bytes_u8(&b) % 64));
  const uint8_t nf = pf_bytes_u8(&b);
  pf_case_set_param(&c, "nonfinite_from", nf < 192 ? 0 : nf % 65);
  const size_t n = c.shape[0] * c.shape[1];
  pf_gen *g = &c.inputs[0];
  if (pf_bytes_u8(&b) % 2 == 0) {
    pf_fuzz_raw_values(&b, g, PF_FP32, n);
  } else {
    g->seed = pf_bytes_u64(&b);
    g->dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    g->scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 64) - 40);
  }
  *out = c;
  return 1;
}

