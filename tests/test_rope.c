/* rope: the oracle and the variants against values derived by hand (angles of 0, 1/2 and 1
 * radian under each scaling), positions as PyTorch 2.15 holds them in bf16, the fault that turns
 * the rotation around, the hazard at position 10^6 and the contract over generated cases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/hazard.h"
#include "core/runner.h"
#include "kernels/rope/rope.h"
#include "tests/case_values.h"
#include "tests/contract_check.h"

/* cos 1, sin 1, cos 1/2, sin 1/2 rounded to fp32 (Python's math.cos, then struct's 'f') */
#define COS1 0x1.14a28p-1
#define SIN1 0x1.aed548p-1
#define COSH 0x1.c15280p-1
#define SINH 0x1.eaee88p-2

typedef struct {
  size_t positions, heads, dim;
  double offset, base, factor;
  int scaling, layout;
} shape;

static pf_verdict run_rope(pf_run *r, const char *variant, pf_dtype t, pf_dtype acc, shape s, const double *x,
                           const char *fault) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "rope", variant, 1), PF_OK);
  c.dtype = t;
  c.accum = acc;
  c.shape[0] = s.positions, c.shape[1] = s.heads, c.shape[2] = s.dim;
  set_values(&c.inputs[0], x, s.positions * s.heads * s.dim);
  pf_case_set_param(&c, "offset", s.offset);
  pf_case_set_param(&c, "base", s.base ? s.base : 10000);
  pf_case_set_param(&c, "factor", s.factor ? s.factor : 1);
  pf_case_set_param(&c, "scaling", s.scaling);
  pf_case_set_param(&c, "layout", s.layout);
  if (fault) snprintf(c.fault, sizeof c.fault, "%s", fault);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(&c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  pf_case_free(&c);
  return r->cmp.verdict;
}

static void test_rope_position_zero_is_identity(void **state) {
  /* theta = 0 at position 0: cos 1, sin 0, y = t exactly in every variant and dtype */
  const double x[8] = {1, -2, 0.5, 3, -0.25, 7, 0, 1.5};
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int layout = 0; layout < 2; layout++) {
        pf_run r;
        assert_int_equal(run_rope(&r, variants[v], (pf_dtype)t, PF_FP32, (shape){1, 1, 8, 0, 0, 0, 0, layout}, x, NULL),
                         PF_V_OK);
        for (int j = 0; j < 8; j++) assert_true(r.out[j] == x[j] && r.oracle.rounded[j] == x[j]);
        pf_run_free(&r);
      }
}

static void test_rope_one_radian(void **state) {
  /* dim 2: omega_0 = 1, so position 1 turns (1, 0) by one radian: (cos 1, sin 1); in bf16
   * 0.5403 = 138.3 / 256 -> 0x1.14p-1 and 0.8415 = 215.4 / 256 -> 0x1.aep-1 */
  const double x[2] = {1, 0};
  const char *variants[] = {"torch", "fused"};
  for (int v = 0; v < 2; v++)
    for (int layout = 0; layout < 2; layout++) {
      pf_run r;
      assert_int_equal(run_rope(&r, variants[v], PF_FP32, PF_FP32, (shape){1, 1, 2, 1, 0, 0, 0, layout}, x, NULL),
                       PF_V_OK);
      assert_true(r.oracle.rounded[0] == COS1 && r.oracle.rounded[1] == SIN1);
      assert_true(r.out[0] == COS1 && r.out[1] == SIN1);
      pf_run_free(&r);
      assert_int_equal(run_rope(&r, variants[v], PF_BF16, PF_FP32, (shape){1, 1, 2, 1, 0, 0, 0, layout}, x, NULL),
                       PF_V_OK);
      assert_true(r.oracle.rounded[0] == 0x1.14p-1 && r.oracle.rounded[1] == 0x1.aep-1);
      pf_run_free(&r);
    }
  /* the fault rope-sin-sign turns it the other way: (cos 1, -sin 1) */
  pf_run r;
  assert_int_equal(run_rope(&r, "torch", PF_FP32, PF_FP32, (shape){1, 1, 2, 1, 0, 0, 0, 0}, x, "rope-sin-sign"),
                   PF_V_INACCURATE);
  assert_true(r.out[1] == -SIN1);
  pf_run_free(&r);
}

static void test_rope_scalings(void **state) {
  pf_run r;
  /* linear, factor 4: position 2 is at 1/2 */
  const double x2[2] = {1, 0};
  assert_int_equal(run_rope(&r, "fused", PF_FP32, PF_FP32, (shape){1, 1, 2, 2, 0, 4, PF_ROPE_SCALE_LINEAR, 0}, x2, NULL),
                   PF_V_OK);
  assert_true(r.oracle.rounded[0] == COSH && r.oracle.rounded[1] == SINH);
  pf_run_free(&r);
  /* dim 4, base 100: omega_1 = 100^(-1/2) = 1/10, theta = 1 at position 10; ntk, factor 4:
   * B = 100 4^(4/2) = 1600, omega_1 = 1/40, theta = 1 at position 40. t = (0, 1, 0, 0): the pair
   * (1, 3) of frequency 1 gives (cos 1, sin 1); the pair (0, 2) is zero, exactly */
  const double x4[4] = {0, 1, 0, 0};
  assert_int_equal(run_rope(&r, "torch", PF_FP32, PF_FP32, (shape){1, 1, 4, 10, 100, 0, 0, 0}, x4, NULL), PF_V_OK);
  assert_true(r.oracle.rounded[1] == COS1 && r.oracle.rounded[3] == SIN1);
  assert_true(r.oracle.rounded[0] == 0 && r.oracle.rounded[2] == 0);
  pf_run_free(&r);
  assert_int_equal(run_rope(&r, "torch", PF_FP32, PF_FP32, (shape){1, 1, 4, 40, 100, 4, PF_ROPE_SCALE_NTK, 0}, x4, NULL),
                   PF_V_OK);
  assert_true(r.oracle.rounded[1] == COS1 && r.oracle.rounded[3] == SIN1);
  pf_run_free(&r);
}

static void test_rope_bf16_positions(void **state) {
  /* torch 2.15: torch.arange(16, dtype=torch.bfloat16) + 295 is 296, 296, 298, 300, 300, 300, 302:
   * 295 becomes bf16's 296 first (an int scalar is made a tensor of the dtype), 297 and 299 are
   * ties (to the even 296 and 300) */
  pf_case c;
  assert_int_equal(pf_case_init(&c, "rope", "torch", 1), PF_OK);
  c.dtype = c.accum = PF_BF16;
  pf_case_set_param(&c, "offset", 295);
  const pf_rope_launch L = pf_rope_launch_of(&c, 0);
  const double want[7] = {296, 296, 298, 300, 300, 300, 302};
  unsigned fe = 0;
  for (size_t i = 0; i < 7; i++) assert_true(pf_rope_seq(&L, i, &fe) == want[i]);
  pf_case_free(&c);
}

static void test_rope_long_position_is_imprecise(void **state) {
  /* position 10^6, base 10^4, dim 64, fp32: fp32's ulp at 10^6 is 1/16, so the fastest
   * frequencies' angles are off by up to 1/32 radian and their pairs by as much relatively: within
   * the contract (which carries the angle's own error), beyond fp32's 2^-10: imprecise */
  double x[64];
  for (int j = 0; j < 64; j++) x[j] = 1 + j % 5;
  pf_run r;
  assert_int_equal(run_rope(&r, "torch", PF_FP32, PF_FP32, (shape){1, 1, 64, 1000000, 0, 0, 0, 0}, x, NULL), PF_V_OK);
  assert_true(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
  /* at position 100 the same row is precise */
  assert_int_equal(run_rope(&r, "torch", PF_FP32, PF_FP32, (shape){1, 1, 64, 100, 0, 0, 0, 0}, x, NULL), PF_V_OK);
  assert_false(r.hazards & (1u << PF_H_IMPRECISE));
  pf_run_free(&r);
}

static void test_rope_contracts_hold_on_generated_cases(void **state) {
  const char *variants[] = {"torch", "fused"};
  const double offsets[3] = {0, 3000, 1000000};
  int cases = 0, in_domain = 0;
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < 6; s++) {
          if (a && v == 1) continue; /* fused: fp32 only */
          pf_case c;
          assert_int_equal(pf_case_init(&c, "rope", variants[v], 900 + (uint64_t)cases), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 5, c.shape[1] = 2, c.shape[2] = s % 2 ? 64 : 10;
          c.inputs[0].dist = (pf_dist)(s % 4);
          c.inputs[0].scale = ldexp(1, 2 * s - 6);
          pf_case_set_param(&c, "offset", offsets[s % 3]);
          pf_case_set_param(&c, "scaling", s % 3);
          if (s % 3) pf_case_set_param(&c, "factor", 8);
          pf_case_set_param(&c, "layout", s / 3);
          in_domain += pf_check_contract(&c, "rope");
          cases++;
        }
  printf("%d cases, %d in the domain, no finding there\n", cases, in_domain);
  assert_true(in_domain > cases / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rope_position_zero_is_identity),
      cmocka_unit_test(test_rope_one_radian),
      cmocka_unit_test(test_rope_scalings),
      cmocka_unit_test(test_rope_bf16_positions),
      cmocka_unit_test(test_rope_long_position_is_imprecise),
      cmocka_unit_test(test_rope_contracts_hold_on_generated_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
