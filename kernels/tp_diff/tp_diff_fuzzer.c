/* tp_diff_fuzzer: bytes -> one TP=1 against TP=2 (or DP=2) case (tp_diff) -> copy checks and
 * the oracle's legitimate sets; aborts on a finding inside the contract's domain.
 *
 * Layout: [variant][dtype and layout][steps][hidden][ffn][vocab][seq][microbatches][tied][lr]
 *         [beta1][beta2][eps][wd][max_norm][spread][loss scale][seed: 8 bytes][dist]
 *         [scale exponent of init][of grads]
 * The steps byte s: 1 + s % 6 steps; when (s / 8) % 2 is 1 (half the inputs of a built-in
 * variant with 2 steps or more) the second run is also saved after step k = 1 + (s / 16) % (steps
 * - 1) and loaded into a fresh group (resume_at), or when s >= 128 each run is saved at its
 * layout after step k and loaded at the other (reshard_at), early in the input so that short
 * inputs reach it.
 * The dtype byte b: fp16 when b is odd (and the variant takes it), else bf16 (fp32 for a
 * variant with neither); when (b / 2) % 4 is 3 (a
 * quarter of the inputs: the TP faults need TP=2, the DP fault DP=2) the second run has two
 * data-parallel replicas, as TP=2 x DP=2 or, when (b / 8) % 2 is 1 or the case is tied (so that
 * no layout needs more than 4 ranks), TP=1 x DP=2, with an even number of micro-batches. The
 * byte is in the shortest inputs (8 bytes), so a fuzzer reaches every layout at once. When
 * (b / 16) % 4 is 3 the layer has two experts (expert-parallel when DP=2); when (b / 64) % 2
 * is 1 a bf16 case reduces its gradients in bf16 (comm=1) and an fp16 case without experts runs
 * the dynamic loss scaler (scaler=1: Megatron's, or DeepSpeed's for its ZeRO variants, which
 * take fp16 too and then reduce in fp16 when (b / 128) % 2 is 1). A rank
 * group's variant whose hello fixes tied, tp, dp, experts or comm gets them fitted into its ranges.
 * When the tied byte's (b / 4) % 4 is 3 (a quarter of the inputs) the case has 2 to 4 layers.
 * Sizes stay small (hidden <= 16, ffn <= 32, vocab <= 33: odd vocabularies split unevenly);
 * gradients are spread around the clipping threshold so that clipping is on in some steps
 * and off in others. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/fuzz_decode.h"
#include "core/kernel.h"
#include "kernels/tp_diff/tp_diff_spec.h"

static const double lrs[] = {1e-3, 3e-4, 6e-5, 1e-4, 3e-3, 1e-2, 1e-5, 6e-4};
static const double beta1s[] = {0.9, 0.95, 0.0, 0.5, 0.99, 0.8, 0.9, 0.9};
static const double beta2s[] = {0.95, 0.999, 0.98, 0.99, 0.9999, 0.9, 0.95, 0.999};
static const double epss[] = {1e-8, 1e-6, 1e-5, 1e-12, 1e-15, 1e-3, 1e-8, 1e-8};
static const double wds[] = {0.1, 0.0, 0.01, 0.05, 1.0, 0.1, 0.0, 0.1};
static const double max_norms[] = {1.0, 0.5, 0.1, 10, 1e-3, 1e3, 1.0, 1.0};
static const double spreads[] = {3, 1, 0, 6, 10, 0.5, 3, 2};

int pf_decode_tp_diff_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 8) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("tp_diff", &b, &c);
  /* fp16 only for a variant that takes it (deepspeed, BF16_Optimizer, is bf16 only); fp32 for one that takes
   * nothing else (torch) */
  const uint8_t db = pf_bytes_u8(&b);
  c.dtype = db % 2 && (k->dtypes & PF_DT(PF_FP16)) ? PF_FP16 : (k->dtypes & PF_DT(PF_BF16)) ? PF_BF16 : PF_FP32;
  const int dp2 = db / 2 % 4 == 3, tp1 = db / 8 % 2, experts = db / 16 % 4 == 3;
  const uint8_t sb = pf_bytes_u8(&b);
  c.shape[0] = 1 + sb % 6;
  c.shape[1] = 2 * (1 + pf_bytes_u8(&b) % 8);
  c.shape[2] = 2 * (1 + pf_bytes_u8(&b) % 16);
  c.shape[3] = 2 + pf_bytes_u8(&b) % 32;
  c.shape[4] = 1 + pf_bytes_u8(&b) % 8;
  pf_case_set_param(&c, "microbatches", 1 + pf_bytes_u8(&b) % 4);
  /* a zero byte: tied (DeepSpeed's ZeRO optimizer here: never, and no experts), one layer */
  const uint8_t tb = pf_bytes_u8(&b);
  pf_case_set_param(&c, "tied", tb % 4 != 3 && !pf_tp_algo_zero(k->algo));
  pf_fuzz_fit_param(k, &c, "tied"); /* a rank group's layout, as its hello fixes it */
  pf_case_set_param(&c, "layers", tb / 4 % 4 == 3 ? 2 + tb / 16 % (PF_TP_MAXLAYERS - 1) : 1); /* a quarter: 2 to 4 */
  pf_fuzz_fit_param(k, &c, "layers");
  const int tied = pf_case_param(&c, "tied") != 0;
  if (dp2) {
    pf_case_set_param(&c, "tp", tp1 || tied ? 1 : 2);
    pf_case_set_param(&c, "dp", 2);
  }
  pf_case_set_param(&c, "experts", experts && k->algo != PF_TP_TORCH && !pf_tp_algo_zero(k->algo) ? 2 : 0);
  pf_fuzz_fit_param(k, &c, "tp");
  pf_fuzz_fit_param(k, &c, "dp");
  pf_fuzz_fit_param(k, &c, "experts");
  /* half the bf16 inputs reduce in bf16 (DeepSpeed's engine's default); half of DeepSpeed's ZeRO
   * in fp16 in fp16 (the same default) */
  pf_case_set_param(&c, "comm", c.dtype == PF_BF16 ? db / 64 % 2 : c.dtype == PF_FP16 && pf_tp_algo_zero(k->algo) && db / 128 % 2);
  pf_fuzz_fit_param(k, &c, "comm");
  const double mb = pf_case_param(&c, "microbatches");
  if (pf_case_param(&c, "dp") == 2 && (int)mb % 2) pf_case_set_param(&c, "microbatches", mb + 1);
  pf_case_set_param(&c, "lr", lrs[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "beta1", beta1s[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "beta2", beta2s[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "eps", epss[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "wd", wds[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "max_norm", max_norms[pf_bytes_u8(&b) % 8]);
  pf_case_set_param(&c, "spread", spreads[pf_bytes_u8(&b) % 8]);
  const uint8_t ls = pf_bytes_u8(&b);
  if (c.dtype == PF_FP16) pf_case_set_param(&c, "loss_scale", ldexp(1.0, ls % 20));
  /* half the fp16 inputs without experts (the comm bit of the dtype byte): Megatron's dynamic
   * scaler, from a scale where the gradients overflow in some steps (2^23 down to 2^12), at least 4 steps of gradients of one size
   * (spread 0), the scale mostly growing every step and halving on every overflow,
   * so that it hovers where a few gradients overflow: skipped steps inside the contract, and
   * steps where only one rank's shard overflows */
  if (c.dtype == PF_FP16 && db / 64 % 2 && pf_case_param(&c, "experts") == 0) {
    pf_case_set_param(&c, "scaler", 1);
    pf_case_set_param(&c, "loss_scale", ldexp(1.0, 23 - ls % 12));
    pf_case_set_param(&c, "growth_interval", ls / 12 % 4 == 3 ? 2 : 1);
    pf_case_set_param(&c, "hysteresis", ls / 48 % 4 == 3 ? 2 : 1);
    pf_case_set_param(&c, "spread", 0);
    if (c.shape[0] < 4) c.shape[0] = 4;
  }
  pf_fuzz_fit_param(k, &c, "scaler");
  if (pf_case_param(&c, "scaler") == 0) { /* a rank group without the dynamic scaler: its settings back too */
    pf_case_set_param(&c, "growth_interval", 1000);
    pf_case_set_param(&c, "hysteresis", 2);
  }
  const uint64_t seed = pf_bytes_u64(&b);
  const pf_dist dist = (pf_dist)(pf_bytes_u8(&b) % 4);
  for (int t = 0; t < 3; t++) {
    c.inputs[t].seed = seed + (uint64_t)t;
    c.inputs[t].dist = dist;
  }
  c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 16) - 12);
  c.inputs[1].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 8) - 4);
  /* a round trip (the same layout), or with the top bit a reshard (the other layout); a kernel
   * process only when its hello takes the parameter (its own save and load) */
  const char *trip = sb >= 128 ? "reshard_at" : "resume_at";
  const int resumes = !k->like || pf_kernel_param(k, pf_op_param_index(k->op, trip));
  if (resumes && c.shape[0] > 1 && sb / 8 % 2) {
    pf_case_set_param(&c, trip, 1 + (double)(sb / 16 % (c.shape[0] - 1)));
    /* the frameworks' checkpoints shard in equal parts (Megatron pads the vocabulary to a multiple
     * of TP: megatron-core's dist_checkpointing refuses an uneven split) */
    if (k->like && pf_case_param(&c, "tp") == 2 && c.shape[3] % 2) c.shape[3]++;
  }
  *out = c;
  return 1;
}

