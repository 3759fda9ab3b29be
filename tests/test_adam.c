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

#include "harness/runner.h"
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adam_first_step_by_hand),
      cmocka_unit_test(test_adam_torch_fused_cuda_by_hand),
      cmocka_unit_test(test_adam_fp16_state_tiny_gradient),
      cmocka_unit_test(test_adam_lost_update),
      cmocka_unit_test(test_adam_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
