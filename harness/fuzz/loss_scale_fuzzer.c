/* loss_scale_fuzzer: bytes -> a gradient stream under a loss scaler -> kernel vs the
 * reference scalers; aborts on a finding inside the contract's domain.
 *
 * Layout: [variant][dtype][steps][n][scale0 exponent][window][hysteresis][decay][spike step]
 *         [spike exponent][non-finite from][mode] then
 *   mode even: raw binary32 bit patterns of the true gradients (4 bytes each; missing: 0);
 *   mode odd:  [seed: 8 bytes][dist][scale exponent].
 * $PF_FUZZ_FAULT=loss-scale-no-skip applies overflowed steps. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/fuzz_common.h"
#include "kernels/kernel.h"

static const double decays[] = {1.0, 1.0, 0.5, 0.9, 2.0, 0.99, 1.1, 0.0};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 12) return 0;
  pf_bytes b = {data, size, 0};
  const char *fault = pf_fuzz_fault();
  const pf_kernel *cands[16];
  size_t nc = 0;
  for (size_t i = 0; i < pf_kernel_count() && nc < 16; i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, "loss_scale") == 0 && (!fault || pf_kernel_has_fault(k, fault))) cands[nc++] = k;
  }
  if (!nc) abort(); /* PF_FUZZ_FAULT names no loss_scale fault */
  const pf_kernel *k = cands[pf_bytes_u8(&b) % nc];
  pf_case c;
  if (pf_case_init(&c, "loss_scale", k->variant, 0)) abort();
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.shape[0] = 1 + pf_bytes_u8(&b) % 64;
  c.shape[1] = 1 + pf_bytes_u8(&b) % 16;
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
    g->dist = PF_DIST_VALUES;
    g->values = malloc(n * sizeof(double));
    g->nvalues = n;
    for (size_t i = 0; i < n; i++) {
      uint32_t bits = 0;
      for (int k2 = 0; k2 < 4; k2++) bits = bits << 8 | pf_bytes_u8(&b);
      g->values[i] = pf_decode(PF_FP32, bits);
    }
  } else {
    g->seed = pf_bytes_u64(&b);
    g->dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    g->scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 64) - 40);
  }
  pf_fuzz_run_case("loss_scale_fuzzer", &c);
  pf_case_free(&c);
  return 0;
}
