/* schedule_fuzzer: bytes -> one training trajectory (schedule case) -> the run against the
 * exact trajectory; aborts on a finding inside the contract's domain.
 *
 * Layout: [variant][dtype][steps][n][tensors][lr][lr_final][warmup][decay][beta1][beta2][eps]
 *         [wd][max_norm][noise_decay][spike_step][spike_mag][spike_tensor][tiny_fraction]
 *         [nonfinite_from][scaler][scale0][hysteresis][window][seed: 8 bytes][dist]
 *         [scale exponent of p0][of curv][of noise]
 * Short trajectories (at most 48 steps of 16 parameters) keep it well above 100 cases a
 * second; hyperparameters come from tables of the values training runs use. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"

static const double lrs[] = {1e-3, 3e-4, 6e-5, 1e-4, 3e-3, 1e-2, 1e-5, 6e-4};
static const double beta1s[] = {0.9, 0.95, 0.0, 0.5, 0.99, 0.8, 0.9, 0.9};
static const double beta2s[] = {0.999, 0.95, 0.98, 0.99, 0.9999, 0.9, 0.95, 0.999};
static const double epss[] = {1e-8, 1e-6, 1e-5, 1e-12, 1e-15, 0.0, 1e-3, 1e-8};
static const double wds[] = {0.0, 0.1, 0.01, 0.05, 1.0, 0.0, 0.0, 0.1};
static const double max_norms[] = {0, 1.0, 0.5, 0.1, 10, 0, 1.0, 0.01};
static const double noise_decays[] = {1, 0.99, 0.9, 0.5, 1.01, 1.1, 1, 1};
static const double spike_mags[] = {1e3, 1e6, 1e-3, 100, 1e9, 2, 0, 1e12};
static const double tiny_fractions[] = {0, 0.01, 0.1, 0.5, 1, 0, 0, 0.25};
static const double windows[] = {0, 1, 2, 5, 10, 100, 0, 0};

int pf_decode_schedule_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 8) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  pf_fuzz_begin("schedule", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  const size_t T = 1 + pf_bytes_u8(&b) % 48, n = 1 + pf_bytes_u8(&b) % 16;
  c.shape[0] = T;
  c.shape[1] = n;
  pf_case_set_param(&c, "tensors", 1 + pf_bytes_u8(&b) % n);
  const double lr = lrs[pf_bytes_u8(&b) % 8];
  pf_case_set_param(&c, "lr", lr);
  pf_case_set_param(&c, "lr_final", lr * (pf_bytes_u8(&b) % 5) / 4);
  pf_case_set_param(&c, "warmup", pf_bytes_u8(&b) % (T + 1));
  pf_case_set_param(&c, "decay", pf_bytes_u8(&b) % 3);
  pf_case_set_param(&c, "beta1", beta1s[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "beta2", beta2s[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "eps", epss[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "wd", wds[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "max_norm", max_norms[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "noise_decay", noise_decays[pf_bytes_u8(&b) % 8]);
  const uint8_t spike = pf_bytes_u8(&b);
  pf_case_set_param(&c, "spike_step", spike % 2 ? 1 + spike / 2 % T : 0);
  pf_case_set_param(&c, "spike_mag", spike_mags[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "spike_tensor", pf_bytes_u8(&b) % ((size_t)pf_case_param(&c, "tensors") + 1));
  pf_case_set_param(&c, "tiny_fraction", tiny_fractions[pf_bytes_u8(&b) % 8]);
  const uint8_t bad = pf_bytes_u8(&b);
  pf_case_set_param(&c, "nonfinite_from", bad % 4 == 0 ? 1 + bad / 4 % T : 0);
  const int scaler = pf_bytes_u8(&b) % 5;
  pf_case_set_param(&c, "scaler", scaler);
  const uint8_t s0 = pf_bytes_u8(&b), hyst = pf_bytes_u8(&b), win = pf_bytes_u8(&b);
  if (scaler) {
    pf_case_set_param(&c, "scale0", s0 % 4 == 0 ? 0 : ldexp(1.0, s0 % 40));
    pf_case_set_param(&c, "hysteresis", hyst % 4);
    pf_case_set_param(&c, "window", windows[win % 8]);
  }
  /* A trajectory's distance from the exact one has no a-priori bound (Adam near a minimum
   * amplifies any difference): the sweep measures it. The fuzzer judges what must hold on
   * every run: no stop, no non-finite value or applied non-finite step, no lost update. */
  pf_case_set_param(&c, "tolerance", 1e6);
  const uint64_t seed = pf_bytes_u64(&b);
  const pf_dist dist = (pf_dist)(pf_bytes_u8(&b) % 4);
  for (int t = 0; t < 3; t++) {
    c.inputs[t].seed = seed + (uint64_t)t;
    c.inputs[t].dist = dist;
    c.inputs[t].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 32) - 20);
  }
  *out = c;
  return 1;
}

