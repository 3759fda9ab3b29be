/* attention_bwd on the GPU in native types (label gpu): every variant, dtype and accumulation,
 * both causal masks, key blocks shorter than the keys, D in the storage dtype; the GPU's dQ, dK,
 * dV (and the standard variant's dP, dS) are judged by the same oracle and bound as the
 * emulation's (each thread takes its sums in the emulation's order, so the bound, which follows
 * it, applies), and compared with the emulation bit for bit (printed: fmaf and the device's
 * expf and logf may differ from the host's in the last bit). Each planted fault is found on the
 * GPU too. Without CUDA in the build, or without a device, exits 77. */
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
#include "tests/gpu_skip.h"

#ifdef PF_HAVE_CUDA
#include "tests/gpu_judge.h"

static const char *const variants[] = {"standard", "flash", "flash-pdp"};

static void test_attention_bwd_cuda_keeps_the_contract(void **state) {
  (void)state;
  gpu_table_head();
  for (int v = 0; v < 3; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++) {
        if (a && t == PF_FP32) continue;
        size_t findings = 0;
        gpu_tally g = {0, 0, 0};
        for (int k = 0; k < 6; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "attention_bwd", variants[v], 1100 + (uint64_t)k), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 1, c.shape[1] = 1 + (size_t)k % 3;
          c.shape[2] = 1 + 13 * (size_t)k, c.shape[3] = 2 + 11 * (size_t)k, c.shape[4] = k == 5 ? 64 : 4 + 4 * (size_t)k;
          for (int i = 0; i < 4; i++) c.inputs[i].scale = k < 3 ? 1.0 : 3.0;
          assert_int_equal(pf_case_set_param(&c, "mask", (double)(k % 3)), PF_OK);
          if (v > 0) {
            assert_int_equal(pf_case_set_param(&c, "block", (double)(1 + 5 * (size_t)k)), PF_OK);
            assert_int_equal(pf_case_set_param(&c, "delta", (double)(k % 2)), PF_OK);
          }
          findings += (size_t)gpu_finding(&c, &g);
          pf_case_free(&c);
        }
        gpu_table_row(variants[v], (pf_dtype)t, a ? (pf_dtype)t : PF_FP32, &g, findings);
        assert_int_equal(findings, 0); /* in-domain GPU results keep the contract */
      }
}

/* each planted fault is a finding on the GPU where the emulation finds it (1x2x16x16x16 fp32,
 * seed 3; attn-bwd-lse-no-max with key blocks of 4, where the running max moves) */
static void test_attention_bwd_cuda_faults_found(void **state) {
  (void)state;
  static const struct {
    const char *variant, *fault;
  } f[] = {{"standard", "attn-bwd-no-delta"}, {"flash", "attn-bwd-no-delta"},  {"flash", "attn-bwd-lse-no-max"},
           {"flash-pdp", "attn-bwd-lse-no-max"}, {"standard", "attn-bwd-no-scale"}, {"flash", "attn-bwd-no-scale"}};
  for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "attention_bwd", f[k].variant, 3), PF_OK);
    c.dtype = PF_FP32;
    c.shape[0] = 1, c.shape[1] = 2, c.shape[2] = 16, c.shape[3] = 16, c.shape[4] = 16;
    for (int i = 0; i < 4; i++) c.inputs[i].scale = 2.0;
    if (strcmp(f[k].variant, "standard")) assert_int_equal(pf_case_set_param(&c, "block", 4), PF_OK);
    snprintf(c.fault, sizeof c.fault, "%s", f[k].fault);
    gpu_finds_as_cpu(&c);
    pf_case_free(&c);
  }
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_attention_bwd_cuda_keeps_the_contract),
                                     cmocka_unit_test(test_attention_bwd_cuda_faults_found)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
