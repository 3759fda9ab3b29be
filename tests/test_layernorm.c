/* layernorm: the oracle and the variants against values derived by hand and values PyTorch 2.15
 * computed (aten::native_layer_norm on the CPU), the cancellation of E[x^2] - E[x]^2, the faults,
 * the contract's tightness and its soundness over generated cases. */
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
#include "kernels/layernorm/layernorm.h"
#include "tests/case_values.h"
#include "tests/contract_check.h"

/* one row of n values, gamma 1 (0 with a zero-centred gamma), beta 0 */
static pf_verdict run_row(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, size_t n, const double *x, double eps,
                          const char *fault, int zero_centered) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "layernorm", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = 1;
  c.shape[1] = n;
  set_values(&c.inputs[0], x, n);
  set_constant(&c.inputs[1], zero_centered ? 0 : 1, n);
  set_constant(&c.inputs[2], 0, n);
  pf_case_set_param(&c, "eps", eps);
  pf_case_set_param(&c, "zero_centered_gamma", zero_centered);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_layernorm_one_to_four(void **state) {
  /* x = (1, 2, 3, 4): mean 5/2, var = (9/4 + 1/4 + 1/4 + 9/4) / 4 = 5/4, rstd = 2/sqrt(5) =
   * 0.894427190999916 (fp32 0x1.c9f25cp-1), y = (-3/2, -1/2, 1/2, 3/2) rstd: +-1.341640786
   * (0x1.5775c6p+0) and +-0.447213595 (0x1.c9f25cp-2) */
  const double x[4] = {1, 2, 3, 4};
  const char *variants[] = {"torch", "welford", "two-pass", "moments"};
  for (int v = 0; v < 4; v++) {
    pf_run r;
    assert_int_equal(run_row(&r, variants[v], PF_FP32, PF_FP32, 4, x, 0, NULL, 0), PF_V_OK);
    assert_true(r.oracle.rounded[0] == 2.5);
    assert_true(r.oracle.rounded[1] == 0x1.c9f25cp-1);
    assert_true(r.oracle.rounded[2] == -0x1.5775c6p+0 && r.oracle.rounded[3] == -0x1.c9f25cp-2);
    assert_true(r.oracle.rounded[4] == 0x1.c9f25cp-2 && r.oracle.rounded[5] == 0x1.5775c6p+0);
    assert_true(r.out[0] == 2.5);
    pf_run_free(&r);
  }
  /* zero-centred gamma 0 scales by 1 + 0: the same outputs */
  pf_run r;
  assert_int_equal(run_row(&r, "welford", PF_FP32, PF_FP32, 4, x, 0, NULL, 1), PF_V_OK);
  assert_true(r.oracle.rounded[5] == 0x1.5775c6p+0);
  pf_run_free(&r);
}

static void test_layernorm_matches_pytorch(void **state) {
  /* torch 2.15, aten::native_layer_norm on the CPU, eps 1e-5, gamma 1, beta 0:
   * fp32 x_i = fl32(i + 0.1), i < 20 (two 8-lane vectors and a tail of 4): mean 0x1.333334p+3,
   * rstd 0x1.632b0ep-3, y_0 = -0x1.a5c32p+0, y_19 = 0x1.a5c32p+0;
   * bf16 x_i = fl_bf16(3 + 0.01 i), i < 40 (two 16-element vectors, a tail of 8): mean and rstd
   * saved in bf16 0x1.98p+1 and 0x1.16p+3, y_0 = -0x1.b2p+0, y_39 = 0x1.b2p+0 */
  double x[40];
  for (int i = 0; i < 20; i++) x[i] = pf_round(PF_FP32, i + 0.1);
  const double eps = pf_round(PF_FP32, 1e-5);
  pf_run r;
  assert_int_equal(run_row(&r, "torch", PF_FP32, PF_FP32, 20, x, eps, NULL, 0), PF_V_OK);
  assert_true(r.out[0] == 0x1.333334p+3 && r.out[1] == 0x1.632b0ep-3);
  assert_true(r.out[2] == -0x1.a5c32p+0 && r.out[2 + 19] == 0x1.a5c32p+0);
  pf_run_free(&r);
  for (int i = 0; i < 40; i++) x[i] = pf_round(PF_BF16, 3 + 0.01 * i);
  assert_int_equal(run_row(&r, "torch", PF_BF16, PF_FP32, 40, x, eps, NULL, 0), PF_V_OK);
  assert_true(r.out[0] == 0x1.98p+1 && r.out[1] == 0x1.16p+3);
  assert_true(r.out[2] == -0x1.b2p+0 && r.out[2 + 39] == 0x1.b2p+0);
  pf_run_free(&r);
}

static void test_layernorm_moments_cancel(void **state) {
  /* x = 1 +- 2^-12 in fp32, eps 2^-20: the exact var is 2^-24 and rstd = 2^10 / sqrt(17/16) =
   * 993.425 (0x1.f0b684p+9 rounded to fp32); E[x^2] = (2 + 2^-23) / 2 = 1 + 2^-24 rounds to 1 (a
   * tie, to even), E[x]^2 = 1: moments sees var 0 and rstd 1 / sqrt(2^-20) = 1024, 3% off: within
   * its contract (the bound of a variance lost to cancellation) and the hazard imprecise.
   * two-pass subtracts the mean (exactly 1) first: (2^-12)^2 is exact, so is its rstd's input */
  const double x[2] = {1 + 0x1p-12, 1 - 0x1p-12};
  pf_run r;
  assert_int_equal(run_row(&r, "moments", PF_FP32, PF_FP32, 2, x, 0x1p-20, NULL, 0), PF_V_OK);
  assert_true(r.out[1] == 1024.0);
  assert_true(r.oracle.rounded[1] == 0x1.f0b684p+9);
  assert_true(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
  assert_int_equal(run_row(&r, "two-pass", PF_FP32, PF_FP32, 2, x, 0x1p-20, NULL, 0), PF_V_OK);
  assert_true(fabs(r.out[1] - 0x1.f0b684p+9) <= 0x1p-13);
  assert_false(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
  /* with eps 0 the exact rstd is 2^12 and moments divides by 0: outside its domain */
  assert_int_equal(run_row(&r, "moments", PF_FP32, PF_FP32, 2, x, 0, NULL, 0), PF_V_OVERFLOW);
  assert_false(r.in_domain);
  pf_run_free(&r);
}

static void test_layernorm_faults(void **state) {
  /* unbiased: var 5/3 instead of 5/4 for (1, 2, 3, 4): rstd 0.7746 instead of 0.8944 */
  const double x[4] = {1, 2, 3, 4};
  pf_run r;
  assert_int_equal(run_row(&r, "welford", PF_FP32, PF_FP32, 4, x, 0, "ln-var-unbiased", 0), PF_V_INACCURATE);
  assert_true(fabs(r.out[1] - 0.7745966692) < 1e-6);
  assert_string_equal(r.born, "rstd");
  pf_run_free(&r);
  /* eps outside: 1 / (sqrt(5/4) + 1/4) = 0.7310 instead of 1 / sqrt(5/4 + 1/4) = 0.8165 */
  assert_int_equal(run_row(&r, "torch", PF_FP32, PF_FP32, 4, x, 0.25, "ln-eps-outside", 0), PF_V_INACCURATE);
  assert_true(fabs(r.out[1] - 0.7309759905) < 1e-6);
  pf_run_free(&r);
  /* 1p ignored: gamma 0 taken as 0, not 1 + 0: every y is 0 where the exact one is normal */
  assert_int_equal(run_row(&r, "two-pass", PF_BF16, PF_FP32, 4, x, 0, "ln-1p-ignored", 1), PF_V_UNDERFLOW);
  assert_true(r.out[2] == 0 && r.out[5] == 0);
  pf_run_free(&r);
}

static void test_layernorm_bound_is_tight(void **state) {
  /* the contract is no blanket: on normal rows of 256 in fp32 nine in ten y's bounds are under
   * 2n = 512 ulps of the output (the worst case of sums of n terms, n u), so a kernel that far off
   * is a finding */
  pf_case c;
  assert_int_equal(pf_case_init(&c, "layernorm", "two-pass", 5), PF_OK);
  c.dtype = PF_FP32;
  c.shape[0] = 2;
  c.shape[1] = 256;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
  assert_int_equal(r.cmp.verdict, PF_V_OK);
  pf_bound *b = malloc(r.nout * sizeof *b);
  pf_case_kernel(&c)->bound(&c, r.in, b);
  size_t tight = 0;
  for (size_t i = 4; i < r.nout; i++) tight += b[i].abs < 512 * ldexp(1.0, ilogb(fabs(r.out[i])) - 23);
  printf("%zu of %zu outputs bounded within 512 ulps\n", tight, r.nout - 4);
  assert_true(tight > (r.nout - 4) * 9 / 10);
  pf_run_free(&r);
  free(b);
  pf_case_free(&c);
}

static void test_layernorm_offset_generator(void **state) {
  /* offset: every drawn value times scale, plus offset; scale 0 leaves the offset alone */
  pf_case c;
  assert_int_equal(pf_case_init(&c, "layernorm", "welford", 3), PF_OK);
  c.inputs[0].scale = 0;
  c.inputs[0].offset = 1000;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
  for (size_t i = 0; i < r.in[0].n; i++) assert_true(r.in[0].data[i] == 1000);
  pf_run_free(&r);
  c.inputs[0].offset = INFINITY;
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  pf_case_free(&c);
}

static void test_layernorm_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"torch", "welford", "two-pass", "moments"};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 4; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < 4; s++) {
          if (a && v == 0) continue; /* torch: fp32 statistics only */
          pf_case c;
          assert_int_equal(pf_case_init(&c, "layernorm", variants[v], 500 + (uint64_t)cases), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 3;
          c.shape[1] = s == 3 ? 700 : 40;
          c.inputs[0].dist = (pf_dist)s;
          c.inputs[0].scale = ldexp(1, 2 * s - 4);
          c.inputs[0].offset = s == 2 ? 8 : 0;
          pf_case_set_param(&c, "weights", s % 2);
          if (v) pf_case_set_param(&c, "zero_centered_gamma", s == 1);
          in_domain += pf_check_contract(&c, "layernorm");
          cases++;
        }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layernorm_one_to_four),
      cmocka_unit_test(test_layernorm_matches_pytorch),
      cmocka_unit_test(test_layernorm_moments_cancel),
      cmocka_unit_test(test_layernorm_faults),
      cmocka_unit_test(test_layernorm_bound_is_tight),
      cmocka_unit_test(test_layernorm_offset_generator),
      cmocka_unit_test(test_layernorm_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
