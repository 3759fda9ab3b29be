/* cross_entropy's fused and chunked variants on the GPU in native types (label gpu): every
 * dtype and accumulation, each reduction, label smoothing and z-loss, rows up to 70000 columns,
 * ignored rows among them; the GPU's losses and dlogits are judged by the same oracle and bound
 * as the emulation's (the kernel takes each row's columns in the emulation's order, so the
 * bound, which follows that order, applies), and compared with the emulation bit for bit
 * (printed: they differ where the device's expf and logf differ from the host's). Each planted
 * fault is found on the GPU too. Without CUDA in the build, or without a device, exits 77. */
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

static void test_cross_entropy_cuda_keeps_the_contract(void **state) {
  (void)state;
  const char *variants[] = {"fused", "chunked"};
  gpu_table_head();
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++) {
        if (a && t == PF_FP32) continue;
        size_t findings = 0;
        gpu_tally g = {0, 0, 0};
        for (int k = 0; k < 6; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "cross_entropy", variants[v], 900 + (uint64_t)k), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = k == 5 ? 2 : 4 + 4 * (size_t)k;
          c.shape[1] = k == 5 ? 70000 : 1 + 333 * (size_t)k;
          c.inputs[0].scale = k < 3 ? 1.0 : 8.0;
          assert_int_equal(pf_case_set_param(&c, "reduction", (double)(k % 3)), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "label_smoothing", k % 2 ? 0.125 : 0), PF_OK);
          assert_int_equal(pf_case_set_param(&c, "z_loss", k % 3 == 1 ? 0x1p-10 : 0), PF_OK);
          if (v == 1) assert_int_equal(pf_case_set_param(&c, "chunk", (double)(1 + 97 * (size_t)k)), PF_OK);
          findings += (size_t)gpu_finding(&c, &g);
          pf_case_free(&c);
        }
        gpu_table_row(variants[v], (pf_dtype)t, a ? (pf_dtype)t : PF_FP32, &g, findings);
        assert_int_equal(findings, 0); /* in-domain GPU results keep the contract */
      }
}

/* each planted fault is a finding on the GPU, on a case where the CPU emulation finds it too
 * (64x100 fp32, seed 5: overflow, inaccurate, inaccurate, inaccurate with `precfuzz run`) */
static void test_cross_entropy_cuda_faults_found(void **state) {
  (void)state;
  static const struct {
    const char *variant, *fault, *param;
    double scale, value;
  } f[] = {{"fused", "ce-no-max", "z_loss", 120, 0},
           {"chunked", "ce-chunk-no-rescale", "chunk", 8, 7},
           {"fused", "ce-mean-counts-ignored", "reduction", 1, 0},
           {"fused", "ce-grad-no-zloss", "z_loss", 4, 0.25}};
  for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "cross_entropy", f[k].variant, 5), PF_OK);
    c.dtype = PF_FP32;
    c.shape[0] = 64, c.shape[1] = 100;
    c.inputs[0].scale = f[k].scale;
    assert_int_equal(pf_case_set_param(&c, f[k].param, f[k].value), PF_OK);
    snprintf(c.fault, sizeof c.fault, "%s", f[k].fault);
    gpu_finds_as_cpu(&c);
    pf_case_free(&c);
  }
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cross_entropy_cuda_keeps_the_contract),
                                     cmocka_unit_test(test_cross_entropy_cuda_faults_found)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
