/* softmax_bwd on the GPU in native types (label gpu): both variants, every dtype and
 * accumulation, on generated cases, a constant dy among them; the GPU's dx is judged by the
 * same oracle and bound as the CPU emulation's (the contract holds for any summation order, and
 * the kernel sums as a tree over a block), and compared with the emulation, which sums in column
 * order: the bitwise-equal fraction and the largest difference are printed, not asserted. Planted
 * faults must be found on the GPU too. Without CUDA in the build, or without a device, exits 77. */
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
#include "tests/case_values.h"
#include "tests/gpu_skip.h"

#ifdef PF_HAVE_CUDA
#include "tests/gpu_judge.h"

static void test_softmax_bwd_cuda_keeps_the_contract(void **state) {
  (void)state;
  const char *variants[] = {"stored", "recompute"};
  gpu_table_head();
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++) {
        if (a && t == PF_FP32) continue;
        size_t findings = 0;
        gpu_tally g = {0, 0, 0};
        for (int k = 0; k < 6; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "softmax_bwd", variants[v], 700 + (uint64_t)k), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 8 + 8 * (size_t)k;
          c.shape[1] = 1 + 300 * (size_t)k; /* 1 to 1501: blocks partly idle, rows over many passes */
          c.inputs[0].scale = k < 3 ? 1.0 : 8.0;
          if (k == 5) set_constant(&c.inputs[1], 0.5, c.shape[0] * c.shape[1]); /* dx exactly 0 */
          findings += (size_t)gpu_finding(&c, &g);
          pf_case_free(&c);
        }
        gpu_table_row(variants[v], (pf_dtype)t, a ? (pf_dtype)t : PF_FP32, &g, findings);
        assert_int_equal(findings, 0); /* in-domain GPU results keep the contract */
      }
}

/* each planted fault is a finding on the GPU as on the CPU: dy = 100 everywhere (exact dx 0);
 * without the sum dx = 100 y, and a sum of 2048 terms of about 0.05 in fp16 stops growing
 * where its spacing (2^-4 from 64) passes them, so S falls short of 100 (both: `inaccurate`
 * on the CPU, 4x2048 fp16, seed 1) */
static void test_softmax_bwd_cuda_faults_found(void **state) {
  (void)state;
  const char *faults[] = {"softmax-bwd-no-sum", "softmax-bwd-sum-in-storage"};
  for (int f = 0; f < 2; f++) {
    pf_case c;
    assert_int_equal(pf_case_init(&c, "softmax_bwd", "stored", 1), PF_OK);
    c.dtype = PF_FP16;
    c.shape[0] = 4, c.shape[1] = 2048;
    snprintf(c.fault, sizeof c.fault, "%s", faults[f]);
    set_constant(&c.inputs[1], 100, 4 * 2048);
    gpu_finds_as_cpu(&c);
    pf_case_free(&c);
  }
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_softmax_bwd_cuda_keeps_the_contract),
                                     cmocka_unit_test(test_softmax_bwd_cuda_faults_found)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
