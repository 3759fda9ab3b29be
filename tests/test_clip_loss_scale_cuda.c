/* Gradient clipping and loss scaling on the GPU (label gpu): every variant and dtype on
 * generated cases, run through the runner with --backend cuda; the GPU's outputs keep the
 * contract and are bitwise equal to the CPU emulation's (both follow the emulation's order).
 * Without CUDA in the build, or without a device, exits 77. */
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
/* One variant across dtypes and accumulations: bitwise-equal elements and in-domain findings. */
static void check_with(const char *kernel, const char *variant, size_t d0, size_t d1, double scale0, const char *param,
                       double value) {
  for (int t = 0; t < PF_NDTYPES; t++)
    for (int s = 0; s < 2; s++) {
      pf_case c;
      assert_int_equal(pf_case_init(&c, kernel, variant, 900), PF_OK);
      c.dtype = (pf_dtype)t;
      c.accum = s ? (pf_dtype)t : PF_FP32;
      if ((s && t == PF_FP32) || !pf_kernel_accepts(pf_case_kernel(&c), c.dtype, c.accum)) {
        pf_case_free(&c);
        continue;
      }
      size_t elems = 0, equal = 0, findings = 0;
      for (int k = 0; k < 6; k++) {
        pf_case_free(&c);
        assert_int_equal(pf_case_init(&c, kernel, variant, 900 + (uint64_t)k), PF_OK);
        c.dtype = (pf_dtype)t;
        c.accum = s ? (pf_dtype)t : PF_FP32;
        c.shape[0] = d0, c.shape[1] = d1;
        c.inputs[0].scale = ldexp(scale0, 3 * k - 6);
        if (param) assert_int_equal(pf_case_set_param(&c, param, value), PF_OK);
        pf_oracle_opts o;
        pf_oracle_opts_default(&o);
        pf_run a, b;
        assert_int_equal(pf_run_case(&c, &o, &a), PF_OK);
        o.backend = PF_BACKEND_CUDA;
        assert_int_equal(pf_run_case(&c, &o, &b), PF_OK);
        size_t eq;
        int64_t mu;
        pf_backend_diff(c.dtype, a.oracle.dtype, a.out, b.out, a.nout, &eq, &mu);
        elems += a.nout, equal += eq;
        findings += b.in_domain && pf_verdict_is_finding(b.cmp.verdict);
        pf_run_free(&a);
        pf_run_free(&b);
      }
      printf("%-10s %-10s %s/%-5s %zux%zu%s%s %8zu elements, %7.3f%% bitwise equal, %zu findings\n", kernel, variant,
             pf_dtype_name((pf_dtype)t), s ? "T" : "fp32", d0, d1, param ? " " : "", param ? param : "", elems, 100.0 * (double)equal / (double)elems, findings);
      assert_int_equal(findings, 0);
      assert_int_equal(equal, elems);
      pf_case_free(&c);
    }
}

static void check(const char *kernel, const char *variant, size_t d0, size_t d1, double scale0) {
  check_with(kernel, variant, d0, d1, scale0, NULL, 0);
}

static void test_clip_cuda(void **state) {
  check("clip", "megatron", 8, 1000, 1);
  check("clip", "torch", 8, 1000, 1);
  check("clip", "inf", 8, 1000, 1);
}

static void test_loss_scale_cuda(void **state) {
  check("loss_scale", "deepspeed", 40, 256, 0x1p-12);
  check("loss_scale", "megatron", 40, 256, 0x1p-12);
  check("loss_scale", "pytorch", 40, 256, 0x1p-8);
  check("loss_scale", "static", 40, 256, 0x1p-8);
  /* more elements per step than the block has threads, and odd counts */
  check("loss_scale", "pytorch", 5, 3001, 0x1p-8);
  check("loss_scale", "megatron", 7, 33, 0x1p-12);
  /* DeepSpeed from a scale of 4: overflowed steps reach the minimum and the run stops */
  check_with("loss_scale", "deepspeed", 40, 64, 0x1p10, "scale0", 4);
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_clip_cuda), cmocka_unit_test(test_loss_scale_cuda)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
