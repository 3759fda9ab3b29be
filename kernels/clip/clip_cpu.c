/* Gradient clipping by global norm over k tensors of n elements: CPU emulation, contract,
 * variant table (Megatron: megatron/core/optimizer/clip_grads.py get_grad_norm_fp32 and
 * clip_grad_by_total_norm_fp32; PyTorch: torch/nn/utils/clip_grad.py clip_grad_norm_).
 *
 *   megatron  sum of squares of each tensor accumulated in A (fp32, or the gradient dtype T),
 *             the tensors' sums added in fp32, norm = fl32(sqrt(total))
 *   torch     clip_grad_norm_ (foreach): each tensor's norm in fp32, stored in T; the norm of
 *             those norms in fp32, stored in T ("norm of norms")
 *   inf       norm = max |g|
 * Then coef = fl32(max_norm / fl32(norm + 1e-6)); if coef < 1 every gradient becomes
 * fl_T(fl32(g coef)); torch: coef = (norm + 1e-6).reciprocal() * max_norm with each op stored
 * in T, clamped to 1, and every gradient multiplied by it (pf_clip_coef, clip_math.h). Outputs: the norm (fp32 for megatron and inf, T for torch), then the k n
 * clipped gradients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/errbound.h"
#include "kernels/clip/clip.h"
#include "core/runner.h"
#include "core/kernel.h"

#include "oracles/clip_mpfr.h"


static const char *const pf_clip_dims[] = {"tensors", "n"};
static const char *const pf_clip_inputs[] = {"g"};
static const pf_param_desc pf_clip_params[] = {
    {"max_norm", PF_PARAM_REAL, 1.0, 0, 0x1p100, NULL, "clip when the global norm exceeds it", 0, "0.5,1,5"},
};

static int pf_clip_variant(const pf_case *c) { return pf_case_algo(c); }
static pf_dtype pf_clip_norm_dtype(const pf_case *c) { return pf_clip_variant(c) == PF_CLIP_TORCH ? c->dtype : PF_FP32; }
static size_t pf_clip_input_count(const pf_case *c, int i) { return c->shape[0] * c->shape[1]; }
static size_t pf_clip_output_count(const pf_case *c) { return 1 + c->shape[0] * c->shape[1]; }
static int pf_clip_stages(const pf_case *c, pf_stage *st) {
  st[0] = (pf_stage){"norm", 0, 1, 0, PF_HELD(pf_clip_norm_dtype(c)), 0, {0}, PF_MEASURE_ELEMENT};
  st[1] = (pf_stage){"grads", 1, c->shape[0] * c->shape[1], 0, 0, 2, {0, 1}, PF_MEASURE_ELEMENT};
  return 2;
}

static int pf_clip_input_dims(const pf_case *c, int i, int *d) {
  d[0] = 0, d[1] = 1; /* g[tensor][element] */
  return 2;
}

/* saturated: the global norm came out short of the exact one beyond the imprecise threshold
 * (of the norm's dtype, or the case's if looser): a sum of squares that stopped absorbing its
 * terms. (inf takes a max, which cannot saturate: its norm is exact.) */
static void pf_clip_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  const double y = r->out[0], E = r->oracle.exact[0];
  if (r->oracle.status[0] == PF_ORACLE_UNDEFINED || !isfinite(y) || !(E > 0)) return;
  const double thr = pf_hazard_threshold(c, l, pf_clip_norm_dtype(c));
  if (pf_hazard_beyond(1 - y / E, thr))
    pf_run_flag_hazard(r, PF_H_SATURATED, 0, 1 - y / E,
                       "the global norm came out as %.6g where the exact norm is %.6g, short by %.3g (threshold %.3g): "
                       "a sum of squares that stopped absorbing its terms",
                       y, E, 1 - y / E, thr);
}

/* per gradient: the emulation about 21 ns, the oracle 14 (measured: 16x65536) */
static void pf_clip_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 21e-9 * n;
  *oracle_s = 14e-9 * n;
}

/* the precision report's sweep: the scan along the gradients' scale, and where the squares of
 * the norm underflow and overflow */
static const pf_op_sweep pf_clip_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x64", .along = "scale", .lo = 0x1p-20, .hi = 0x1p16, .fail = "finding", .cases_div = 1,
    .searches = {{"squares underflow", "1x16", "value", "event:underflow", 0, 1, {NULL}},
                 {"squares overflow", "1x16", "value", "event:overflow", 1, 0, {NULL}}},
    .explanation =
        "The global norm sums g^2: accumulated in fp16, a square below 2^-25 (|g| <= 1448 2^-23 = 1.726e-4) rounds to "
        "0 and the sum overflows once it passes 65504 (the search's 16 equal gradients: |g| >= 64); in fp32 the squares "
        "keep fp32's range. torch stores each tensor's norm in the gradient dtype (the norm of norms): 4 |g| for 16 "
        "equal gradients overflows fp16 from |g| = 16384; inf takes max |g|, exact.",
};

int pf_decode_clip_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* clip_fuzzer.c */
const pf_op pf_clip_op = {
    .name = "clip",
    .summary = "gradient clipping by the global norm of k tensors",
    .ndims = 2,
    .dim_names = pf_clip_dims,
    .dim_max = {4096, (size_t)1 << 22},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 22,
    .nparams = 1,
    .params = pf_clip_params,
    .ninputs = 1,
    .input_names = pf_clip_inputs,
    .input_count = pf_clip_input_count,
    .output_count = pf_clip_output_count,
    .oracle = pf_clip_mpfr,
    .stages = pf_clip_stages,
    .input_dims = pf_clip_input_dims,
    .hazards = pf_clip_hazards,
    .cost = pf_clip_cost,
    .fuzz_decode = pf_decode_clip_fuzzer,
    .sweep = &pf_clip_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:n"},
};

pf_clip_launch pf_clip_launch_of(const pf_case *c) {
  return (pf_clip_launch){c->shape[0], c->shape[1], pf_clip_variant(c), c->dtype, c->accum, c->params[0]};
}

pf_status pf_clip_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_clip_launch L = pf_clip_launch_of(c);
  double *part = malloc((L.tensors ? L.tensors : 1) * sizeof(double));
  if (!part) return pf_error(PF_ERR_NOMEM, "clip: cannot allocate %zu tensor norms", L.tensors);
  for (size_t t = 0; t < L.tensors; t++)
    part[t] = pf_clip_tensor_part(L.variant, L.dtype, L.accum, in[0].data + t * L.n, L.n, fe);
  const double norm = pf_clip_norm_of(L.variant, L.dtype, part, L.tensors, fe);
  free(part);
  const double coef = pf_clip_coef(L.variant, L.dtype, L.max_norm, norm, fe);
  out[0] = norm;
  for (size_t x = 0; x < L.tensors * L.n; x++) out[1 + x] = pf_clip_apply(L.variant, L.dtype, in[0].data[x], coef, fe);
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "kernels/clip/clip_cuda.h"
#include "core/cuda_module.h"
/* the CUDA kernel, in the module (core/cuda_module.h) */
pf_status pf_clip_cuda(const pf_clip_launch *L, const double *g, double *out, unsigned *fe) {
  __typeof__(&pf_clip_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_clip_cuda", (void **)&fn);
  return st ? st : fn(L, g, out, fe);
}
static pf_status pf_clip_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_clip_launch L = pf_clip_launch_of(c);
  return pf_clip_cuda(&L, in[0].data, out, fe);
}
#define PF_CLIP_RUN_CUDA pf_clip_cuda_case
#else
#define PF_CLIP_RUN_CUDA NULL
#endif

/* The same sequence in running-error arithmetic. The clipping factor min(1, coef) is
 * 1-Lipschitz in coef, so its error bound is coef's. */
static void pf_clip_eb(const pf_case *c, const pf_tensor *in, pf_eb *norm_out, pf_eb *factor) {
  const size_t k = c->shape[0], n = c->shape[1];
  const pf_dtype T = c->dtype, A = c->accum, F = PF_FP32;
  const int var = pf_clip_variant(c);
  const double *g = in[0].data;
  pf_eb norm = pf_eb_exact(0);
  if (var == PF_CLIP_INF) {
    for (size_t x = 0; x < k * n; x++)
      if (fabs(g[x]) > norm.v) norm.v = fabs(g[x]); /* exact */
  } else {
    pf_eb total = pf_eb_exact(0);
    for (size_t t = 0; t < k; t++) {
      pf_eb s = pf_eb_exact(0);
      for (size_t i = 0; i < n; i++) {
        const pf_eb x = pf_eb_exact(g[t * n + i]);
        s = pf_eb_add(A, s, pf_eb_mul(A, x, x));
      }
      if (var == PF_CLIP_TORCH) {
        const pf_eb nt = pf_eb_store(T, pf_eb_sqrt(F, s));
        total = pf_eb_add(F, total, pf_eb_mul(F, nt, nt));
      } else {
        total = pf_eb_add(F, total, pf_eb_store(F, s));
      }
    }
    norm = pf_eb_sqrt(F, total); /* torch's store to T is the final rounding, the compare's */
  }
  *norm_out = norm;
  const pf_eb stored = pf_eb_store(pf_clip_norm_dtype(c), norm);
  pf_eb coef;
  if (var == PF_CLIP_TORCH) { /* fl_T(norm + 1e-6), its reciprocal and times max_norm, each stored in T */
    const pf_eb d = pf_eb_store(T, pf_eb_add(F, stored, pf_eb_const(F, 1e-6)));
    const pf_eb r = pf_eb_store(T, pf_eb_div(F, pf_eb_exact(1), d));
    coef = pf_eb_store(T, pf_eb_mul(F, r, pf_eb_const(F, c->params[0])));
  } else {
    coef = pf_eb_div(F, pf_eb_const(F, c->params[0]), pf_eb_add(F, stored, pf_eb_const(F, 1e-6)));
  }
  *factor = (pf_eb){fmin(1.0, coef.v), coef.e};
}

void pf_clip_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t kn = c->shape[0] * c->shape[1];
  pf_eb norm, f;
  pf_clip_eb(c, in, &norm, &f);
  out[0] = pf_eb_bound(norm);
  for (size_t x = 0; x < kn; x++) {
    const pf_eb gx = pf_eb_exact(in[0].data[x]);
    /* unclipped outputs are g itself; clipped ones fl32(g coef), then stored in T */
    out[1 + x] = pf_eb_bound(pf_eb_mul(PF_FP32, gx, f));
  }
}

int pf_clip_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t kn = c->shape[0] * c->shape[1];
  for (size_t x = 0; x < kn; x++)
    if (!isfinite(in[0].data[x])) {
      snprintf(why, len, "gradient %zu is not finite", x);
      return 0;
    }
  pf_eb norm, f;
  pf_clip_eb(c, in, &norm, &f);
  if (!isfinite(norm.e) || !isfinite(f.e)) {
    snprintf(why, len, "the sum of squares (norm %.4g) may overflow %s", norm.v, pf_dtype_name(c->accum));
    return 0;
  }
  if (norm.v + norm.e >= pf_max_finite(pf_clip_norm_dtype(c))) {
    snprintf(why, len, "the norm %.4g leaves %s", norm.v, pf_dtype_name(pf_clip_norm_dtype(c)));
    return 0;
  }
  return 1;
}

#define PF_CLIP_KERNEL(var, algo, summary, accums)                                                                    \
  {PF_KERNEL_ABI, &pf_clip_op, var, summary, PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16), accums,            \
   pf_clip_no_faults, "norm and clipped gradients within the running error bound of their sequence (errbound.h); " \
   "domain: finite gradients, no overflow on the way",                                                            \
   pf_clip_cpu, pf_clip_bound, pf_clip_in_domain, NULL, PF_CLIP_RUN_CUDA, algo, NULL, NULL}
static const char *const pf_clip_no_faults[] = {NULL};
static const pf_kernel pf_clip_tab[] = {
    PF_CLIP_KERNEL("megatron", PF_CLIP_MEGATRON, "per-tensor sums of squares (in fp32 or the gradient dtype), summed in fp32, sqrt",
                   PF_DT(PF_FP32) | PF_ACCUM_STORAGE),
    PF_CLIP_KERNEL("torch", PF_CLIP_TORCH, "PyTorch clip_grad_norm_: per-tensor norms in the gradient dtype, their norm", PF_DT(PF_FP32)),
    PF_CLIP_KERNEL("inf", PF_CLIP_INF, "infinity norm: max |g|", PF_DT(PF_FP32)),
};
const pf_kernel *const pf_clip_kernels[] = {&pf_clip_tab[0], &pf_clip_tab[1], &pf_clip_tab[2], NULL};
