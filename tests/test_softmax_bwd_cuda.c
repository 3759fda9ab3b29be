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

#include "harness/runner.h"
#include "tests/case_values.h"
#include "tests/gpu_skip.h"

#ifdef PF_HAVE_CUDA
/* runs c on the GPU, judged against c's oracle and bound: 1 when it is a finding in the domain */
static int gpu_finding(pf_case *c, size_t *elems, size_t *equal, int64_t *ulps) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  assert_int_equal(pf_run_case(c, &o, &r), PF_OK);
  double *gy = malloc(r.nout * sizeof(double));
  unsigned gfe = 0;
  assert_non_null(r.kernel->run_cuda);
  assert_int_equal(r.kernel->run_cuda(c, r.in, gy, &gfe), PF_OK);
  pf_comparison g;
  assert_int_equal(pf_compare(c->dtype, gy, r.nout, &r.oracle, r.bound, gfe, &g), PF_OK);
  const int finding = pf_verdict_is_finding(g.verdict) && r.in_domain;
  if (g.max_ulps > *ulps) *ulps = g.max_ulps;
  for (size_t i = 0; i < r.nout; i++) *equal += memcmp(&gy[i], &r.out[i], sizeof(double)) == 0;
  *elems += r.nout;
  pf_comparison_free(&g);
  free(gy);
  pf_run_free(&r);
  return finding;
}

static void test_softmax_bwd_cuda_keeps_the_contract(void **state) {
  (void)state;
  const char *variants[] = {"stored", "recompute"};
  printf("%-9s %-5s %-5s %10s %10s %9s %9s\n", "variant", "dtype", "accum", "elements", "bitwise=", "gpu-ulps", "findings");
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++) {
        if (a && t == PF_FP32) continue;
        size_t elems = 0, equal = 0, findings = 0;
        int64_t ulps = 0;
        for (int k = 0; k < 6; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "softmax_bwd", variants[v], 700 + (uint64_t)k), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 8 + 8 * (size_t)k;
          c.shape[1] = 1 + 300 * (size_t)k; /* 1 to 1501: blocks partly idle, rows over many passes */
          c.inputs[0].scale = k < 3 ? 1.0 : 8.0;
          if (k == 5) set_constant(&c.inputs[1], 0.5, c.shape[0] * c.shape[1]); /* dx exactly 0 */
          findings += (size_t)gpu_finding(&c, &elems, &equal, &ulps);
          pf_case_free(&c);
        }
        printf("%-9s %-5s %-5s %10zu %9.4f%% %9lld %9zu\n", variants[v], pf_dtype_name((pf_dtype)t),
               a ? pf_dtype_name((pf_dtype)t) : "fp32", elems, 100.0 * (double)equal / (double)elems, (long long)ulps,
               findings);
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
    size_t elems = 0, equal = 0;
    int64_t ulps = 0;
    assert_int_equal(gpu_finding(&c, &elems, &equal, &ulps), 1);
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
