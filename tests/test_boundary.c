/* Boundary search: single-value thresholds recovered to adjacent representable values, each
 * against a value derived by hand (the derivation is in the comment above the assertion), and
 * the probability search's counts against a direct count of the same cases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/boundary.h"
#include "core/runner.h"

/* A case of kernel/variant (seed 1) with dtype, accumulation and shape. */
static void make_case(pf_case *c, const char *kernel, const char *variant, pf_dtype t, pf_dtype acc, const size_t *shape,
                      int ndims) {
  assert_int_equal(pf_case_init(c, kernel, variant, 1), PF_OK);
  c->dtype = t;
  c->accum = acc;
  for (int d = 0; d < ndims; d++) c->shape[d] = shape[d];
}

static void set_value(pf_case *c, const char *input, double v) {
  pf_axis a;
  char spec[64];
  snprintf(spec, sizeof spec, "value:%s", input);
  assert_int_equal(pf_axis_parse(c, spec, &a), PF_OK);
  pf_case k;
  assert_int_equal(pf_axis_apply(c, &a, v, &k), PF_OK);
  pf_case_free(c);
  *c = k;
}

static pf_threshold search(const pf_case *c, const char *along, double lo, double hi, const char *fail) {
  pf_axis a;
  pf_fail_set f;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  assert_int_equal(pf_axis_parse(c, along, &a), PF_OK);
  assert_int_equal(pf_fail_set_parse(fail, &f), PF_OK);
  pf_threshold t;
  if (pf_boundary_threshold(c, &a, lo, hi, f, 64, &oo, &t)) fail_msg("search failed: %s", pf_error_message());
  assert_true(t.found);
  assert_int_equal(t.changes, 1);
  return t;
}

static void test_ordinals_step_over_adjacent_values(void **state) {
  /* fp16: 1 and 1 + 2^-10 are adjacent; -0 and +0 share ordinal 0; 65504 is the last finite */
  assert_true(pf_bfmt_value(PF_FP16, pf_bfmt_ordinal(PF_FP16, 1.0) + 1) == 1 + 0x1p-10);
  assert_true(pf_bfmt_value(PF_FP16, pf_bfmt_ordinal(PF_FP16, -1.0) + 1) == -1 + 0x1p-11);
  assert_true(pf_bfmt_ordinal(PF_FP16, -0.0) == 0 && pf_bfmt_ordinal(PF_FP16, 0x1p-24) == 1);
  assert_true(pf_bfmt_value(PF_FP16, pf_bfmt_ordinal(PF_FP16, 65504) - 1) == 65472);
  assert_true(pf_bfmt_value(PF_BF16, pf_bfmt_ordinal(PF_BF16, 1.0) + 1) == 1 + 0x1p-7);
  assert_true(pf_bfmt_value(PF_FP32, pf_bfmt_ordinal(PF_FP32, 65520) - 1) == 65520 - 0x1p-8);
  assert_true(pf_bfmt_value(PF_BFMT_BINARY64, pf_bfmt_ordinal(PF_BFMT_BINARY64, 1.0) + 1) == 1 + 0x1p-52);
  assert_true(pf_bfmt_value(PF_BFMT_BINARY64, pf_bfmt_ordinal(PF_BFMT_BINARY64, -0x1p-1074) + 1) == 0);
  assert_true(pf_bfmt_ordinal(PF_BFMT_BINARY64, -2.0) < pf_bfmt_ordinal(PF_BFMT_BINARY64, -1.0));
  assert_true(pf_bfmt_value(PF_BFMT_INT, pf_bfmt_ordinal(PF_BFMT_INT, 7) + 1) == 8);
}

/* The largest fp16 input whose exp is finite. exp(x) overflows fp16 when it rounds past 65504,
 * i.e. exp(x) >= 65520 (the midpoint to 65536, ties to even 65536 = inf): x >= ln 65520 =
 * 11.08998... fp16 values in [8, 16) are 2^-7 apart: 11.0859375 = 0x1.62cp+3 (exp = 65263.7,
 * finite) and 11.09375 = 0x1.63p+3 (exp = 65775, inf). With fp32 exp the threshold is
 * ln(FLT_MAX + ulp/2) = 88.7228...; fp16 values in [64, 128) are 2^-4 apart: 88.6875 and 88.75. */
static void test_softmax_naive_exp_overflow(void **state) {
  const size_t shape[2] = {1, 1};
  pf_case c;
  make_case(&c, "softmax", "naive", PF_FP16, PF_FP16, shape, 2);
  pf_threshold t = search(&c, "value", 0x1p-24, 65504, "overflow");
  assert_true(t.bad_above);
  assert_true(t.below == 0x1.62cp+3 && t.above == 0x1.63p+3);
  assert_true(t.below < log(65520) && log(65520) < t.above && t.above - t.below == 0x1p-7);
  assert_int_equal(t.v_below, PF_V_OK);
  assert_int_equal(t.v_above, PF_V_OVERFLOW);
  c.accum = PF_FP32;
  t = search(&c, "value", 0x1p-24, 65504, "overflow");
  assert_true(t.below == 0x1.62cp+6 && t.above == 0x1.63p+6);
  assert_true(t.below < log(0x1.ffffffp+127) && log(0x1.ffffffp+127) < t.above);
  pf_case_free(&c);
}

/* The gradient magnitude below which an fp16 square underflows (a sum of squares kept in
 * fp16: clip megatron with fp16 accumulation). fp16 values in [2^-13, 2^-12) are k 2^-23; g^2 =
 * k^2 2^-46 rounds to 0 when it is at most 2^-25 (half the least subnormal 2^-24; the tie goes
 * to even 0): k^2 <= 2^21 = 2097152. 1448^2 = 2096704 <= 2097152 < 1449^2 = 2099601, so g =
 * 1448 2^-23 = 0x1.6ap-13 is the largest whose square is lost and 1449 2^-23 = 0x1.6a4p-13 the
 * first that keeps it. The contract's bound allows the lost square (it is a partial sum), so
 * the failure is the kernel's own underflow event, not a verdict. */
static void test_clip_fp16_square_underflow(void **state) {
  const size_t shape[2] = {1, 1};
  pf_case c;
  make_case(&c, "clip", "megatron", PF_FP16, PF_FP16, shape, 2);
  const pf_threshold t = search(&c, "value", 0x1p-24, 1, "event:underflow");
  assert_false(t.bad_above);
  assert_true(t.below == 1448 * 0x1p-23 && t.above == 1449 * 0x1p-23);
  assert_true(1448.0 * 1448 <= 0x1p21 && 1449.0 * 1449 > 0x1p21);
  assert_true(t.fe_below & PF_FE_UNDERFLOW);
  assert_false(t.fe_above & PF_FE_UNDERFLOW);
  pf_case_free(&c);
}

/* The loss scale at which a gradient of 1 overflows fp16 in the backward pass: fl16(S) is inf
 * from S = 65520 on (see above). The scale is held in fp32 (the parameter says so), whose
 * values in [2^15, 2^16) are 2^-8 apart: the last scale that passes is 65520 - 2^-8. */
static void test_loss_scale_scale0_overflow_in_fp32(void **state) {
  const size_t shape[2] = {1, 1};
  pf_case c;
  make_case(&c, "loss_scale", "static", PF_FP16, PF_FP32, shape, 2);
  set_value(&c, "g", 1);
  pf_axis a;
  assert_int_equal(pf_axis_parse(&c, "param:scale0", &a), PF_OK);
  assert_int_equal(a.format, PF_FP32);
  const pf_threshold t = search(&c, "param:scale0", 1, 0x1p20, "event:overflow");
  assert_true(t.bad_above);
  assert_true(t.below == 65520 - 0x1p-8 && t.above == 65520);
  pf_case_free(&c);
}

/* Attention's stored score overflows: post-scale, fp16 GEMM accumulation, head_dim 1 (alpha
 * 1): q k = 45 k is stored in fp16; 45 * 1455 = 65475 rounds to 65472, 45 * 1456 = 65520 is
 * the overflow threshold: k = 1456 is the first fp16 key that fails (fp16 integers in
 * [1024, 2048) are adjacent). */
static void test_attention_score_overflow(void **state) {
  const size_t shape[5] = {1, 1, 1, 1, 1};
  pf_case c;
  make_case(&c, "attention", "post-scale", PF_FP16, PF_FP16, shape, 5);
  set_value(&c, "q", 45);
  const pf_threshold t = search(&c, "value:k", 1, 65504, "overflow,nan");
  assert_true(t.bad_above);
  assert_true(t.below == 1455 && t.above == 1456);
  assert_non_null(strstr(t.detail, "scores"));
  pf_case_free(&c);
}

/* A dimension: a row of n copies of 11 through naive fp16 softmax with fp16 sums: exp(11) =
 * 59874.1 rounds to 59872; one passes, two sum past 65520. */
static void test_dimension_axis(void **state) {
  const size_t shape[2] = {1, 1};
  pf_case c;
  make_case(&c, "softmax", "naive", PF_FP16, PF_FP16, shape, 2);
  set_value(&c, "x", 11);
  const pf_threshold t = search(&c, "dim:cols", 1, 100, "overflow");
  assert_true(t.below == 1 && t.above == 2);
  pf_case_free(&c);
}

/* Probability along the generator's scale: 16 cases of one standard normal logit through
 * naive fp16 softmax. A case overflows exactly when its logit is at least 11.09375 (the first
 * test), so the failing count at each point is the number of drawn logits there that reach it. */
static void test_probability_counts_match_a_direct_count(void **state) {
  const size_t shape[2] = {1, 1};
  enum { N = 16 };
  pf_case tm[N];
  for (int i = 0; i < N; i++) {
    assert_int_equal(pf_case_init(&tm[i], "softmax", "naive", 100 + (uint64_t)i), PF_OK);
    tm[i].dtype = tm[i].accum = PF_FP16;
    tm[i].shape[0] = shape[0], tm[i].shape[1] = shape[1];
  }
  pf_axis a;
  pf_fail_set f;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  assert_int_equal(pf_axis_parse(&tm[0], "scale", &a), PF_OK);
  assert_int_equal(pf_fail_set_parse("overflow", &f), PF_OK);
  pf_probability p;
  assert_int_equal(pf_boundary_probability(tm, N, &a, 1, 4096, f, 24, 10, &oo, &p), PF_OK);
  /* the direct count: the drawn logit of each case at scale x */
  const double thr = 0x1.63p+3;
  unsigned last = 0;
  for (size_t k = 0; k < p.npoints; k++) {
    unsigned want = 0;
    for (int i = 0; i < N; i++) {
      pf_case ci;
      assert_int_equal(pf_axis_apply(&tm[i], &a, p.points[k].x, &ci), PF_OK);
      pf_tensor x;
      assert_int_equal(pf_tensor_alloc(&x, PF_FP16, 1), PF_OK);
      assert_int_equal(pf_tensor_generate(&x, &ci.inputs[0]), PF_OK);
      want += x.data[0] >= thr;
      pf_tensor_free(&x);
      pf_case_free(&ci);
    }
    if (p.points[k].fails != want) fail_msg("scale %g: %u failing, the direct count says %u", p.points[k].x, p.points[k].fails, want);
    last = want;
  }
  assert_true(last > N / 4 && last < N); /* positive logits overflow at 4096, negative ones never */
  assert_true(p.first_found && p.half_found == (last * 2 >= N));
  assert_true(p.first_fails >= 1 && p.first_prev < p.first_x);
  /* at the point below the first failure none fails (refined between grid points) */
  unsigned f_prev;
  {
    unsigned cnt = 0;
    for (int i = 0; i < N; i++) {
      pf_case ci;
      assert_int_equal(pf_axis_apply(&tm[i], &a, p.first_prev, &ci), PF_OK);
      pf_run r;
      assert_int_equal(pf_run_case(&ci, &oo, &r), PF_OK);
      cnt += r.cmp.verdict == PF_V_OVERFLOW;
      pf_run_free(&r);
      pf_case_free(&ci);
    }
    f_prev = cnt;
  }
  assert_int_equal(f_prev, 0);
  print_message("%zu points, first failure at scale %.6g (%u of %d), none at %.6g\n", p.npoints, p.first_x, p.first_fails,
                N, p.first_prev);
  pf_probability_free(&p);
  for (int i = 0; i < N; i++) pf_case_free(&tm[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ordinals_step_over_adjacent_values),
      cmocka_unit_test(test_softmax_naive_exp_overflow),
      cmocka_unit_test(test_clip_fp16_square_underflow),
      cmocka_unit_test(test_loss_scale_scale0_overflow_in_fp32),
      cmocka_unit_test(test_attention_score_overflow),
      cmocka_unit_test(test_dimension_axis),
      cmocka_unit_test(test_probability_counts_match_a_direct_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
