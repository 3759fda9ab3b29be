/* loss_scale: the scalers' state machines on hand-traced streams (seed 000: DeepSpeed stops
 * at the step its state machine implies, Megatron keeps skipping), the no-skip fault, and the
 * applied gradients' contract. */
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
#include "tests/contract_check.h"

/* A case of steps x n gradients in dtype t, all equal to g (parameters at their defaults). */
static void ls_case(pf_case *c, const char *variant, pf_dtype t, size_t steps, size_t n, double g) {
  assert_int_equal(pf_case_init(c, "loss_scale", variant, 1), PF_OK);
  c->dtype = t;
  c->shape[0] = steps;
  c->shape[1] = n;
  pf_gen_free(&c->inputs[0]);
  c->inputs[0].dist = PF_DIST_VALUES;
  c->inputs[0].nvalues = steps * n;
  c->inputs[0].values = malloc(steps * n * sizeof(double));
  for (size_t i = 0; i < steps * n; i++) c->inputs[0].values[i] = g;
}

/* Runs the case into r and frees it; the case's verdict. */
static pf_verdict ls_run(pf_case *c, pf_run *r) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(c);
  return r->cmp.verdict;
}

/* fp16 steps x n gradients all equal to g, infinite from step nonfinite_from (1-based; 0 never) */
static pf_verdict run_ls(pf_run *r, const char *variant, size_t steps, size_t n, double g, double scale0,
                         int nonfinite_from, const char *fault) {
  pf_case c;
  ls_case(&c, variant, PF_FP16, steps, n, g);
  assert_int_equal(pf_case_set_param(&c, "scale0", scale0), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "nonfinite_from", nonfinite_from), PF_OK);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  return ls_run(&c, r);
}

static void test_loss_scale_deepspeed_stops_at_minimum(void **state) {
  /* scale 2^16, hysteresis 2, min 1; g = 2^-10 (S g = 64) for 9 steps, inf from step 10:
   * step 10 uses up the hysteresis (skip), steps 11..26 halve 2^16 down to 1, step 27 finds
   * the scale at its minimum and raises: the run stops there. */
  pf_run r;
  assert_int_equal(run_ls(&r, "deepspeed", 30, 4, 0x1p-10, 65536, 10, NULL), PF_V_DIVERGENT);
  const size_t T = 30, n = 4;
  for (size_t t = 0; t < T; t++) {
    const double want = t < 9 ? 0 : t < 26 ? 1 : 2;
    if (r.out[T * n + t] != want) fail_msg("step %zu: status %g, want %g", t + 1, r.out[T * n + t], want);
  }
  assert_true(r.out[T * n + T + 9] == 65536);     /* after step 10: hysteresis spent, no halving */
  assert_true(r.out[T * n + T + 10] == 32768);    /* step 11 */
  assert_true(r.out[T * n + T + 25] == 1);        /* step 26 */
  assert_true(r.out[0] == 0x1p-10);               /* an applied step passes the gradient exactly */
  pf_run_free(&r);
}

static void test_loss_scale_megatron_keeps_skipping(void **state) {
  pf_run r;
  assert_int_equal(run_ls(&r, "megatron", 30, 4, 0x1p-10, 65536, 10, NULL), PF_V_RANGE);
  const size_t T = 30, n = 4;
  for (size_t t = 9; t < T; t++) assert_true(r.out[T * n + t] == 1); /* skipped, never stopped */
  assert_true(r.out[T * n + T + 29] == 1);
  pf_run_free(&r);
}

static void test_loss_scale_growth_and_no_skip_fault(void **state) {
  /* PyTorch: window 2000 by default; g = 1 overflows at 2^16 (65536 > 65520): step 1 skips
   * and halves to 2^15 (32768 < 65520), then steps apply. With loss-scale-no-skip the first
   * step applies inf: an overflow where the true gradient is 1. */
  pf_run r;
  assert_int_equal(run_ls(&r, "pytorch", 4, 2, 1.0, 65536, 0, NULL), PF_V_OK);
  assert_true(r.out[8] == 1 && r.out[9] == 0); /* statuses of steps 1, 2 */
  assert_true(r.out[12] == 32768);
  assert_true(r.out[2] == 1.0);                /* step 2 applied g = 1 exactly */
  pf_run_free(&r);
  assert_int_equal(run_ls(&r, "pytorch", 4, 2, 1.0, 65536, 0, "loss-scale-no-skip"), PF_V_OVERFLOW);
  assert_true(isinf(r.out[0]));
  pf_run_free(&r);
  /* DeepSpeed's window: with window 3 the scale doubles after 3 clean steps */
  pf_case c;
  assert_int_equal(pf_case_init(&c, "loss_scale", "deepspeed", 1), PF_OK);
  c.dtype = PF_FP16;
  c.shape[0] = 7;
  c.shape[1] = 1;
  pf_case_set_param(&c, "scale0", 1024);
  pf_case_set_param(&c, "window", 3);
  c.inputs[0].scale = 0x1p-12;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
  /* iterations 0..6 with last overflow -1: (iter + 1) % 3 == 0 at iter 2 and 5 */
  const double want[7] = {1024, 1024, 2048, 2048, 2048, 4096, 4096};
  for (int t = 0; t < 7; t++) assert_true(r.out[7 + 7 + t] == want[t]);
  assert_int_equal(r.cmp.verdict, PF_V_OK);
  pf_run_free(&r);
  pf_case_free(&c);
}

static void test_loss_scale_applied_gradients_keep_their_contract(void **state) {
  const char *variants[] = {"deepspeed", "megatron", "pytorch", "static"};
  int in_domain = 0, cases = 0;
  for (int v = 0; v < 4; v++)
    for (int t = 0; t < 2; t++)
      for (int k = 0; k < 6; k++) {
        pf_case c;
        assert_int_equal(pf_case_init(&c, "loss_scale", variants[v], 40 + (uint64_t)k), PF_OK);
        c.dtype = t ? PF_BF16 : PF_FP16;
        c.shape[0] = 40;
        c.shape[1] = 8;
        pf_case_set_param(&c, "scale0", ldexp(1, 4 * k));
        pf_case_set_param(&c, "window", 5);
        pf_case_set_param(&c, "spike_step", 7);
        pf_case_set_param(&c, "spike_mag", 300);
        c.inputs[0].scale = ldexp(1, -2 * k);
        in_domain += pf_check_contract(&c, "loss_scale");
        cases++;
      }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain >= cases / 4);
}

/* Found by loss_scale_fuzzer: with a scale below 1 the scaler checks fl_T(S g) (finite) and
 * the unscaling by 1/S > 1 overflows fp32 afterwards. By hand: static scale 1/2, bf16,
 * g = 0x1.ff5756p+127 (finite in fp32): S g = 0x1.ff5756p+126 lies above the bf16 midpoint
 * 0x1.ffp+126 and rounds up to 2^127 (finite, no overflow seen); times fl32(2) = 2^128 = inf.
 * The contract's relative bound cannot hold within fp32's range there: outside the domain,
 * with its reason. g = 0x1.fcp+127 (exact in bf16) stays inside and applies exactly. */
static void test_loss_scale_unscaling_past_fp32_is_outside_the_domain(void **state) {
  const double gs[2] = {0x1.ff5756p+127, 0x1.fcp+127};
  for (int k = 0; k < 2; k++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "loss_scale", "static", 1), PF_OK);
    c.dtype = PF_BF16;
    c.shape[0] = 1;
    c.shape[1] = 1;
    assert_int_equal(pf_case_set_param(&c, "scale0", 0.5), PF_OK);
    pf_gen_free(&c.inputs[0]);
    c.inputs[0].dist = PF_DIST_VALUES;
    c.inputs[0].nvalues = 1;
    c.inputs[0].values = malloc(sizeof(double));
    c.inputs[0].values[0] = gs[k];
    pf_oracle_opts o;
    pf_oracle_opts_default(&o);
    pf_run r;
    assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
    assert_true(r.out[1] == 0); /* applied: the scaled value was finite */
    if (k == 0) {
      assert_true(isinf(r.out[0]));
      assert_int_equal(r.cmp.verdict, PF_V_OVERFLOW);
      assert_false(r.in_domain);
      assert_non_null(strstr(r.why, "unscaled gradient may overflow"));
    } else {
      assert_true(r.out[0] == 0x1.fcp+127);
      assert_int_equal(r.cmp.verdict, PF_V_OK);
      assert_true(r.in_domain);
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
}

/* A user's variant with pytorch's contract is judged as pytorch by the reference too (its
 * defaults: scale 2^16, hysteresis 1): the first overflow (1 * 2^16 > 65504) halves the scale
 * at once, and the stream is clean from then on. A reference that picked the defaults by name
 * would keep 2^16 for one more (hysteresis 2) step and disagree at step 2. */
static void test_loss_scale_variant_behaviour_comes_from_data(void **state) {
  static pf_kernel like;
  const pf_kernel *pt = pf_kernel_find("loss_scale", "pytorch");
  assert_int_equal(pf_kernel_like(&like, "loss_scale", "pytorch"), PF_OK);
  like.variant = "like-pytorch";
  like.summary = "pytorch's contract, a user's name";
  like.run_cpu = pt->run_cpu;
  assert_int_equal(pf_kernel_register(&like), PF_OK);
  const char *names[] = {"pytorch", "like-pytorch"};
  for (int v = 0; v < 2; v++) {
    pf_run r;
    assert_int_equal(run_ls(&r, names[v], 4, 2, 1.0, 0, 0, NULL), PF_V_OK);
    const size_t T = 4, n = 2;
    assert_true(r.oracle.exact[T * n + 0] == 1 && r.oracle.exact[T * n + 1] == 0); /* skipped, then applied */
    assert_true(r.oracle.exact[T * n + T + 0] == 32768 && r.oracle.exact[T * n + T + 1] == 32768);
    assert_true(r.oracle.exact[1 * n] == 1.0); /* step 2's gradient applied, unscaled */
    pf_run_free(&r);
  }
}

/* At the fp32 ceiling, derived by hand: scale 2^64, growth every clean step (window 1), zero
 * gradients (h = 0: no overflow while the scale is finite). After step t the scale is
 * 2^(64+t), 2^127 after step 63. PyTorch's _amp_update_scale_ will not double 2^127 to inf:
 * the scale stays 2^127 and every step applies. Megatron's scale is an fp32 tensor: step 64
 * makes it inf; step 65's h = inf * 0 = NaN skips the step and backoff keeps inf * 0.5 = inf:
 * every later step is skipped. The emulation and the reference agree on both. */
static void test_loss_scale_fp32_ceiling(void **state) {
  const char *names[] = {"pytorch", "megatron"};
  for (int v = 0; v < 2; v++) {
    pf_case c;
    ls_case(&c, names[v], PF_FP32, 70, 1, 0.0);
    assert_int_equal(pf_case_set_param(&c, "scale0", 0x1p64), PF_OK);
    assert_int_equal(pf_case_set_param(&c, "window", 1), PF_OK);
    assert_int_equal(pf_case_set_param(&c, "hysteresis", 1), PF_OK);
    pf_run r;
    ls_run(&c, &r);
    const size_t T = 70, st = T, sc = 2 * T; /* n = 1: status at T, scale at 2T */
    assert_true(r.out[sc + 62] == 0x1p127 && r.oracle.exact[sc + 62] == 0x1p127); /* after step 63 */
    for (size_t t = 63; t < T; t++) {
      if (v == 0) {
        assert_true(r.out[sc + t] == 0x1p127 && r.oracle.exact[sc + t] == 0x1p127);
        assert_true(r.out[st + t] == 0 && r.oracle.exact[st + t] == 0);
      } else {
        assert_true(isinf(r.out[sc + t]));
        if (t >= 64) assert_true(r.out[st + t] == 1 && r.oracle.exact[st + t] == 1); /* skipped */
      }
    }
    assert_false(pf_verdict_is_finding(r.cmp.verdict));
    pf_run_free(&r);
  }
}

/* The order of update and unscaling, by hand: scale 16, window 2, g = 1 (h = 16 in fp16).
 * DeepSpeed 0.19's rule doubles after step 3 (stable interval 3 - (-1) - 1 = 2 = window).
 * deepspeed-0.19 and deepspeed-0.19-fp16 unscale step 3 by the new 1/32 (DeepSpeed 0.19.8's
 * own order): 0.5, their contract (the oracle's 0.5), reported as the hazard imprecise at
 * output 2 with error 1 - 16/32. deepspeed's older rule doubles after step 2 ((1 - (-1)) % 2 =
 * 0) and again after step 4; the fault loss-scale-unscale-after-update gives it the same
 * order, against its contract of 1 there: a finding. */
static void test_loss_scale_unscale_after_update(void **state) {
  const char *names[] = {"deepspeed-0.19", "deepspeed-0.19-fp16", "deepspeed"};
  for (int v = 0; v < 3; v++) {
    pf_case c;
    ls_case(&c, names[v], PF_FP16, 4, 1, 1.0);
    assert_int_equal(pf_case_set_param(&c, "scale0", 16), PF_OK);
    assert_int_equal(pf_case_set_param(&c, "window", 2), PF_OK);
    if (v == 2) snprintf(c.fault, sizeof c.fault, "loss-scale-unscale-after-update");
    pf_run r;
    assert_int_equal(ls_run(&c, &r), v == 2 ? PF_V_INACCURATE : PF_V_OK);
    const size_t grow = v == 2 ? 1 : 2; /* the step (from 0) after which the scale is 32 */
    for (size_t t = 0; t < 4; t++) assert_true(r.out[t] == (t == grow || (v == 2 && t == 3) ? 0.5 : 1));
    assert_true(r.out[8 + grow - 1] == 16 && r.out[8 + grow] == 32); /* the scale after the steps */
    assert_true(r.oracle.exact[grow] == (v == 2 ? 1 : 0.5) && r.oracle.exact[0] == 1 && r.oracle.exact[3] == 1);
    if (v < 2)
      assert_true((r.hazards >> PF_H_IMPRECISE) & 1 && r.hazard_at[PF_H_IMPRECISE] == 2 &&
                  r.hazard_measure[PF_H_IMPRECISE] == 0.5);
    pf_run_free(&r);
  }
}

/* Hysteresis, by hand: scale 4, g = 20000 (4 g = 80000 overflows fp16, 2 g = 40000 does not).
 * deepspeed-0.19 (ZeRO's DynamicLossScaler, hysteresis 2): step 1 spends the hysteresis and
 * keeps 4, step 2 overflows again and halves to 2, step 3 applies. deepspeed-0.19-fp16
 * (FP16_Optimizer, which has none): step 1 halves to 2, steps 2 and 3 apply. */
static void test_loss_scale_fp16_optimizer_has_no_hysteresis(void **state) {
  const double want_status[2][3] = {{1, 1, 0}, {1, 0, 0}}, want_scale[2][3] = {{4, 2, 2}, {2, 2, 2}};
  const char *names[] = {"deepspeed-0.19", "deepspeed-0.19-fp16"};
  for (int v = 0; v < 2; v++) {
    pf_case c;
    ls_case(&c, names[v], PF_FP16, 3, 1, 20000);
    assert_int_equal(pf_case_set_param(&c, "scale0", 4), PF_OK);
    pf_run r;
    assert_int_equal(ls_run(&c, &r), PF_V_OK);
    for (int t = 0; t < 3; t++) {
      assert_true(r.out[3 + t] == want_status[v][t] && r.oracle.exact[3 + t] == want_status[v][t]);
      assert_true(r.out[6 + t] == want_scale[v][t] && r.oracle.exact[6 + t] == want_scale[v][t]);
      assert_true(r.out[t] == (want_status[v][t] ? 0 : 20000));
    }
    pf_run_free(&r);
  }
}

/* DeepSpeed's scale is a Python float. From 2^64 with window 1 and zero gradients,
 * deepspeed-0.19 doubles when cur_iter - (-1) - 1 = cur_iter is positive: from step 2 on, so the
 * scale after step t >= 2 is 2^(63 + t): 2^65 after step 2, 2^128 after step 65. The
 * operation's scale output is fp32: the case is outside the domain, with the reason, and no
 * hazard is judged on scales fp32 cannot hold (before: a biased hazard of -inf ulps). */
static void test_loss_scale_deepspeed_scale_beyond_fp32(void **state) {
  pf_case c;
  ls_case(&c, "deepspeed-0.19", PF_FP32, 70, 1, 0.0);
  assert_int_equal(pf_case_set_param(&c, "scale0", 0x1p64), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "window", 1), PF_OK);
  pf_run r;
  ls_run(&c, &r);
  const size_t sc = 2 * 70; /* n = 1 */
  assert_true(r.out[sc + 0] == 0x1p64 && r.out[sc + 1] == 0x1p65 && r.out[sc + 63] == 0x1p127 && r.out[sc + 64] == 0x1p128);
  assert_false(r.in_domain);
  assert_true(strstr(r.why, "Python float") != NULL);
  assert_false((r.hazards >> PF_H_BIASED) & 1);
  pf_run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loss_scale_variant_behaviour_comes_from_data),
      cmocka_unit_test(test_loss_scale_fp32_ceiling),
      cmocka_unit_test(test_loss_scale_unscale_after_update),
      cmocka_unit_test(test_loss_scale_fp16_optimizer_has_no_hysteresis),
      cmocka_unit_test(test_loss_scale_deepspeed_scale_beyond_fp32),
      cmocka_unit_test(test_loss_scale_deepspeed_stops_at_minimum),
      cmocka_unit_test(test_loss_scale_megatron_keeps_skipping),
      cmocka_unit_test(test_loss_scale_growth_and_no_skip_fault),
      cmocka_unit_test(test_loss_scale_applied_gradients_keep_their_contract),
      cmocka_unit_test(test_loss_scale_unscaling_past_fp32_is_outside_the_domain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
