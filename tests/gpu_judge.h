/* Shared by the gpu-labelled tests of the native kernels: a case run on the GPU and judged by
 * its variant's oracle and bound, with the agreement with the CPU emulation counted. */
#ifndef PF_GPU_JUDGE_H
#define PF_GPU_JUDGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/runner.h"

typedef struct {
  size_t elems, equal; /* outputs; bitwise equal to the emulation's */
  int64_t ulps;        /* the GPU's largest distance from the correctly rounded result */
} gpu_tally;

/* Runs c on the GPU: 1 when its result is a finding inside the contract's domain. */
static int gpu_finding(pf_case *c, gpu_tally *t) {
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
  if (g.max_ulps > t->ulps) t->ulps = g.max_ulps;
  for (size_t i = 0; i < r.nout; i++) t->equal += memcmp(&gy[i], &r.out[i], sizeof(double)) == 0;
  t->elems += r.nout;
  pf_comparison_free(&g);
  free(gy);
  pf_run_free(&r);
  return finding;
}

/* A planted fault found by the emulation on c, and by the GPU too. */
static void gpu_finds_as_cpu(pf_case *c) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  assert_int_equal(pf_run_case(c, &o, &r), PF_OK);
  assert_true(pf_verdict_is_finding(r.cmp.verdict)); /* found by the emulation here */
  pf_run_free(&r);
  gpu_tally g = {0, 0, 0};
  assert_int_equal(gpu_finding(c, &g), 1);
}

/* The table of a contract test: its head, and one configuration's line. */
static void gpu_table_head(void) {
  printf("%-10s %-5s %-5s %10s %10s %9s %9s\n", "variant", "dtype", "accum", "elements", "bitwise=", "gpu-ulps", "findings");
}
static void gpu_table_row(const char *variant, pf_dtype t, pf_dtype acc, const gpu_tally *g, size_t findings) {
  printf("%-10s %-5s %-5s %10zu %9.4f%% %9lld %9zu\n", variant, pf_dtype_name(t), pf_dtype_name(acc), g->elems,
         100.0 * (double)g->equal / (double)(g->elems ? g->elems : 1), (long long)g->ulps, findings);
}

#endif
