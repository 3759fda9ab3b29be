/* RMSNorm backward: CPU emulation of every variant, their contracts and the variant table.
 *
 *   dx = rstd (a - xhat mean(a xhat)), a = g' dy;  dgamma = sum over the tokens of dy xhat
 *   (rmsnorm_bwd_spec.h has the definition).
 *
 * Variants:
 *   torch  autograd through PyTorch's F.rms_norm composite on the CPU, torch 2.15: the row's
 *          ops in fp32 (rmsnorm_bwd_math.h), dgamma = the fp32 sum over dim 0 of dy xhat, by
 *          ATen's outer sum (SumKernel.cpp's vectorized_outer_sum: columns in groups of 32 by
 *          multi_row_sum's cascade over the rows, then groups of 8 and single columns by
 *          row_sum's 4 interleaved rows and cascade)
 *   fused  a fused GPU backward (apex's and Transformer Engine's RMSNorm backward): the row in
 *          the accumulation dtype, dgamma's partial sums per block of tokens in it, the blocks'
 *          sums added in fp32
 * Every output is rounded once to its dtype at the end: dx to the storage dtype, dgamma to the
 * weights'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/layernorm_bwd/layernorm_bwd.h"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd.h"

#include "oracles/rmsnorm_bwd_mpfr.h"

static const char *const pf_rmsb_dims[] = {"rows", "cols"};
static const char *const pf_rmsb_inputs[] = {"x", "dy", "gamma"};
static const char *const pf_rmsb_weights_choices[] = {"storage", "fp32", NULL};
static const char *const pf_rmsb_no_yes[] = {"no", "yes", NULL};

static const pf_param_desc pf_rmsb_params[] = {
    {"eps", PF_PARAM_REAL, 0x1.4f8b58p-17 /* 1e-5 in fp32 */, 0, 1, NULL, "added to the mean square inside the root",
     PF_HELD(PF_FP32), "1e-5,1e-6"},
    {"weights", PF_PARAM_CHOICE, 0, 0, 1, pf_rmsb_weights_choices,
     "the dtype of gamma and dgamma: the storage dtype, or fp32 (parameters kept in fp32 beside bf16 activations)", 0,
     "storage,fp32"},
    {"zero_centered_gamma", PF_PARAM_CHOICE, 0, 0, 1, pf_rmsb_no_yes,
     "yes: the forward scaled by 1 + gamma (Gemma), formed in the weights' dtype", 0, "no,no,yes"},
    {"blocks", PF_PARAM_INT, 1, 1, 1024, NULL,
     "the token reduction's blocks: dgamma summed over this many contiguous runs of rows, each on its own, then the "
     "runs' sums added (a GPU kernel's partial sums)",
     0, "1,2,8,64"},
};

static size_t pf_rmsb_input_count(const pf_case *c, int i) {
  return i == PF_RMSB_IN_GAMMA ? c->shape[1] : c->shape[0] * c->shape[1];
}
static pf_dtype pf_rmsb_input_dtype(const pf_case *c, int i) {
  return i == PF_RMSB_IN_GAMMA ? pf_rmsb_weights_dtype(c) : c->dtype;
}
static size_t pf_rmsb_output_count(const pf_case *c) { return c->shape[0] * c->shape[1] + c->shape[1]; }

static int pf_rmsb_input_dims(const pf_case *c, int i, int *d) {
  if (i == PF_RMSB_IN_GAMMA) {
    d[0] = 1; /* gamma[col] */
    return 1;
  }
  d[0] = 0, d[1] = 1; /* x[row][col], dy[row][col] */
  return 2;
}

/* dx's rows do not cancel to 0 as LayerNorm's do, but a row's dx is orthogonal to its xhat: its
 * elements cancel against each other, so it is judged against the whole tensor's norm; dgamma,
 * sums over the tokens of terms of either sign, as a vector. */
static int pf_rmsb_stages(const pf_case *c, pf_stage *st) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  st[0] = (pf_stage){"dx", 0, rows * cols, 0, 0, 2, {0, 1}, PF_MEASURE_TENSOR};
  st[1] = (pf_stage){"dgamma", pf_rmsb_dgamma_at(c), cols, 0, PF_HELD(pf_rmsb_weights_dtype(c)), 1, {1},
                     PF_MEASURE_TENSOR};
  return 2;
}

static int pf_rmsb_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "rmsb-var-term-dropped") == 0 ? PF_RMSB_F_VAR_DROPPED : 0) |
         (strcmp(c->fault, "rmsb-1p-ignored") == 0 ? PF_RMSB_F_1P_IGNORED : 0) |
         (strcmp(c->fault, "rmsb-partials-in-storage") == 0 ? PF_RMSB_F_PARTIALS_IN_STORAGE : 0);
}

pf_rmsb_launch pf_rmsb_launch_of(const pf_case *c, int faults) {
  pf_rmsb_launch L;
  L.rows = c->shape[0];
  L.cols = c->shape[1];
  L.blocks = (size_t)c->params[PF_RMSB_P_BLOCKS];
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.dtype = c->dtype;
  L.accum = L.algo == PF_RMSB_TORCH ? PF_FP32 : c->accum;
  L.weights = pf_rmsb_weights_dtype(c);
  L.red = faults & PF_RMSB_F_PARTIALS_IN_STORAGE ? c->dtype : L.accum;
  pf_rms_launch *F = &L.fwd;
  F->rows = L.rows;
  F->cols = L.cols;
  F->algo = L.algo == PF_RMSB_TORCH ? PF_RMS_TORCH : PF_RMS_FUSED;
  F->faults = 0;
  F->dtype = c->dtype;
  F->accum = L.accum;
  F->weights = L.weights;
  F->eps = c->params[PF_RMSB_P_EPS];
  F->zero_centered = (int)c->params[PF_RMSB_P_ZERO_CENTERED];
  return L;
}

/* torch's dgamma: columns [j0, j0 + width) summed over every row as ATen's outer sum does, terms
 * fl(dy fl(x rstd)) in fp32 (width 32: one accumulator per column through multi_row_sum's
 * cascade; 8 or 1: row_sum, the rows interleaved by 4); q, eq: rows x 32 doubles each. */
static void pf_rmsb_torch_columns(const pf_rmsb_launch *L, const pf_tensor *in, const pf_ln_val *r, size_t j0,
                                  int width, double *q, double *eq, pf_ln_val *out, unsigned *fe) {
  const pf_dtype F = PF_FP32;
  const size_t n = L->cols;
  for (size_t i = 0; i < L->rows; i++)
    for (int l = 0; l < width; l++) {
      const size_t k = i * n + j0 + (size_t)l;
      const pf_ln_val xh = pf_lnb_mul(F, pf_lnb_exact(in[PF_RMSB_IN_X].data[k]), r[i], fe);
      const pf_ln_val t = pf_lnb_mul(F, pf_lnb_exact(in[PF_RMSB_IN_DY].data[k]), xh, fe);
      q[i * (size_t)width + (size_t)l] = t.v, eq[i * (size_t)width + (size_t)l] = t.e;
    }
  if (width == 32) {
    pf_rms_multi_row_sum(q, eq, L->rows, 8, out, fe); /* 4 vectors of 8 columns: out[k 8 + l] */
  } else {
    pf_rms_row_sum(q, eq, L->rows, width, out, fe);
  }
}

pf_status pf_rmsb_compute(const pf_rmsb_launch *L, const pf_tensor *in, double *out, double *e, unsigned *fe) {
  const size_t n = L->cols, rows = L->rows, nb = L->blocks < rows ? L->blocks : rows;
  const size_t wq = L->algo == PF_RMSB_TORCH ? 32 * (rows ? rows : 1) : 0;
  /* dx and xhat (n each), two rows of doubles, per-block sums (n), totals (n), rstd per row,
   * torch's packed columns (rows x 32, twice) */
  pf_ln_val *w = malloc((4 * n + rows + 1) * sizeof(pf_ln_val));
  double *d = malloc((2 * n + 2 * wq + 1) * sizeof(double));
  if (!w || !d) {
    free(w), free(d);
    return pf_error(PF_ERR_NOMEM, "rmsnorm_bwd: cannot allocate working rows of %zu", n);
  }
  pf_ln_val *dx = w, *xh = w + n, *sg = w + 2 * n, *tg = w + 3 * n, *rs = w + 4 * n;
  double *dg = out + rows * n, *eg = e ? e + rows * n : NULL;
  for (size_t j = 0; j < n; j++) tg[j] = pf_lnb_exact(0);
  for (size_t t = 0; t < (L->algo == PF_RMSB_TORCH ? 1 : nb); t++) {
    size_t b = 0, e_ = rows; /* torch: one block of every row */
    if (L->algo != PF_RMSB_TORCH) pf_lnb_block_rows(rows, L->blocks, t, &b, &e_);
    for (size_t j = 0; j < n; j++) sg[j] = pf_lnb_exact(0);
    for (size_t i = b; i < e_; i++) {
      const double *x = in[PF_RMSB_IN_X].data + i * n, *dy = in[PF_RMSB_IN_DY].data + i * n;
      const double *g = in[PF_RMSB_IN_GAMMA].data;
      if (L->algo == PF_RMSB_TORCH) {
        rs[i] = pf_rmsb_torch_row(L, x, dy, g, dx, d, d + n, fe);
      } else {
        pf_rmsb_fused_row(L, x, dy, g, xh, dx, d, fe);
        for (size_t j = 0; j < n; j++)
          sg[j] = pf_lnb_add(L->red, sg[j], pf_lnb_mul(L->red, pf_lnb_exact(dy[j]), pf_lnb_round(L->red, xh[j], fe), fe),
                             fe);
      }
      for (size_t j = 0; j < n; j++) {
        out[i * n + j] = pf_round_fe(L->dtype, dx[j].v, fe);
        if (e) e[i * n + j] = dx[j].e;
      }
    }
    if (L->algo != PF_RMSB_TORCH)
      for (size_t j = 0; j < n; j++) tg[j] = pf_lnb_add(PF_FP32, tg[j], sg[j], fe);
  }
  if (L->algo == PF_RMSB_TORCH) { /* ATen's outer sum over the rows, column group by column group */
    size_t j = 0;
    for (; j + 32 <= n; j += 32) pf_rmsb_torch_columns(L, in, rs, j, 32, d + 2 * n, d + 2 * n + wq, tg + j, fe);
    for (; j + 8 <= n; j += 8) pf_rmsb_torch_columns(L, in, rs, j, 8, d + 2 * n, d + 2 * n + wq, tg + j, fe);
    for (; j < n; j++) pf_rmsb_torch_columns(L, in, rs, j, 1, d + 2 * n, d + 2 * n + wq, tg + j, fe);
  }
  for (size_t j = 0; j < n; j++) {
    dg[j] = pf_round_fe(L->weights, tg[j].v, fe);
    if (e) eg[j] = tg[j].e;
  }
  free(w);
  free(d);
  return PF_OK;
}

pf_status pf_rmsb_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_rmsb_launch L = pf_rmsb_launch_of(c, pf_rmsb_faults_of(c));
  return pf_rmsb_compute(&L, in, out, NULL, fe);
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/rmsnorm_bwd/rmsnorm_bwd_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_rmsb_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_rmsnorm_bwd_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_rmsnorm_bwd_cuda", (void **)&fn);
  if (st) return st;
  const pf_rmsb_launch L = pf_rmsb_launch_of(c, pf_rmsb_faults_of(c));
  return fn(&L, in[0].data, in[1].data, in[2].data, out, fe);
}
#define PF_RMSB_RUN_CUDA pf_rmsb_cuda_case
#else
#define PF_RMSB_RUN_CUDA NULL
#endif

/* ---- contracts -------------------------------------------------------------------------
 * Every output's bound is the running error bound its computation carries (rmsnorm_bwd_math.h),
 * taken without the faults; the domain: finite inputs, every output's bound finite (no overflow
 * of the squares, the row sums or the partial sums; a mean square plus eps not lost) and its
 * enclosure inside its dtype (layernorm_bwd_cpu.c's pf_norm_bwd_bound and _in_domain). */
static pf_status pf_rmsb_values(const pf_case *c, const pf_tensor *in, double *v, double *e) {
  const pf_rmsb_launch L = pf_rmsb_launch_of(c, 0);
  unsigned fe = 0;
  return pf_rmsb_compute(&L, in, v, e, &fe);
}
static const char *const pf_rmsb_outs[] = {"dx", "dgamma"};
void pf_rmsb_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  pf_norm_bwd_bound(c, in, out, pf_rmsb_output_count(c), pf_rmsb_values);
}
int pf_rmsb_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  return pf_norm_bwd_in_domain(c, in, why, len, pf_rmsb_output_count(c), pf_rmsb_weights_dtype(c), pf_rmsb_outs,
                               pf_rmsb_values);
}

/* saturated: a block holds at least 2^(p-1) tokens (p: the precision of the dtype its sums are
 * held in) and dgamma came out short of the exact one by more than the imprecise threshold times
 * its terms' magnitude (sum over the tokens of |dy xhat|, xhat from the exact rstd in binary64):
 * a token reduction that stopped absorbing its terms. */
static void pf_rmsb_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const int torch = pf_case_algo(c) == PF_RMSB_TORCH;
  const pf_dtype red = torch ? PF_FP32 : c->accum;
  const double thr = pf_hazard_threshold(c, l, red);
  const size_t b = torch ? 1 : (size_t)c->params[PF_RMSB_P_BLOCKS] < rows ? (size_t)c->params[PF_RMSB_P_BLOCKS] : rows;
  if (!b || (rows + b - 1) / b < ((size_t)1 << (pf_format_of(red).prec - 1))) return;
  const double *x = r->in[PF_RMSB_IN_X].data, *dy = r->in[PF_RMSB_IN_DY].data;
  double *mag = calloc(cols ? cols : 1, sizeof(double));
  if (!mag) return;
  for (size_t i = 0; i < rows; i++) {
    double s = 0;
    for (size_t j = 0; j < cols; j++) s += x[i * cols + j] * x[i * cols + j];
    const double rs = 1 / sqrt(s / (double)cols + c->params[PF_RMSB_P_EPS]);
    for (size_t j = 0; j < cols; j++) mag[j] += fabs(dy[i * cols + j] * x[i * cols + j] * rs);
  }
  for (size_t j = 0; j < cols; j++) {
    const size_t o = pf_rmsb_dgamma_at(c) + j;
    if (r->oracle.status[o] != PF_ORACLE_NUMBER || !isfinite(r->out[o]) || !(mag[j] > 0)) continue;
    const double y = r->out[o], E = r->oracle.exact[o];
    const double short_by = fabs(E) - (y * E >= 0 ? fabs(y) : -fabs(y));
    if (pf_hazard_beyond(short_by / mag[j], thr)) {
      pf_run_flag_hazard(r, PF_H_SATURATED, o, short_by / mag[j],
                         "dgamma[%zu] came out as %.6g where the exact sum over the %zu tokens is %.6g, short by %.3g "
                         "of its terms' magnitude %.6g (threshold %.3g): a token reduction that stopped absorbing its "
                         "terms",
                         j, y, rows, E, short_by / mag[j], mag[j], thr);
      break;
    }
  }
  free(mag);
}

/* rows x cols elements: the emulation about 150 ns each (with the running bounds), the oracle
 * 2 us (MPFR, every element's exact numerator) */
static void pf_rmsb_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 150e-9 * n;
  *oracle_s = 2e-6 * n;
}

static const pf_fault_setting pf_rmsb_fault_settings[] = {
    {"rmsb-1p-ignored", NULL, {"zero_centered_gamma=yes", NULL}},
    {"rmsb-partials-in-storage", "bf16", {NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the rows' scale; where a token reduction in the
 * storage dtype stops absorbing as the tokens grow (dy = 1) */
static const pf_op_sweep pf_rmsb_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "16x256", .along = "scale:x", .lo = 0x1p-20, .hi = 0x1p20, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_rmsb_fault_settings,
    .searches = {{"token reduction stops absorbing (saturated)", "16x8", "dim:rows", "saturated", 16, 65536,
                  {"dy:value=1", NULL}},
                 {"squares overflow", "1x64", "value:x", "event:overflow", 1, 0, {NULL}}},
    .explanation =
        "dgamma sums dy xhat over every token of the batch: PyTorch's composite and fused kernels with fp32 partial "
        "sums keep absorbing to 2^24 tokens; partial sums in bf16 stop at about 256 terms of one size (fp16: 2048). "
        "dx is rstd (a - xhat mean(a xhat)) and needs no mean: unlike LayerNorm's it does not degrade with the rows' "
        "offset. The squares of the forward's rstd overflow fp16 accumulation from |x| = 256.",
};

int pf_decode_rmsnorm_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* rmsnorm_bwd_fuzzer.c */
const pf_op pf_rmsnorm_bwd_op = {
    .name = "rmsnorm_bwd",
    .summary = "RMSNorm backward: dx, and dgamma summed over the tokens",
    .ndims = 2,
    .dim_names = pf_rmsb_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 20},
    .dim_default = {16, 256},
    .elems_max = (size_t)1 << 30,
    .nparams = PF_RMSB_NPARAMS,
    .params = pf_rmsb_params,
    .ninputs = 3,
    .input_names = pf_rmsb_inputs,
    .input_count = pf_rmsb_input_count,
    .input_dtype = pf_rmsb_input_dtype,
    .output_count = pf_rmsb_output_count,
    .oracle = pf_rmsnorm_bwd_mpfr,
    .stages = pf_rmsb_stages,
    .input_dims = pf_rmsb_input_dims,
    .hazards = pf_rmsb_hazards,
    .cost = pf_rmsb_cost,
    .fuzz_decode = pf_decode_rmsnorm_bwd_fuzzer,
    .sweep = &pf_rmsb_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:rows"},
};

#define PF_RMSB_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_rmsb_faults[] = {"rmsb-var-term-dropped", "rmsb-1p-ignored", "rmsb-partials-in-storage",
                                             NULL};
static const char *const pf_rmsb_torch_faults[] = {"rmsb-var-term-dropped", NULL};
/* F.rms_norm has no zero-centred gamma; its dgamma is one sum over the rows (one thread) */
static const pf_param_range pf_rmsb_torch_params[] = {
    {"zero_centered_gamma", 0, 0, 1u << 0, 0}, {"blocks", 1, 1, 0, 1}, {NULL, 0, 0, 0, 0}};
#define PF_RMSB_CONTRACT                                                                                                 \
  "dx and dgamma within the running error bound of the variant's own sequence of operations, its recomputed rstd "   \
  "included (rmsnorm_bwd_math.h); domain: finite inputs, every output's bound finite (no overflow, a mean square not " \
  "lost) and inside its dtype"

static const pf_kernel pf_rmsb_torch = {
    PF_KERNEL_ABI, &pf_rmsnorm_bwd_op, "torch",
    "autograd through PyTorch's F.rms_norm on the CPU (torch 2.15): the composite's backward ops in fp32, dgamma by "
    "ATen's outer sum",
    PF_RMSB_DTYPES, PF_DT(PF_FP32), pf_rmsb_torch_faults, PF_RMSB_CONTRACT, pf_rmsb_cpu, pf_rmsb_bound,
    pf_rmsb_in_domain, NULL, NULL, .algo = PF_RMSB_TORCH, .params = pf_rmsb_torch_params};
static const pf_kernel pf_rmsb_fused = {
    PF_KERNEL_ABI, &pf_rmsnorm_bwd_op, "fused",
    "a fused GPU backward: the row's sum of a xhat, dgamma in partial sums per block", PF_RMSB_DTYPES,
    PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_rmsb_faults, PF_RMSB_CONTRACT, pf_rmsb_cpu, pf_rmsb_bound, pf_rmsb_in_domain,
    NULL, PF_RMSB_RUN_CUDA, .algo = PF_RMSB_FUSED};

const pf_kernel *const pf_rmsnorm_bwd_kernels[] = {&pf_rmsb_torch, &pf_rmsb_fused, NULL};
