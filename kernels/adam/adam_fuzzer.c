/* adam_fuzzer: bytes -> one Adam step case -> kernel vs oracle; aborts on a finding inside
 * the contract's domain.
 *
 * Layout: [variant][dtype][mode: bit 0 l2, bit 1 ema=lerp, bit 2 bias_correction=device, bit 3
 *         scalars=binary64 (FusedAdam family); PyTorch's fused kernels: bits 0-1 both set
 *         found_inf, bits 2-3 grad_scale 1, 2^16, 1000, 2^-3][n*][step: 2 bytes][lr][beta1][beta2][eps][wd][mode bits]
 *   mode bits even: raw bit patterns of p, g, m, v, each in its own dtype (fp32: 4 bytes,
 *                   fp16/bf16: 2; missing ones are 0), so tiny, huge and special values occur;
 *   odd:            [seed: 8 bytes][dist] and one scale exponent per input (p, g, m, v).
 * Hyperparameters come from tables of the values training runs use, and their neighbours.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fuzz_decode.h"
#include "kernels/adam/adam_math.h"
#include "core/kernel.h"

static const double lrs[] = {1e-3, 3e-4, 6e-5, 1e-5, 1e-2, 1e-1, 1e-6, 1.0};
static const double beta1s[] = {0.9, 0.95, 0.0, 0.5, 0.99, 0.8, 0.9, 0.9};
static const double beta2s[] = {0.999, 0.95, 0.98, 0.99, 0.9999, 0.5, 0.0, 0.999999};
static const double epss[] = {1e-8, 1e-6, 1e-5, 1e-12, 1e-15, 0.0, 1e-3, 1e-8};
static const double wds[] = {0.0, 0.1, 0.01, 0.05, 1.0, 0.0, 0.0, 0.1};

int pf_decode_adam_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 12) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("adam", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const uint8_t mode = pf_bytes_u8(&b);
  if (!pf_adam_is_torch(k->algo)) { /* the mode, and the FusedAdam family's legitimate choices */
    pf_case_set_param(&c, "mode", mode & 1);
    pf_case_set_param(&c, "ema", mode >> 1 & 1);
    if (k->algo != PF_ADAM_NO_BIAS_CORRECTION) pf_case_set_param(&c, "bias_correction", mode >> 2 & 1);
    pf_case_set_param(&c, "scalars", mode >> 3 & 1);
  } else if (k->algo == PF_ADAM_TORCH_FUSED || k->algo == PF_ADAM_TORCH_FUSED_CUDA) { /* what GradScaler hands them */
    static const double scales[4] = {1, 0x1p16, 1000, 0x1p-3};
    pf_case_set_param(&c, "found_inf", (mode & 3) == 3);
    pf_case_set_param(&c, "grad_scale", scales[mode >> 2 & 3]);
  }
  c.shape[0] = pf_fuzz_dim(&b, 32, 256); /* elementwise: a long tensor adds cost, not reach */
  const unsigned step = 1u + ((unsigned)pf_bytes_u8(&b) << 8 | pf_bytes_u8(&b));
  pf_case_set_param(&c, "step", step);
  pf_case_set_param(&c, "lr", lrs[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "beta1", beta1s[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "beta2", beta2s[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "eps", epss[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "wd", wds[pf_bytes_u8(&b) % 8]);
  const size_t n = c.shape[0];
  if (pf_bytes_u8(&b) % 2 == 0) {
    for (int t = 0; t < 4; t++) pf_fuzz_raw_values(&b, &c.inputs[t], k->op->input_dtype(&c, t), n);
  } else {
    const uint64_t seed = pf_bytes_u64(&b);
    const pf_dist dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    for (int t = 0; t < 4; t++) {
      c.inputs[t].seed = seed + (uint64_t)t;
      c.inputs[t].dist = dist;
      c.inputs[t].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 64) - 48);
    }
  }
  *out = c;
  return 1;
}

