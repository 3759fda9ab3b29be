/* RMSNorm forward: CPU emulation of every variant, their contracts and the variant table.
 *
 *   y = x rstd g',  rstd = 1 / sqrt(mean(x^2) + eps), over each row (rmsnorm_spec.h).
 *
 * Variants:
 *   torch  PyTorch's F.rms_norm on the CPU, torch 2.15: a composite of ATen ops on x in fp32
 *          (torch/_refs and aten's rms_norm: x.float(), pow(2), mean(-1) = the fp32 sum of
 *          SumKernel.cpp divided by n, + eps, rsqrt = 1 / sqrt, x rstd, times gamma taken to
 *          fp32, rounded to the input's dtype)
 *   fused  the fused kernels (Megatron's and Transformer Engine's RMSNorm, apex's FusedRMSNorm,
 *          HF's LlamaRMSNorm): the squares summed in order in the accumulation dtype (fp32, or the
 *          storage dtype), the same rstd and y, rstd saved in the accumulation dtype */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/rmsnorm/rmsnorm.h"

#include "oracles/rmsnorm_mpfr.h"

static const char *const pf_rms_dims[] = {"rows", "cols"};
static const char *const pf_rms_inputs[] = {"x", "gamma"};
static const char *const pf_rms_weights_choices[] = {"storage", "fp32", NULL};
static const char *const pf_rms_no_yes[] = {"no", "yes", NULL};

static const pf_param_desc pf_rms_params[] = {
    {"eps", PF_PARAM_REAL, 0x1.4f8b58p-17 /* 1e-5 in fp32 */, 0, 1, NULL,
     "added to the mean square (F.rms_norm's default eps=None is fp32's epsilon, 2^-23)", PF_HELD(PF_FP32),
     "1e-5,1e-6,0x1p-23"},
    {"weights", PF_PARAM_CHOICE, 0, 0, 1, pf_rms_weights_choices,
     "the dtype of gamma: the storage dtype, or fp32 (parameters kept in fp32 beside bf16 activations)", 0,
     "storage,fp32"},
    {"zero_centered_gamma", PF_PARAM_CHOICE, 0, 0, 1, pf_rms_no_yes,
     "yes: y scales by 1 + gamma, gamma stored centred on 0 (Gemma's RMSNorm, Transformer Engine's "
     "zero_centered_gamma); 1 + gamma formed in the weights' dtype",
     0, "no,no,yes"},
};

static size_t pf_rms_input_count(const pf_case *c, int i) {
  return i == PF_RMS_IN_X ? c->shape[0] * c->shape[1] : c->shape[1];
}
static pf_dtype pf_rms_input_dtype(const pf_case *c, int i) { return i == PF_RMS_IN_X ? c->dtype : pf_rms_weights_dtype(c); }
static size_t pf_rms_output_count(const pf_case *c) { return c->shape[0] + c->shape[0] * c->shape[1]; }

static int pf_rms_input_dims(const pf_case *c, int i, int *d) {
  if (i == PF_RMS_IN_X) {
    d[0] = 0, d[1] = 1; /* x[row][col] */
    return 2;
  }
  d[0] = 1; /* gamma[col] */
  return 1;
}

/* rstd element by element (positive, no cancellation); y normwise per row */
static int pf_rms_stages(const pf_case *c, pf_stage *st) {
  const size_t rows = c->shape[0];
  st[0] = (pf_stage){"rstd", 0, rows, 0, PF_HELD(pf_rms_stats_dtype(c)), 1, {0}, PF_MEASURE_ELEMENT};
  st[1] = (pf_stage){"y", rows, rows * c->shape[1], 0, 0, 2, {0, 1}, PF_MEASURE_ROW};
  return 2;
}

static int pf_rms_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "rms-sum-in-storage") == 0 ? PF_RMS_F_SUM_IN_STORAGE : 0) |
         (strcmp(c->fault, "rms-1p-in-storage") == 0 ? PF_RMS_F_1P_IN_STORAGE : 0);
}

pf_rms_launch pf_rms_launch_of(const pf_case *c, int faults) {
  pf_rms_launch L;
  L.rows = c->shape[0];
  L.cols = c->shape[1];
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.dtype = c->dtype;
  L.accum = c->accum;
  L.weights = pf_rms_weights_dtype(c);
  L.eps = c->params[PF_RMS_P_EPS];
  L.zero_centered = (int)c->params[PF_RMS_P_ZERO_CENTERED];
  return L;
}

/* One row: rstd with its bound and, when y is given, the outputs rounded to the storage dtype
 * (ey: each one's bound before that rounding); work: 2 cols doubles. */
void pf_rms_row(const pf_rms_launch *L, const double *x, const double *g, pf_ln_val *rstd, double *y, double *ey,
                double *work, unsigned *fe) {
  const size_t n = L->cols;
  const pf_dtype t = L->faults & PF_RMS_F_SUM_IN_STORAGE ? L->dtype : L->accum;
  double *q = work, *eq = work + n;
  for (size_t j = 0; j < n; j++) {
    q[j] = pf_mul(t, x[j], x[j], fe);
    eq[j] = pf_ln_rerr(t, q[j]);
  }
  *rstd = pf_rms_rstd(t, pf_rms_sum(L->algo, t, q, eq, n, fe), n, L->eps, fe);
  if (t != L->accum) { /* the fault: rstd held in the accumulation dtype again */
    rstd->v = pf_round_fe(L->accum, rstd->v, fe);
    rstd->e = INFINITY;
  }
  if (!y) return;
  for (size_t j = 0; j < n; j++) {
    double e;
    y[j] = pf_round_fe(L->dtype, pf_rms_y(L, x[j], *rstd, g[j], &e, fe), fe);
    if (ey) ey[j] = e;
  }
}

pf_status pf_rms_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_rms_launch L = pf_rms_launch_of(c, pf_rms_faults_of(c));
  double *work = malloc(2 * (L.cols ? L.cols : 1) * sizeof(double));
  if (!work) return pf_error(PF_ERR_NOMEM, "rmsnorm: cannot allocate a row of %zu", L.cols);
  for (size_t i = 0; i < L.rows; i++) {
    pf_ln_val r;
    pf_rms_row(&L, in[0].data + i * L.cols, in[1].data, &r, out + L.rows + i * L.cols, NULL, work, fe);
    out[i] = r.v; /* in the accumulation dtype, which is rstd's */
  }
  free(work);
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/rmsnorm/rmsnorm_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_rms_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_rmsnorm_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_rmsnorm_cuda", (void **)&fn);
  if (st) return st;
  const pf_rms_launch L = pf_rms_launch_of(c, pf_rms_faults_of(c));
  return fn(&L, in[0].data, in[1].data, out, fe);
}
#define PF_RMS_RUN_CUDA pf_rms_cuda_case
#else
#define PF_RMS_RUN_CUDA NULL
#endif

/* ---- contracts ---------------------------------------------------------------------------
 * Every output's bound is the running error bound its row's computation carries (taken without
 * the faults); rel is slack for the bound's own binary64 evaluation. */
static pf_bound pf_rms_bound_of(double e) {
  if (!(e < INFINITY)) return (pf_bound){INFINITY, INFINITY};
  return (pf_bound){0x1p-45, e * (1 + 0x1p-20) + 0x1p-1074};
}

/* the bounds of every output (out) and, for the domain, whether each is finite and inside its
 * dtype: 0 and one line in why at the first that is not */
static int pf_rms_bounds(const pf_case *c, const pf_tensor *in, pf_bound *out, char *why, size_t len) {
  const pf_rms_launch L = pf_rms_launch_of(c, 0);
  double *w = malloc(4 * (L.cols ? L.cols : 1) * sizeof(double));
  if (!w) {
    for (size_t k = 0; out && k < pf_rms_output_count(c); k++) out[k] = (pf_bound){INFINITY, INFINITY};
    if (why) snprintf(why, len, "no memory for a row's bounds");
    return 0;
  }
  double *y = w + 2 * L.cols, *ey = w + 3 * L.cols;
  int ok = 1;
  for (size_t i = 0; i < L.rows && (ok || out); i++) {
    pf_ln_val r;
    unsigned fe = 0;
    pf_rms_row(&L, in[0].data + i * L.cols, in[1].data, &r, y, ey, w, &fe);
    if (out) {
      out[i] = pf_rms_bound_of(r.e);
      for (size_t j = 0; j < L.cols; j++) out[L.rows + i * L.cols + j] = pf_rms_bound_of(ey[j]);
    }
    if (!ok || !why) continue;
    if (!(r.e < INFINITY) || !(fabs(r.v) + r.e < pf_max_finite(L.accum))) {
      snprintf(why, len, "row %zu: no error bound holds for rstd in %s (the sum of squares may overflow, or the mean "
               "square plus eps reach 0)", i, pf_dtype_name(L.accum));
      ok = 0;
      continue;
    }
    for (size_t j = 0; j < L.cols && ok; j++)
      if (!(fabs(y[j]) + ey[j] < pf_max_finite(L.dtype))) {
        snprintf(why, len, "row %zu: y[%zu] may overflow on the way or leave %s (gamma %g)", i, j,
                 pf_dtype_name(L.dtype), in[1].data[j]);
        ok = 0;
      }
  }
  free(w);
  return ok;
}

void pf_rms_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) { pf_rms_bounds(c, in, out, NULL, 0); }

/* Domain: finite inputs, and every output's bound finite and inside its dtype's range. */
int pf_rms_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  for (size_t j = 0; j < cols; j++)
    if (!isfinite(in[1].data[j])) {
      snprintf(why, len, "gamma at column %zu is not finite", j);
      return 0;
    }
  for (size_t k = 0; k < rows * cols; k++)
    if (!isfinite(in[0].data[k])) {
      snprintf(why, len, "row %zu: x[%zu] is not finite", k / cols, k % cols);
      return 0;
    }
  return pf_rms_bounds(c, in, NULL, why, len);
}

/* saturated: a row's rstd came out above the exact one by more than the imprecise threshold: a
 * sum of squares that fell short, one that stopped absorbing its terms (fp16 or bf16 sums). */
static void pf_rms_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  const double thr = pf_hazard_threshold(c, l, pf_rms_stats_dtype(c));
  for (size_t i = 0; i < c->shape[0]; i++) {
    if (r->oracle.status[i] != PF_ORACLE_NUMBER || !isfinite(r->out[i])) continue;
    const double y = r->out[i], E = r->oracle.exact[i];
    /* rstd = 1/sqrt(S/n + eps): S short by a fraction f makes rstd long by about f/2 */
    if (E > 0 && pf_hazard_beyond(2 * (y / E - 1), thr)) {
      pf_run_flag_hazard(r, PF_H_SATURATED, i, 2 * (y / E - 1),
                         "row %zu: rstd came out as %.6g where the exact one is %.6g: the sum of squares fell short "
                         "by about %.3g of itself (threshold %.3g), a running sum that stopped absorbing its terms",
                         i, y, E, 2 * (y / E - 1), thr);
      return;
    }
  }
}

/* rows x cols elements: the emulation about 30 ns each (27 measured, with the running bound), the
 * oracle's fast path 15 (11 measured; precfuzz-bench, 64x4096 bf16) */
static void pf_rms_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 30e-9 * n;
  *oracle_s = 15e-9 * n;
}

static const pf_fault_setting pf_rms_fault_settings[] = {
    {"rms-sum-in-storage", "bf16", {NULL}},
    {"rms-1p-in-storage", "bf16", {"weights=fp32", "zero_centered_gamma=yes", NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the row length (the sum of squares grows with
 * it), where a storage-dtype sum stops absorbing, and where the squares overflow */
static const pf_op_sweep pf_rms_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "2x16", .along = "dim:cols", .lo = 16, .hi = 16384, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_rms_fault_settings,
    .searches = {{"sum stops absorbing (saturated)", "1x16", "dim:cols", "saturated", 16, 65536, {NULL}},
                 {"squares overflow", "1x64", "value:x", "event:overflow", 1, 0, {NULL}}},
    .explanation =
        "RMSNorm sums n squares: accumulated in fp32 the sum keeps its digits at every row length a model uses; "
        "accumulated in fp16 or bf16 it stops absorbing its terms once a square falls below half an ulp of the running "
        "sum (bf16: from a few hundred values of similar size), rstd comes out too large (the hazard saturated) and "
        "every y of the row with it. The sum of squares overflows where n x^2 passes the accumulation's largest "
        "finite: over a row of 64 from |x| = 32 in fp16 storage, 2.3e18 in fp32 and bf16.",
};

int pf_decode_rmsnorm_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* rmsnorm_fuzzer.c */
const pf_op pf_rmsnorm_op = {
    .name = "rmsnorm",
    .summary = "RMSNorm forward over each row: rstd and x rstd gamma",
    .ndims = 2,
    .dim_names = pf_rms_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 20},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 30,
    .nparams = PF_RMS_NPARAMS,
    .params = pf_rms_params,
    .ninputs = 2,
    .input_names = pf_rms_inputs,
    .input_count = pf_rms_input_count,
    .input_dtype = pf_rms_input_dtype,
    .output_count = pf_rms_output_count,
    .oracle = pf_rmsnorm_mpfr,
    .stages = pf_rms_stages,
    .input_dims = pf_rms_input_dims,
    .hazards = pf_rms_hazards,
    .cost = pf_rms_cost,
    .fuzz_decode = pf_decode_rmsnorm_fuzzer,
    .sweep = &pf_rms_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:cols"},
};

#define PF_RMS_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_rms_faults[] = {"rms-sum-in-storage", "rms-1p-in-storage", NULL};
static const char *const pf_rms_torch_faults[] = {"rms-sum-in-storage", NULL};
/* F.rms_norm has no zero-centred gamma */
static const pf_param_range pf_rms_torch_params[] = {{"zero_centered_gamma", 0, 0, 1u << 0, 0}, {NULL, 0, 0, 0, 0}};
#define PF_RMS_CONTRACT                                                                                               \
  "rstd and y within the running error bound of the variant's own sequence of operations (rmsnorm_math.h); domain: " \
  "finite inputs, every output's bound finite and inside its dtype"

static const pf_kernel pf_rms_torch = {
    PF_KERNEL_ABI, &pf_rmsnorm_op, "torch",
    "PyTorch's F.rms_norm on the CPU (torch 2.15): fp32 composite, ATen's cascade sum of the squares", PF_RMS_DTYPES,
    PF_DT(PF_FP32), pf_rms_torch_faults, PF_RMS_CONTRACT, pf_rms_cpu, pf_rms_bound, pf_rms_in_domain, NULL, NULL,
    .algo = PF_RMS_TORCH, .params = pf_rms_torch_params};
static const pf_kernel pf_rms_fused = {
    PF_KERNEL_ABI, &pf_rmsnorm_op, "fused", "the squares summed in order in the accumulation dtype, rstd, x rstd gamma",
    PF_RMS_DTYPES, PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_rms_faults, PF_RMS_CONTRACT, pf_rms_cpu, pf_rms_bound,
    pf_rms_in_domain, NULL, PF_RMS_RUN_CUDA, .algo = PF_RMS_FUSED};

const pf_kernel *const pf_rmsnorm_kernels[] = {&pf_rms_torch, &pf_rms_fused, NULL};
