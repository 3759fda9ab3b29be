/* softmax on the GPU (label gpu): every variant, dtype and accumulation on generated
 * cases; the GPU's outputs are judged by the same oracle and bound as the CPU's, and
 * compared with the CPU emulation bit for bit: the kernel runs the emulation's row code with
 * the project's own binary32 exp (core/expf.h), so every output must be equal. Without
 * CUDA in the build, or without a device, exits 77. */
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
#include "kernels/softmax/softmax_cuda.h"

static void test_softmax_cuda_matches_oracle_and_cpu(void **state) {
  const char *variants[] = {"naive", "safe", "online"};
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  size_t elems = 0, equal = 0;
  int64_t worst_diff = 0;
  int cases = 0;
  printf("%-7s %-5s %-5s %10s %10s %9s %9s\n", "variant", "dtype", "accum", "elements", "bitwise=", "gpu-ulps", "findings");
  for (int v = 0; v < 3; v++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int a = 0; a < 2; a++) {
        if (a && t == PF_FP32) continue;
        size_t e_cfg = 0, eq_cfg = 0, findings = 0;
        int64_t gpu_ulps = 0;
        for (int k = 0; k < 6; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "softmax", variants[v], 500 + (uint64_t)k), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = a ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 16 + 8 * (size_t)k;
          c.shape[1] = 32 + 100 * (size_t)k;
          c.inputs[0].scale = k < 3 ? 1.0 : 6.0;
          if (k % 2) pf_case_set_param(&c, "mask", 1);
          pf_run r;
          assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
          double *gy = malloc(r.nout * sizeof(double));
          unsigned gfe = 0;
          pf_status st = r.kernel->run_cuda(&c, r.in, gy, &gfe);
          assert_int_equal(st, PF_OK);
          pf_comparison g;
          assert_int_equal(pf_compare(c.dtype, gy, r.nout, &r.oracle, r.bound, gfe, &g), PF_OK);
          findings += pf_verdict_is_finding(g.verdict) && r.in_domain;
          if (g.max_ulps > gpu_ulps) gpu_ulps = g.max_ulps;
          for (size_t i = 0; i < r.nout; i++) {
            const int same = memcmp(&gy[i], &r.out[i], sizeof(double)) == 0 || (isnan(gy[i]) && isnan(r.out[i]));
            eq_cfg += same;
            const int64_t d = pf_ulp_distance(c.dtype, gy[i], r.out[i]);
            if (d != INT64_MAX && d > worst_diff) worst_diff = d;
          }
          e_cfg += r.nout;
          pf_comparison_free(&g);
          free(gy);
          pf_run_free(&r);
          pf_case_free(&c);
          cases++;
        }
        printf("%-7s %-5s %-5s %10zu %9.4f%% %9lld %9zu\n", variants[v], pf_dtype_name((pf_dtype)t),
               a ? pf_dtype_name((pf_dtype)t) : "fp32", e_cfg, 100.0 * (double)eq_cfg / (double)e_cfg,
               (long long)gpu_ulps, findings);
        assert_int_equal(findings, 0); /* in-domain GPU results keep the contract */
        elems += e_cfg;
        equal += eq_cfg;
      }
  printf("%d cases, %zu elements: %.4f%% bitwise equal CPU vs GPU, largest CPU-GPU difference %lld ulps\n", cases,
         elems, 100.0 * (double)equal / (double)elems, (long long)worst_diff);
  assert_int_equal(equal, elems);
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_softmax_cuda_matches_oracle_and_cpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
