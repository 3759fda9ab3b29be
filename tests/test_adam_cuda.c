/* Adam on the GPU (label gpu): every variant and dtype on generated cases; the GPU's
 * outputs are judged by the same oracle and bound as the CPU's, and compared with the CPU
 * emulation bit for bit. Without CUDA in the build, or without a device, exits 77. */
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
#include "tests/gpu_skip.h"

#ifdef PF_HAVE_CUDA

static void test_adam_cuda_matches_oracle_and_cpu(void **state) {
  const char *variants[] = {"fused", "torch", "no-master", "state-lowp", "eps-inside", "no-bias-correction"};
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  size_t elems = 0, equal = 0;
  printf("%-19s %-5s %9s %10s %9s\n", "variant", "dtype", "elements", "bitwise=", "findings");
  for (int v = 0; v < 6; v++)
    for (int t = 0; t < PF_NDTYPES; t++) {
      size_t e_cfg = 0, eq_cfg = 0, findings = 0;
      for (int k = 0; k < 4; k++) {
        pf_case c;
        assert_int_equal(pf_case_init(&c, "adam", variants[v], 700 + (uint64_t)k), PF_OK);
        c.dtype = (pf_dtype)t;
        c.shape[0] = 4096;
        pf_case_set_param(&c, "step", k ? 10 * k : 1);
        pf_case_set_param(&c, "wd", k % 2 ? 0.1 : 0);
        for (int i = 0; i < 4; i++) c.inputs[i].scale = ldexp(1, -4 * k);
        pf_run r;
        assert_int_equal(pf_run_case(&c, &o, &r), PF_OK);
        double *gy = malloc(r.nout * sizeof(double));
        unsigned gfe = 0;
        assert_int_equal(r.kernel->run_cuda(&c, r.in, gy, &gfe), PF_OK);
        pf_comparison g;
        assert_int_equal(pf_compare(c.dtype, gy, r.nout, &r.oracle, r.bound, gfe, &g), PF_OK);
        findings += pf_verdict_is_finding(g.verdict) && r.in_domain;
        for (size_t i = 0; i < r.nout; i++)
          eq_cfg += memcmp(&gy[i], &r.out[i], sizeof(double)) == 0 || (isnan(gy[i]) && isnan(r.out[i]));
        e_cfg += r.nout;
        pf_comparison_free(&g);
        free(gy);
        pf_run_free(&r);
        pf_case_free(&c);
      }
      printf("%-19s %-5s %9zu %9.4f%% %9zu\n", variants[v], pf_dtype_name((pf_dtype)t), e_cfg,
             100.0 * (double)eq_cfg / (double)e_cfg, findings);
      assert_int_equal(findings, 0);
      elems += e_cfg;
      equal += eq_cfg;
    }
  printf("%zu elements: %.4f%% bitwise equal CPU vs GPU\n", elems, 100.0 * (double)equal / (double)elems);
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_adam_cuda_matches_oracle_and_cpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
