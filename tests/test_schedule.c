/* schedule: the learning-rate schedule at hand-computed steps. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/schedule/schedule_spec.h"

static void test_schedule_warmup_then_cosine(void **state) {
  /* peak 6e-4, warm-up 100, cosine over 900 steps to 6e-5 */
  const pf_lr_schedule s = {6e-4, 6e-5, 100, 900, PF_DECAY_COSINE};
  assert_int_equal(pf_lr_schedule_check(&s), PF_OK);
  assert_true(fabs(pf_lr_at(&s, 1) - 6e-6) < 1e-18);     /* 1/100 of peak */
  assert_true(fabs(pf_lr_at(&s, 50) - 3e-4) < 1e-18);
  assert_true(pf_lr_at(&s, 100) == 6e-4);                /* the peak at the end of warm-up */
  assert_true(fabs(pf_lr_at(&s, 550) - 3.3e-4) < 1e-15); /* halfway: (peak + final) / 2 */
  assert_true(pf_lr_at(&s, 1000) == 6e-5);
  assert_true(pf_lr_at(&s, 5000) == 6e-5);
  /* a quarter of the way: final + (peak - final) (1 + cos(pi/4)) / 2 = 6e-5 + 5.4e-4 * 0.85355339 */
  assert_true(fabs(pf_lr_at(&s, 325) - (6e-5 + 5.4e-4 * 0.8535533905932737)) < 1e-15);
}

static void test_schedule_linear_and_checks(void **state) {
  const pf_lr_schedule s = {1.0, 0.0, 0, 10, PF_DECAY_LINEAR};
  assert_true(pf_lr_at(&s, 1) == 0.9);
  assert_true(pf_lr_at(&s, 5) == 0.5);
  assert_true(pf_lr_at(&s, 10) == 0.0);
  const pf_lr_schedule bad = {1.0, 2.0, 0, 10, PF_DECAY_LINEAR};
  assert_int_equal(pf_lr_schedule_check(&bad), PF_ERR_ARG);
  const pf_lr_schedule nan = {NAN, 0.0, 0, 10, PF_DECAY_LINEAR};
  assert_int_equal(pf_lr_schedule_check(&nan), PF_ERR_ARG);
  const pf_lr_schedule c = {3e-4, 0.0, 10, 0, PF_DECAY_CONSTANT};
  assert_true(pf_lr_at(&c, 5) == 1.5e-4 && pf_lr_at(&c, 11) == 3e-4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schedule_warmup_then_cosine),
      cmocka_unit_test(test_schedule_linear_and_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
