/* LayerNorm forward: CPU emulation of every variant, their contracts and the variant table.
 *
 *   y = (x - mean) rstd g' + beta over each row of x (layernorm_spec.h has the definition).
 *
 * Variants (the statistics' algorithm; the rest follows the same formula):
 *   torch     PyTorch's CPU kernel, torch 2.15 (aten/src/ATen/native/cpu/layer_norm_kernel.cpp and
 *             moments_utils.h): Welford over 8-float vector lanes in chunks of 16 vectors, the
 *             chunks merged by Chan's formula in a binary cascade, a scalar Welford tail, the
 *             lanes merged into it; all in fp32; y = fma((x - mean) rstd, g, beta) for fp32,
 *             fma(fma(x, rstd, -rstd mean), g, beta) for fp16 and bf16; mean and rstd saved in
 *             the weights' dtype
 *   welford   one pass, m += (x - m) / k, M2 += (x - m_old)(x - m_new) (apex's and Megatron's
 *             fused LayerNorm, Transformer Engine: Welford per thread)
 *   two-pass  the mean, then the sum of squared deviations from it
 *   moments   E[x^2] - E[x]^2 in one pass, clamped at 0: cancels when the mean is large
 *             against the spread (ATen's kernel before Welford)
 * Statistics in fp32 or the storage dtype (torch: fp32 only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/layernorm/layernorm.h"

#include "oracles/layernorm_mpfr.h"

static const char *const pf_ln_dims[] = {"rows", "cols"};
static const char *const pf_ln_inputs[] = {"x", "gamma", "beta"};
static const char *const pf_ln_weights_choices[] = {"storage", "fp32", NULL};
static const char *const pf_ln_no_yes[] = {"no", "yes", NULL};
static const char *const pf_ln_eps_place_choices[] = {"inside", "outside", NULL};

static const pf_param_desc pf_ln_params[] = {
    {"eps", PF_PARAM_REAL, 0x1.4f8b58p-17 /* 1e-5 in fp32 */, 0, 1, NULL, "added to the variance (inside the root) or to its root (outside)",
     PF_HELD(PF_FP32), "1e-5,1e-6"},
    {"weights", PF_PARAM_CHOICE, 0, 0, 1, pf_ln_weights_choices,
     "the dtype of gamma and beta: the storage dtype, or fp32 (Megatron's mixed-precision LayerNorm)", 0, "storage,fp32"},
    {"zero_centered_gamma", PF_PARAM_CHOICE, 0, 0, 1, pf_ln_no_yes,
     "yes: y scales by 1 + gamma, gamma stored centred on 0 (Megatron's apply_layernorm_1p, Transformer Engine's "
     "zero_centered_gamma); 1 + gamma computed in the weights' dtype",
     0, "no,no,yes"},
    {"eps_place", PF_PARAM_CHOICE, 0, 0, 1, pf_ln_eps_place_choices,
     "inside: 1 / sqrt(var + eps), every framework's LayerNorm; outside: 1 / (sqrt(var) + eps)", 0, NULL},
};

static size_t pf_ln_input_count(const pf_case *c, int i) { return i == PF_LN_IN_X ? c->shape[0] * c->shape[1] : c->shape[1]; }
static pf_dtype pf_ln_input_dtype(const pf_case *c, int i) { return i == PF_LN_IN_X ? c->dtype : pf_ln_weights_dtype(c); }
static size_t pf_ln_output_count(const pf_case *c) { return 2 * c->shape[0] + c->shape[0] * c->shape[1]; }

static int pf_ln_input_dims(const pf_case *c, int i, int *d) {
  if (i == PF_LN_IN_X) {
    d[0] = 0, d[1] = 1; /* x[row][col] */
    return 2;
  }
  d[0] = 1; /* gamma[col], beta[col] */
  return 1;
}

/* mean is judged by the contract only (a mean near 0 has no relative precision to lose, and what
 * its error does shows in y); rstd element by element; y normwise per row. */
static int pf_ln_stages(const pf_case *c, pf_stage *st) {
  const size_t rows = c->shape[0];
  const int sh = PF_HELD(pf_ln_stats_dtype(c, pf_case_algo(c)));
  st[0] = (pf_stage){"mean", 0, rows, 0, sh, 1, {0}, PF_MEASURE_NONE};
  st[1] = (pf_stage){"rstd", rows, rows, 0, sh, 1, {0}, PF_MEASURE_ELEMENT};
  st[2] = (pf_stage){"y", 2 * rows, rows * c->shape[1], 0, 0, 2, {0, 1}, PF_MEASURE_ROW};
  return 3;
}

static int pf_ln_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "ln-var-unbiased") == 0 ? PF_LN_F_UNBIASED : 0) |
         (strcmp(c->fault, "ln-eps-outside") == 0 ? PF_LN_F_EPS_OUTSIDE : 0) |
         (strcmp(c->fault, "ln-1p-ignored") == 0 ? PF_LN_F_1P_IGNORED : 0);
}

pf_ln_launch pf_ln_launch_of(const pf_case *c, int faults) {
  pf_ln_launch L;
  L.rows = c->shape[0];
  L.cols = c->shape[1];
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.dtype = c->dtype;
  L.accum = c->accum;
  L.weights = pf_ln_weights_dtype(c);
  L.stats = pf_ln_stats_dtype(c, L.algo);
  L.eps = c->params[PF_LN_P_EPS];
  L.zero_centered = (int)c->params[PF_LN_P_ZERO_CENTERED];
  L.eps_outside = (int)c->params[PF_LN_P_EPS_PLACE] == PF_LN_EPS_OUTSIDE;
  return L;
}

/* One row: its statistics (and their bounds) and, when y is given, its outputs rounded to the
 * storage dtype (ey: each one's bound before that rounding). */
void pf_ln_row(const pf_ln_launch *L, const double *x, const double *g, const double *b, pf_ln_val *mean,
               pf_ln_val *rstd, double *y, double *ey, unsigned *fe) {
  pf_ln_val M2;
  pf_ln_moments(L, x, mean, &M2, fe);
  *rstd = pf_ln_rstd(L, pf_ln_variance(L, *mean, M2, fe), fe);
  if (!y) return;
  for (size_t j = 0; j < L->cols; j++) {
    double e;
    y[j] = pf_round_fe(L->dtype, pf_ln_y(L, x[j], *mean, *rstd, g[j], b[j], &e, fe), fe);
    if (ey) ey[j] = e;
  }
}

pf_status pf_ln_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_ln_launch L = pf_ln_launch_of(c, pf_ln_faults_of(c));
  for (size_t i = 0; i < L.rows; i++) {
    pf_ln_val m, r;
    pf_ln_row(&L, in[0].data + i * L.cols, in[1].data, in[2].data, &m, &r, out + 2 * L.rows + i * L.cols, NULL, fe);
    out[i] = pf_round_fe(L.stats, m.v, fe);
    out[L.rows + i] = pf_round_fe(L.stats, r.v, fe);
  }
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/layernorm/layernorm_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_ln_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_layernorm_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_layernorm_cuda", (void **)&fn);
  if (st) return st;
  const pf_ln_launch L = pf_ln_launch_of(c, pf_ln_faults_of(c));
  return fn(&L, in[0].data, in[1].data, in[2].data, out, fe);
}
#define PF_LN_RUN_CUDA pf_ln_cuda_case
#else
#define PF_LN_RUN_CUDA NULL
#endif

/* ---- contracts -------------------------------------------------------------------------
 * The bound of every output is the running error bound its row's computation carries
 * (layernorm_math.h), taken without the faults; rel is slack for the bound's own binary64
 * evaluation. */
static pf_bound pf_ln_bound_of(double e) {
  if (!(e < INFINITY)) return (pf_bound){INFINITY, INFINITY};
  return (pf_bound){0x1p-45, e * (1 + 0x1p-20) + 0x1p-1074};
}

void pf_ln_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const pf_ln_launch L = pf_ln_launch_of(c, 0);
  double *y = malloc(2 * (L.cols ? L.cols : 1) * sizeof(double));
  if (!y) { /* no memory for a row's bounds: none is promised */
    for (size_t k = 0; k < pf_ln_output_count(c); k++) out[k] = (pf_bound){INFINITY, INFINITY};
    return;
  }
  for (size_t i = 0; i < L.rows; i++) {
    pf_ln_val m, r;
    unsigned fe = 0;
    pf_ln_row(&L, in[0].data + i * L.cols, in[1].data, in[2].data, &m, &r, y, y + L.cols, &fe);
    out[i] = pf_ln_bound_of(m.e);
    out[L.rows + i] = pf_ln_bound_of(r.e);
    for (size_t j = 0; j < L.cols; j++) out[2 * L.rows + i * L.cols + j] = pf_ln_bound_of(y[L.cols + j]);
  }
  free(y);
}

/* Domain: finite inputs, and a finite bound on every output: no overflow on the way (x^2 in
 * fp16 beyond 256 overflows the moments variant's sum; x rstd in PyTorch's fp16 path, where rstd
 * is large), a variance whose error stays below var + eps (else rstd has no bound: the variance
 * is lost to cancellation), and every output's enclosure inside its dtype's range. */
/* row i's part of the domain; y: 2 cols doubles to work in */
static int pf_ln_row_in_domain(const pf_ln_launch *L, const pf_tensor *in, size_t i, double *y, char *why, size_t len) {
  const double *x = in[0].data + i * L->cols;
  for (size_t j = 0; j < L->cols; j++)
    if (!isfinite(x[j])) {
      snprintf(why, len, "row %zu: x[%zu] is not finite", i, j);
      return 0;
    }
  pf_ln_val m, r;
  unsigned fe = 0;
  pf_ln_row(L, x, in[1].data, in[2].data, &m, &r, y, y + L->cols, &fe);
  if (!(m.e < INFINITY) || !(r.e < INFINITY)) {
    snprintf(why, len, "row %zu: no error bound holds for its statistics in %s (%s)", i, pf_dtype_name(L->accum),
             !(m.e < INFINITY) ? "the sum may overflow" : "the variance may be lost to cancellation or overflow");
    return 0;
  }
  if (!(fabs(r.v) + r.e < pf_max_finite(L->stats))) {
    snprintf(why, len, "row %zu: rstd %g may leave %s", i, r.v, pf_dtype_name(L->stats));
    return 0;
  }
  for (size_t j = 0; j < L->cols; j++)
    if (!(fabs(y[j]) + y[L->cols + j] < pf_max_finite(L->dtype))) {
      snprintf(why, len, "row %zu: y[%zu] may overflow on the way or leave %s (gamma %g, beta %g)", i, j,
               pf_dtype_name(L->dtype), in[1].data[j], in[2].data[j]);
      return 0;
    }
  return 1;
}

int pf_ln_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const pf_ln_launch L = pf_ln_launch_of(c, 0);
  for (size_t j = 0; j < L.cols; j++)
    if (!isfinite(in[1].data[j]) || !isfinite(in[2].data[j])) {
      snprintf(why, len, "gamma or beta at column %zu is not finite", j);
      return 0;
    }
  double *y = malloc(2 * (L.cols ? L.cols : 1) * sizeof(double));
  if (!y) {
    snprintf(why, len, "no memory for a row's bounds");
    return 0;
  }
  int ok = 1;
  for (size_t i = 0; i < L.rows && ok; i++) ok = pf_ln_row_in_domain(&L, in, i, y, why, len);
  free(y);
  return ok;
}

/* saturated: a row's mean came out short of the exact one by more than the imprecise threshold
 * times the row's mean magnitude (sum |x| / n): a running sum that stopped absorbing its terms
 * (two-pass and moments accumulating in fp16 or bf16). */
static void pf_ln_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double thr = pf_hazard_threshold(c, l, pf_ln_stats_dtype(c, pf_case_algo(c)));
  for (size_t i = 0; i < rows; i++) {
    if (r->oracle.status[i] != PF_ORACLE_NUMBER || !isfinite(r->out[i])) continue;
    double a = 0;
    for (size_t j = 0; j < cols; j++) a += fabs(r->in[0].data[i * cols + j]);
    a /= (double)cols;
    const double y = r->out[i], E = r->oracle.exact[i];
    const double short_by = fabs(E) - (y * E >= 0 ? fabs(y) : -fabs(y));
    if (a > 0 && pf_hazard_beyond(short_by / a, thr)) {
      pf_run_flag_hazard(r, PF_H_SATURATED, i, short_by / a,
                         "row %zu: the mean came out as %.6g where the exact mean is %.6g, short by %.3g of the row's "
                         "mean magnitude %.6g (threshold %.3g): a running sum that stopped absorbing its terms",
                         i, y, E, short_by / a, a, thr);
      return;
    }
  }
}

/* rows x cols elements: the emulation about 100 ns each (welford, with the running bound; torch
 * 63), the oracle's fast path 15 (measured: precfuzz-bench, 8x16384 fp32 and 64x4096 bf16) */
static void pf_ln_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 100e-9 * n;
  *oracle_s = 15e-9 * n;
}

static const pf_fault_setting pf_ln_fault_settings[] = {
    {"ln-eps-outside", "fp32", {"eps=0x1p-7", NULL}},
    {"ln-1p-ignored", NULL, {"zero_centered_gamma=yes", NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the rows' mean (offset) at a spread of 1, so that
 * the mean-to-spread ratio is the offset; where the statistics become imprecise as it grows; where
 * the sums overflow */
static const pf_op_sweep pf_ln_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x1024", .along = "offset:x", .lo = 1, .hi = 0x1p24, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_ln_fault_settings,
    .searches = {{"cancellation (imprecise)", "1x1024", "offset:x", "imprecise", 1, 0x1p24, {NULL}},
                 {"overflow", "1x64", "value:x", "event:overflow", 1, 0, {NULL}}},
    .explanation =
        "Rows of spread 1 around a mean that grows: the mean-to-spread ratio is the offset. Every variant holds the "
        "mean in its accumulation dtype, so x - mean, and y with it, carries about u times the ratio of error (u = "
        "2^-24 in fp32: y imprecise from ratios of a few thousand for Welford, two-pass and PyTorch's kernel). "
        "E[x^2] - E[x]^2 (moments) also loses u times the ratio squared in the variance, times the row length: in fp32 "
        "over rows of 1024 rstd is imprecise from a ratio near 50, and the variance keeps no digit (outside the "
        "contract's domain) from about 100. The inputs hold no spread beyond their own precision: in bf16 a ratio past "
        "2^8 leaves rows of a few distinct values, in fp16 past 2^11. The sums overflow where n |x| (or n x^2 for "
        "moments) passes the accumulation's largest finite: in fp16 storage, a row of 64 values of 1024, or of 32 for "
        "the squares.",
};

int pf_decode_layernorm_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* layernorm_fuzzer.c */
const pf_op pf_layernorm_op = {
    .name = "layernorm",
    .summary = "LayerNorm forward over each row: mean, rstd and (x - mean) rstd gamma + beta",
    .ndims = 2,
    .dim_names = pf_ln_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 20},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 30,
    .nparams = PF_LN_NPARAMS,
    .params = pf_ln_params,
    .ninputs = 3,
    .input_names = pf_ln_inputs,
    .input_count = pf_ln_input_count,
    .input_dtype = pf_ln_input_dtype,
    .output_count = pf_ln_output_count,
    .oracle = pf_layernorm_mpfr,
    .stages = pf_ln_stages,
    .input_dims = pf_ln_input_dims,
    .hazards = pf_ln_hazards,
    .cost = pf_ln_cost,
    .fuzz_decode = pf_decode_layernorm_fuzzer,
    .sweep = &pf_ln_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:cols"},
};

#define PF_LN_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_ln_faults[] = {"ln-var-unbiased", "ln-eps-outside", "ln-1p-ignored", NULL};
static const char *const pf_ln_torch_faults[] = {"ln-var-unbiased", "ln-eps-outside", NULL};
/* F.layer_norm has neither a zero-centred gamma nor eps outside the root */
static const pf_param_range pf_ln_torch_params[] = {
    {"zero_centered_gamma", 0, 0, 1u << 0, 0}, {"eps_place", 0, 0, 1u << PF_LN_EPS_INSIDE, 0}, {NULL, 0, 0, 0, 0}};
#define PF_LN_CONTRACT                                                                                                \
  "mean, rstd and y within the running error bound of the variant's own sequence of operations (layernorm_math.h); " \
  "domain: finite inputs, every output's bound finite (no overflow, a variance not lost to cancellation) and inside " \
  "its dtype"

static const pf_kernel pf_ln_torch = {
    PF_KERNEL_ABI, &pf_layernorm_op, "torch",
    "PyTorch's F.layer_norm on the CPU (torch 2.15): vectorized Welford with a cascade, fp32 statistics", PF_LN_DTYPES,
    PF_DT(PF_FP32), pf_ln_torch_faults, PF_LN_CONTRACT, pf_ln_cpu, pf_ln_bound, pf_ln_in_domain, NULL, NULL,
    .algo = PF_LN_TORCH, .params = pf_ln_torch_params};
static const pf_kernel pf_ln_welford = {
    PF_KERNEL_ABI, &pf_layernorm_op, "welford", "one pass: m += (x - m) / k, M2 += (x - m)(x - m_new)", PF_LN_DTYPES,
    PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_ln_faults, PF_LN_CONTRACT, pf_ln_cpu, pf_ln_bound, pf_ln_in_domain, NULL,
    PF_LN_RUN_CUDA, .algo = PF_LN_WELFORD};
static const pf_kernel pf_ln_two_pass = {
    PF_KERNEL_ABI, &pf_layernorm_op, "two-pass", "the mean, then the sum of squared deviations from it", PF_LN_DTYPES,
    PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_ln_faults, PF_LN_CONTRACT, pf_ln_cpu, pf_ln_bound, pf_ln_in_domain, NULL,
    PF_LN_RUN_CUDA, .algo = PF_LN_TWO_PASS};
static const pf_kernel pf_ln_moments_k = {
    PF_KERNEL_ABI, &pf_layernorm_op, "moments", "one pass: var = E[x^2] - E[x]^2, clamped at 0", PF_LN_DTYPES,
    PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_ln_faults, PF_LN_CONTRACT, pf_ln_cpu, pf_ln_bound, pf_ln_in_domain, NULL,
    PF_LN_RUN_CUDA, .algo = PF_LN_MOMENTS};

const pf_kernel *const pf_layernorm_kernels[] = {&pf_ln_torch, &pf_ln_welford, &pf_ln_two_pass, &pf_ln_moments_k, NULL};
