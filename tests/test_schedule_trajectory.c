/* schedule (trajectories): constant-gradient Adam steps whose exact trajectory is known by
 * hand, the first divergent step of a parameter kept in bf16, and the fp32 master keeping it. */
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

static void fill(pf_gen *g, size_t n, double x) {
  pf_gen_free(g);
  g->dist = PF_DIST_VALUES;
  g->values = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) g->values[i] = x;
  g->nvalues = n;
}

/* One parameter p0 = 1, zero curvature and a constant gradient 1: every exact step moves p by
 * lr / (1 + eps) (m^ = v^ = 1), so p*_t = 1 - t lr / (1 + eps). */
static pf_verdict run_const(pf_run *r, const char *variant, pf_dtype t, size_t steps, double lr) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "schedule", variant, 1), PF_OK);
  c.dtype = t;
  c.shape[0] = steps;
  c.shape[1] = 1;
  pf_case_set_param(&c, "lr", lr);
  pf_case_set_param(&c, "decay", 0); /* constant */
  fill(&c.inputs[0], 1, 1.0);
  fill(&c.inputs[1], 1, 0.0);
  fill(&c.inputs[2], steps, 1.0);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_schedule_constant_gradient_exact_trajectory(void **state) {
  pf_run r;
  assert_int_equal(run_const(&r, "fp32-state", PF_FP32, 10, 1e-2), PF_V_OK);
  for (int t = 1; t <= 10; t++) assert_true(fabs(r.oracle.exact[t - 1] - (1 - t * 1e-2 / (1 + 1e-8))) < 1e-15);
  assert_true(fabs(r.out[9] - 0.9) < 1e-6);
  pf_run_free(&r);
}

static void test_schedule_bf16_parameter_stagnates(void **state) {
  /* lr 1e-3 is below half a bf16 ulp of 1 (2^-9): a bf16 parameter never moves, while the
   * exact one loses 1e-3 a step. The allowed outputs are the bf16 values between the roundings
   * of p* -+ 1e-2 (|p*| + lr); 1.0 leaves them once p* + 1e-2 (p* + 1e-3) < 1 - 2^-9 (the
   * midpoint below 1), i.e. 1.01001 - 1.01e-3 t < 0.998046875, t > 11.84: step 12, index 11.
   * The fp32 master keeps every update (its bf16 copy is within one bf16 ulp, 0.4%). */
  pf_run r;
  assert_int_equal(run_const(&r, "lowp-state", PF_BF16, 20, 1e-3), PF_V_DIVERGENT);
  assert_int_equal(r.cmp.first_bad, 11);
  assert_true(r.out[19] == 1.0);
  pf_run_free(&r);
  assert_int_equal(run_const(&r, "fp32-state", PF_BF16, 20, 1e-3), PF_V_OK);
  assert_true(r.out[19] < 1.0);
  pf_run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schedule_constant_gradient_exact_trajectory),
      cmocka_unit_test(test_schedule_bf16_parameter_stagnates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
