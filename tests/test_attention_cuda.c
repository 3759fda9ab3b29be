/* Attention on the GPU (label gpu): every variant, dtype and accumulation cuBLAS has a
 * compute type for, on generated cases through the runner with --backend cuda. The GPU's
 * results keep the contract (no finding inside the domain); flash, our own kernel running the
 * emulation's row routine, is bitwise equal to the CPU; the cuBLAS variants are reported
 * (fraction bitwise equal, largest ulp difference), since cuBLAS sums in its own order.
 * bf16 with bf16 accumulation must be refused with PF_ERR_UNSUPPORTED. Without CUDA in the
 * build, or without a device, exits 77. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/backend.h"
#include "core/runner.h"
#include "tests/gpu_skip.h"

#ifdef PF_HAVE_CUDA
static void test_attention_cuda(void **state) {
  static const char *const variants[] = {"post-scale", "inward", "layer-scaled", "flash"};
  printf("%-13s %-12s %9s %10s %9s %9s\n", "variant", "dtype/accum", "elements", "bitwise=", "max-ulps", "findings");
  for (int vi = 0; vi < 4; vi++)
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int s = 0; s < 2; s++) {
        if (s && t == PF_FP32) continue;
        size_t elems = 0, equal = 0, findings = 0;
        int64_t worst = 0;
        for (int k = 0; k < 4; k++) {
          pf_case c;
          assert_int_equal(pf_case_init(&c, "attention", variants[vi], 1100 + (uint64_t)k), PF_OK);
          c.dtype = (pf_dtype)t;
          c.accum = s ? (pf_dtype)t : PF_FP32;
          c.shape[0] = 2, c.shape[1] = 2, c.shape[2] = 24, c.shape[3] = 40, c.shape[4] = 32;
          if (vi == 3) pf_case_set_param(&c, "block", 16);
          for (int i = 0; i < 3; i++) c.inputs[i].scale = ldexp(1, k);
          pf_oracle_opts o;
          pf_oracle_opts_default(&o);
          pf_run a, b;
          assert_int_equal(pf_run_case(&c, &o, &a), PF_OK);
          o.backend = PF_BACKEND_CUDA;
          const pf_status st = pf_run_case(&c, &o, &b);
          if (t == PF_BF16 && s && vi != 3) {
            assert_int_equal(st, PF_ERR_UNSUPPORTED);
            pf_run_free(&a);
            pf_run_free(&b);
            pf_case_free(&c);
            continue;
          }
          assert_int_equal(st, PF_OK);
          size_t eq;
          int64_t mu;
          pf_backend_diff(c.dtype, a.oracle.dtype, a.out, b.out, a.nout, &eq, &mu);
          elems += a.nout, equal += eq;
          if (mu > worst) worst = mu;
          findings += b.in_domain && pf_verdict_is_finding(b.cmp.verdict);
          pf_run_free(&a);
          pf_run_free(&b);
          pf_case_free(&c);
        }
        if (!elems) continue;
        printf("%-13s %s/%-7s %9zu %9.3f%% %9lld %9zu\n", variants[vi], pf_dtype_name((pf_dtype)t), s ? "storage" : "fp32",
               elems, 100.0 * (double)equal / (double)elems, (long long)worst, findings);
        assert_int_equal(findings, 0);
        if (vi == 3) assert_int_equal(equal, elems);
      }
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_attention_cuda)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
