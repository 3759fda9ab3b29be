/* precfuzz-bench: what a case costs, kernel (CPU emulation) and oracle (the fast path where
 * an operation has one, and MPFR alone), against a plain binary64 reference, for the shapes
 * the README quotes. Prints figures; asserts nothing (speed is measured, not tested).
 * usage: precfuzz-bench [REPEATS]   (default 3; the median is printed) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/runner.h"

typedef struct {
  const char *kernel, *variant;
  pf_dtype t, a;
  size_t shape[5];
} pf_bench_case;

static double pf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The check a user would otherwise write: softmax in binary64 (alpha x, max subtracted, no
 * bound, no certainty), timed over the case's rows. */
static double fp64_softmax_seconds(const pf_case *c, const double *x) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double alpha = pf_case_param(c, "alpha");
  double *y = malloc(cols * sizeof *y), sink = 0;
  const double t0 = pf_now();
  for (size_t i = 0; i < rows; i++) {
    const double *r = x + i * cols;
    double m = -INFINITY, s = 0;
    for (size_t j = 0; j < cols; j++) m = fmax(m, alpha * r[j]);
    for (size_t j = 0; j < cols; j++) s += y[j] = exp(alpha * r[j] - m);
    for (size_t j = 0; j < cols; j++) sink += y[j] / s;
  }
  const double t = pf_now() - t0;
  free(y);
  return sink == 12345.678 ? t + 1 : t; /* keeps the work */
}

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
      {"softmax", "safe", PF_FP16, PF_FP32, {1, 1024}},
      {"softmax", "safe", PF_FP16, PF_FP32, {4, 256}},
      {"softmax", "safe", PF_FP32, PF_FP32, {1, 65536}},
      {"softmax", "online", PF_BF16, PF_FP32, {64, 8192}},
      {"attention", "post-scale", PF_FP16, PF_FP32, {1, 1, 16, 16, 16}},
      {"attention", "post-scale", PF_FP16, PF_FP32, {1, 1, 128, 128, 64}},
      {"attention", "flash", PF_FP16, PF_FP32, {1, 1, 128, 128, 64}},
  };
  printf("%-9s %-10s %-9s %-11s %9s %10s %10s %10s %9s %9s %8s\n", "kernel", "variant", "dtype", "shape", "kernel s",
         "fp64 ref s", "fast s", "mpfr s", "fast/ref", "mpfr/ref", "to mpfr");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const pf_bench_case *b = &cases[i];
    double tk[100], tf[100], tm[100], tr[100];
    size_t units = 0, mpfr_units = 0;
    int has_fast = 0;
    for (int r = 0; r < reps; r++) {
      pf_case c;
      if (pf_case_init(&c, b->kernel, b->variant, 1 + (uint64_t)r)) return 1;
      c.dtype = b->t;
      c.accum = b->a;
      memcpy(c.shape, b->shape, sizeof c.shape);
      pf_run run, ref;
      pf_oracle_opts o, om;
      pf_oracle_opts_default(&o);
      pf_oracle_opts_default(&om);
      om.mpfr_only = 1;
      if (pf_run_case(&c, &o, &run) || pf_run_case(&c, &om, &ref)) {
        fprintf(stderr, "precfuzz-bench: %s\n", pf_error_message());
        return 1;
      }
      tk[r] = run.seconds_kernel;
      tf[r] = run.seconds_oracle;
      tm[r] = ref.seconds_oracle;
      has_fast = run.oracle.fast_units > 0;
      units += run.oracle.fast_units + run.oracle.mpfr_units;
      mpfr_units += run.oracle.mpfr_units;
      tr[r] = strcmp(b->kernel, "softmax") == 0 ? fp64_softmax_seconds(&c, run.in[0].data) : -1;
      pf_run_free(&run);
      pf_run_free(&ref);
      pf_case_free(&c);
    }
    qsort(tk, (size_t)reps, sizeof(double), cmp_double);
    qsort(tf, (size_t)reps, sizeof(double), cmp_double);
    qsort(tm, (size_t)reps, sizeof(double), cmp_double);
    qsort(tr, (size_t)reps, sizeof(double), cmp_double);
    char shape[64] = "";
    for (int d = 0; d < 5 && b->shape[d]; d++) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? "x%zu" : "%zu", b->shape[d]);
    char dt[16], ref_s[16] = "-", fast_s[16] = "-", fr[16] = "-", mr[16] = "-", fb[16] = "-";
    snprintf(dt, sizeof dt, "%s/%s", pf_dtype_name(b->t), pf_dtype_name(b->a));
    const double ref_t = tr[reps / 2], fast_t = tf[reps / 2], mpfr_t_ = tm[reps / 2];
    if (ref_t > 0) snprintf(ref_s, sizeof ref_s, "%.6f", ref_t), snprintf(mr, sizeof mr, "%.0f", mpfr_t_ / ref_t);
    if (has_fast) {
      snprintf(fast_s, sizeof fast_s, "%.5f", fast_t);
      if (ref_t > 0) snprintf(fr, sizeof fr, "%.1f", fast_t / ref_t);
      snprintf(fb, sizeof fb, "%.2f%%", 100.0 * (double)mpfr_units / (double)(units ? units : 1));
    }
    printf("%-9s %-10s %-9s %-11s %9.4f %10s %10s %10.4f %9s %9s %8s\n", b->kernel, b->variant, dt, shape, tk[reps / 2],
           ref_s, fast_s, mpfr_t_, fr, mr, fb);
  }
  printf("(median of %d runs, one thread. fp64 ref: the same softmax in plain binary64, no bound; fast: the oracle\n"
         "with its certified fast path (oracles/softmax_fast.c); mpfr: --oracle mpfr; to mpfr: rows the fast path left to\n"
         "MPFR. Outputs include stored scores and probabilities where the variant has them.)\n",
         reps);
  return 0;
}
