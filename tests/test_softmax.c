/* softmax: CPU variants and the MPFR oracle against values derived by hand (docs/kernels/softmax.md notes
 * each derivation), verdicts at hand-derived thresholds, and the soundness of every
 * variant's contract over many generated cases. */
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

/* Runs softmax/variant on explicit values. */
static pf_verdict run_values(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, size_t rows, size_t cols,
                             const double *x, const char *fault, const char *mask) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "softmax", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = rows;
  c.shape[1] = cols;
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  if (mask)
    assert_int_equal(pf_case_set_param(&c, "mask", strcmp(mask, "causal") == 0 ? 1 : strcmp(mask, "causal-top-left") == 0 ? 2 : 0),
                     PF_OK);
  pf_gen_free(&c.inputs[0]);
  c.inputs[0].dist = PF_DIST_VALUES;
  c.inputs[0].values = malloc(rows * cols * sizeof(double));
  memcpy(c.inputs[0].values, x, rows * cols * sizeof(double));
  c.inputs[0].nvalues = rows * cols;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_status st = pf_run_case(&c, &o, r);
  if (st) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_softmax_equal_inputs_give_exact_halves(void **state) {
  const double x[2] = {3.0, 3.0};
  const char *variants[] = {"naive", "safe", "online"};
  for (int v = 0; v < 3; v++)
    for (int t = 0; t < PF_NDTYPES; t++) {
      pf_run r;
      assert_int_equal(run_values(&r, variants[v], (pf_dtype)t, (pf_dtype)t, 1, 2, x, NULL, NULL), PF_V_OK);
      assert_true(r.out[0] == 0.5 && r.out[1] == 0.5);
      assert_true(r.oracle.exact[0] == 0.5 && r.oracle.rounded[1] == 0.5);
      assert_int_equal(r.cmp.max_ulps, 0);
      pf_run_free(&r);
    }
}

static void test_softmax_one_zero_row_matches_hand_values(void **state) {
  /* softmax([1, 0]) = (e/(1+e), 1/(1+e)) = (0.73105857863..., 0.26894142136...):
   * binary32 0x1.764d5p-1, 0x1.136562p-2; binary16 0x1.764p-1, 0x1.138p-2 */
  const double x[2] = {1.0, 0.0};
  pf_run r;
  assert_int_equal(run_values(&r, "safe", PF_FP32, PF_FP32, 1, 2, x, NULL, NULL), PF_V_OK);
  assert_true(r.oracle.rounded[0] == 0x1.764d5p-1);
  assert_true(r.oracle.rounded[1] == 0x1.136562p-2);
  assert_true(fabs(r.oracle.exact[0] - 0.7310585786300049) <= 0x1p-53);
  assert_true(fabs(r.oracle.exact[1] - 0.2689414213699951) <= 0x1p-54);
  pf_run_free(&r);
  assert_int_equal(run_values(&r, "online", PF_FP16, PF_FP32, 1, 2, x, NULL, NULL), PF_V_OK);
  assert_true(r.oracle.rounded[0] == 0x1.764p-1);
  assert_true(r.oracle.rounded[1] == 0x1.138p-2);
  assert_true(r.out[0] == 0x1.764p-1 && r.out[1] == 0x1.138p-2);
  pf_run_free(&r);
}

static void test_softmax_naive_fp16_overflow_threshold(void **state) {
  /* fp16 overflows at 65520 (the midpoint past 65504); ln 65520 = 11.0901...; the fp16
   * neighbours are 11.0859375 (exp = 65247.1, finite) and 11.09375 (exp = 65758.9, inf). */
  const double ok[2] = {11.0859375, 0}, bad[2] = {11.09375, 0};
  pf_run r;
  assert_int_equal(run_values(&r, "naive", PF_FP16, PF_FP16, 1, 2, ok, NULL, NULL), PF_V_OK);
  assert_int_equal(r.fe & PF_FE_OVERFLOW, 0);
  pf_run_free(&r);
  assert_int_equal(run_values(&r, "naive", PF_FP16, PF_FP16, 1, 2, bad, NULL, NULL), PF_V_OVERFLOW);
  assert_true(r.fe & PF_FE_OVERFLOW);
  assert_true(isnan(r.out[0])); /* inf / inf */
  assert_true(r.oracle.rounded[0] == 1.0);  /* 1/(1 + e^-11.09375) rounds to 1 in fp16 */
  pf_run_free(&r);
  /* the safe variant never exponentiates a positive number */
  assert_int_equal(run_values(&r, "safe", PF_FP16, PF_FP16, 1, 2, bad, NULL, NULL), PF_V_OK);
  pf_run_free(&r);
}

static void test_softmax_naive_fp32_total_underflow(void **state) {
  /* e^-104 = 6.81e-46 is below half of binary32's smallest subnormal (7.01e-46): expf
   * returns 0, the sum is 0 and 0/0 is NaN, where the exact result is 1/2. */
  const double x[2] = {-104, -104};
  pf_run r;
  assert_int_equal(run_values(&r, "naive", PF_FP32, PF_FP32, 1, 2, x, NULL, NULL), PF_V_UNDERFLOW);
  assert_true(r.fe & PF_FE_UNDERFLOW);
  pf_run_free(&r);
  assert_int_equal(run_values(&r, "safe", PF_FP32, PF_FP32, 1, 2, x, NULL, NULL), PF_V_OK);
  pf_run_free(&r);
}

static void test_softmax_no_max_fault(void **state) {
  /* e^100 = 2.7e43 > FLT_MAX: a safe softmax that forgot the max overflows in binary32 */
  const double x[2] = {100, 0};
  pf_run r;
  assert_int_equal(run_values(&r, "safe", PF_FP32, PF_FP32, 1, 2, x, NULL, NULL), PF_V_OK);
  pf_run_free(&r);
  assert_int_equal(run_values(&r, "safe", PF_FP32, PF_FP32, 1, 2, x, "softmax-no-max", NULL), PF_V_OVERFLOW);
  pf_run_free(&r);
  assert_int_equal(run_values(&r, "online", PF_FP32, PF_FP32, 1, 2, x, "softmax-no-max", NULL), PF_V_OVERFLOW);
  pf_run_free(&r);
}

static void test_softmax_causal_mask(void **state) {
  /* 2x2 causal: row 0 sees column 0 only -> [1, 0]; row 1 sees both */
  const double x[4] = {5, 7, 2, 2};
  pf_run r;
  assert_int_equal(run_values(&r, "online", PF_BF16, PF_FP32, 2, 2, x, NULL, "causal"), PF_V_OK);
  assert_true(r.out[0] == 1.0 && r.out[1] == 0.0);
  assert_true(r.oracle.exact[0] == 1.0 && r.oracle.exact[1] == 0.0);
  assert_true(r.out[2] == 0.5 && r.out[3] == 0.5);
  pf_run_free(&r);
}

static void test_softmax_undefined_rows_are_range(void **state) {
  const double x[4] = {NAN, 1, INFINITY, 0};
  pf_run r;
  assert_int_equal(run_values(&r, "safe", PF_FP16, PF_FP32, 2, 2, x, NULL, NULL), PF_V_RANGE);
  assert_int_equal(r.oracle.status[0], PF_ORACLE_UNDEFINED);
  assert_int_equal(r.oracle.status[3], PF_ORACLE_UNDEFINED); /* +inf: inf/inf */
  assert_false(pf_verdict_is_finding(r.cmp.verdict));
  pf_run_free(&r);
  /* -inf is a masked position: exp(-inf) = 0, well defined */
  const double y[2] = {-INFINITY, 1};
  assert_int_equal(run_values(&r, "online", PF_FP16, PF_FP32, 1, 2, y, NULL, NULL), PF_V_OK);
  assert_true(r.out[0] == 0 && r.out[1] == 1);
  pf_run_free(&r);
}

static void test_softmax_contracts_hold_on_generated_cases(void **state) {
  /* Soundness: over many generated cases of every variant, dtype and accumulation, no
   * element falls outside its rigorous bound (no 'inaccurate'), and for binary32
   * accumulation the bound is tight enough to matter (<= 64 ulps at fp32 output). */
  const char *variants[] = {"naive", "safe", "online"};
  const pf_dist dists[] = {PF_DIST_NORMAL, PF_DIST_LOGUNIFORM, PF_DIST_HEAVY, PF_DIST_UNIFORM};
  const double scales[] = {0.5, 4, 12};
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  int cases = 0;
  for (int v = 0; v < 3; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int d = 0; d < 4; d++)
          for (int s = 0; s < 3; s++) {
            pf_case c;
            assert_int_equal(pf_case_init(&c, "softmax", variants[v], 1000 + cases), PF_OK);
            c.dtype = (pf_dtype)t;
            c.accum = a ? (pf_dtype)t : PF_FP32;
            c.shape[0] = 3;
            c.shape[1] = 5 + 37 * (size_t)s;
            c.inputs[0].dist = dists[d];
            c.inputs[0].scale = scales[s];
            c.inputs[0].exp_min = -12;
            c.inputs[0].exp_max = 3;
            pf_run r;
            assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
            if (r.cmp.counts[PF_V_INACCURATE]) {
              char d2[512];
              pf_run_describe(&c, &r, d2, sizeof d2);
              fail_msg("%s %s/%s dist %d scale %g: %s", variants[v], pf_dtype_name(c.dtype), pf_dtype_name(c.accum), d, scales[s], d2);
            }
            /* not vacuous: about n + 30 X unit roundoffs for binary32 (docs/kernels/softmax.md) */
            if (t == PF_FP32 && a == 0 && d == 0 && s == 0)
              for (size_t i = 0; i < r.nout; i++) assert_true(r.cmp.allowed[i] <= 2 * (int64_t)c.shape[1] + 64);
            pf_run_free(&r);
            pf_case_free(&c);
            cases++;
          }
  printf("%d cases, no element outside its bound\n", cases);
}

/* A variant's behaviour comes from its data (pf_kernel.algo), never its name: a copy of naive
 * registered under another name, and a kernel made with pf_kernel_like("naive"), both run,
 * bound and judge exactly as naive. x = (12, 0) in fp16 with fp16 accumulation: naive
 * computes e^12 = 162754.79... > 65504 (fp16's largest finite), so its sum overflows and the
 * outputs are inf/inf = NaN and 1/inf = 0 (verdict overflow) and the case lies outside naive's domain
 * (the largest score must stay below ln(65504/2) = 10.397); safe computes e^0 and e^-12 and
 * is ok. Under name-based dispatch the copies ran safe's algorithm and gave ok. */
static void test_softmax_variant_behaviour_comes_from_data(void **state) {
  static pf_kernel copy, like;
  const pf_kernel *naive = pf_kernel_find("softmax", "naive");
  assert_non_null(naive);
  copy = *naive;
  copy.variant = "copy-of-naive";
  assert_int_equal(pf_kernel_register(&copy), PF_OK);
  assert_int_equal(pf_kernel_like(&like, "softmax", "naive"), PF_OK);
  like.variant = "like-naive";
  like.summary = "naive's contract, a user's name";
  like.faults = naive->faults;
  like.run_cpu = naive->run_cpu;
  assert_string_equal(like.like, "naive");
  assert_int_equal(pf_kernel_register(&like), PF_OK);
  /* a user's variant is no contract to copy */
  pf_kernel other;
  assert_int_equal(pf_kernel_like(&other, "softmax", "like-naive"), PF_ERR_UNKNOWN);
  assert_int_equal(pf_kernel_like(&other, "softmax", "no-such"), PF_ERR_UNKNOWN);

  const double x[2] = {12.0, 0.0};
  const char *names[] = {"naive", "copy-of-naive", "like-naive"};
  for (int v = 0; v < 3; v++) {
    pf_run r;
    assert_int_equal(run_values(&r, names[v], PF_FP16, PF_FP16, 1, 2, x, NULL, NULL), PF_V_OVERFLOW);
    assert_false(r.in_domain);
    assert_non_null(strstr(r.why, "naive needs the largest score"));
    assert_true(isnan(r.out[0]) && r.out[1] == 0);
    pf_run_free(&r);
  }
  pf_run r;
  assert_int_equal(run_values(&r, "safe", PF_FP16, PF_FP16, 1, 2, x, NULL, NULL), PF_V_OK);
  pf_run_free(&r);
}

/* A 2x3 block of equal scores, by hand. causal (aligned bottom right, offset 3 - 2 = 1): row 0
 * sees columns 0 and 1, row 1 all three: (1/2, 1/2, 0), (1/3, 1/3, 1/3). causal-top-left
 * (PyTorch's is_causal): row 0 sees column 0, row 1 columns 0 and 1: (1, 0, 0), (1/2, 1/2, 0). */
static void test_softmax_causal_alignments(void **state) {
  const double x[6] = {0, 0, 0, 0, 0, 0};
  const double third = 0x1.555556p-2; /* 1/3 rounded to fp32 */
  const double bottom_right[6] = {0.5, 0.5, 0, third, third, third}, top_left[6] = {1, 0, 0, 0.5, 0.5, 0};
  const char *masks[2] = {"causal", "causal-top-left"};
  const double *want[2] = {bottom_right, top_left};
  for (int m = 0; m < 2; m++) {
    const char *variants[] = {"naive", "safe", "online"};
    for (int v = 0; v < 3; v++) {
      pf_run r;
      assert_int_equal(run_values(&r, variants[v], PF_FP32, PF_FP32, 2, 3, x, NULL, masks[m]), PF_V_OK);
      for (int j = 0; j < 6; j++) {
        assert_true(r.out[j] == want[m][j]);
        assert_true(r.oracle.rounded[j] == want[m][j]);
      }
      pf_run_free(&r);
    }
  }
}

/* More rows than columns, by hand: 4x2 causal (bottom right: row i sees j <= i - 2). Rows 0
 * and 1 see nothing, row 2 column 0, row 3 both. Under -inf (PyTorch's boolean mask) the hidden
 * rows are 0, kernel and oracle, verdict ok; under -10000 their scores are all the sentinel:
 * (1/2, 1/2). Row 2: (1, 0); row 3 of equal scores: (1/2, 1/2). */
static void test_softmax_more_rows_than_columns(void **state) {
  const double x[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const double want_inf[8] = {0, 0, 0, 0, 1, 0, 0.5, 0.5}, want_10000[8] = {0.5, 0.5, 0.5, 0.5, 1, 0, 0.5, 0.5};
  const char *variants[] = {"safe", "online"};
  for (int v = 0; v < 2; v++)
    for (int mv = 0; mv < 2; mv++) {
      pf_case c;
      assert_int_equal(pf_case_init(&c, "softmax", variants[v], 1), PF_OK);
      c.dtype = c.accum = PF_FP32;
      c.shape[0] = 4;
      c.shape[1] = 2;
      assert_int_equal(pf_case_set_param(&c, "mask", 1), PF_OK);
      assert_int_equal(pf_case_set_param(&c, "mask_value", mv), PF_OK); /* -inf, -10000 */
      pf_gen_free(&c.inputs[0]);
      c.inputs[0].dist = PF_DIST_VALUES;
      c.inputs[0].values = malloc(sizeof x);
      memcpy(c.inputs[0].values, x, sizeof x);
      c.inputs[0].nvalues = 8;
      pf_oracle_opts o;
      pf_oracle_opts_default(&o);
      pf_run r;
      assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
      pf_case_free(&c);
      assert_int_equal(r.cmp.verdict, PF_V_OK);
      for (int j = 0; j < 8; j++) {
        const double want = mv ? want_10000[j] : want_inf[j];
        assert_true(r.out[j] == want && r.oracle.exact[j] == want);
      }
      pf_run_free(&r);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_equal_inputs_give_exact_halves),
      cmocka_unit_test(test_softmax_one_zero_row_matches_hand_values),
      cmocka_unit_test(test_softmax_naive_fp16_overflow_threshold),
      cmocka_unit_test(test_softmax_naive_fp32_total_underflow),
      cmocka_unit_test(test_softmax_no_max_fault),
      cmocka_unit_test(test_softmax_causal_mask),
      cmocka_unit_test(test_softmax_undefined_rows_are_range),
      cmocka_unit_test(test_softmax_contracts_hold_on_generated_cases),
      cmocka_unit_test(test_softmax_variant_behaviour_comes_from_data),
      cmocka_unit_test(test_softmax_causal_alignments),
      cmocka_unit_test(test_softmax_more_rows_than_columns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
