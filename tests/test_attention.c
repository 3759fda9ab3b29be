/* attention: every variant against values derived by hand (tanh(1) from a 1x2 score row,
 * the fp16 overflow threshold of a stored score), the stage a finding is born in, the
 * flash-no-rescale fault, and the soundness of every contract over generated cases. */
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
#include "tests/case_values.h"

/* One head, explicit Q (lq x d), K and V (lk x d). */
static pf_verdict run_attn(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, size_t lq, size_t lk, size_t d,
                           const double *q, const double *k, const double *v, const char *fault, double layer,
                           double block) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "attention", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  const size_t shape[5] = {1, 1, lq, lk, d};
  memcpy(c.shape, shape, sizeof shape);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  if (layer > 0) assert_int_equal(pf_case_set_param(&c, "layer", layer), PF_OK);
  if (block > 0) assert_int_equal(pf_case_set_param(&c, "block", block), PF_OK);
  set_values(&c.inputs[0], q, lq * d);
  set_values(&c.inputs[1], k, lk * d);
  set_values(&c.inputs[2], v, lk * d);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_attention_tanh_one(void **state) {
  /* d = 1, q = 2, K = (1, 0): scores (2, 0), P = (e^2, 1)/(e^2 + 1); V = (1, -1):
   * o = (e^2 - 1)/(e^2 + 1) = tanh(1) = 0.76159415595..., binary32 0x1.85efacp-1;
   * P[0] = 0.88079707797..., binary32 0x1.c2f7d6p-1. */
  const double q[1] = {2}, k[2] = {1, 0}, v[2] = {1, -1};
  const char *variants[] = {"post-scale", "inward", "layer-scaled", "flash"};
  for (int i = 0; i < 4; i++) {
    pf_run r;
    assert_int_equal(run_attn(&r, variants[i], PF_FP32, PF_FP32, 1, 2, 1, q, k, v, NULL, 0, 0), PF_V_OK);
    assert_true(r.oracle.rounded[0] == 0x1.85efacp-1);
    assert_true(fabs(r.oracle.exact[0] - 0.7615941559557649) < 0x1p-52);
    if (i != 3) {
      assert_true(r.oracle.rounded[1] == 2.0); /* stored score */
      assert_true(r.oracle.rounded[3] == 0x1.c2f7d6p-1);
    }
    assert_true(fabs(r.out[0] - 0.7615941559557649) < 0x1p-20);
    pf_run_free(&r);
  }
}

static void test_attention_fp16_score_overflow_threshold(void **state) {
  /* d = 1 (alpha = 1): q k = 45 * 1456 = 65520, the fp16 overflow threshold (ties to inf);
   * 32 * 2047 = 65504 is the largest finite fp16. Post-scale stores the score in fp16;
   * layer-scaled with L = 2 stores 32760, which rounds to 32768 (fp16 spacing 16 there, a tie
   * to even), finite, and the fp32 softmax multiplies it back by 2. */
  const double q[1] = {45}, q_fin[1] = {32}, v[2] = {1, 0.5};
  const double k_inf[2] = {1456, 0}, k_fin[2] = {2047, 0};
  pf_run r;
  assert_int_equal(run_attn(&r, "post-scale", PF_FP16, PF_FP32, 1, 2, 1, q, k_inf, v, NULL, 0, 0), PF_V_OVERFLOW);
  assert_non_null(r.born);
  assert_string_equal(r.born, "scores");
  assert_true(isinf(r.out[1]));                     /* the stored score */
  assert_false(r.in_domain);
  pf_run_free(&r);
  assert_int_equal(run_attn(&r, "post-scale", PF_FP16, PF_FP32, 1, 2, 1, q_fin, k_fin, v, NULL, 0, 0), PF_V_OK);
  assert_true(r.out[1] == 65504.0);
  assert_true(r.out[0] == 1.0); /* P = (1, 0): o = v[0] */
  pf_run_free(&r);
  assert_int_equal(run_attn(&r, "layer-scaled", PF_FP16, PF_FP32, 1, 2, 1, q, k_inf, v, NULL, 2, 0), PF_V_OK);
  assert_true(r.out[1] == 32768.0);
  assert_true(r.in_domain);
  pf_run_free(&r);
}

static void test_attention_flash_no_rescale(void **state) {
  /* block 1, q = 1, K = (0, 5), V = (1, 0): the max grows in the second block; the exact
   * o = e^-5 / (1 + e^-5) = 0.00669285...; without rescaling the accumulator keeps v[0]
   * at weight 1: 1 / (1 + e^-5) = 0.99330714... */
  const double q[1] = {1}, k[2] = {0, 5}, v[2] = {1, 0};
  pf_run r;
  assert_int_equal(run_attn(&r, "flash", PF_FP32, PF_FP32, 1, 2, 1, q, k, v, NULL, 0, 1), PF_V_OK);
  assert_true(fabs(r.out[0] - 0.0066928509242848554) < 1e-8);
  pf_run_free(&r);
  assert_int_equal(run_attn(&r, "flash", PF_FP32, PF_FP32, 1, 2, 1, q, k, v, "flash-no-rescale", 0, 1), PF_V_INACCURATE);
  assert_true(fabs(r.out[0] - 0.9933071490757152) < 1e-6);
  pf_run_free(&r);
}

static void test_attention_variant_checks(void **state) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "attention", "post-scale", 1), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "layer", 4), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "layer"));
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "attention", "flash", 1), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "softmax_accum", 1), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  pf_case_free(&c);
}

static void test_attention_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"post-scale", "inward", "layer-scaled", "flash"};
  const double scales[] = {0.5, 3, 12};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 4; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < 3; s++)
          for (int m = 0; m < 2; m++) {
            pf_case c;
            assert_int_equal(pf_case_init(&c, "attention", variants[v], 77 + cases), PF_OK);
            c.dtype = (pf_dtype)t;
            c.accum = a ? (pf_dtype)t : PF_FP32;
            const size_t shape[5] = {1, 2, 3 + (size_t)s, 7 + 2 * (size_t)s, 8 + 4 * (size_t)m};
            memcpy(c.shape, shape, sizeof shape);
            pf_case_set_param(&c, "mask", m);
            pf_case_set_param(&c, "mask_value", (s + m) % 3);
            if (v == 2) pf_case_set_param(&c, "layer", 1 + 3 * s);
            if (v == 3) pf_case_set_param(&c, "block", 1 + 2 * s);
            if (v < 2 && a) pf_case_set_param(&c, "softmax_accum", m);
            for (int i = 0; i < 3; i++) {
              c.inputs[i].scale = scales[s];
              c.inputs[i].dist = (pf_dist)((s + i) % 4);
            }
            in_domain += pf_check_contract(&c, "attention");
            cases++;
          }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

/* More queries than keys, by hand: 3 queries, 2 keys, d = 1, Q = K = 0 (every score 0),
 * V = (2, 4); causal aligned bottom right: query i sees keys j <= i - 1. Query 0 sees none,
 * query 1 key 0, query 2 both. Under -inf (PyTorch's boolean mask) query 0's P and O are 0,
 * by definition and exactly: O = (0, 2, 3). Under -10000 its scores are all the sentinel:
 * uniform, O = (3, 2, 3). Every variant, kernel and oracle, verdict ok. */
static void test_attention_more_queries_than_keys(void **state) {
  const double zeros[3] = {0, 0, 0}, v[2] = {2, 4};
  const double want_o[2][3] = {{0, 2, 3}, {3, 2, 3}};
  const double want_p[2][6] = {{0, 0, 1, 0, 0.5, 0.5}, {0.5, 0.5, 1, 0, 0.5, 0.5}};
  const char *variants[] = {"post-scale", "inward", "layer-scaled", "flash"};
  for (int i = 0; i < 4; i++)
    for (int mv = 0; mv < 2; mv++) {
      pf_case c;
      assert_int_equal(pf_case_init(&c, "attention", variants[i], 1), PF_OK);
      c.dtype = c.accum = PF_FP32;
      const size_t shape[5] = {1, 1, 3, 2, 1};
      memcpy(c.shape, shape, sizeof shape);
      assert_int_equal(pf_case_set_param(&c, "mask", 1), PF_OK);
      assert_int_equal(pf_case_set_param(&c, "mask_value", mv), PF_OK); /* -inf, -10000 */
      set_values(&c.inputs[0], zeros, 3);
      set_values(&c.inputs[1], zeros, 2);
      set_values(&c.inputs[2], v, 2);
      pf_oracle_opts o;
      pf_oracle_opts_default(&o);
      pf_run r;
      if (pf_run_case(&c, &o, &r)) fail_msg("run failed: %s", pf_error_message());
      pf_case_free(&c);
      assert_int_equal(r.cmp.verdict, PF_V_OK);
      for (int q = 0; q < 3; q++) assert_true(r.out[q] == want_o[mv][q] && r.oracle.exact[q] == want_o[mv][q]);
      if (i != 3) /* P after O (3) and S (6) */
        for (int j = 0; j < 6; j++) assert_true(r.out[9 + j] == want_p[mv][j] && r.oracle.exact[9 + j] == want_p[mv][j]);
      pf_run_free(&r);
    }
}

/* 4096 equal scores (q = 0) with the softmax accumulated in the storage dtype, by hand: the
 * running sum of exp(0) = 1 stops at 2048 in fp16 (2048 + 1 ties to even, 2048) and at 256 in
 * bf16, so every P is 2^-11 (2^-8) and a query's P sums to 2 (16), its output 2x (16x) the
 * mean of V: the hazard saturated, error 1 (15), at the query's first probability. */
static void test_attention_saturated_softmax_sum(void **state) {
  const pf_dtype dts[2] = {PF_FP16, PF_BF16};
  const double p[2] = {0x1p-11, 0x1p-8}, err[2] = {1, 15};
  for (int t = 0; t < 2; t++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "attention", "post-scale", 1), PF_OK);
    c.dtype = dts[t];
    c.accum = PF_FP32;
    const size_t shape[5] = {1, 1, 1, 4096, 1};
    memcpy(c.shape, shape, sizeof shape);
    assert_int_equal(pf_case_set_param(&c, "softmax_accum", 1), PF_OK); /* storage */
    const double zero = 0;
    set_values(&c.inputs[0], &zero, 1);
    pf_oracle_opts o;
    pf_oracle_opts_default(&o);
    pf_run r;
    if (pf_run_case(&c, &o, &r)) fail_msg("run failed: %s", pf_error_message());
    pf_case_free(&c);
    const size_t P0 = 1 + 4096; /* after O (1) and S (4096) */
    assert_true(r.out[P0] == p[t] && r.out[P0 + 4095] == p[t]);
    assert_true((r.hazards >> PF_H_SATURATED) & 1);
    assert_true(r.hazard_at[PF_H_SATURATED] == P0 && fabs(r.hazard_measure[PF_H_SATURATED] - err[t]) < 1e-12);
    pf_run_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_tanh_one),
      cmocka_unit_test(test_attention_fp16_score_overflow_threshold),
      cmocka_unit_test(test_attention_flash_no_rescale),
      cmocka_unit_test(test_attention_variant_checks),
      cmocka_unit_test(test_attention_contracts_hold_on_generated_cases),
      cmocka_unit_test(test_attention_more_queries_than_keys),
      cmocka_unit_test(test_attention_saturated_softmax_sum),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
