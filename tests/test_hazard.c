/* The bias pool (hazard.h): biased's test over units pooled from many cases, against values
 * worked out by hand, and pooling only a stage with a stage of the same name. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/hazard.h"

/* one stage's units as a case would give them: upward x, away from zero y */
static pf_bias_pool pool_of(const char *name, const double *x, const double *y, size_t n) {
  pf_bias_pool p = {.nstages = 1};
  p.st[0].name = name, p.st[0].n = n;
  for (size_t i = 0; i < n; i++)
    p.st[0].sum[0] += x[i], p.st[0].sq[0] += x[i] * x[i], p.st[0].sum[1] += y[i], p.st[0].sq[1] += y[i] * y[i];
  return p;
}

/* units 1, 2, 3, 4: mean 5/2, sample variance 5/3, t = (5/2) / sqrt(5/12) = sqrt(15) = 3.873;
 * units 1, -1, 1, -1: mean 0, t 0 */
static void test_pool_mean_and_t_by_hand(void **state) {
  (void)state;
  const double x[] = {1, 2, 3, 4}, y[] = {1, -1, 1, -1};
  const pf_bias_pool p = pool_of("dQ", x, y, 4);
  pf_hazard_limits l;
  pf_hazard_limits_default(&l);
  l.bias_min = 4, l.bias_ulps = 0.25;
  double mean[2], t[2];
  l.bias_z = 3.8;
  assert_int_equal(pf_bias_pool_test(&p, 0, &l, mean, t), 0); /* upward: |t| 3.873 >= 3.8 */
  assert_true(fabs(mean[0] - 2.5) < 1e-15 && fabs(t[0] - sqrt(15.0)) < 1e-12);
  assert_true(mean[1] == 0 && t[1] == 0);
  l.bias_z = 3.9;
  assert_int_equal(pf_bias_pool_test(&p, 0, &l, mean, t), -1); /* 3.873 < 3.9 */
  l.bias_z = 3, l.bias_ulps = 2.6;
  assert_int_equal(pf_bias_pool_test(&p, 0, &l, mean, t), -1); /* |mean| 2.5 < 2.6 */
  l.bias_ulps = 0.25, l.bias_min = 5;
  assert_int_equal(pf_bias_pool_test(&p, 0, &l, mean, t), -1); /* 4 units < 5 */
}

/* Pooling {1, 2} with {3, 4} gives {1, 2, 3, 4}'s test; an empty pool takes the first case's;
 * a stage of another name is not pooled. Away from zero: a constant -1/2 (the planted
 * round-toward-zero's signature) is biased with an infinite t. */
static void test_pool_adds_by_stage(void **state) {
  (void)state;
  const double a[] = {1, 2}, b[] = {3, 4}, h[] = {-0.5, -0.5};
  pf_bias_pool p = {0};
  const pf_bias_pool u = pool_of("dQ", a, h, 2), v = pool_of("dQ", b, h, 2), w = pool_of("dK", b, h, 2);
  pf_bias_pool_add(&p, &u);
  pf_bias_pool_add(&p, &v);
  pf_bias_pool_add(&p, &w); /* another stage at index 0: left out */
  assert_int_equal(p.st[0].n, 4);
  pf_hazard_limits l;
  pf_hazard_limits_default(&l);
  l.bias_min = 4;
  double mean[2], t[2];
  pf_bias_pool_test(&p, 0, &l, mean, t);
  assert_true(fabs(t[0] - sqrt(15.0)) < 1e-12);
  assert_true(mean[1] == -0.5 && isinf(t[1]) && t[1] < 0);
  l.bias_z = 100;
  assert_int_equal(pf_bias_pool_test(&p, 0, &l, mean, t), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_mean_and_t_by_hand),
      cmocka_unit_test(test_pool_adds_by_stage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
