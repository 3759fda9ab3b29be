/* precfuzz-bench: what a case costs, kernel (CPU emulation) and oracle (MPFR), for the
 * shapes the README quotes. Prints figures; asserts nothing (speed is measured, not tested).
 * usage: precfuzz-bench [REPEATS]   (default 3; the median is printed) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/runner.h"

typedef struct {
  const char *kernel, *variant;
  pf_dtype t, a;
  size_t shape[5];
} pf_bench_case;

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int reps = 3;
  if (argc > 2) {
    fprintf(stderr, "precfuzz-bench: usage: precfuzz-bench [REPEATS]\n");
    return 2;
  }
  if (argc == 2) {
    char *end;
    const long r = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end || r < 1 || r > 100) {
      fprintf(stderr, "precfuzz-bench: REPEATS '%s' is not an integer in [1, 100]\n", argv[1]);
      return 2;
    }
    reps = (int)r;
  }
  const pf_bench_case cases[] = {
      {"softmax", "safe", PF_FP16, PF_FP32, {4, 256}},
      {"softmax", "online", PF_BF16, PF_FP32, {64, 8192}},
      {"attention", "post-scale", PF_FP16, PF_FP32, {1, 1, 16, 16, 16}},
      {"attention", "post-scale", PF_FP16, PF_FP32, {1, 1, 128, 128, 64}},
      {"attention", "flash", PF_FP16, PF_FP32, {1, 1, 128, 128, 64}},
  };
  printf("%-10s %-11s %-10s %-18s %12s %12s %14s\n", "kernel", "variant", "dtype", "shape", "kernel s", "oracle s",
         "oracle us/out");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const pf_bench_case *b = &cases[i];
    double tk[100], to[100];
    size_t nout = 0;
    for (int r = 0; r < reps; r++) {
      pf_case c;
      if (pf_case_init(&c, b->kernel, b->variant, 1 + (uint64_t)r)) return 1;
      c.dtype = b->t;
      c.accum = b->a;
      memcpy(c.shape, b->shape, sizeof c.shape);
      pf_oracle_opts o;
      pf_oracle_opts_default(&o);
      pf_run run;
      if (pf_run_case(&c, &o, &run)) {
        fprintf(stderr, "precfuzz-bench: %s\n", pf_error_message());
        return 1;
      }
      tk[r] = run.seconds_kernel;
      to[r] = run.seconds_oracle;
      nout = run.nout;
      pf_run_free(&run);
      pf_case_free(&c);
    }
    qsort(tk, (size_t)reps, sizeof(double), cmp_double);
    qsort(to, (size_t)reps, sizeof(double), cmp_double);
    char shape[64] = "";
    for (int d = 0; d < 5 && b->shape[d]; d++) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? "x%zu" : "%zu", b->shape[d]);
    char dt[16];
    snprintf(dt, sizeof dt, "%s/%s", pf_dtype_name(b->t), pf_dtype_name(b->a));
    printf("%-10s %-11s %-10s %-18s %12.4f %12.4f %14.3f\n", b->kernel, b->variant, dt, shape, tk[reps / 2], to[reps / 2],
           1e6 * to[reps / 2] / (double)nout);
  }
  printf("(median of %d runs, one thread; outputs include stored scores and probabilities where the variant has them)\n", reps);
  return 0;
}
