/* cross_entropy: the oracle and the variants against values derived by hand (rows whose loss
 * and gradient are known in closed form: the 1x2 row, the all-equal row, the one-hot target at
 * the row's maximum), the faults, the targets' validation, the contract's tightness, and the
 * contract over generated cases. */
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

static void make_case(pf_case *c, const char *variant, pf_dtype t, pf_dtype acc, size_t rows, size_t cols,
                      const double *x, const double *target) {
  assert_int_equal(pf_case_init(c, "cross_entropy", variant, 1), PF_OK);
  c->dtype = t;
  c->accum = acc;
  c->shape[0] = rows;
  c->shape[1] = cols;
  set_values(&c->inputs[0], x, rows * cols);
  set_values(&c->inputs[1], target, rows);
}

static pf_verdict run_case(pf_run *r, pf_case *c) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(c);
  return r->cmp.verdict;
}

static pf_verdict run_ce(pf_run *r, const char *variant, pf_dtype t, size_t rows, size_t cols, const double *x,
                         const double *target, const char *fault) {
  pf_case c;
  make_case(&c, variant, t, PF_FP32, rows, cols, x, target);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  return run_case(r, &c);
}

static const char *const variants[] = {"logsoftmax", "fused", "chunked", "logsoftmax-cpu"};
static const pf_dtype dtypes[] = {PF_FP32, PF_FP16, PF_BF16};
static int fused(int v) { return v == 1 || v == 2; } /* z-loss, no log-probabilities stored */

/* x = (0, 0), target 0: lse = log 2, the loss log 2 (= 0.693147180559945309...), p = (1/2, 1/2),
 * dx = (1/2 - 1, 1/2) = (-1/2, 1/2), exact in every dtype. Outputs: loss, reduced (the mean of
 * one row: the same), dx. */
static void test_two_equal_logits(void **state) {
  const double x[2] = {0, 0}, t[1] = {0};
  for (int v = 0; v < 4; v++)
    for (int d = 0; d < 3; d++) {
      pf_run r;
      assert_int_equal(run_ce(&r, variants[v], dtypes[d], 1, 2, x, t, NULL), PF_V_OK);
      assert_true(fabs(r.oracle.exact[0] - 0.69314718055994531) <= 0x1p-52);
      assert_true(r.oracle.exact[1] == r.oracle.exact[0]);
      assert_true(r.oracle.rounded[2] == -0.5 && r.oracle.rounded[3] == 0.5);
      if (fused(v)) assert_true(r.out[2] == -0.5 && r.out[3] == 0.5); /* fused: p = 1/2 exactly */
      pf_run_free(&r);
    }
}

/* x = (0, 1): lse = log(1 + e) = 1.31326168751822284... (softplus(1)). Target 0: the loss is lse,
 * dx = (1/(1+e) - 1, e/(1+e)) = (-q, q), q = e/(1+e) = 0.731058578630004879...; target 1: the
 * loss lse - 1, dx = (1 - q, q - 1). The oracle's roundings are fl32 of those (none near a tie);
 * every variant is ok in fp32. */
static void test_closed_form_row(void **state) {
  const double x[2] = {0, 1}, lse = 1.3132616875182228, q = 0.7310585786300049;
  assert_true(fabs(lse - log1p(exp(1.0))) < 1e-15 && fabs(q - exp(1.0) / (1 + exp(1.0))) < 1e-16);
  for (int target = 0; target < 2; target++) {
    const double t[1] = {target};
    for (int v = 0; v < 4; v++) {
      pf_run r;
      assert_int_equal(run_ce(&r, variants[v], PF_FP32, 1, 2, x, t, NULL), PF_V_OK);
      const double loss = target ? lse - 1 : lse;
      assert_true(fabs(r.oracle.exact[0] - loss) <= 0x1p-50 * loss);
      assert_true(r.oracle.rounded[0] == (double)(float)loss);
      const double d0 = target ? 1 - q : -q, d1 = target ? q - 1 : q;
      assert_true(r.oracle.rounded[2] == (double)(float)d0 && r.oracle.rounded[3] == (double)(float)d1);
      pf_run_free(&r);
    }
  }
}

/* The all-equal row: 1000 logits of 3, target 7, and a second row ignored. lse = 3 + ln 1000,
 * the loss ln 1000 = 6.90775527898213705...; the mean counts one row (g = 1): dx_j = 1/1000,
 * dx_7 = 1/1000 - 1. With label smoothing 1/4: the loss is lse - (3/4) 3 - (1/4000) 3000 = ln 1000
 * again, dx_j = 1/1000 - 1/4000 = 3/4000, dx_7 = 3/4000 - 3/4. With z-loss 2^-10 (fused): the
 * loss gains lse^2 / 1024 and p gains the factor 1 + lse / 512. The ignored row is 0 throughout. */
static void test_all_equal_row(void **state) {
  enum { C = 1000 };
  double *x = malloc(2 * C * sizeof *x);
  for (int j = 0; j < 2 * C; j++) x[j] = 3;
  const double t[2] = {7, -100}, ln = log(1000.0), lse = 3 + ln;
  for (int v = 0; v < 4; v++)
    for (int smooth = 0; smooth < 2; smooth++)
      for (int zl = 0; zl < (fused(v) ? 2 : 1); zl++) {
        pf_case c;
        make_case(&c, variants[v], PF_FP32, PF_FP32, 2, C, x, t);
        const double eps = smooth ? 0.25 : 0, z = zl ? 0x1p-10 : 0;
        assert_int_equal(pf_case_set_param(&c, "label_smoothing", eps), PF_OK);
        assert_int_equal(pf_case_set_param(&c, "z_loss", z), PF_OK);
        if (v == 2) assert_int_equal(pf_case_set_param(&c, "chunk", 300), PF_OK);
        pf_run r;
        assert_int_equal(run_case(&r, &c), PF_V_OK);
        const double loss = ln + z * lse * lse, pj = 1.0 / C * (1 + 2 * z * lse) - eps / C;
        assert_true(fabs(r.oracle.exact[0] - loss) <= 0x1p-48 * loss);
        assert_true(r.oracle.exact[1] == 0 && r.oracle.status[1] == PF_ORACLE_NUMBER && r.out[1] == 0);
        assert_true(fabs(r.oracle.exact[2] - loss) <= 0x1p-48 * loss); /* the mean over the one row counted */
        const double *dx = r.oracle.exact + 3;
        assert_true(fabs(dx[0] - pj) <= 0x1p-48 * pj);
        assert_true(fabs(dx[7] - (pj - (1 - eps))) <= 0x1p-48);
        for (int j = C; j < 2 * C; j++) assert_true(dx[j] == 0 && r.out[3 + j] == 0);
        pf_run_free(&r);
      }
  free(x);
}

/* The one-hot target at the row's maximum with a margin of 40: x = (40, 0, 0, 0), target 0.
 * Exactly: Z = 1 + 3 e^-40, the loss log1p(3 e^-40) = 1.27e-17, dx_0 = -3 e^-40 / Z, dx_j =
 * e^-40 / Z. In fp32, fused rounds Z to 1 and lse to 40: the loss and dx_0 come out 0. Both are
 * inside the contract (absolute errors of u 40 and u), but the row's gradient lost its largest
 * component: the verdict is ok and the hazard imprecise. */
static void test_one_hot_at_max(void **state) {
  const double x[4] = {40, 0, 0, 0}, t[1] = {0};
  const double e = exp(-40.0), Z = 1 + 3 * e;
  pf_run r;
  assert_int_equal(run_ce(&r, "fused", PF_FP32, 1, 4, x, t, NULL), PF_V_OK);
  assert_true(fabs(r.oracle.exact[0] - log1p(3 * e)) <= 0x1p-50 * log1p(3 * e));
  assert_true(r.oracle.rounded[2] == (double)(float)(-3 * e / Z) && r.oracle.rounded[3] == (double)(float)(e / Z));
  assert_true(r.out[0] == 0 && r.out[2] == 0 && r.out[3] == (double)(float)(e / Z));
  assert_true(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
}

/* Each fault on a row where it shows: no max, exp(100) overflows fp32; the rescale forgotten
 * (chunk 1, x = (0, 5)), Z = 2 instead of 1 + e^-5; the mean over two rows, one ignored; the
 * gradient without z-loss's 2 z lse p. */
static void test_faults(void **state) {
  pf_run r;
  const double big[2] = {100, 0}, t0[1] = {0};
  assert_int_equal(run_ce(&r, "fused", PF_FP32, 1, 2, big, t0, "ce-no-max"), PF_V_OVERFLOW);
  pf_run_free(&r);
  assert_int_equal(run_ce(&r, "logsoftmax", PF_FP32, 1, 2, big, t0, NULL), PF_V_OK);
  pf_run_free(&r);

  const double step[2] = {0, 5};
  pf_case c;
  make_case(&c, "chunked", PF_FP32, PF_FP32, 1, 2, step, t0);
  assert_int_equal(pf_case_set_param(&c, "chunk", 1), PF_OK);
  snprintf(c.fault, sizeof c.fault, "ce-chunk-no-rescale");
  assert_int_equal(run_case(&r, &c), PF_V_INACCURATE);
  assert_true(fabs(r.out[0] - (float)(5 + log(2.0))) <= 1e-5); /* lse 5 + ln 2, the exact 5 + ln(1 + e^-5) */
  pf_run_free(&r);

  const double two[4] = {0, 1, 0, 1}, t2[2] = {0, -100};
  for (int v = 0; v < 4; v++) {
    assert_int_equal(run_ce(&r, variants[v], PF_FP32, 2, 2, two, t2, "ce-mean-counts-ignored"), PF_V_INACCURATE);
    assert_true(fabs(r.out[2] - r.oracle.exact[2] / 2) <= 1e-6); /* the mean halved */
    pf_run_free(&r);
  }

  make_case(&c, "fused", PF_FP32, PF_FP32, 1, 2, step, t0);
  assert_int_equal(pf_case_set_param(&c, "z_loss", 0x1p-4), PF_OK);
  snprintf(c.fault, sizeof c.fault, "ce-grad-no-zloss");
  assert_int_equal(run_case(&r, &c), PF_V_INACCURATE);
  pf_run_free(&r);
}

/* ce-grad-p-in-storage (Liger-Kernel before its PR 1329), by hand: fused bf16, x = (4, 0),
 * target 0. p0 = e^4 / (e^4 + 1) = 0.98201379; in bf16 (spacing 2^-8 below 1) it is
 * 251/256 = 0.98046875, so the target's gradient is p0 - 1 = -0.01953125 = -0x1.4p-6 exactly,
 * where the exact -0.01798621 rounds to -0x1.26p-6 in bf16 (147/128 2^-6): 8.6% off, a finding;
 * without the fault p stays fp32 and dx0 is that rounding. */
static void test_grad_p_in_storage(void **state) {
  const double x[2] = {4, 0}, t0[1] = {0};
  pf_run r;
  assert_int_equal(run_ce(&r, "fused", PF_BF16, 1, 2, x, t0, "ce-grad-p-in-storage"), PF_V_INACCURATE);
  assert_true(r.out[2] == -0x1.4p-6 && r.oracle.rounded[2] == -0x1.26p-6);
  pf_run_free(&r);
  assert_int_equal(run_ce(&r, "fused", PF_BF16, 1, 2, x, t0, NULL), PF_V_OK);
  assert_true(r.out[2] == -0x1.26p-6);
  pf_run_free(&r);
}

/* Generated cases: one row in four that is not ignored has its target at the row's largest
 * logit, raised by at least 1 (a confident row); a uniform target would be there 1 time in 32.
 * Over 20 cases of 8 x 32 (160 rows, about 140 not ignored): at least 20 such rows, each a unique
 * maximum by at least 1 (about 35 expected; uniform targets would give about 4). */
static void test_confident_rows_generated(void **state) {
  size_t confident = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "cross_entropy", "fused", seed), PF_OK);
    c.dtype = PF_FP32, c.accum = PF_FP32, c.shape[0] = 8, c.shape[1] = 32;
    pf_run r;
    assert_int_equal(run_case(&r, &c), PF_V_OK);
    for (size_t i = 0; i < 8; i++) {
      const double t = r.in[1].data[i], *x = r.in[0].data + i * 32;
      if (t < 0) continue;
      double second = -INFINITY;
      for (size_t j = 0; j < 32; j++)
        if (j != (size_t)t && x[j] > second) second = x[j];
      confident += x[(size_t)t] >= second + 1;
    }
    pf_run_free(&r);
  }
  assert_true(confident >= 20);
}

/* Targets must be class indices or the ignore index; z-loss only where the variant has it. */
static void test_validation(void **state) {
  const double x[4] = {0, 1, 2, 3};
  const double bad[4][1] = {{4}, {-1}, {0.5}, {NAN}};
  for (int k = 0; k < 4; k++) {
    pf_case c;
    make_case(&c, "fused", PF_FP32, PF_FP32, 1, 4, x, bad[k]);
    assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
    assert_non_null(strstr(pf_error_message(), "target 0"));
    pf_case_free(&c);
  }
  const double ok[1] = {3};
  pf_case c;
  make_case(&c, "logsoftmax", PF_FP32, PF_FP32, 1, 4, x, ok);
  assert_int_equal(pf_case_validate(&c), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "z_loss", 0x1p-10), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "z_loss"));
  /* chunk is chunked's alone: elsewhere it would be ignored */
  assert_int_equal(pf_case_set_param(&c, "z_loss", 0), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "chunk", 16), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "chunk"));
  pf_case_free(&c);
}

/* The contract is tight enough to catch a kernel a few ulps off: on the closed-form row in fp32
 * each element's bound is under 16 ulps of the exact value (measured: 4.7 to 15 ulps; expf and
 * logf are allowed 2 ulps each, and the sum, the log and the subtractions add theirs), so an
 * output 16 ulps off is a finding. */
static void test_bound_is_tight(void **state) {
  const double x[2] = {0, 1}, t[1] = {0};
  for (int v = 0; v < 4; v++) {
    pf_case c;
    make_case(&c, variants[v], PF_FP32, PF_FP32, 1, 2, x, t);
    pf_bound b[4];
    variant_bounds(&c, b);
    const double exact[4] = {1.3132616875182228, 1.3132616875182228, -0.7310585786300049, 0.7310585786300049};
    for (int i = 0; i < 4; i++) {
      const double ulp = ldexp(1.0, ilogb(exact[i]) - 23), e = b[i].abs + b[i].rel * fabs(exact[i]);
      assert_true(e < 16 * ulp);
    }
    pf_case_free(&c);
  }
}

/* Every variant keeps its contract on generated cases: every dtype and accumulation, smoothing,
 * z-loss, the reductions, small chunks, a row of 70000 columns; most of them inside the domain. */
static void test_contract_generated(void **state) {
  size_t in = 0, total = 0;
  for (int v = 0; v < 4; v++)
    for (int d = 0; d < 3; d++)
      for (int st = 0; st < 2; st++)
        for (uint64_t seed = 1; seed <= 8; seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "cross_entropy", variants[v], seed), PF_OK);
          c.dtype = dtypes[d];
          c.accum = st ? dtypes[d] : PF_FP32;
          c.shape[0] = 3;
          c.shape[1] = st ? 1 + (size_t)(seed * 7 % 40) : 1 + (size_t)(seed * 37 % 500);
          c.inputs[0].scale = ldexp(1.0, (int)(seed % 9) - 2);
          c.inputs[0].special_rate = seed % 4 == 0 ? 0.02 : 0;
          assert_int_equal(pf_case_set_param(&c, "label_smoothing", seed % 3 == 0 ? 0.125 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "z_loss", fused(v) && seed % 2 ? 0x1p-12 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "reduction", (double)(seed % 3)), PF_OK);
          if (v == 2) assert_int_equal(pf_case_set_param(&c, "chunk", (double)(1 + seed * 5)), PF_OK);
          in += (size_t)pf_check_contract(&c, "generated");
          total++;
        }
  assert_true(in > total / 2);
  for (int v = 0; v < 4; v++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "cross_entropy", variants[v], 5), PF_OK);
    c.dtype = PF_BF16;
    c.shape[0] = 1;
    c.shape[1] = 70000;
    c.inputs[0].scale = 4;
    assert_int_equal(pf_case_set_param(&c, "reduction", 1), PF_OK); /* sum: its one row may be drawn ignored */
    assert_true(pf_check_contract(&c, "long row"));
  }
}

/* Gradient accumulation over micro-batches (microbatches=2 of 4 rows, two columns): rows (0, 0),
 * (0, 1), (0, 0) with target 0 and a fourth ignored. The batch's token-weighted mean is
 * (2 ln 2 + softplus(1)) / 3 = 0.89985201621270450..., each row's gradient its own over 3 (row 2:
 * -1/6 at the target). Each micro-batch's own mean averaged over the two (ce-microbatch-mean, HF
 * transformers' gradient accumulation before 4.46): ((ln 2 + softplus(1)) / 2 + ln 2) / 2 =
 * 0.84816260243950..., row 0's gradient -1/8, row 2's -1/4. PyTorch's variants refuse the
 * parameter, and so does a micro-batch without a row. */
static void test_microbatches(void **state) {
  const double x[8] = {0, 0, 0, 1, 0, 0, 0, 0}, t[4] = {0, 0, 0, -100};
  const double mean = (2 * 0.69314718055994531 + 1.31326168751822284) / 3;
  const double mb = ((0.69314718055994531 + 1.31326168751822284) / 2 + 0.69314718055994531) / 2;
  const char *vs[2] = {"fused", "chunked"};
  for (int k = 0; k < 2; k++)
    for (int f = 0; f < 2; f++) {
      pf_case c;
      make_case(&c, vs[k], PF_FP32, PF_FP32, 4, 2, x, t);
      assert_int_equal(pf_case_set_param(&c, "microbatches", 2), PF_OK);
      if (f) snprintf(c.fault, sizeof c.fault, "ce-microbatch-mean");
      pf_run r;
      const pf_verdict v = run_case(&r, &c);
      assert_true(fabs(r.oracle.exact[4] - mean) < 1e-15);
      assert_true(fabs(r.oracle.exact[5 + 4] - (-1.0 / 6)) < 1e-15);
      if (!f) {
        assert_int_equal(v, PF_V_OK);
        assert_true(fabs(r.out[4] - mean) < 1e-6 && fabs(r.out[5 + 4] - (-1.0 / 6)) < 1e-7);
      } else {
        assert_true(pf_verdict_is_finding(v));
        assert_true(fabs(r.out[4] - mb) < 1e-6);
        assert_true(r.out[5] == -0.125 && r.out[5 + 4] == -0.25);
      }
      pf_run_free(&r);
    }
  pf_case c;
  make_case(&c, "logsoftmax", PF_FP32, PF_FP32, 4, 2, x, t);
  assert_int_equal(pf_case_set_param(&c, "microbatches", 2), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_int_equal(pf_case_set_param(&c, "microbatches", 1), PF_OK);
  pf_case_free(&c);
  make_case(&c, "fused", PF_FP32, PF_FP32, 4, 2, x, t);
  assert_int_equal(pf_case_set_param(&c, "microbatches", 5), PF_OK);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "at most one per row"));
  pf_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_equal_logits), cmocka_unit_test(test_closed_form_row),
      cmocka_unit_test(test_all_equal_row),    cmocka_unit_test(test_one_hot_at_max),
      cmocka_unit_test(test_faults),           cmocka_unit_test(test_validation),
      cmocka_unit_test(test_bound_is_tight),   cmocka_unit_test(test_contract_generated),
      cmocka_unit_test(test_grad_p_in_storage), cmocka_unit_test(test_confident_rows_generated),
      cmocka_unit_test(test_microbatches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
