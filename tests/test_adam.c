/* adam: one step against values derived by hand, the fp16-state failure, a lost update,
 * and the soundness of every variant's contract over generated cases. */
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
#include "tests/case_values.h"
#include "tests/contract_check.h"

static pf_verdict run_adam(pf_run *r, const char *variant, pf_dtype t, double p, double g, double m, double v,
                           double lr, double eps) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "adam", variant, 1), PF_OK);
  c.dtype = t;
  c.shape[0] = 1;
  assert_int_equal(pf_case_set_param(&c, "lr", lr), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "eps", eps), PF_OK);
  set_values(&c.inputs[0], &p, 1);
  set_values(&c.inputs[1], &g, 1);
  set_values(&c.inputs[2], &m, 1);
  set_values(&c.inputs[3], &v, 1);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_adam_first_step_by_hand(void **state) {
  /* t = 1, m = v = 0, g = 1/2: m' = 0.05, v' = 0.00025, m^ = 1/2, v^ = 1/4,
   * p' = 1 - 1e-3 (1/2) / (1/2 + 1e-8) = 0.99900000001999999958...; binary32 0x1.ff7ceep-1 */
  const char *variants[] = {"fused", "no-master", "state-lowp", "torch"};
  for (int i = 0; i < 4; i++) {
    pf_run r;
    assert_int_equal(run_adam(&r, variants[i], PF_FP32, 1.0, 0.5, 0, 0, 1e-3, 1e-8), PF_V_OK);
    assert_true(fabs(r.oracle.exact[2] - 0.99900000002) < 1e-15);
    assert_true(r.oracle.rounded[2] == 0x1.ff7ceep-1);
    assert_true(fabs(r.oracle.exact[0] - 0.05) < 1e-16); /* beta1 is the binary64 0.9 */
    assert_true(fabs(r.oracle.exact[1] - 0.00025) < 1e-18);
    assert_true(fabs(r.out[2] - 0.999) < 1e-6);
    pf_run_free(&r);
  }
}

/* adam-step-bf16 (torchao before its PR 4915: the step count in bf16 stops at 256, since 256 + 1
 * rounds back to 256): from m = v = 0, p = 1, g = 1/2, lr 1e-3, eps 1e-8 the step is
 * lr (0.05 / bc1) / (sqrt(0.00025 / bc2) + eps), bc = 1 - beta^t, here in binary64 with libm's pow:
 * t = 1000 gives p' = 0.997485..., t = 256 gives 0.998497...; below 257 the fault changes nothing. */
static double adam_first_moves(double t) {
  return 1 - 1e-3 * (0.05 / (1 - pow(0.9, t))) / (sqrt(0.00025 / (1 - pow(0.999, t))) + 1e-8);
}
/* One element from p = 1, m = v = 0 with gradient g, at step t, under grad_scale and found_inf. */
static pf_verdict run_one(pf_run *r, const char *variant, double g, double step, double scale, int found_inf,
                          const char *fault) {
  pf_case c;
  const double p = 1, z = 0;
  assert_int_equal(pf_case_init(&c, "adam", variant, 1), PF_OK);
  c.dtype = PF_FP32;
  c.shape[0] = 1;
  assert_int_equal(pf_case_set_param(&c, "step", step), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "grad_scale", scale), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "found_inf", found_inf), PF_OK);
  snprintf(c.fault, sizeof c.fault, "%s", fault);
  set_values(&c.inputs[0], &p, 1);
  set_values(&c.inputs[1], &g, 1);
  set_values(&c.inputs[2], &z, 1);
  set_values(&c.inputs[3], &z, 1);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}
static pf_verdict run_adam_step(pf_run *r, double step, const char *fault) { return run_one(r, "fused", 0.5, step, 1, 0, fault); }
static void test_adam_step_count_in_bf16(void **state) {
  pf_run r;
  assert_true(fabs(adam_first_moves(1000) - 0.9974854) < 1e-6 && fabs(adam_first_moves(256) - 0.9984968) < 1e-6);
  assert_int_equal(run_adam_step(&r, 1000, ""), PF_V_OK);
  assert_true(fabs(r.out[2] - adam_first_moves(1000)) < 1e-6);
  pf_run_free(&r);
  assert_true(run_adam_step(&r, 1000, "adam-step-bf16") != PF_V_OK);
  assert_true(fabs(r.out[2] - adam_first_moves(256)) < 1e-6);
  assert_true(fabs(r.oracle.exact[2] - adam_first_moves(1000)) < 1e-12);
  pf_run_free(&r);
  pf_run a, b;
  assert_int_equal(run_adam_step(&a, 256, ""), PF_V_OK);
  assert_int_equal(run_adam_step(&b, 256, "adam-step-bf16"), PF_V_OK);
  assert_memory_equal(a.out, b.out, 4 * sizeof(double));
  pf_run_free(&a);
  pf_run_free(&b);
}

/* grad_scale and found_inf, as GradScaler hands them to PyTorch's fused AdamW: g = 512 under a
 * scale of 1024 (and g = 500 under 1000: fl32(500/1000) = 1/2 too) is the first step with g = 1/2,
 * p' = 0.99900000001999999958... (test_adam_first_step_by_hand); found_inf = 1 leaves p = 1,
 * m = v = 0 as they were although g[0] is inf, and a kernel that ignores it (PyTorch issue
 * 95781) steps with the inf. The other variants refuse both. */
static pf_verdict run_scaled(pf_run *r, const char *variant, double g, double scale, int found_inf, const char *fault) {
  return run_one(r, variant, g, 1, scale, found_inf, fault);
}
static void test_adam_fused_grad_scale_and_found_inf(void **state) {
  const char *fused[] = {"torch-fused", "torch-fused-cuda"};
  for (int k = 0; k < 2; k++) {
    const double gs[2][2] = {{512, 1024}, {500, 1000}};
    for (int j = 0; j < 2; j++) {
      pf_run r;
      assert_int_equal(run_scaled(&r, fused[k], gs[j][0], gs[j][1], 0, ""), PF_V_OK);
      assert_true(fabs(r.oracle.exact[2] - 0.99900000002) < 1e-15);
      assert_true(r.oracle.rounded[2] == 0x1.ff7ceep-1);
      assert_true(fabs(r.out[2] - 0.999) < 1e-6);
      pf_run_free(&r);
    }
    pf_run r;
    assert_int_equal(run_scaled(&r, fused[k], 0.5, 1024, 1, ""), PF_V_OK);
    assert_true(isinf(r.in[1].data[0])); /* the inf the scaler found */
    assert_true(r.out[0] == 0 && r.out[1] == 0 && r.out[2] == 1);
    assert_true(r.oracle.exact[0] == 0 && r.oracle.exact[1] == 0 && r.oracle.exact[2] == 1);
    pf_run_free(&r);
    assert_true(run_scaled(&r, fused[k], 0.5, 1024, 1, "adam-ignores-found-inf") != PF_V_OK);
    assert_true(!isfinite(r.out[2]));
    pf_run_free(&r);
  }
  pf_case c;
  assert_int_equal(pf_case_init(&c, "adam", "fused", 1), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "grad_scale", 2), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "only the fused kernels take them"));
  pf_case_free(&c);
}

static void test_adam_fp16_state_tiny_gradient(void **state) {
  /* g = 2^-13 in fp16 with PyTorch's fp16 state: v' = 0.001 g^2 = 1.5e-11 underflows to 0 in
   * fp16, eps = 1e-8 rounds to 0 in fp16 (below half of 2^-24), so the denominator is 0 and
   * the step is -inf, where the exact step leaves p at 0.999. fp32 state (fused) is fine. */
  pf_run r;
  assert_int_equal(run_adam(&r, "torch", PF_FP16, 1.0, 0x1p-13, 0, 0, 1e-3, 1e-8), PF_V_OVERFLOW);
  assert_true(isinf(r.out[2]));
  assert_true(r.out[1] == 0); /* v lost */
  assert_false(r.in_domain);
  pf_run_free(&r);
  assert_int_equal(run_adam(&r, "fused", PF_FP16, 1.0, 0x1p-13, 0, 0, 1e-3, 1e-8), PF_V_OK);
  assert_true(r.out[3] == 0x1.ff8p-1); /* fl16(0.999000...) */
  pf_run_free(&r);
  /* the boundary: v' = fl16(fl32(1 - 0.999) g^2) is 0 iff 0.00100000005 g^2 <= 2^-25, i.e.
   * g <= 5.459e-3: g = 2^-8 = 3.9e-3 fails, g = 2^-7 = 7.8e-3 keeps a subnormal v' and works */
  assert_int_equal(run_adam(&r, "torch", PF_FP16, 1.0, 0x1p-8, 0, 0, 1e-3, 1e-8), PF_V_OVERFLOW);
  pf_run_free(&r);
  assert_int_equal(run_adam(&r, "torch", PF_FP16, 1.0, 0x1p-7, 0, 0, 1e-3, 1e-8), PF_V_OK);
  assert_true(r.out[1] != 0);
  pf_run_free(&r);
}

static void test_adam_lost_update(void **state) {
  /* torch fp16, g = 2^-22, eps = 1e-6, lr = 1e-2: m' = 0.1 g = 2.4e-8 rounds to 0 in fp16,
   * so the step is 0 and p stays 1; the exact step is lr g/(g + eps) = 1.9e-3 > half an ulp
   * of 1 (2^-11): the update is lost, an underflow. */
  pf_run r;
  assert_int_equal(run_adam(&r, "torch", PF_FP16, 1.0, 0x1p-22, 0, 0, 1e-2, 1e-6), PF_V_UNDERFLOW);
  assert_true(r.out[2] == 1.0);
  assert_true(r.oracle.rounded[2] != 1.0);
  pf_run_free(&r);
}

static void test_adam_torch_fused_cuda_by_hand(void **state) {
  /* PyTorch's fused AdamW on CUDA takes m' = fma(b1, m, fma(-b1, g, g)) and v' = fma(b2, v,
   * fma(-b2, g g, g g)) with b1 = fl32(0.9), b2 = fl32(0.999); its CPU kernel lerps, m' =
   * fl(fma(w, fl(g - m), m)) with w = fl32(1 - 0.9), and v' = fl(fl(fl32(1 - 0.999) g) g).
   * g = -0x1.0c53p-1, m = 0x1.21dc54p-7, v = 0, worked in exact rational arithmetic (Python's
   * Fraction, rounding to binary32 by hand): fma(-b1, g, g) = -0x1.ad51ap-5, then
   *   CUDA m' = -0x1.6c19a6p-5, v' = 0x1.1ffce2p-12 (its 1 - b2 is 1 - fl32(0.999) = 0.00099998713,
   *            1.29e-5 below 0.001: 122 ulps below the exact 2.7465014e-4)
   *   CPU  m' = -0x1.6c19a2p-5, v' = 0x1.1ffdd6p-12 (0.04 ulps from it). Both keep their contracts. */
  pf_run r;
  assert_int_equal(run_adam(&r, "torch-fused-cuda", PF_FP32, 1.0, -0x1.0c53p-1, 0x1.21dc54p-7, 0, 1e-3, 1e-8), PF_V_OK);
  assert_true(r.out[0] == -0x1.6c19a6p-5);
  assert_true(r.out[1] == 0x1.1ffce2p-12);
  assert_true(fabs(r.oracle.exact[1] - 2.7465014025801790e-4) < 1e-18);
  pf_run_free(&r);
  assert_int_equal(run_adam(&r, "torch-fused", PF_FP32, 1.0, -0x1.0c53p-1, 0x1.21dc54p-7, 0, 1e-3, 1e-8), PF_V_OK);
  assert_true(r.out[0] == -0x1.6c19a2p-5);
  assert_true(r.out[1] == 0x1.1ffdd6p-12);
  pf_run_free(&r);
}

static void test_adam_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"fused", "torch", "no-master", "state-lowp", "eps-inside", "no-bias-correction",
                            "torch-fused-cuda"};
  const double scales[] = {1e-3, 1, 30};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 7; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int s = 0; s < 3; s++)
        for (int k = 0; k < 2; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "adam", variants[v], 900 + cases), PF_OK);
          c.dtype = (pf_dtype)t;
          c.shape[0] = 64;
          pf_case_set_param(&c, "step", k ? 1000 : 1);
          pf_case_set_param(&c, "wd", k ? 0.1 : 0);
          pf_case_set_param(&c, "beta2", k ? 0.95 : 0.999);
          if (strncmp(variants[v], "torch", 5) != 0) pf_case_set_param(&c, "mode", k); /* torch: AdamW only */
          for (int i = 0; i < 4; i++) {
            c.inputs[i].scale = i == 3 ? scales[s] * scales[s] : scales[s];
            c.inputs[i].dist = (pf_dist)((s + i) % 4);
          }
          in_domain += pf_check_contract(&c, "adam");
          cases++;
        }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

/* Two users' fp32 AdamW kernels, written apart from the emulation (plain C float arithmetic,
 * libm's powf and fmaf), each judged as a variant like fused (its bound and domain) with the
 * contract parameters that say what it does (docs/kernels/adam.md):
 *   llmc      llm.c's adamw_kernel3: m = lerp(g, m, beta1) = fma(beta1, m, fma(-beta1, g, g)),
 *             v likewise with g g, corrections 1 - powf(beta, t) in fp32 on the device, m / bc1,
 *             v / bc2, p - lr (m / (sqrt(v) + eps) + wd p)     (ema=lerp, bias_correction=device)
 *   textbook  the textbook in fp32 with the constants of its Python side: 1 - beta and
 *             1 - beta^t computed in binary64 and rounded once (scalars=binary64)
 *   llmc-nobc llm.c's kernel with v's correction forgotten: a bug */
static int user_kind;
static pf_status user_adamw(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  (void)fe;
  const size_t n = c->shape[0];
  const double lr64 = pf_case_param(c, "lr"), b164 = pf_case_param(c, "beta1"), b264 = pf_case_param(c, "beta2");
  const float lr = (float)lr64, b1 = (float)b164, b2 = (float)b264, eps = (float)pf_case_param(c, "eps"),
              wd = (float)pf_case_param(c, "wd");
  const int t = (int)pf_case_param(c, "step");
  float bc1, bc2, omb1 = 0, omb2 = 0;
  if (user_kind == 1) {
    bc1 = (float)(1.0 - pow(b164, t)), bc2 = (float)(1.0 - pow(b264, t));
    omb1 = (float)(1.0 - b164), omb2 = (float)(1.0 - b264);
  } else {
    bc1 = 1.0f - powf(b1, (float)t), bc2 = user_kind == 2 ? 1.0f : 1.0f - powf(b2, (float)t);
  }
  for (size_t i = 0; i < n; i++) {
    const float p = (float)in[0].data[i], g = (float)in[1].data[i], m0 = (float)in[2].data[i], v0 = (float)in[3].data[i];
    float m, v;
    if (user_kind == 1) {
      const float gm = omb1 * g, gv = omb2 * g;
      m = b1 * m0 + gm;
      v = b2 * v0 + gv * g;
    } else {
      const float gg = g * g;
      m = fmaf(b1, m0, fmaf(-b1, g, g));
      v = fmaf(b2, v0, fmaf(-b2, gg, gg));
    }
    const float mh = m / bc1, vh = v / bc2;
    const float upd = mh / (sqrtf(vh) + eps) + wd * p;
    const float pn = p - lr * upd;
    out[i] = m, out[n + i] = v, out[2 * n + i] = pn;
    out[3 * n + i] = pf_round(c->dtype, pn); /* the parameter written back */
  }
  return PF_OK;
}

/* Runs 300 cases of the user's kernel `kind` at fp32 steps 1 to 10^5 under the contract set by
 * ema, bias_correction and scalars; returns how many are findings inside the domain. */
static int user_findings(int kind, int ema, int bcd, int s64) {
  static pf_kernel k[3];
  static const char *const names[] = {"llmc", "textbook", "llmc-nobc"};
  if (!pf_kernel_find("adam", names[kind])) {
    assert_int_equal(pf_kernel_like(&k[kind], "adam", "fused"), PF_OK);
    k[kind].variant = names[kind], k[kind].summary = "a user's AdamW (test_adam.c)", k[kind].run_cpu = user_adamw;
    assert_int_equal(pf_kernel_register(&k[kind]), PF_OK);
  }
  user_kind = kind;
  static const double steps[] = {1, 2, 10, 1000, 100000}, beta2s[] = {0.999, 0.95, 0.98};
  int findings = 0;
  for (int s = 0; s < 300; s++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "adam", names[kind], 5000 + s), PF_OK);
    c.dtype = PF_FP32;
    c.shape[0] = 64;
    pf_case_set_param(&c, "step", steps[s % 5]);
    pf_case_set_param(&c, "beta2", beta2s[s % 3]);
    pf_case_set_param(&c, "wd", s % 2 ? 0.1 : 0);
    pf_case_set_param(&c, "ema", ema);
    pf_case_set_param(&c, "bias_correction", bcd);
    pf_case_set_param(&c, "scalars", s64);
    /* half the cases log-uniform over many binades (where a few ulps of a constant or of a
     * lerp decide more), as the fuzz driver's raw bit patterns are */
    for (int q = 0; q < 4 && s % 2; q++) c.inputs[q].dist = PF_DIST_LOGUNIFORM, c.inputs[q].exp_min = -40, c.inputs[q].exp_max = 4;
    c.inputs[3].scale = s % 2 ? 1 : 1e-2;
    if (s % 2) c.inputs[3].dist = PF_DIST_LOGUNIFORM, c.inputs[3].exp_min = -60, c.inputs[3].exp_max = 0;
    pf_oracle_opts o;
    pf_oracle_opts_default(&o);
    pf_run r;
    if (pf_run_case(&c, &o, &r)) fail_msg("run failed: %s", pf_error_message());
    findings += r.in_domain && pf_verdict_is_finding(r.cmp.verdict);
    pf_run_free(&r);
    pf_case_free(&c);
  }
  return findings;
}

static void test_adam_contract_parameters_fit_users_kernels(void **state) {
  /* each kernel under the parameters that say what it does: no finding in 300 cases */
  const int llmc_fit = user_findings(0, 1, 1, 0), textbook_fit = user_findings(1, 0, 0, 1);
  /* a wrong one is still found under the fitting parameters */
  const int nobc = user_findings(2, 1, 1, 0);
  printf("findings in 300 cases: llm.c %d, textbook %d (under the parameters that fit them); llm.c without v's "
         "correction %d\n", llmc_fit, textbook_fit, nobc);
  assert_int_equal(llmc_fit, 0);
  assert_int_equal(textbook_fit, 0);
  assert_true(nobc > 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adam_first_step_by_hand),
      cmocka_unit_test(test_adam_torch_fused_cuda_by_hand),
      cmocka_unit_test(test_adam_fp16_state_tiny_gradient),
      cmocka_unit_test(test_adam_lost_update),
      cmocka_unit_test(test_adam_step_count_in_bf16),
      cmocka_unit_test(test_adam_fused_grad_scale_and_found_inf),
      cmocka_unit_test(test_adam_contracts_hold_on_generated_cases),
      cmocka_unit_test(test_adam_contract_parameters_fit_users_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
