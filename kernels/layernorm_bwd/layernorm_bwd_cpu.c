/* LayerNorm backward: CPU emulation of every variant, their contracts and the variant table.
 *
 *   dx = rstd (a - mean(a) - xhat mean(a xhat)), a = g' dy;  dgamma = sum over the tokens of
 *   dy xhat;  dbeta = sum over the tokens of dy  (layernorm_bwd_spec.h has the definition).
 *
 * Variants:
 *   torch  PyTorch's CPU backward, torch 2.15 (aten/src/ATen/native/cpu/layer_norm_kernel.cpp):
 *          the forward's saved statistics (layernorm/torch), dx from ds = sum dy x g and
 *          db = sum dy g by vector lanes, all in fp32; dgamma and dbeta summed over each
 *          thread's rows in a buffer of the input's dtype (fp16/bf16 even with fp32 weights),
 *          the threads' buffers then added in fp32 (`blocks` = torch.get_num_threads())
 *   fused  a fused GPU backward (apex's and Megatron's fused LayerNorm, Transformer Engine):
 *          Welford statistics, dx from the row's sums of a and a xhat, dgamma's and dbeta's
 *          partial sums per block of tokens in the accumulation dtype, the blocks' sums added in
 *          fp32 (apex's two-stage cuComputePartGradGammaBeta / cuComputeGradGammaBeta)
 * Every output is rounded once to its dtype at the end: dx to the storage dtype, dgamma and
 * dbeta to the weights'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/layernorm_bwd/layernorm_bwd.h"

#include "oracles/layernorm_bwd_mpfr.h"

static const char *const pf_lnb_dims[] = {"rows", "cols"};
static const char *const pf_lnb_inputs[] = {"x", "dy", "gamma"};
static const char *const pf_lnb_weights_choices[] = {"storage", "fp32", NULL};
static const char *const pf_lnb_no_yes[] = {"no", "yes", NULL};

static const pf_param_desc pf_lnb_params[] = {
    {"eps", PF_PARAM_REAL, 0x1.4f8b58p-17 /* 1e-5 in fp32 */, 0, 1, NULL, "added to the variance inside the root",
     PF_HELD(PF_FP32), "1e-5,1e-6"},
    {"weights", PF_PARAM_CHOICE, 0, 0, 1, pf_lnb_weights_choices,
     "the dtype of gamma, dgamma and dbeta: the storage dtype, or fp32 (Megatron's mixed-precision LayerNorm)", 0,
     "storage,fp32"},
    {"zero_centered_gamma", PF_PARAM_CHOICE, 0, 0, 1, pf_lnb_no_yes,
     "yes: the forward scaled by 1 + gamma (Megatron's apply_layernorm_1p), formed in the weights' dtype", 0,
     "no,no,yes"},
    {"blocks", PF_PARAM_INT, 1, 1, 1024, NULL,
     "the token reduction's blocks: dgamma and dbeta summed over this many contiguous runs of rows, each on its own, "
     "then the runs' sums added (PyTorch: its thread count; a GPU kernel: its partial sums)",
     0, "1,2,8,64"},
};

static size_t pf_lnb_input_count(const pf_case *c, int i) {
  return i == PF_LNB_IN_GAMMA ? c->shape[1] : c->shape[0] * c->shape[1];
}
static pf_dtype pf_lnb_input_dtype(const pf_case *c, int i) {
  return i == PF_LNB_IN_GAMMA ? pf_lnb_weights_dtype(c) : c->dtype;
}
static size_t pf_lnb_output_count(const pf_case *c) { return c->shape[0] * c->shape[1] + 2 * c->shape[1]; }

static int pf_lnb_input_dims(const pf_case *c, int i, int *d) {
  if (i == PF_LNB_IN_GAMMA) {
    d[0] = 1; /* gamma[col] */
    return 1;
  }
  d[0] = 0, d[1] = 1; /* x[row][col], dy[row][col] */
  return 2;
}

/* dx's rows cancel (each sums to 0 exactly), so it is judged against the whole tensor's norm, as
 * softmax's backward; dgamma and dbeta, sums over the tokens of terms of either sign, as vectors. */
static int pf_lnb_stages(const pf_case *c, pf_stage *st) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const int wh = PF_HELD(pf_lnb_weights_dtype(c));
  st[0] = (pf_stage){"dx", 0, rows * cols, 0, 0, 2, {0, 1}, PF_MEASURE_TENSOR};
  st[1] = (pf_stage){"dgamma", pf_lnb_dgamma_at(c), cols, 0, wh, 1, {1}, PF_MEASURE_TENSOR};
  st[2] = (pf_stage){"dbeta", pf_lnb_dbeta_at(c), cols, 0, wh, 1, {1}, PF_MEASURE_TENSOR};
  return 3;
}

/* the dtype dgamma's and dbeta's per-block sums are held in: PyTorch's buffer is of the input's
 * dtype; a fused kernel's partial sums are of its accumulation's */
static pf_dtype pf_lnb_red_dtype(const pf_case *c) { return pf_case_algo(c) == PF_LNB_TORCH ? c->dtype : c->accum; }

static int pf_lnb_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "lnb-mean-term-dropped") == 0 ? PF_LNB_F_MEAN_DROPPED : 0) |
         (strcmp(c->fault, "lnb-var-term-dropped") == 0 ? PF_LNB_F_VAR_DROPPED : 0) |
         (strcmp(c->fault, "lnb-1p-ignored") == 0 ? PF_LNB_F_1P_IGNORED : 0);
}

pf_lnb_launch pf_lnb_launch_of(const pf_case *c, int faults) {
  pf_lnb_launch L;
  L.rows = c->shape[0];
  L.cols = c->shape[1];
  L.blocks = (size_t)c->params[PF_LNB_P_BLOCKS];
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.dtype = c->dtype;
  L.accum = L.algo == PF_LNB_TORCH ? PF_FP32 : c->accum;
  L.weights = pf_lnb_weights_dtype(c);
  L.red = pf_lnb_red_dtype(c);
  pf_ln_launch *F = &L.fwd;
  F->rows = L.rows;
  F->cols = L.cols;
  F->algo = L.algo == PF_LNB_TORCH ? PF_LN_TORCH : PF_LN_WELFORD;
  F->faults = 0;
  F->dtype = c->dtype;
  F->accum = L.accum;
  F->weights = L.weights;
  /* the saved statistics: PyTorch's in the weights' dtype, a fused kernel's in its accumulation's */
  F->stats = L.algo == PF_LNB_TORCH ? L.weights : L.accum;
  F->eps = c->params[PF_LNB_P_EPS];
  F->zero_centered = (int)c->params[PF_LNB_P_ZERO_CENTERED];
  F->eps_outside = 0;
  return L;
}

/* One block's rows: dx into out (and e), dgamma's and dbeta's sums over the block into sg, sb. */
static void pf_lnb_block(const pf_lnb_launch *L, const pf_tensor *in, size_t b, size_t e_, pf_ln_val *sg,
                         pf_ln_val *sb, pf_ln_val *w, double *out, double *e, unsigned *fe) {
  const size_t n = L->cols;
  pf_ln_val *dx = w, *P = w + n, *Q = w + 2 * n;
  for (size_t j = 0; j < n; j++) sg[j] = sb[j] = pf_lnb_exact(0);
  for (size_t i = b; i < e_; i++) {
    const double *x = in[PF_LNB_IN_X].data + i * n, *dy = in[PF_LNB_IN_DY].data + i * n;
    const double *g = in[PF_LNB_IN_GAMMA].data;
    if (L->algo == PF_LNB_TORCH) {
      pf_ln_val m, a;
      pf_lnb_torch_row(L, x, dy, g, P, Q, dx, &m, &a, fe);
      /* the thread's buffer, in the input's dtype: dgamma += dy (a x + (-a mean)), dbeta += dy */
      const pf_ln_val nb = pf_lnb_mul(PF_FP32, pf_lnb_neg(a), m, fe);
      for (size_t j = 0; j < n; j++) {
        const pf_ln_val t = pf_lnb_fma(a, pf_lnb_exact(x[j]), nb, fe);
        sg[j] = pf_lnb_round(L->red, pf_lnb_fma(pf_lnb_exact(dy[j]), t, sg[j], fe), fe);
        sb[j] = pf_lnb_round(L->red, pf_lnb_add(PF_FP32, sb[j], pf_lnb_exact(dy[j]), fe), fe);
      }
    } else {
      pf_lnb_fused_row(L, x, dy, g, P, dx, fe);
      for (size_t j = 0; j < n; j++) {
        sg[j] = pf_lnb_add(L->red, sg[j], pf_lnb_mul(L->red, pf_lnb_exact(dy[j]), P[j], fe), fe);
        sb[j] = pf_lnb_add(L->red, sb[j], pf_lnb_exact(dy[j]), fe);
      }
    }
    for (size_t j = 0; j < n; j++) {
      out[i * n + j] = pf_round_fe(L->dtype, dx[j].v, fe);
      if (e) e[i * n + j] = dx[j].e;
    }
  }
}

pf_status pf_lnb_compute(const pf_lnb_launch *L, const pf_tensor *in, double *out, double *e, unsigned *fe) {
  const size_t n = L->cols, nb = L->blocks < L->rows ? L->blocks : L->rows;
  pf_ln_val *w = malloc((5 * n + 1) * sizeof(pf_ln_val));
  if (!w) return pf_error(PF_ERR_NOMEM, "layernorm_bwd: cannot allocate working rows of %zu", n);
  pf_ln_val *sg = w + 3 * n, *sb = w + 4 * n;
  /* dgamma's and dbeta's totals, in fp32, kept in the output until their rounding */
  double *dg = out + L->rows * n, *db = dg + n, *eg = e ? e + L->rows * n : NULL, *eb = e ? eg + n : NULL;
  pf_ln_val *tg = malloc((2 * n + 1) * sizeof(pf_ln_val)), *tb = tg ? tg + n : NULL;
  if (!tg) {
    free(w);
    return pf_error(PF_ERR_NOMEM, "layernorm_bwd: cannot allocate working rows of %zu", n);
  }
  for (size_t j = 0; j < n; j++) tg[j] = tb[j] = pf_lnb_exact(0);
  for (size_t t = 0; t < nb; t++) {
    size_t b, e_;
    pf_lnb_block_rows(L->rows, L->blocks, t, &b, &e_);
    pf_lnb_block(L, in, b, e_, sg, sb, w, out, e, fe);
    for (size_t j = 0; j < n; j++) {
      tg[j] = pf_lnb_add(PF_FP32, tg[j], sg[j], fe);
      tb[j] = pf_lnb_add(PF_FP32, tb[j], sb[j], fe);
    }
  }
  for (size_t j = 0; j < n; j++) {
    dg[j] = pf_round_fe(L->weights, tg[j].v, fe);
    db[j] = pf_round_fe(L->weights, tb[j].v, fe);
    if (e) eg[j] = tg[j].e, eb[j] = tb[j].e;
  }
  free(tg);
  free(w);
  return PF_OK;
}

pf_status pf_lnb_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_lnb_launch L = pf_lnb_launch_of(c, pf_lnb_faults_of(c));
  return pf_lnb_compute(&L, in, out, NULL, fe);
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/layernorm_bwd/layernorm_bwd_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_lnb_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_layernorm_bwd_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_layernorm_bwd_cuda", (void **)&fn);
  if (st) return st;
  const pf_lnb_launch L = pf_lnb_launch_of(c, pf_lnb_faults_of(c));
  return fn(&L, in[0].data, in[1].data, in[2].data, out, fe);
}
#define PF_LNB_RUN_CUDA pf_lnb_cuda_case
#else
#define PF_LNB_RUN_CUDA NULL
#endif

/* ---- contracts -------------------------------------------------------------------------
 * Every output's bound is the running error bound its computation carries (layernorm_bwd_math.h),
 * taken without the faults; rel is slack for the bound's own binary64 evaluation. The two
 * functions below serve RMSNorm's backward too (its values and bounds from its own compute). */
static double *pf_norm_bwd_bounds_of(const pf_case *c, const pf_tensor *in, size_t no, pf_norm_bwd_values f,
                                     double **vals) {
  double *v = malloc(2 * (no ? no : 1) * sizeof(double));
  if (!v) return NULL;
  if (f(c, in, v, v + no) != PF_OK) {
    free(v);
    return NULL;
  }
  *vals = v;
  return v + no;
}

void pf_norm_bwd_bound(const pf_case *c, const pf_tensor *in, pf_bound *out, size_t no, pf_norm_bwd_values f) {
  double *v = NULL, *e = pf_norm_bwd_bounds_of(c, in, no, f, &v);
  for (size_t k = 0; k < no; k++) {
    if (!e || !(e[k] < INFINITY)) out[k] = (pf_bound){INFINITY, INFINITY}; /* no memory, or no bound */
    else out[k] = (pf_bound){0x1p-45, e[k] * (1 + 0x1p-20) + 0x1p-1074};
  }
  free(v);
}

/* Domain: finite inputs, and a finite bound on every output inside its dtype: no overflow on the
 * way (the statistics, the row sums, the buffers), rstd not lost (var + eps of the forward's
 * own computation bounded away from 0), each output's enclosure inside its dtype's range. */
int pf_norm_bwd_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len, size_t no, pf_dtype weights,
                          const char *const *outs, pf_norm_bwd_values f) {
  static const char *const names[] = {"x", "dy", "gamma"};
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < in[t].n; k++)
      if (!isfinite(in[t].data[k])) {
        snprintf(why, len, "%s[%zu] is not finite", names[t], k);
        return 0;
      }
  const size_t rows = c->shape[0], cols = c->shape[1];
  double *v = NULL, *e = pf_norm_bwd_bounds_of(c, in, no, f, &v);
  if (!e) {
    snprintf(why, len, "no memory for the bounds");
    return 0;
  }
  int ok = 1;
  for (size_t k = 0; k < no && ok; k++) {
    const int isdx = k < rows * cols;
    const pf_dtype t = isdx ? c->dtype : weights;
    const char *what = isdx ? outs[0] : outs[1 + (k - rows * cols) / cols];
    const size_t at = isdx ? k : (k - rows * cols) % cols;
    if (!(e[k] < INFINITY)) {
      snprintf(why, len, "%s[%zu]: no error bound holds (a sum or a buffer may overflow, or the row's statistic is lost)",
               what, at);
      ok = 0;
    } else if (!(fabs(v[k]) + e[k] < pf_max_finite(t))) {
      snprintf(why, len, "%s[%zu] may leave %s", what, at, pf_dtype_name(t));
      ok = 0;
    }
  }
  free(v);
  return ok;
}

static pf_status pf_lnb_values(const pf_case *c, const pf_tensor *in, double *v, double *e) {
  const pf_lnb_launch L = pf_lnb_launch_of(c, 0);
  unsigned fe = 0;
  return pf_lnb_compute(&L, in, v, e, &fe);
}
static const char *const pf_lnb_outs[] = {"dx", "dgamma", "dbeta"};
void pf_lnb_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  pf_norm_bwd_bound(c, in, out, pf_lnb_output_count(c), pf_lnb_values);
}
int pf_lnb_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  return pf_norm_bwd_in_domain(c, in, why, len, pf_lnb_output_count(c), pf_lnb_weights_dtype(c), pf_lnb_outs,
                               pf_lnb_values);
}

/* saturated: a block holds at least 2^(p-1) tokens and dbeta (or dgamma) came out short of the
 * exact one by more than the imprecise threshold times its terms' magnitude (sum over the tokens of |dy|, or of |dy xhat| with xhat
 * from the exact statistics in binary64): a token reduction that stopped absorbing its terms
 * (PyTorch's fp16/bf16 buffer; a fused kernel's partial sums in the storage dtype). */
static void pf_lnb_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const pf_dtype red = pf_lnb_red_dtype(c);
  const double thr = pf_hazard_threshold(c, l, red);
  /* a sum stops absorbing terms of its own size after 2^(p-1) of them (p: its dtype's
   * precision): a block of fewer tokens is short for other reasons (the statistics' error) */
  const size_t b = (size_t)c->params[PF_LNB_P_BLOCKS] < rows ? (size_t)c->params[PF_LNB_P_BLOCKS] : rows;
  if (!b || (rows + b - 1) / b < ((size_t)1 << (pf_format_of(red).prec - 1))) return;
  const double *x = r->in[PF_LNB_IN_X].data, *dy = r->in[PF_LNB_IN_DY].data;
  double *mag = calloc(2 * (cols ? cols : 1), sizeof(double));
  if (!mag) return;
  for (size_t i = 0; i < rows; i++) {
    double m = 0, v = 0;
    for (size_t j = 0; j < cols; j++) m += x[i * cols + j];
    m /= (double)cols;
    for (size_t j = 0; j < cols; j++) v += (x[i * cols + j] - m) * (x[i * cols + j] - m);
    const double rs = 1 / sqrt(v / (double)cols + c->params[PF_LNB_P_EPS]);
    for (size_t j = 0; j < cols; j++) {
      mag[j] += fabs(dy[i * cols + j] * (x[i * cols + j] - m) * rs);
      mag[cols + j] += fabs(dy[i * cols + j]);
    }
  }
  for (size_t k = 0; k < 2 * cols; k++) {
    const size_t o = pf_lnb_dgamma_at(c) + k;
    if (r->oracle.status[o] != PF_ORACLE_NUMBER || !isfinite(r->out[o]) || !(mag[k] > 0)) continue;
    const double y = r->out[o], E = r->oracle.exact[o];
    const double short_by = fabs(E) - (y * E >= 0 ? fabs(y) : -fabs(y));
    if (pf_hazard_beyond(short_by / mag[k], thr)) {
      pf_run_flag_hazard(r, PF_H_SATURATED, o, short_by / mag[k],
                         "%s[%zu] came out as %.6g where the exact sum over the %zu tokens is %.6g, short by %.3g of "
                         "its terms' magnitude %.6g (threshold %.3g): a token reduction that stopped absorbing its terms",
                         k < cols ? "dgamma" : "dbeta", k % cols, y, rows, E, short_by / mag[k], mag[k], thr);
      break;
    }
  }
  free(mag);
}

/* rows x cols elements: the emulation about 150 ns each (torch, with the running bounds), the
 * oracle 2 us (MPFR, every element's exact numerator; precfuzz-bench) */
static void pf_lnb_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 150e-9 * n;
  *oracle_s = 2e-6 * n;
}

static const pf_fault_setting pf_lnb_fault_settings[] = {
    {"lnb-1p-ignored", NULL, {"zero_centered_gamma=yes", NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the rows' mean (offset) at a spread of 1; where the
 * token reduction stops absorbing as the tokens grow (dy = 1: dbeta is the token count); where the
 * sums overflow */
static const pf_op_sweep pf_lnb_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "16x256", .along = "offset:x", .lo = 1, .hi = 0x1p24, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_lnb_fault_settings,
    .searches = {{"token reduction stops absorbing (saturated)", "16x8", "dim:rows", "saturated", 16, 65536,
                  {"dy:value=1", NULL}},
                 {"cancellation (imprecise)", "4x256", "offset:x", "imprecise", 1, 0x1p24, {NULL}}},
    .explanation =
        "dgamma and dbeta sum over every token of the batch. PyTorch's CPU backward sums each thread's tokens in a "
        "buffer of the input's dtype, even with fp32 weights: in bf16 a sum of dy = 1 stops at 256 (bf16's spacing "
        "there is 2), in fp16 at 2048; a fused kernel whose partial sums are fp32 keeps going to 2^24. dx is "
        "rstd (a - mean(a) - xhat mean(a xhat)): x - mean carries the statistics' error of about u times the "
        "mean-to-spread ratio (the offset at a spread of 1), as in the forward.",
};

int pf_decode_layernorm_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* layernorm_bwd_fuzzer.c */
const pf_op pf_layernorm_bwd_op = {
    .name = "layernorm_bwd",
    .summary = "LayerNorm backward: dx, and dgamma and dbeta summed over the tokens",
    .ndims = 2,
    .dim_names = pf_lnb_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 20},
    .dim_default = {16, 256},
    .elems_max = (size_t)1 << 30,
    .nparams = PF_LNB_NPARAMS,
    .params = pf_lnb_params,
    .ninputs = 3,
    .input_names = pf_lnb_inputs,
    .input_count = pf_lnb_input_count,
    .input_dtype = pf_lnb_input_dtype,
    .output_count = pf_lnb_output_count,
    .oracle = pf_layernorm_bwd_mpfr,
    .stages = pf_lnb_stages,
    .input_dims = pf_lnb_input_dims,
    .hazards = pf_lnb_hazards,
    .cost = pf_lnb_cost,
    .fuzz_decode = pf_decode_layernorm_bwd_fuzzer,
    .sweep = &pf_lnb_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:rows"},
};

#define PF_LNB_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_lnb_faults[] = {"lnb-mean-term-dropped", "lnb-var-term-dropped", "lnb-1p-ignored", NULL};
static const char *const pf_lnb_torch_faults[] = {"lnb-mean-term-dropped", "lnb-var-term-dropped", NULL};
/* PyTorch's LayerNorm has no zero-centred gamma */
static const pf_param_range pf_lnb_torch_params[] = {{"zero_centered_gamma", 0, 0, 1u << 0, 0}, {NULL, 0, 0, 0, 0}};
#define PF_LNB_CONTRACT                                                                                                 \
  "dx, dgamma and dbeta within the running error bound of the variant's own sequence of operations, its recomputed " \
  "statistics included (layernorm_bwd_math.h); domain: finite inputs, every output's bound finite (no overflow, "    \
  "a variance not lost to cancellation) and inside its dtype"

static const pf_kernel pf_lnb_torch = {
    PF_KERNEL_ABI, &pf_layernorm_bwd_op, "torch",
    "PyTorch's LayerNorm backward on the CPU (torch 2.15): fp32 row sums by vector lanes, dgamma and dbeta per "
    "thread in the input's dtype",
    PF_LNB_DTYPES, PF_DT(PF_FP32), pf_lnb_torch_faults, PF_LNB_CONTRACT, pf_lnb_cpu, pf_lnb_bound, pf_lnb_in_domain,
    NULL, NULL, .algo = PF_LNB_TORCH, .params = pf_lnb_torch_params};
static const pf_kernel pf_lnb_fused = {
    PF_KERNEL_ABI, &pf_layernorm_bwd_op, "fused",
    "a fused GPU backward: Welford statistics, dx from the row's sums, dgamma and dbeta in partial sums per block",
    PF_LNB_DTYPES, PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_lnb_faults, PF_LNB_CONTRACT, pf_lnb_cpu, pf_lnb_bound,
    pf_lnb_in_domain, NULL, PF_LNB_RUN_CUDA, .algo = PF_LNB_FUSED};

const pf_kernel *const pf_layernorm_bwd_kernels[] = {&pf_lnb_torch, &pf_lnb_fused, NULL};
