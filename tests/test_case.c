/* case: JSON round trip bit for bit, and a clear error for every malformed field. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/case.h"
#include "core/kernel.h"

static void test_case_roundtrip_is_bit_exact(void **state) {
  pf_case c, d;
  assert_int_equal(pf_case_init(&c, "softmax", "online", 5), PF_OK);
  c.dtype = PF_FP16;
  c.accum = PF_FP16;
  c.shape[0] = 2;
  c.shape[1] = 4;
  assert_int_equal(pf_case_set_param(&c, "alpha", 0x1.123456789abcdp-3), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "mask", 1), PF_OK);
  snprintf(c.fault, sizeof c.fault, "softmax-no-max");
  snprintf(c.expect, sizeof c.expect, "overflow");
  pf_gen_free(&c.inputs[0]);
  const double vals[8] = {-0.0, 0x1p-24, 65504.0, -INFINITY, INFINITY, NAN, 0x1.ffcp+3, -0x1.554p-2};
  c.inputs[0].dist = PF_DIST_VALUES;
  c.inputs[0].values = malloc(sizeof vals);
  memcpy(c.inputs[0].values, vals, sizeof vals);
  c.inputs[0].nvalues = 8;
  assert_int_equal(pf_case_validate(&c), PF_OK);
  char *j1 = pf_case_to_json(&c);
  assert_int_equal(pf_case_from_json(&d, j1, "test"), PF_OK);
  char *j2 = pf_case_to_json(&d);
  assert_string_equal(j1, j2);
  assert_true(pf_case_param(&d, "alpha") == 0x1.123456789abcdp-3);
  for (int i = 0; i < 8; i++) {
    if (isnan(vals[i])) assert_true(isnan(d.inputs[0].values[i]));
    else assert_memory_equal(&vals[i], &d.inputs[0].values[i], sizeof(double)); /* -0 stays -0 */
  }
  assert_string_equal(d.fault, "softmax-no-max");
  assert_string_equal(d.expect, "overflow");
  free(j1);
  free(j2);
  pf_case_free(&c);
  pf_case_free(&d);
}

static void test_case_roundtrip_generated_and_big_seed(void **state) {
  pf_case c, d;
  assert_int_equal(pf_case_init(&c, "softmax", "safe", 1), PF_OK);
  c.inputs[0].seed = 0xfedcba9876543210ull; /* beyond 2^53: written as a string */
  c.inputs[0].dist = PF_DIST_LOGUNIFORM;
  c.inputs[0].exp_min = -30;
  c.inputs[0].exp_max = 3;
  c.inputs[0].scale = 0x1.8p-1;
  c.inputs[0].outliers = 3;
  c.inputs[0].outlier_mag = 1e4;
  c.inputs[0].special_rate = 0x1p-7;
  char *j1 = pf_case_to_json(&c);
  assert_non_null(strstr(j1, "\"18364758544493064720\""));
  assert_int_equal(pf_case_from_json(&d, j1, "test"), PF_OK);
  assert_true(d.inputs[0].seed == 0xfedcba9876543210ull);
  assert_int_equal(d.inputs[0].exp_min, -30);
  assert_true(d.inputs[0].scale == 0x1.8p-1);
  assert_true(d.inputs[0].outlier_mag == 1e4);
  assert_true(d.inputs[0].special_rate == 0x1p-7);
  char *j2 = pf_case_to_json(&d);
  assert_string_equal(j1, j2);
  free(j1);
  free(j2);
  pf_case_free(&c);
  pf_case_free(&d);
}

#define HEAD "{\"format\":\"precfuzz-case/1\",\"kernel\":\"softmax\",\"variant\":\"safe\","
#define GOOD_INPUT "\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1}}"

static void test_case_malformed_inputs_give_clear_errors(void **state) {
  struct { const char *json, *needle; } bad[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {"{\"kernel\":\"softmax\"}", "missing field 'format'"},
      {"{\"format\":\"precfuzz-case/9\"}", "format"},
      {"{\"format\":\"precfuzz-case/1\",\"kernel\":\"softmaxx\",\"variant\":\"safe\"}", "unknown kernel 'softmaxx'"},
      {"{\"format\":\"precfuzz-case/1\",\"kernel\":\"softmax\",\"variant\":\"fast\"}", "unknown variant 'fast'"},
      {HEAD "\"dtype\":\"fp8\",\"accum\":\"fp32\",\"shape\":[1,2]," GOOD_INPUT "}", "dtype 'fp8'"},
      {HEAD "\"dtype\":\"bf16\",\"accum\":\"fp16\",\"shape\":[1,2]," GOOD_INPUT "}", "does not support"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[0,4]," GOOD_INPUT "}", "rows = 0"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[-1,4]," GOOD_INPUT "}", "'shape'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1e20,4]," GOOD_INPUT "}", "'shape'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[65536,65536]," GOOD_INPUT "}", "elements"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[4]," GOOD_INPUT "}", "2 dimensions"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":\"4x4\"," GOOD_INPUT "}", "'shape'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"params\":{\"alpha\":\"nan\"}," GOOD_INPUT "}", "NaN"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"params\":{\"alpha\":\"-0x1p+0\"}," GOOD_INPUT "}", "alpha"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"params\":{\"alpha\":\"abc\"}," GOOD_INPUT "}", "alpha"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"params\":{\"mask\":\"diagonal\"}," GOOD_INPUT "}", "mask"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"params\":{\"beta\":1}," GOOD_INPUT "}", "no parameter 'beta'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"fault\":\"nope\"," GOOD_INPUT "}", "fault 'nope'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2]}", "'inputs'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{}}", "missing input 'x'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"values\":[\"0x1p+0\"]}}}", "1 values given"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"values\":[\"0x1p+0\",\"abc\"]}}}", "value 1"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"values\":[\"0x1p+0\",\"0x1.99999ap-4\"]}}}", "not representable"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"values\":[\"0x1p+0\",1]}}}", "value 1"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"gaussian\",\"seed\":1}}}", "unknown dist"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":-1}}}", "'seed'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1.5}}}", "'seed'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\"}}}", "needs a 'seed'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1,\"special_rate\":2}}}", "special_rate"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1,\"scale\":\"-3\"}}}", "scale"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1,\"scale\":\"inf\"}}}", "scale"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1,\"outliers\":3}}}", "3 outliers"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"x\":{\"dist\":\"normal\",\"seed\":1,\"colour\":1}}}", "unknown field 'colour'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"inputs\":{\"y\":{}}}", "no input 'y'"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"expect\":\"fine\"," GOOD_INPUT "}", "not a verdict"},
      {HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2],\"extra\":1," GOOD_INPUT "}", "unknown field 'extra'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pf_case c;
    pf_error_clear();
    pf_status st = pf_case_from_json(&c, bad[i].json, "case.json");
    if (st == PF_OK) fail_msg("accepted: %s", bad[i].json);
    const char *msg = pf_error_message();
    if (!strstr(msg, bad[i].needle)) fail_msg("case %zu: message '%s' lacks '%s'", i, msg, bad[i].needle);
    assert_null(strchr(msg, '\n'));          /* one line */
    assert_non_null(strstr(msg, "case.json")); /* names the file */
    pf_case_free(&c);
  }
  /* and the good one parses */
  pf_case c;
  assert_int_equal(pf_case_from_json(&c, HEAD "\"dtype\":\"fp16\",\"accum\":\"fp32\",\"shape\":[1,2]," GOOD_INPUT "}", "ok"), PF_OK);
  pf_case_free(&c);
}

static void test_case_missing_file(void **state) {
  pf_case c;
  assert_int_equal(pf_case_load(&c, "/nonexistent/case.json"), PF_ERR_IO);
  assert_non_null(strstr(pf_error_message(), "/nonexistent/case.json"));
  pf_case_free(&c);
}

/* The training values run draws (pf_param_desc.train): every built-in one parses to values its
 * parameter takes; a draw depends on the seed and the parameter alone; a list's every value and a
 * range's both ends come up; a decimal the frameworks hold in fp32 is drawn as its fp32 value. */
static void test_param_training_draws(void **state) {
  (void)state;
  int specs = 0;
  assert_true(pf_kernel_count() > 0); /* the built-in operations registered */
  for (size_t o = 0; o < pf_op_count(); o++) {
    const pf_op *op = pf_op_at(o);
    for (int p = 0; p < op->nparams; p++) {
      const pf_param_desc *d = &op->params[p];
      double vals[64], lo = 0, hi = 0;
      const int n = pf_param_train_parse(d, vals, 64, &lo, &hi);
      if (!d->train) {
        assert_int_equal(n, -1);
        continue;
      }
      specs++;
      if (n < 0) fail_msg("%s %s: training values '%s' do not parse", op->name, d->name, d->train);
      for (int i = 0; i < n; i++) {
        if (d->type == PF_PARAM_CHOICE) assert_true(vals[i] >= 0 && d->choices[(int)vals[i]]);
        else assert_true(vals[i] >= d->min && vals[i] <= d->max);
      }
      if (n == 0) assert_true(lo >= d->min && hi <= d->max && lo <= hi);
      for (uint64_t seed = 1; seed < 50; seed++) /* the same seed, the same value */
        assert_true(pf_param_train_draw(d, p, seed) == pf_param_train_draw(d, p, seed));
    }
  }
  assert_true(specs >= 15);
  /* adam's lr: each of its 7 values within 400 seeds, nothing else */
  const pf_op *adam = pf_op_find("adam");
  const int lr = pf_op_param_index(adam, "lr"), step = pf_op_param_index(adam, "step");
  const double lrs[7] = {1e-5, 3e-5, 1e-4, 3e-4, 6e-4, 1e-3, 3e-3};
  int seen[7] = {0};
  double smin = 1e300, smax = 0;
  for (uint64_t seed = 1; seed <= 400; seed++) {
    const double v = pf_param_train_draw(&adam->params[lr], lr, seed);
    int k = -1;
    for (int i = 0; i < 7; i++)
      if (v == lrs[i]) k = i;
    assert_true(k >= 0);
    seen[k]++;
    const double t = pf_param_train_draw(&adam->params[step], step, seed);
    assert_true(t == floor(t) && t >= 1 && t <= 1e6);
    smin = fmin(smin, t);
    smax = fmax(smax, t);
  }
  for (int i = 0; i < 7; i++) assert_true(seen[i] > 0);
  /* log-uniform over 1..10^6: 20 octaves, so both ends come up in 400 draws (each ~1/20) */
  assert_true(smin < 4 && smax >= 0x1p19);
  /* two parameters of one seed draw from streams of their own: lr's and eps's sequences differ */
  const int eps = pf_op_param_index(adam, "eps");
  int differ = 0;
  for (uint64_t seed = 1; seed <= 20; seed++)
    differ += (pf_param_train_draw(&adam->params[lr], lr, seed) == 1e-5) != (pf_param_train_draw(&adam->params[eps], eps, seed) == 1e-8);
  assert_true(differ > 0);
  /* label_smoothing 0.1 is held in fp32 by torch: drawn as fl32(0.1) = 0x1.99999ap-4 */
  const pf_op *ce = pf_op_find("cross_entropy");
  const int ls = pf_op_param_index(ce, "label_smoothing");
  double vals[64], lo, hi;
  assert_int_equal(pf_param_train_parse(&ce->params[ls], vals, 64, &lo, &hi), 2);
  assert_true(vals[0] == 0 && vals[1] == 0x1.99999ap-4);
  /* malformed specs are refused, not read as something else */
  const char *bad[] = {"", "x", "1..0", "0.5..3", "1,,", "1e-3,11", NULL};
  for (int i = 0; bad[i]; i++) {
    pf_param_desc d = adam->params[step];
    if (i == 5) d = adam->params[lr]; /* 11 is beyond lr's range [0, 10] */
    d.train = bad[i];
    if (pf_param_train_parse(&d, vals, 64, &lo, &hi) >= 0) fail_msg("'%s' parsed", bad[i]);
  }
  pf_param_desc dm = pf_op_find("softmax")->params[1];
  dm.train = "none,sideways";
  assert_int_equal(pf_param_train_parse(&dm, vals, 64, &lo, &hi), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_param_training_draws),
      cmocka_unit_test(test_case_roundtrip_is_bit_exact),
      cmocka_unit_test(test_case_roundtrip_generated_and_big_seed),
      cmocka_unit_test(test_case_malformed_inputs_give_clear_errors),
      cmocka_unit_test(test_case_missing_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
