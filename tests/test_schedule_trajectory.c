/* schedule (trajectories): cases whose exact trajectory and failure are derived by hand —
 * constant gradients (Adam then moves a parameter by lr g/(|g| + eps) a step), the first
 * divergent step of a parameter kept in bf16, a lost update, loss-scaler skips and the
 * DeepSpeed stop (seed 000), fp16 state underflow, and the gradient stream's shaping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/runner.h"
#include "kernels/loss_scale/loss_scale_math.h"
#include "kernels/schedule/schedule_spec.h"

static void fill(pf_gen *g, size_t n, double x) {
  pf_gen_free(g);
  g->dist = PF_DIST_VALUES;
  g->values = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) g->values[i] = x;
  g->nvalues = n;
}

/* n parameters p0, zero curvature and a constant gradient g: the gradient never depends on
 * the parameters, so the exact trajectory is p*_t = p0 - lr_t g / (|g| + eps) summed. */
static void const_case(pf_case *c, const char *variant, pf_dtype t, size_t steps, size_t n, double p0, double g,
                       double lr) {
  assert_int_equal(pf_case_init(c, "schedule", variant, 1), PF_OK);
  c->dtype = t;
  c->shape[0] = steps;
  c->shape[1] = n;
  pf_case_set_param(c, "lr", lr);
  pf_case_set_param(c, "decay", 0); /* constant */
  fill(&c->inputs[0], n, p0);
  fill(&c->inputs[1], n, 0.0);
  fill(&c->inputs[2], steps * n, g);
}

static pf_verdict run(pf_case *c, pf_run *r) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(c);
  return r->cmp.verdict;
}

static void test_schedule_constant_gradient_exact_trajectory(void **state) {
  pf_case c;
  pf_run r;
  const_case(&c, "fp32-state", PF_FP32, 10, 1, 1.0, 1.0, 1e-2);
  assert_int_equal(run(&c, &r), PF_V_OK);
  for (int t = 1; t <= 10; t++) {
    assert_true(fabs(r.oracle.exact[PF_SCHED_PARAMS(10, 1) + t - 1] - (1 - t * 1e-2 / (1 + 1e-8))) < 1e-15);
    assert_true(r.out[PF_SCHED_STATUS(10) + t - 1] == PF_LS_APPLIED);
    assert_true(r.out[PF_SCHED_SCALE(10) + t - 1] == 1);
  }
  assert_true(fabs(r.out[PF_SCHED_PARAMS(10, 1) + 9] - 0.9) < 1e-6);
  assert_string_equal(r.note, "");
  pf_run_free(&r);
}

static void test_schedule_bf16_parameter_stagnates(void **state) {
  /* lr 1e-3 is below half the bf16 gap under 1 (2^-9): a bf16 parameter never moves, while
   * the exact one loses 1e-3 a step (not a lost update: each exact step is below half a gap).
   * The allowed outputs are the bf16 values between the roundings of p* -+ 1e-2 (|p*| + lr);
   * 1.0 leaves them once p* + 1e-2 (p* + 1e-3) < 1 - 2^-9 (the midpoint below 1), i.e.
   * 1.01001 - 1.01e-3 t < 0.998046875, t > 11.84: step 12, index 11.
   * The fp32 master keeps every update (its bf16 copy is within one bf16 ulp, 0.4%). */
  pf_case c;
  pf_run r;
  const_case(&c, "lowp-state", PF_BF16, 20, 1, 1.0, 1.0, 1e-3);
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  assert_string_equal(r.born, "master");
  assert_int_equal(r.born_at, PF_SCHED_MASTER(20, 1) + 11);
  assert_non_null(strstr(r.note, "the parameter 0 left the exact trajectory at step 12"));
  assert_true(r.out[PF_SCHED_PARAMS(20, 1) + 19] == 1.0);
  pf_run_free(&r);
  const_case(&c, "fp32-state", PF_BF16, 20, 1, 1.0, 1.0, 1e-3);
  assert_int_equal(run(&c, &r), PF_V_OK);
  assert_true(r.out[PF_SCHED_PARAMS(20, 1) + 19] < 1.0);
  pf_run_free(&r);
}

static void test_schedule_lost_update_decay_and_step_rounded_apart(void **state) {
  /* PyTorch AdamW, bf16, p = 1, lr 1e-3, wd 1, g = 1: it first decays p by lr wd p = 1e-3,
   * then steps by lr g/(|g| + eps) ~ 1e-3; each is below half the bf16 gap under 1 (2^-9 =
   * 0.00195), so each rounds back to 1. The exact step moves p by 2e-3 > 2^-9 (p* = 0.998
   * rounds to 0.99609375): the update is lost at step 1, while p is still within 1% of p*.
   * The fp32 master applies it. */
  pf_case c;
  pf_run r;
  const_case(&c, "lowp-state", PF_BF16, 4, 1, 1.0, 1.0, 1e-3);
  pf_case_set_param(&c, "wd", 1);
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  assert_int_equal(r.born_at, PF_SCHED_MASTER(4, 1));
  assert_true(r.out[PF_SCHED_MASTER(4, 1)] == 1.0);
  assert_true(r.oracle.rounded[PF_SCHED_MASTER(4, 1)] == 0x1.fep-1); /* 0.99609375 */
  assert_non_null(strstr(r.note, "update lost at step 1: the parameter 0 stayed 1"));
  pf_run_free(&r);
  const_case(&c, "fp32-state", PF_BF16, 4, 1, 1.0, 1.0, 1e-3);
  pf_case_set_param(&c, "wd", 1);
  assert_int_equal(run(&c, &r), PF_V_OK);
  assert_true(r.out[PF_SCHED_MASTER(4, 1)] < 0.9981 && r.out[PF_SCHED_MASTER(4, 1)] > 0.9979);
  pf_run_free(&r);
}

static void test_schedule_fp16_state_underflow_goes_non_finite(void **state) {
  /* PyTorch AdamW with fp16 state and gradient 2^-20 (an fp16 subnormal): v = (1 - beta2) g^2
   * = 1e-3 2^-40 is below half the smallest fp16 subnormal (2^-25) and eps = 1e-8 rounds to 0
   * in fp16, so the denominator is 0 and m / 0 = inf: the parameter is -inf after step 1. The
   * exact step moves it by lr g / (g + eps) ~ 0.99 lr. With an fp32 master and state, fine. */
  pf_case c;
  pf_run r;
  const_case(&c, "lowp-state", PF_FP16, 4, 1, 1.0, 0x1p-20, 1e-2);
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  assert_int_equal(r.born_at, PF_SCHED_MASTER(4, 1));
  assert_true(isinf(r.out[PF_SCHED_MASTER(4, 1)]));
  assert_non_null(strstr(r.note, "the parameter 0 is not finite after step 1"));
  pf_run_free(&r);
  const_case(&c, "fp32-state", PF_FP16, 4, 1, 1.0, 0x1p-20, 1e-2);
  assert_int_equal(run(&c, &r), PF_V_OK);
  pf_run_free(&r);
}

/* Seed 000 inside a trajectory: fp16, DeepSpeed scaler with initial scale 2^16 and hysteresis
 * 2, gradient 2^-10 (S g = 2^6 fits fp16), inf from step 10. DeepSpeed: step 10 spends the
 * hysteresis, steps 11..26 halve the scale 2^15 .. 2^0, step 27 finds it at the minimum 1 and
 * stops the run (status 2 from then on). Megatron reaches 1 at step 26 and keeps skipping, as
 * the exact run skips every non-finite step: its trajectory stays exact. */
static void seed000_case(pf_case *c, const char *scaler) {
  const_case(c, "fp32-state", PF_FP16, 40, 2, 1.0, 0x1p-10, 1e-3);
  assert_int_equal(pf_case_set_param(c, "scaler", strcmp(scaler, "deepspeed") == 0 ? 1 : 2), PF_OK);
  pf_case_set_param(c, "scale0", 0x1p16);
  pf_case_set_param(c, "hysteresis", 2);
  pf_case_set_param(c, "nonfinite_from", 10);
}

static void test_schedule_seed000_deepspeed_stops_megatron_skips(void **state) {
  pf_case c;
  pf_run r;
  seed000_case(&c, "deepspeed");
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  assert_false(r.in_domain);
  for (int t = 1; t <= 40; t++) {
    const double st = r.out[PF_SCHED_STATUS(40) + t - 1], S = r.out[PF_SCHED_SCALE(40) + t - 1];
    assert_true(st == (t < 10 ? PF_LS_APPLIED : t < 27 ? PF_LS_SKIPPED : PF_LS_STOPPED));
    assert_true(S == (t <= 10 ? 0x1p16 : t <= 26 ? ldexp(1, 16 - (t - 10)) : 1));
  }
  assert_string_equal(r.born, "status");
  assert_int_equal(r.born_at, PF_SCHED_STATUS(40) + 26);
  assert_non_null(strstr(r.note, "the run stopped at step 27"));
  pf_run_free(&r);

  seed000_case(&c, "megatron");
  assert_int_equal(run(&c, &r), PF_V_OK);
  assert_true(r.in_domain);
  for (int t = 10; t <= 40; t++) assert_true(r.out[PF_SCHED_STATUS(40) + t - 1] == PF_LS_SKIPPED);
  assert_true(r.out[PF_SCHED_SCALE(40) + 39] == 1);
  pf_run_free(&r);
}

static void test_schedule_no_skip_fault_applies_inf(void **state) {
  /* loss-scale-no-skip: step 10's overflowed gradient goes into Adam: the master is not
   * finite after step 10 while the exact run skipped it. */
  pf_case c;
  pf_run r;
  seed000_case(&c, "megatron");
  strcpy(c.fault, "loss-scale-no-skip");
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  assert_string_equal(r.born, "status");
  assert_int_equal(r.born_at, PF_SCHED_STATUS(40) + 9);
  assert_non_null(strstr(r.note, "step 10 applied a gradient whose true value is not finite"));
  assert_false(isfinite(r.out[PF_SCHED_MASTER(40, 2) + 9 * 2]));
  pf_run_free(&r);
}

static void test_schedule_overflow_skips_delay_the_trajectory(void **state) {
  /* DeepSpeed's default initial scale 2^32 with gradient 2^-10: S g overflows fp16 (max
   * 65504 < 2^16) until S <= 2^25. Step 1 spends the hysteresis, steps 2..8 halve 2^32 to 2^25,
   * step 9 is the first applied: 8 steps skipped that the exact run applied. With u = lr g/(g
   * + eps) = 1e-3/(1 + 2^10 1e-8) the run then trails the exact parameter by 8u ~ 0.008, which
   * the tolerance 0.01 (|p*| + lr) = 0.01 (1.001 - k u) allows until k > 1.001/u - 800 =
   * 201.01: the parameter leaves at step 202 (fp32 master roundings move it by < 1 step). */
  pf_case c;
  pf_run r;
  const_case(&c, "fp32-state", PF_FP16, 260, 1, 1.0, 0x1p-10, 1e-3);
  pf_case_set_param(&c, "scaler", 1);
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  for (int t = 1; t <= 9; t++) assert_true(r.out[PF_SCHED_STATUS(260) + t - 1] == (t < 9 ? PF_LS_SKIPPED : PF_LS_APPLIED));
  assert_true(r.out[PF_SCHED_SCALE(260) + 7] == 0x1p25);
  const size_t step = (r.born_at - PF_SCHED_MASTER(260, 1)) % 260 + 1;
  assert_true(step >= 201 && step <= 203);
  assert_non_null(strstr(r.note, "skipped 8 steps for overflow that the exact run applied"));
  pf_run_free(&r);
}

static void test_schedule_gradient_stream(void **state) {
  /* 10 parameters in 3 tensors: sizes 4, 3, 3. Noise 1, decaying by 1/2 a step, a spike x8 at
   * step 2 on tensor 2 (parameters 4..6), +inf from step 4. */
  pf_case c;
  pf_run r;
  const_case(&c, "fp32-state", PF_FP32, 5, 10, 1.0, 1.0, 1e-3);
  pf_case_set_param(&c, "tensors", 3);
  pf_case_set_param(&c, "noise_decay", 0.5);
  pf_case_set_param(&c, "spike_step", 2);
  pf_case_set_param(&c, "spike_mag", 8);
  pf_case_set_param(&c, "spike_tensor", 2);
  pf_case_set_param(&c, "nonfinite_from", 4);
  pf_case_set_param(&c, "scaler", 3); /* pytorch: skips for ever */
  run(&c, &r);
  const double *g = r.in[2].data;
  for (size_t i = 0; i < 10; i++) {
    assert_true(g[i] == 1);
    assert_true(g[10 + i] == (i >= 4 && i <= 6 ? 4 : 0.5));
    assert_true(g[20 + i] == 0.25);
    assert_true(isinf(g[30 + i]) && isinf(g[40 + i]));
  }
  assert_true(r.in_domain);
  assert_true(r.out[PF_SCHED_STATUS(5) + 3] == PF_LS_SKIPPED);
  pf_run_free(&r);

  /* a quarter of 2^16 noise values become -2^-20 (binomial: 16384 +- 5 sigma = 554) */
  const_case(&c, "fp32-state", PF_FP32, 4096, 16, 1.0, -1.0, 1e-3);
  pf_case_set_param(&c, "tiny_fraction", 0.25);
  run(&c, &r);
  size_t tiny = 0;
  for (size_t x = 0; x < r.in[2].n; x++) {
    assert_true(r.in[2].data[x] == -1 || r.in[2].data[x] == -0x1p-20);
    tiny += r.in[2].data[x] == -0x1p-20;
  }
  assert_true(tiny > 16384 - 554 && tiny < 16384 + 554);
  pf_run_free(&r);
}

/* fp32's range in the run, derived by hand (bf16, p0 0, zero curvature, so g is the noise;
 * lr 1e-3 constant, beta2 0.999): FusedAdam's vhat = fl32(fl32(fl32(0.001) g) g) / bc2 with
 * bc2 = fl32(1 - fl32(0.999)) = 0x1.0624p-10 at step 1. g = 2^63: vhat ~ 2^126, the step
 * moves p by lr (in the domain, ok). g = 2^64: fl32(0.001) 2^128 / 0x1.0624p-10 =
 * 2^128 (0x1.0624dep0 / 0x1.0624p0) > fp32's max: vhat overflows, the update is 0: outside
 * the domain. A static scale 1/2 with g = 0x1.ff8p127: S g = 0x1.ff8p126 lies above the bf16
 * midpoint 0x1.ffp126 and rounds to 2^127, which unscaled by 2 is 2^128 = inf while the true
 * gradient is finite: outside. The norm's sum of squares of g = 2^64 (max_norm 1) is 2^128. */
static void test_schedule_fp32_range_outside_domain(void **state) {
  static const struct {
    double g;
    int scaler; /* 4: static */
    double max_norm;
    const char *why; /* NULL: in the domain and ok */
  } cases[] = {
      {0x1p63, 0, 0, NULL},
      {0x1p64, 0, 0, "step 1: Adam's arithmetic"},
      {0x1p63, 4, 0, NULL},
      {0x1.fep127, 4, 0, "step 1: Adam's arithmetic"},
      {0x1.ff8p127, 4, 0, "step 1: the unscaled gradient fl32(h fl32(1/S)) (a loss scale below 1) overflowed"},
      {0x1p63, 0, 1, NULL},
      {0x1p64, 0, 1, "step 1: the clipping norm's fp32 sum of squares overflowed"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    pf_case c;
    pf_run r;
    const_case(&c, "fp32-state", PF_BF16, 1, 1, 0.0, cases[k].g, 1e-3);
    if (cases[k].scaler) {
      pf_case_set_param(&c, "scaler", cases[k].scaler);
      pf_case_set_param(&c, "scale0", 0.5);
    }
    pf_case_set_param(&c, "max_norm", cases[k].max_norm);
    const pf_verdict v = run(&c, &r);
    if (!cases[k].why) {
      if (!r.in_domain || v != PF_V_OK) fail_msg("g %a: %s, %s", cases[k].g, pf_verdict_name(v), r.why);
      if (cases[k].max_norm == 0) assert_true(r.out[PF_SCHED_MASTER(1, 1)] == pf_round(PF_FP32, -1e-3));
    } else {
      assert_false(r.in_domain);
      if (!strstr(r.why, cases[k].why)) fail_msg("g %a: '%s' does not say '%s'", cases[k].g, r.why, cases[k].why);
    }
    pf_run_free(&r);
  }
}

static void test_schedule_case_checks(void **state) {
  pf_case c;
  const_case(&c, "fp32-state", PF_FP32, 5, 4, 1.0, 1.0, 1e-3);
  pf_case_set_param(&c, "tensors", 5);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "tensors"));
  pf_case_set_param(&c, "tensors", 2);
  pf_case_set_param(&c, "spike_tensor", 3);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  pf_case_set_param(&c, "spike_tensor", 0);
  pf_case_set_param(&c, "scale0", 1024);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "scale0 is set but scaler is none"));
  pf_case_set_param(&c, "scaler", 2);
  assert_int_equal(pf_case_validate(&c), PF_OK);
  pf_case_set_param(&c, "nonfinite_from", 6);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  pf_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schedule_constant_gradient_exact_trajectory),
      cmocka_unit_test(test_schedule_bf16_parameter_stagnates),
      cmocka_unit_test(test_schedule_lost_update_decay_and_step_rounded_apart),
      cmocka_unit_test(test_schedule_fp16_state_underflow_goes_non_finite),
      cmocka_unit_test(test_schedule_seed000_deepspeed_stops_megatron_skips),
      cmocka_unit_test(test_schedule_no_skip_fault_applies_inf),
      cmocka_unit_test(test_schedule_overflow_skips_delay_the_trajectory),
      cmocka_unit_test(test_schedule_gradient_stream),
      cmocka_unit_test(test_schedule_fp32_range_outside_domain),
      cmocka_unit_test(test_schedule_case_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
