/* Adam on the GPU (label gpu): every variant and dtype on generated cases; the GPU's
 * outputs are judged by the same oracle and bound as the CPU's, and compared with the CPU
 * emulation bit for bit; one launch over many tensors of uneven sizes (several chunks, an
 * empty tensor) gives every tensor the bits of its own launch. Without CUDA in the build, or
 * without a device, exits 77. */
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
#include "kernels/adam/adam_cuda.h"
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

/* One launch over 5 tensors (sizes 1, 65537, 0, 3, 131079: chunk edges inside and at the end)
 * against one launch per tensor and the CPU emulation: the chunking must not move a bit. */
static void test_adam_cuda_multi_tensor(void **state) {
  const char *variants[2] = {"fused", "torch"};
  const int var_ids[2] = {PF_ADAM_FUSED, PF_ADAM_TORCH};
  const size_t sizes[5] = {1, 65537, 0, 3, 131079};
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  for (int vi = 0; vi < 2; vi++) {
    pf_case cs[5];
    pf_run rs[5];
    pf_adam_tensor ts[5];
    double *single[5];
    memset(ts, 0, sizeof ts);
    for (int k = 0; k < 5; k++) {
      if (!sizes[k]) continue;
      assert_int_equal(pf_case_init(&cs[k], "adam", variants[vi], 900 + (uint64_t)k), PF_OK);
      cs[k].dtype = PF_BF16;
      cs[k].shape[0] = sizes[k];
      pf_case_set_param(&cs[k], "step", 7);
      pf_case_set_param(&cs[k], "wd", 0.1);
      assert_int_equal(pf_run_case(&cs[k], &o, &rs[k]), PF_OK);
      const size_t n = sizes[k];
      single[k] = malloc(rs[k].nout * sizeof(double));
      unsigned sfe = 0;
      assert_int_equal(rs[k].kernel->run_cuda(&cs[k], rs[k].in, single[k], &sfe), PF_OK);
      double *p = malloc(n * sizeof(double)), *m = malloc(n * sizeof(double)), *v = malloc(n * sizeof(double));
      memcpy(p, rs[k].in[0].data, n * sizeof(double));
      memcpy(m, rs[k].in[2].data, n * sizeof(double));
      memcpy(v, rs[k].in[3].data, n * sizeof(double));
      ts[k] = (pf_adam_tensor){p, rs[k].in[1].data, m, v, n};
    }
    const pf_case *c = &cs[0];
    const pf_adam_hyper h = pf_adam_hyper_make(pf_case_param(c, "lr"), pf_case_param(c, "beta1"),
                                               pf_case_param(c, "beta2"), pf_case_param(c, "eps"),
                                               pf_case_param(c, "wd"), pf_case_param(c, "step"), 1);
    const pf_dtype pt = vi ? PF_BF16 : PF_FP32, st = vi ? PF_BF16 : PF_FP32;
    unsigned fe = 0;
    assert_int_equal(pf_adam_step_cuda(var_ids[vi], (int)pf_case_param(c, "mode"), pt, st, &h, ts, 5, &fe), PF_OK);
    size_t elems = 0, same_cpu = 0;
    for (int k = 0; k < 5; k++) {
      if (!sizes[k]) continue;
      const size_t n = sizes[k];
      const double *got[3] = {ts[k].m, ts[k].v, ts[k].p};
      for (int s = 0; s < 3; s++) {
        assert_memory_equal(got[s], single[k] + s * n, n * sizeof(double)); /* stages m, v, p */
        for (size_t i = 0; i < n; i++) same_cpu += memcmp(&got[s][i], &rs[k].out[s * n + i], sizeof(double)) == 0;
        elems += n;
      }
      free(ts[k].p);
      free(ts[k].m);
      free(ts[k].v);
      free(single[k]);
      pf_run_free(&rs[k]);
      pf_case_free(&cs[k]);
    }
    printf("%s bf16, 5 tensors in one launch: %zu outputs equal to one launch per tensor, %.4f%% bitwise equal "
           "to the CPU\n",
           variants[vi], elems, 100.0 * (double)same_cpu / (double)elems);
  }
}
#endif

int main(void) {
  pf_require_gpu();
#ifdef PF_HAVE_CUDA
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_adam_cuda_matches_oracle_and_cpu),
                                     cmocka_unit_test(test_adam_cuda_multi_tensor)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
