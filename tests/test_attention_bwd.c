/* attention_bwd: the oracle and the variants against values derived by hand (a query over two
 * keys whose gradients are known in closed form, rows of equal values that cancel exactly, a
 * causal row that sees one key), the faults, the contract's tightness, and the contract over
 * generated cases. Outputs: dQ (Lq d), dK (Lk d), dV (Lk d), then (standard) dP, dS (Lq Lk). */
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

/* one head: Lq x d queries and dO, Lk x d keys and values */
static void make_case(pf_case *c, const char *variant, pf_dtype t, size_t lq, size_t lk, size_t d, const double *q,
                      const double *k, const double *v, const double *dO) {
  assert_int_equal(pf_case_init(c, "attention_bwd", variant, 1), PF_OK);
  c->dtype = t;
  c->accum = PF_FP32;
  const size_t shape[5] = {1, 1, lq, lk, d};
  memcpy(c->shape, shape, sizeof shape);
  set_values(&c->inputs[0], q, lq * d);
  set_values(&c->inputs[1], k, lk * d);
  set_values(&c->inputs[2], v, lk * d);
  set_values(&c->inputs[3], dO, lq * d);
}

static pf_verdict run_case(pf_run *r, pf_case *c) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(c);
  return r->cmp.verdict;
}

static const char *const variants[] = {"standard", "flash", "flash-pdp"};
static const pf_dtype dtypes[] = {PF_FP32, PF_FP16, PF_BF16};

/* q = (1), k = (0, 0), v = (1, 3), dO = (1), d = 1 (alpha = 1): s = (0, 0), P = (1/2, 1/2),
 * dV = (1/2, 1/2), dP = (1, 3), D = 2, dS = (-1/2, 1/2), dQ = sum dS_j k_j = 0, dK = dS q =
 * (-1/2, 1/2): exact in every dtype; every variant is ok. */
static void test_two_equal_scores(void **state) {
  const double q[1] = {1}, k[2] = {0, 0}, v[2] = {1, 3}, dO[1] = {1};
  for (int var = 0; var < 3; var++)
    for (int d = 0; d < 3; d++) {
      pf_case c;
      make_case(&c, variants[var], dtypes[d], 1, 2, 1, q, k, v, dO);
      pf_run r;
      assert_int_equal(run_case(&r, &c), PF_V_OK);
      const double *E = r.oracle.rounded;
      assert_true(E[0] == 0 && r.oracle.status[0] == PF_ORACLE_NUMBER);   /* dQ */
      assert_true(E[1] == -0.5 && E[2] == 0.5);                           /* dK */
      assert_true(E[3] == 0.5 && E[4] == 0.5);                            /* dV */
      if (var == 0) assert_true(E[5] == 1 && E[6] == 3 && E[7] == -0.5 && E[8] == 0.5); /* dP, dS */
      pf_run_free(&r);
    }
}

/* q = (1), k = (0, 1), v = (0, 1), dO = (1), d = 1: s = (0, 1), P = (1 - q, q) with
 * q = e/(1+e) = 0.731058578630004879; dP = (0, 1), D = q, dS = (-(1-q) q, q (1-q)) = (-r, r),
 * r = e/(1+e)^2 = 0.196611933241481852; dQ = dS_1 = r, dK = dS, dV = P. The oracle gives fl32 of
 * those (none near a tie); every variant is ok in fp32. */
static void test_closed_form(void **state) {
  const double q1 = 0.7310585786300049, r1 = 0.19661193324148185;
  assert_true(fabs(q1 - exp(1.0) / (1 + exp(1.0))) < 1e-16 && fabs(r1 - q1 * (1 - q1)) < 1e-16);
  const double q[1] = {1}, k[2] = {0, 1}, v[2] = {0, 1}, dO[1] = {1};
  for (int var = 0; var < 3; var++) {
    pf_case c;
    make_case(&c, variants[var], PF_FP32, 1, 2, 1, q, k, v, dO);
    pf_run r;
    assert_int_equal(run_case(&r, &c), PF_V_OK);
    const double *E = r.oracle.rounded;
    const float want[5] = {(float)r1, (float)-r1, (float)r1, (float)(1 - q1), (float)q1};
    for (int i = 0; i < 5; i++) assert_true(E[i] == (double)want[i]);
    assert_true(fabs(r.oracle.exact[0] - r1) <= 0x1p-50 * r1);
    pf_run_free(&r);
  }
}

/* Every row of v equal: dP_ij = dO_i . v is the same over j, so dS = P (dP - D) = 0 exactly and
 * dQ = dK = 0; dV_j = sum_i P_ij dO_i. The oracle proves the zeros (status NUMBER, not a tie);
 * the variants, whose D carries rounding, are within their absolute contracts. */
static void test_equal_values_cancel(void **state) {
  enum { LQ = 3, LK = 4, D = 2 };
  const double q[LQ * D] = {0.5, -1, 2, 0.25, -0.75, 1.5}, k[LK * D] = {1, 0, -0.5, 2, 0.125, -1, 3, 0.5};
  const double v[LK * D] = {0.5, -2, 0.5, -2, 0.5, -2, 0.5, -2}, dO[LQ * D] = {1, -1, 0.5, 2, -3, 0.25};
  for (int var = 0; var < 3; var++)
    for (int d = 0; d < 3; d++) {
      pf_case c;
      make_case(&c, variants[var], dtypes[d], LQ, LK, D, q, k, v, dO);
      pf_run r;
      assert_int_equal(run_case(&r, &c), PF_V_OK);
      for (size_t i = 0; i < (LQ + LK) * D; i++) /* dQ and dK */
        assert_true(r.oracle.exact[i] == 0 && r.oracle.status[i] == PF_ORACLE_NUMBER);
      if (var == 0)
        for (size_t i = 0; i < LQ * LK; i++) assert_true(r.oracle.exact[(LQ + 2 * LK) * D + LQ * LK + i] == 0); /* dS */
      pf_run_free(&r);
    }
}

/* Causal, 2 x 2: query 0 sees key 0 only, so P_00 = 1, P_01 = 0 and its dS row is 0; query 1 sees
 * both keys (q = 0: P = (1/2, 1/2)). With v = (1, 3), dO = (1, 1): dV = (1 + 1/2, 1/2),
 * dS_1 = (-1/2, 1/2), dK_j = dS_1j q_1 = 0, dQ_1 = dS_1 . k = (-k_0 + k_1) / 2 = 1 with k = (1, 3). */
static void test_causal(void **state) {
  const double q[2] = {2, 0}, k[2] = {1, 3}, v[2] = {1, 3}, dO[2] = {1, 1};
  for (int var = 0; var < 3; var++) {
    pf_case c;
    make_case(&c, variants[var], PF_FP32, 2, 2, 1, q, k, v, dO);
    assert_int_equal(pf_case_set_param(&c, "mask", 1), PF_OK);
    pf_run r;
    assert_int_equal(run_case(&r, &c), PF_V_OK);
    const double *E = r.oracle.rounded;
    assert_true(E[0] == 0 && E[1] == 1);   /* dQ */
    assert_true(E[2] == 0 && E[3] == 0);   /* dK: dS_0 = 0, q_1 = 0 */
    assert_true(E[4] == 1.5 && E[5] == 0.5); /* dV */
    pf_run_free(&r);
  }
}

/* The faults on the closed-form case: D = 0 gives dS = P dP = (0, q); without the scale (d = 4,
 * alpha = 1/2) dQ and dK are doubled; P recomputed without the max is off by e^m. */
static void test_faults(void **state) {
  const double q[1] = {1}, k[2] = {0, 1}, v[2] = {0, 1}, dO[1] = {1};
  const char *const faults[] = {"attn-bwd-no-delta", "attn-bwd-no-scale", "attn-bwd-lse-no-max"};
  for (int var = 0; var < 3; var++)
    for (int f = 0; f < (var ? 3 : 2); f++) {
      pf_case c;
      if (f == 1) {
        const double q4[4] = {1, 1, 1, 1}, k4[8] = {0, 0, 0, 0, 1, 1, 1, 1}, v4[8] = {0, 0, 0, 0, 1, 1, 1, 1},
                     d4[4] = {1, 0, 0, 0};
        make_case(&c, variants[var], PF_FP32, 1, 2, 4, q4, k4, v4, d4);
      } else {
        const double q2[1] = {2}, k2[2] = {1, 2};
        make_case(&c, variants[var], PF_FP32, 1, 2, 1, f == 2 ? q2 : q, f == 2 ? k2 : k, v, dO);
      }
      snprintf(c.fault, sizeof c.fault, "%s", faults[f]);
      pf_run r;
      assert_true(pf_verdict_is_finding(run_case(&r, &c))); /* inaccurate, or underflow where dS_0 = P_0 0 */
      pf_run_free(&r);
    }
}

/* delta and block are flash's: standard refuses them (they would be silently ignored) */
static void test_flash_parameters_refused_by_standard(void **state) {
  const char *const names[2] = {"delta", "block"};
  for (int p = 0; p < 2; p++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "attention_bwd", "standard", 1), PF_OK);
    if (p == 0) assert_int_equal(pf_case_set_param(&c, "delta", 1), PF_OK);
    else assert_int_equal(pf_case_set_param(&c, "block", 8), PF_OK);
    assert_int_equal(pf_case_validate(&c), PF_ERR_ARG);
    assert_non_null(strstr(pf_error_message(), names[p]));
    pf_case_free(&c);
    assert_int_equal(pf_case_init(&c, "attention_bwd", "flash", 1), PF_OK);
    if (p == 0) assert_int_equal(pf_case_set_param(&c, "delta", 1), PF_OK);
    else assert_int_equal(pf_case_set_param(&c, "block", 8), PF_OK);
    assert_int_equal(pf_case_validate(&c), PF_OK);
    pf_case_free(&c);
  }
}

/* The contract catches a kernel some ulps off: on the closed-form case in fp32 the bounds of dV
 * (1 - q, q) are under 32 ulps (measured 12.7 to 20.1), those of dQ and dK (r, -r, r: the
 * difference dP - D = 1 - q, a quarter of its terms, so four times their ulps) under 128
 * (measured 43 to 97). */
static void test_bound_is_tight(void **state) {
  const double q[1] = {1}, k[2] = {0, 1}, v[2] = {0, 1}, dO[1] = {1};
  const double exact[5] = {0.19661193324148185, -0.19661193324148185, 0.19661193324148185, 1 - 0.7310585786300049,
                           0.7310585786300049};
  for (int var = 0; var < 3; var++) {
    pf_case c;
    make_case(&c, variants[var], PF_FP32, 1, 2, 1, q, k, v, dO);
    pf_bound b[9];
    variant_bounds(&c, b);
    for (int i = 0; i < 5; i++) {
      const double ulp = ldexp(1.0, ilogb(exact[i]) - 23), e = b[i].abs + b[i].rel * fabs(exact[i]);
      assert_true(e < (i < 3 ? 128 : 32) * ulp);
    }
    pf_case_free(&c);
  }
}

/* Every variant keeps its contract on generated cases: every dtype and accumulation, the masks,
 * blocks shorter than the keys, special values; most of them inside the domain. */
static void test_contract_generated(void **state) {
  size_t in = 0, total = 0;
  for (int var = 0; var < 3; var++)
    for (int d = 0; d < 3; d++)
      for (int st = 0; st < 2; st++)
        for (uint64_t seed = 1; seed <= 6; seed++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "attention_bwd", variants[var], seed), PF_OK);
          c.dtype = dtypes[d];
          c.accum = st ? dtypes[d] : PF_FP32;
          const size_t shape[5] = {1, 2, 1 + seed * 3 % 9, 1 + seed * 5 % 11, 1 + seed * 7 % 13};
          memcpy(c.shape, shape, sizeof shape);
          for (int t = 0; t < 4; t++) {
            c.inputs[t].scale = ldexp(1.0, (int)(seed % 5) - 2);
            c.inputs[t].special_rate = seed % 5 == 0 ? 0.01 : 0;
          }
          assert_int_equal(pf_case_set_param(&c, "mask", (double)(seed % 3)), PF_OK);
          if (var) assert_int_equal(pf_case_set_param(&c, "block", (double)(1 + seed % 4)), PF_OK);
          in += (size_t)pf_check_contract(&c, "generated");
          total++;
        }
  assert_true(in > total / 2);
}

/* More queries than keys, by hand: 3 queries, 2 keys, d = 1 (alpha = 1), q = 0, k = (1, 3),
 * v = (2, 4), dO = (1, 1, 1); causal bottom right: query 0 sees no key, query 1 key 0, query
 * 2 both (scores 0). P = ((0, 0), (1, 0), (1/2, 1/2)): query 0's row is 0 by definition
 * (PyTorch's), not uniform. dP_ij = v_j, D = (0, 2, 3), dS = (0, 0; 0, 0; -1/2, 1/2).
 * dQ = dS k = (0, 0, 1), dK = dS^T q = 0, dV = P^T dO = (3/2, 1/2) (a uniform query 0 would
 * give (2, 1)). Exact in every dtype; every variant ok. */
static void test_more_queries_than_keys(void **state) {
  const double q[3] = {0, 0, 0}, k[2] = {1, 3}, v[2] = {2, 4}, dO[3] = {1, 1, 1};
  const double want[7] = {0, 0, 1, 0, 0, 1.5, 0.5};
  for (int var = 0; var < 3; var++)
    for (int d = 0; d < 3; d++) {
      pf_case c;
      make_case(&c, variants[var], dtypes[d], 3, 2, 1, q, k, v, dO);
      assert_int_equal(pf_case_set_param(&c, "mask", 1), PF_OK);
      pf_run r;
      assert_int_equal(run_case(&r, &c), PF_V_OK);
      for (int x = 0; x < 7; x++) assert_true(r.oracle.rounded[x] == want[x] && fabs(r.out[x] - want[x]) <= 0x1p-10);
      if (var == 0) assert_true(r.out[5] == 1.5 && r.out[6] == 0.5);
      pf_run_free(&r);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_equal_scores), cmocka_unit_test(test_closed_form),
      cmocka_unit_test(test_equal_values_cancel), cmocka_unit_test(test_causal),
      cmocka_unit_test(test_faults), cmocka_unit_test(test_flash_parameters_refused_by_standard),
      cmocka_unit_test(test_bound_is_tight),
      cmocka_unit_test(test_contract_generated),
      cmocka_unit_test(test_more_queries_than_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
