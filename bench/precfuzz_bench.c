/* precfuzz-bench: what a case costs, kernel (CPU emulation) and oracle (the fast path where
 * an operation has one, and MPFR alone), against a plain binary64 reference, for the shapes
 * docs/oracle.md quotes. Prints figures; asserts nothing (speed is measured, not tested).
 * usage: precfuzz-bench [REPEATS [KERNEL]]   (default 3, the median printed; every kernel) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/parallel.h"
#include "core/runner.h"
#include "kernels/tp_diff/tp_diff_spec.h"

typedef struct {
  const char *kernel, *variant;
  pf_dtype t, a;
  size_t shape[5];
  int judge; /* 1: too large for the kernel's CPU emulation; the correctly rounded outputs are
                judged (as a GPU kernel's would be), MPFR timed on a few rows and scaled */
} pf_bench_case;

static double pf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double sink; /* keeps the references' work */

/* The check a user would otherwise write: softmax in binary64 (alpha x, max subtracted, no
 * bound, no certainty), timed over the case's rows. */
static double fp64_softmax_seconds(const pf_case *c, const double *x) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double alpha = pf_case_param(c, "alpha");
  double *y = malloc(cols * sizeof *y);
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
  return t;
}

/* The same for attention: scores, softmax and the weighted sum of V in binary64, row by row
 * (no mask: the cases here have none). */
static double fp64_attention_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t heads = c->shape[0] * c->shape[1], Lq = c->shape[2], Lk = c->shape[3], d = c->shape[4];
  const double alpha = 1 / sqrt((double)d);
  double *p = malloc(Lk * sizeof *p), *o = malloc(d * sizeof *o);
  const double t0 = pf_now();
  for (size_t h = 0; h < heads; h++)
    for (size_t i = 0; i < Lq; i++) {
      const double *q = in[0].data + (h * Lq + i) * d, *K = in[1].data + h * Lk * d, *V = in[2].data + h * Lk * d;
      double m = -INFINITY, s = 0;
      for (size_t j = 0; j < Lk; j++) {
        double a[4] = {0, 0, 0, 0}; /* four partial sums, as vectorized code (BLAS) keeps */
        size_t e = 0;
        for (; e + 4 <= d; e += 4)
          for (int l = 0; l < 4; l++) a[l] += q[e + (size_t)l] * K[j * d + e + (size_t)l];
        for (; e < d; e++) a[0] += q[e] * K[j * d + e];
        p[j] = alpha * ((a[0] + a[1]) + (a[2] + a[3]));
        m = fmax(m, p[j]);
      }
      for (size_t j = 0; j < Lk; j++) s += p[j] = exp(p[j] - m);
      for (size_t e = 0; e < d; e++) o[e] = 0;
      for (size_t j = 0; j < Lk; j++) {
        const double pj = p[j] / s;
        for (size_t e = 0; e < d; e++) o[e] += pj * V[j * d + e];
      }
      sink += o[0];
    }
  const double t = pf_now() - t0;
  free(p);
  free(o);
  return t;
}

/* Adam: one AdamW step in binary64 per element (m, v, bias corrections, the update). */
static double fp64_adam_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t n = c->shape[0];
  const double lr = pf_case_param(c, "lr"), b1 = pf_case_param(c, "beta1"), b2 = pf_case_param(c, "beta2"),
               eps = pf_case_param(c, "eps"), wd = pf_case_param(c, "wd"), t = pf_case_param(c, "step");
  const double t0 = pf_now(), bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
  for (size_t i = 0; i < n; i++) {
    const double p = in[0].data[i], g = in[1].data[i];
    const double m = b1 * in[2].data[i] + (1 - b1) * g, v = b2 * in[3].data[i] + (1 - b2) * g * g;
    sink += m + v + p - lr * (m / bc1 / (sqrt(v / bc2) + eps) + wd * p);
  }
  return pf_now() - t0;
}

/* Clipping: the global norm and every gradient times min(1, max_norm / (norm + 1e-6)). */
static double fp64_clip_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t n = c->shape[0] * c->shape[1];
  const double max_norm = pf_case_param(c, "max_norm"), t0 = pf_now();
  double s = 0;
  for (size_t i = 0; i < n; i++) s += in[0].data[i] * in[0].data[i];
  const double f = fmin(1, max_norm / (sqrt(s) + 1e-6));
  for (size_t i = 0; i < n; i++) sink += in[0].data[i] * f;
  return pf_now() - t0;
}

/* LayerNorm: each row's mean, variance (two passes), rstd and y = (x - mean) rstd gamma + beta. */
static double fp64_layernorm_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double eps = pf_case_param(c, "eps"), t0 = pf_now();
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols;
    double m = 0, v = 0;
    for (size_t j = 0; j < cols; j++) m += x[j];
    m /= (double)cols;
    for (size_t j = 0; j < cols; j++) v += (x[j] - m) * (x[j] - m);
    const double r = 1 / sqrt(v / (double)cols + eps);
    for (size_t j = 0; j < cols; j++) sink += (x[j] - m) * r * in[1].data[j] + in[2].data[j];
  }
  return pf_now() - t0;
}

/* LayerNorm's backward: each row's mean, variance (two passes) and rstd, its sums of a = g dy and
 * a xhat, dx = rstd (a - mean(a) - xhat mean(a xhat)); dgamma and dbeta summed over the rows. */
static double fp64_layernorm_bwd_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double eps = pf_case_param(c, "eps"), t0 = pf_now();
  double *dg = calloc(2 * cols, sizeof(double)), *db = dg + cols;
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols, *dy = in[1].data + i * cols, *g = in[2].data;
    double m = 0, v = 0, A = 0, C = 0;
    for (size_t j = 0; j < cols; j++) m += x[j];
    m /= (double)cols;
    for (size_t j = 0; j < cols; j++) v += (x[j] - m) * (x[j] - m);
    const double r = 1 / sqrt(v / (double)cols + eps);
    for (size_t j = 0; j < cols; j++) {
      const double xh = (x[j] - m) * r, a = g[j] * dy[j];
      A += a, C += a * xh;
      dg[j] += dy[j] * xh, db[j] += dy[j];
    }
    for (size_t j = 0; j < cols; j++) sink += r * (g[j] * dy[j] - A / (double)cols - (x[j] - m) * r * C / (double)cols);
  }
  for (size_t j = 0; j < cols; j++) sink += dg[j] + db[j];
  free(dg);
  return pf_now() - t0;
}

/* RMSNorm's backward: each row's mean square and rstd, its sum of a = g dy times xhat,
 * dx = rstd (a - xhat mean(a xhat)); dgamma summed over the rows. */
static double fp64_rmsnorm_bwd_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double eps = pf_case_param(c, "eps"), t0 = pf_now();
  double *dg = calloc(cols, sizeof(double));
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols, *dy = in[1].data + i * cols, *g = in[2].data;
    double s = 0, C = 0;
    for (size_t j = 0; j < cols; j++) s += x[j] * x[j];
    const double r = 1 / sqrt(s / (double)cols + eps);
    for (size_t j = 0; j < cols; j++) {
      C += g[j] * dy[j] * x[j] * r;
      dg[j] += dy[j] * x[j] * r;
    }
    for (size_t j = 0; j < cols; j++) sink += r * (g[j] * dy[j] - x[j] * r * C / (double)cols);
  }
  for (size_t j = 0; j < cols; j++) sink += dg[j];
  free(dg);
  return pf_now() - t0;
}

/* RMSNorm: each row's mean square, rstd and y = x rstd gamma. */
static double fp64_rmsnorm_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double eps = pf_case_param(c, "eps"), t0 = pf_now();
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols;
    double s = 0;
    for (size_t j = 0; j < cols; j++) s += x[j] * x[j];
    const double r = 1 / sqrt(s / (double)cols + eps);
    for (size_t j = 0; j < cols; j++) sink += x[j] * r * in[1].data[j];
  }
  return pf_now() - t0;
}

/* RoPE: the frequencies once, then per position each angle's cos and sin and the rotation of
 * every head's pairs (half layout), in binary64 with libm's cos and sin. */
static double fp64_rope_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t rows = c->shape[0], heads = c->shape[1], dim = c->shape[2], h = dim / 2;
  const double base = pf_case_param(c, "base"), off = pf_case_param(c, "offset");
  double *w = malloc(3 * h * sizeof *w), *cs = w + h, *sn = w + 2 * h;
  if (!w) return -1;
  const double t0 = pf_now();
  for (size_t k = 0; k < h; k++) w[k] = pow(base, -(double)(2 * k) / (double)dim);
  for (size_t i = 0; i < rows; i++) {
    for (size_t k = 0; k < h; k++) cs[k] = cos((off + (double)i) * w[k]), sn[k] = sin((off + (double)i) * w[k]);
    for (size_t hd = 0; hd < heads; hd++) {
      const double *t = in[0].data + (i * heads + hd) * dim;
      for (size_t k = 0; k < h; k++) sink += t[k] * cs[k] - t[k + h] * sn[k] + t[k + h] * cs[k] + t[k] * sn[k];
    }
  }
  const double dt = pf_now() - t0;
  free(w);
  return dt;
}

/* SwiGLU: a b / (1 + exp(-a)) per element, libm's exp. */
static double fp64_swiglu_seconds(const pf_case *c, const pf_tensor *in) {
  const size_t n = c->shape[0] * c->shape[1];
  const double t0 = pf_now();
  for (size_t q = 0; q < n; q++) sink += in[0].data[q] * in[1].data[q] / (1 + exp(-in[0].data[q]));
  return pf_now() - t0;
}

/* The TP step: every step's gradient buffers (micro-batches summed, the tied head's added), the
 * global norm, the clip factor and an AdamW step on every parameter, in binary64. */
static double fp64_tp_seconds(const pf_case *c, const pf_tensor *in) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  const size_t n = L.n, embed = L.b[pf_tp_embed(&L)].offset;
  double *p = malloc(n * 4 * sizeof *p), *m = p + n, *v = p + 2 * n, *g = p + 3 * n;
  if (!p) return -1;
  const double t0 = pf_now(), max_norm = c->params[PF_TPP_MAXNORM], lr = c->params[PF_TPP_LR],
               b1 = c->params[PF_TPP_BETA1], b2 = c->params[PF_TPP_BETA2], eps = c->params[PF_TPP_EPS],
               wd = c->params[PF_TPP_WD];
  for (size_t e = 0; e < n; e++) p[e] = in[0].data[e], m[e] = v[e] = 0;
  for (size_t s = 0; s < L.steps; s++) {
    double sq = 0;
    for (size_t e = 0; e < n; e++) {
      double b = 0;
      for (size_t k = 0; k < L.mb; k++) {
        b += pf_tp_grad(&L, in[1].data, s, k, e);
        if (L.tied && e >= embed) b += pf_tp_grad(&L, in[1].data, s, k, n + (e - embed));
      }
      g[e] = b;
      sq += b * b;
    }
    const double f = fmin(1, max_norm / (sqrt(sq) + 1e-6)), bc1 = 1 - pow(b1, (double)s + 1),
                 bc2 = 1 - pow(b2, (double)s + 1);
    for (size_t e = 0; e < n; e++) {
      const double ge = g[e] * f;
      m[e] = b1 * m[e] + (1 - b1) * ge;
      v[e] = b2 * v[e] + (1 - b2) * ge * ge;
      p[e] -= lr * (m[e] / bc1 / (sqrt(v[e] / bc2) + eps) + wd * p[e]);
    }
  }
  const double t = pf_now() - t0;
  sink += p[0];
  free(p);
  return t;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One judged case of b (seed): kernel (or none), oracle as opts say; the run kept in r. */
static int bench_run(const pf_bench_case *b, const pf_case *c, const pf_oracle_opts *o, pf_run *r) {
  size_t judged;
  const pf_status st = b->judge ? pf_judge_outputs(c, pf_case_kernel(c), 0, NULL, 0, o, r, &judged) : pf_run_case(c, o, r);
  if (st) fprintf(stderr, "precfuzz-bench: %s\n", pf_error_message());
  return st != PF_OK;
}

int main(int argc, char **argv) {
  int reps = 3;
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: precfuzz-bench [REPEATS [KERNEL]]\n\n"
           "What a case costs (kernel, fast oracle, MPFR oracle, a binary64 loop) for the shapes\n"
           "docs/oracle.md quotes: the median of REPEATS runs (default 3, at most 100), every kernel or\n"
           "KERNEL's alone. Prints figures; asserts nothing.\n");
    return 0;
  }
  const char *only = argc == 3 ? argv[2] : NULL;
  if (argc > 3 || (only && !pf_op_find(only))) {
    fprintf(stderr, "precfuzz-bench: usage: precfuzz-bench [REPEATS [KERNEL]]%s\n", argc == 3 ? " (KERNEL: see precfuzz list)" : "");
    return 2;
  }
  if (argc >= 2) {
    char *end;
    const long r = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end || r < 1 || r > 100) {
      fprintf(stderr, "precfuzz-bench: REPEATS '%s' is not an integer in [1, 100]\n", argv[1]);
      return 2;
    }
    reps = (int)r;
  }
  const pf_bench_case cases[] = {
      {"softmax", "safe", PF_FP16, PF_FP32, {1, 1024}, 0},
      {"softmax", "safe", PF_FP16, PF_FP32, {4, 256}, 0},
      {"softmax", "safe", PF_FP32, PF_FP32, {1, 65536}, 0},
      {"softmax", "safe", PF_BF16, PF_FP32, {1, 131072}, 0},
      {"softmax", "online", PF_BF16, PF_FP32, {64, 8192}, 0},
      {"attention", "post-scale", PF_FP16, PF_FP32, {1, 1, 16, 16, 16}, 0},
      {"attention", "post-scale", PF_FP16, PF_FP32, {1, 1, 128, 128, 64}, 0},
      {"attention", "flash", PF_FP16, PF_FP32, {1, 1, 128, 128, 64}, 0},
      {"attention", "flash", PF_BF16, PF_FP32, {1, 8, 4096, 4096, 128}, 1},
      {"adam", "fused", PF_BF16, PF_FP32, {1 << 16}, 0},
      {"adam", "torch", PF_FP16, PF_FP32, {1 << 16}, 0},
      {"layernorm", "torch", PF_BF16, PF_FP32, {64, 4096}, 0},
      {"layernorm", "welford", PF_FP32, PF_FP32, {8, 16384}, 0},
      {"rmsnorm", "torch", PF_BF16, PF_FP32, {64, 4096}, 0},
      {"layernorm_bwd", "torch", PF_BF16, PF_FP32, {2048, 512}, 0},
      {"layernorm_bwd", "fused", PF_FP32, PF_FP32, {64, 4096}, 0},
      {"rmsnorm_bwd", "torch", PF_BF16, PF_FP32, {2048, 512}, 0},
      {"rope", "torch", PF_BF16, PF_FP32, {4096, 8, 128}, 0},
      {"rope", "fused", PF_FP32, PF_FP32, {16384, 1, 128}, 0},
      {"swiglu", "torch", PF_BF16, PF_FP32, {64, 8192}, 0},
      {"clip", "megatron", PF_BF16, PF_FP32, {16, 4096}, 0},
      {"clip", "torch", PF_FP16, PF_FP32, {16, 4096}, 0},
      {"tp_diff", "megatron", PF_BF16, PF_FP32, {3, 8, 16, 11, 4}, 0},
      {"tp_diff", "megatron", PF_BF16, PF_FP32, {3, 64, 256, 1000, 4}, 0},
  };
  printf("%-9s %-10s %-9s %-16s %8s %10s %9s %10s %8s %8s %7s %8s\n", "kernel", "variant", "dtype", "shape", "kernel s",
         "fp64 ref s", "fast s", "mpfr s", "fast/ref", "mpfr/ref", "to mpfr", "judge s");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const pf_bench_case *b = &cases[i];
    if (only && strcmp(only, b->kernel) != 0) continue;
    const int n = b->judge ? 1 : reps;
    double tk[100], tf[100], tm[100], tr[100], tj = -1;
    size_t units = 0, mpfr_units = 0;
    int has_fast = 0;
    for (int r = 0; r < n; r++) {
      pf_case c;
      if (pf_case_init(&c, b->kernel, b->variant, 1 + (uint64_t)r)) return 1;
      c.dtype = b->t;
      c.accum = b->a;
      memcpy(c.shape, b->shape, sizeof c.shape);
      pf_run run, ref;
      pf_oracle_opts o, om;
      pf_oracle_opts_default(&o);
      pf_oracle_opts_default(&om);
      pf_parallel_set_threads(1); /* per core, as the fp64 reference */
      om.mpfr_only = 1;
      if (bench_run(b, &c, &o, &run)) return 1;
      tk[r] = b->judge ? -1 : run.seconds_kernel;
      tf[r] = run.seconds_oracle;
      has_fast = run.oracle.fast_units > 0;
      units += run.oracle.fast_units + run.oracle.mpfr_units;
      mpfr_units += run.oracle.mpfr_units;
      tr[r] = strcmp(b->kernel, "softmax") == 0 ? fp64_softmax_seconds(&c, run.in[0].data)
              : strcmp(b->kernel, "attention") == 0 ? fp64_attention_seconds(&c, run.in)
              : strcmp(b->kernel, "adam") == 0      ? fp64_adam_seconds(&c, run.in)
              : strcmp(b->kernel, "clip") == 0      ? fp64_clip_seconds(&c, run.in)
              : strcmp(b->kernel, "layernorm") == 0 ? fp64_layernorm_seconds(&c, run.in)
              : strcmp(b->kernel, "rmsnorm") == 0   ? fp64_rmsnorm_seconds(&c, run.in)
              : strcmp(b->kernel, "layernorm_bwd") == 0 ? fp64_layernorm_bwd_seconds(&c, run.in)
              : strcmp(b->kernel, "rmsnorm_bwd") == 0   ? fp64_rmsnorm_bwd_seconds(&c, run.in)
              : strcmp(b->kernel, "rope") == 0          ? fp64_rope_seconds(&c, run.in)
              : strcmp(b->kernel, "swiglu") == 0        ? fp64_swiglu_seconds(&c, run.in)
                                                    : fp64_tp_seconds(&c, run.in);
      pf_run_free(&run);
      if (b->judge) {
        /* the whole judgement on every thread; MPFR on 4 query rows of one head, scaled */
        pf_parallel_set_threads(0);
        const double t0 = pf_now();
        if (bench_run(b, &c, &o, &run)) return 1;
        tj = pf_now() - t0;
        pf_run_free(&run);
        const size_t rows = c.shape[0] * c.shape[1] * c.shape[2];
        c.shape[0] = c.shape[1] = 1;
        c.shape[2] = 4;
        if (bench_run(b, &c, &om, &ref)) return 1;
        tm[r] = ref.seconds_oracle * (double)rows / 4;
      } else {
        if (bench_run(b, &c, &om, &ref)) return 1;
        tm[r] = ref.seconds_oracle;
      }
      pf_run_free(&ref);
      pf_case_free(&c);
    }
    qsort(tk, (size_t)n, sizeof(double), cmp_double);
    qsort(tf, (size_t)n, sizeof(double), cmp_double);
    qsort(tm, (size_t)n, sizeof(double), cmp_double);
    qsort(tr, (size_t)n, sizeof(double), cmp_double);
    char shape[64] = "";
    for (int d = 0; d < 5 && b->shape[d]; d++) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? "x%zu" : "%zu", b->shape[d]);
    char dt[16], kern_s[16] = "-", ref_s[16] = "-", fast_s[16] = "-", mpfr_s[16], fr[16] = "-", mr[16] = "-", fb[16] = "-",
                 judge_s[16] = "-";
    snprintf(dt, sizeof dt, "%s/%s", pf_dtype_name(b->t), pf_dtype_name(b->a));
    const double ref_t = tr[n / 2], fast_t = tf[n / 2], mpfr_t_ = tm[n / 2];
    if (tk[n / 2] >= 0) snprintf(kern_s, sizeof kern_s, "%.3g", tk[n / 2]);
    snprintf(mpfr_s, sizeof mpfr_s, b->judge ? "~%.0f" : "%.3g", mpfr_t_);
    if (ref_t > 0) snprintf(ref_s, sizeof ref_s, "%.3g", ref_t), snprintf(mr, sizeof mr, "%.0f", mpfr_t_ / ref_t);
    if (has_fast) {
      snprintf(fast_s, sizeof fast_s, "%.3g", fast_t);
      if (ref_t > 0) snprintf(fr, sizeof fr, "%.1f", fast_t / ref_t);
      snprintf(fb, sizeof fb, "%.2f%%", 100.0 * (double)mpfr_units / (double)(units ? units : 1));
    }
    if (tj >= 0) snprintf(judge_s, sizeof judge_s, "%.1f", tj);
    printf("%-9s %-10s %-9s %-16s %8s %10s %9s %10s %8s %8s %7s %8s\n", b->kernel, b->variant, dt, shape, kern_s, ref_s,
           fast_s, mpfr_s, fr, mr, fb, judge_s);
    fflush(stdout);
  }
  printf("(median of %d runs, one thread but for judge s. kernel: the CPU emulation; fp64 ref: the same computation in\n"
         "plain binary64, no bound, no certainty; fast: the oracle with its certified fast path (oracles/*_fast.c); mpfr:\n"
         "--oracle mpfr (~: timed on 4 query rows and scaled); to mpfr: the rows (units) the fast path left to MPFR;\n"
         "judge s: a case too large for the emulation, its correctly rounded outputs judged as a GPU kernel's would be\n"
         "(oracle, bound, comparison, hazards), wall time on every processor. Outputs include stored scores and\n"
         "probabilities where the variant has them. tp_diff: its oracle is the set of values some summation order\n"
         "gives (fp32 intervals around an exact squared norm: fast, a compensated sum; mpfr, MPFR); its fp64 ref\n"
         "is one TP=1 step in binary64, its units the steps.)\n",
         reps);
  return 0;
}
