/* clip: the global norm and the clipped gradients against values derived by hand, the
 * fp16 sum-of-squares overflow threshold, and the contract over generated cases. */
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

static pf_verdict run_clip(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, size_t k, size_t n, const double *g) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "clip", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = k;
  c.shape[1] = n;
  pf_gen_free(&c.inputs[0]);
  c.inputs[0].dist = PF_DIST_VALUES;
  c.inputs[0].values = malloc(k * n * sizeof(double));
  memcpy(c.inputs[0].values, g, k * n * sizeof(double));
  c.inputs[0].nvalues = k * n;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_clip_three_four_five(void **state) {
  /* g = (3, 4): norm 5; coef = 1/(5 + 1e-6) < 1: (3, 4) coef = (0.59999988, 0.79999984),
   * binary32 0x1.33333p-1 and 0x1.999994p-1; the inf norm is 4 */
  const double g[2] = {3, 4};
  pf_run r;
  assert_int_equal(run_clip(&r, "megatron", PF_FP32, PF_FP32, 1, 2, g), PF_V_OK);
  assert_true(r.oracle.rounded[0] == 5.0 && r.out[0] == 5.0);
  assert_true(r.oracle.rounded[1] == 0x1.33333p-1 && r.oracle.rounded[2] == 0x1.999994p-1);
  pf_run_free(&r);
  assert_int_equal(run_clip(&r, "inf", PF_FP32, PF_FP32, 1, 2, g), PF_V_OK);
  assert_true(r.out[0] == 4.0);
  pf_run_free(&r);
  /* two tensors (3) and (4): the same global norm through torch's norm of norms */
  assert_int_equal(run_clip(&r, "torch", PF_FP32, PF_FP32, 2, 1, g), PF_V_OK);
  assert_true(r.out[0] == 5.0);
  pf_run_free(&r);
  /* below max_norm nothing changes */
  const double small[2] = {0.25, 0.5};
  assert_int_equal(run_clip(&r, "megatron", PF_FP32, PF_FP32, 1, 2, small), PF_V_OK);
  assert_true(r.out[1] == small[0] && r.out[2] == small[1]);
  pf_run_free(&r);
}

static void test_clip_fp16_sum_of_squares_overflow(void **state) {
  /* fp16 accumulation: 255^2 = 65025 rounds to 65024 (finite; norm 254.998...), 256^2 = 65536
   * rounds to inf (past the threshold 65520) */
  const double ok[1] = {255}, bad[1] = {256};
  pf_run r;
  assert_int_equal(run_clip(&r, "megatron", PF_FP16, PF_FP16, 1, 1, ok), PF_V_OK);
  assert_true(fabs(r.out[0] - 254.998) < 1e-3);
  pf_run_free(&r);
  assert_int_equal(run_clip(&r, "megatron", PF_FP16, PF_FP16, 1, 1, bad), PF_V_OVERFLOW);
  assert_true(isinf(r.out[0]));
  assert_string_equal(r.born, "norm");
  pf_run_free(&r);
  assert_int_equal(run_clip(&r, "megatron", PF_FP16, PF_FP32, 1, 1, bad), PF_V_OK); /* fp32 sums */
  assert_true(r.out[0] == 256.0);
  pf_run_free(&r);
}

static void test_clip_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"megatron", "torch", "inf"};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 3; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < 4; s++) {
          if (a && v) continue; /* storage accumulation: megatron only */
          pf_case c;
          assert_int_equal(pf_case_init(&c, "clip", variants[v], 300 + (uint64_t)cases), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 3;
          c.shape[1] = 40;
          c.inputs[0].scale = ldexp(1, 4 * s - 6);
          c.inputs[0].dist = (pf_dist)s;
          pf_case_set_param(&c, "max_norm", s % 2 ? 1.0 : 100.0);
          in_domain += pf_check_contract(&c, "clip");
          cases++;
        }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clip_three_four_five),
      cmocka_unit_test(test_clip_fp16_sum_of_squares_overflow),
      cmocka_unit_test(test_clip_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
