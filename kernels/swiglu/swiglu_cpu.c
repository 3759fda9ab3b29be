/* SwiGLU forward: CPU emulation of every variant, their contracts and the variant table.
 *
 *   y = silu(a) b = a b / (1 + e^(-a))   (swiglu_spec.h).
 *
 * Variants:
 *   torch  F.silu(a) * b on PyTorch's CPU (torch 2.15; Llama's MLP as HF writes it): ATen's
 *          silu_kernel in fp32 (x / (1 + exp(-x)), SLEEF's expf over the vector body, the C
 *          library's on the tensor's scalar tail) rounded to the storage dtype, then the product
 *          in the storage dtype
 *   fused  a fused SwiGLU (Megatron's bias_swiglu, Transformer Engine's swiglu): silu and the
 *          product in fp32, one rounding to the storage dtype */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/swiglu/swiglu_math.h"

#include "oracles/swiglu_mpfr.h"

static const char *const pf_swiglu_dims[] = {"rows", "cols"};
static const char *const pf_swiglu_inputs[] = {"a", "b"};

static size_t pf_swiglu_count(const pf_case *c) { return c->shape[0] * c->shape[1]; }
static size_t pf_swiglu_input_count(const pf_case *c, int i) {
  (void)i;
  return pf_swiglu_count(c);
}
static int pf_swiglu_input_dims(const pf_case *c, int i, int *d) {
  (void)c, (void)i;
  d[0] = 0, d[1] = 1;
  return 2;
}

static int pf_swiglu_stages(const pf_case *c, pf_stage *st) {
  st[0] = (pf_stage){"y", 0, pf_swiglu_count(c), 0, 0, 2, {0, 1}, PF_MEASURE_ELEMENT};
  return 1;
}

static int pf_swiglu_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "swiglu-halves-swapped") == 0 ? PF_SWIGLU_F_HALVES_SWAPPED : 0) |
         (strcmp(c->fault, "swiglu-silu-in-storage") == 0 ? PF_SWIGLU_F_SILU_IN_STORAGE : 0);
}

pf_swiglu_launch pf_swiglu_launch_of(const pf_case *c, int faults) {
  pf_swiglu_launch L;
  L.n = pf_swiglu_count(c);
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.dtype = c->dtype;
  return L;
}

/* the first element of ATen's scalar tail for silu over a (two vectors a step, gelu_math.h's
 * lanes) */
static size_t pf_swiglu_tail(const pf_swiglu_launch *L) {
  const size_t step = 2 * (L->dtype == PF_FP32 ? PF_GELU_TORCH_LANES : 2 * PF_GELU_TORCH_LANES);
  return L->n - L->n % step;
}

pf_status pf_swiglu_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_swiglu_launch L = pf_swiglu_launch_of(c, pf_swiglu_faults_of(c));
  const size_t tail = pf_swiglu_tail(&L);
  for (size_t q = 0; q < L.n; q++) {
    const double a = in[0].data[q], b = in[1].data[q];
    const double y = pf_swiglu_fp32(&L, (float)a, (float)b, q < tail);
    if (isinf(y) && isfinite(a) && isfinite(b)) *fe |= PF_FE_OVERFLOW;
    out[q] = pf_round_fe(L.dtype, y, fe);
  }
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/swiglu/swiglu_cuda.h"
static pf_status pf_swiglu_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_swiglu_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_swiglu_cuda", (void **)&fn);
  if (st) return st;
  const pf_swiglu_launch L = pf_swiglu_launch_of(c, pf_swiglu_faults_of(c));
  return fn(&L, in[0].data, in[1].data, out, fe);
}
#define PF_SWIGLU_RUN_CUDA pf_swiglu_cuda_case
#else
#define PF_SWIGLU_RUN_CUDA NULL
#endif

/* ---- contracts ---------------------------------------------------------------------------
 * A running bound along the fp32 evaluation, u = 2^-24 per operation, with exp within U ulps
 * (U = 1: SLEEF's expf_u10, the C library's; U = 2: CUDA's expf):
 *   E = exp(-a):      |E - e^(-a)| <= U 2^-23 E
 *   D = fl(1 + E):    |D - (1 + e^(-a))| <= U 2^-23 E + u D
 *   s = fl(a / D):    |s - silu(a)| <= |a| eD / (D (D - eD)) + u |s|
 *   torch: s rounded to the storage dtype (half an ulp of it) before s b, whose fp32 product is
 *   exact for bf16 and fp16 and the final rounding for fp32; fused: fl32(s b) before a bf16 or
 *   fp16 rounding is counted. Where e^(-a) overflows fp32 (a < -88.7) the kernel's s is 0 and
 *   the bound is silu(a) itself, a tiny number. */
#define PF_SWIGLU_U 0x1p-24
static double pf_swiglu_rerr(pf_dtype t, double v) {
  const pf_format f = pf_format_of(t);
  return ldexp(1.0, -f.prec) * fabs(v) * (1 + 0x1p-20) + ldexp(1.0, f.emin - f.prec);
}

/* the bound on y (before the final rounding) for a, b */
static double pf_swiglu_err(const pf_swiglu_launch *L, double a, double b) {
  const int U = L->algo == PF_SWIGLU_FUSED ? 2 : 1;
  const double E = exp(-a);
  double es, s;
  if (!(E < 0x1.fffffep127)) { /* e^(-a) beyond fp32: s is 0, silu(a) = a e^a / (1 + e^a) */
    s = 0;
    es = fabs(a) * exp(a) * (1 + 0x1p-20) + 0x1p-149;
  } else {
    const double D = (float)(1.0 + E), eD = U * 0x1p-23 * E + pf_swiglu_rerr(PF_FP32, D);
    s = (float)(a / D);
    es = fabs(a) * eD / (D * (D - eD)) + pf_swiglu_rerr(PF_FP32, s);
  }
  if (L->algo == PF_SWIGLU_TORCH && L->dtype != PF_FP32) es += pf_swiglu_rerr(L->dtype, fabs(s) + es);
  double e = fabs(b) * es;
  if (L->algo == PF_SWIGLU_FUSED && L->dtype != PF_FP32) e += pf_swiglu_rerr(PF_FP32, (fabs(s) + es) * fabs(b));
  return e + 0x1p-149;
}

void pf_swiglu_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const pf_swiglu_launch L = pf_swiglu_launch_of(c, 0);
  for (size_t q = 0; q < L.n; q++) {
    const double a = in[0].data[q], b = in[1].data[q];
    const double e = isfinite(a) && isfinite(b) ? pf_swiglu_err(&L, a, b) : INFINITY;
    out[q] = e < INFINITY ? (pf_bound){0x1p-45, e * (1 + 0x1p-20)} : (pf_bound){INFINITY, INFINITY};
  }
}

/* Domain: finite inputs, silu(a) b inside the storage dtype with room for its error. */
int pf_swiglu_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const pf_swiglu_launch L = pf_swiglu_launch_of(c, 0);
  for (size_t q = 0; q < L.n; q++) {
    const double a = in[0].data[q], b = in[1].data[q];
    if (!isfinite(a) || !isfinite(b)) {
      snprintf(why, len, "a or b at %zu is not finite", q);
      return 0;
    }
    const double s = a > 0 ? a / (1 + exp(-a)) : a * exp(a) / (1 + exp(a));
    if (!(fabs(s * b) + pf_swiglu_err(&L, a, b) < pf_max_finite(L.dtype))) {
      snprintf(why, len, "element %zu: silu(%g) %g = %g may overflow %s", q, a, b, s * b, pf_dtype_name(L.dtype));
      return 0;
    }
  }
  return 1;
}

/* n elements: the emulation about 12 ns each, the oracle's fast path 60 (a double-word exp) */
static void pf_swiglu_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)pf_swiglu_count(c);
  *emulation_s = 12e-9 * n;
  *oracle_s = 60e-9 * n;
}

static const pf_fault_setting pf_swiglu_fault_settings[] = {
    {"swiglu-halves-swapped", NULL, {NULL}},
    {"swiglu-silu-in-storage", "bf16", {NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the inputs' scale, and where the product of the
 * two projections overflows the storage dtype */
static const pf_op_sweep pf_swiglu_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x64", .along = "scale", .lo = 0.125, .hi = 256, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_swiglu_fault_settings,
    .searches = {{"y overflows (gate = up)", "1x64", "value", "event:overflow", 1, 0, {NULL}},
                 {NULL, NULL, NULL, NULL, 0, 0, {NULL}}},
    .explanation =
        "SwiGLU multiplies silu of the gate projection by the up projection: for a large positive gate silu(a) is "
        "about a, so y is about a b, the product of two activations, and grows with the square of their scale: the "
        "outliers that break low-precision formats (FP8 training diverged on them). In fp16 storage y overflows once "
        "a b passes 65504 (a = b = 256 gives 65536); bf16 and fp32 keep fp32's range. Far in the negative tail silu "
        "is a e^a, tiny, and computed as a / (1 + e^-a) it keeps its relative precision until e^-a overflows fp32 "
        "(a < -88.7), where it becomes 0.",
};

int pf_decode_swiglu_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* swiglu_fuzzer.c */
const pf_op pf_swiglu_op = {
    .name = "swiglu",
    .summary = "SwiGLU forward: silu(a) b, elementwise",
    .ndims = 2,
    .dim_names = pf_swiglu_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 24},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 28,
    .nparams = 0,
    .params = NULL,
    .ninputs = 2,
    .input_names = pf_swiglu_inputs,
    .input_count = pf_swiglu_input_count,
    .output_count = pf_swiglu_count,
    .oracle = pf_swiglu_mpfr,
    .stages = pf_swiglu_stages,
    .input_dims = pf_swiglu_input_dims,
    .cost = pf_swiglu_cost,
    .fuzz_decode = pf_decode_swiglu_fuzzer,
    .sweep = &pf_swiglu_sweep,
};

#define PF_SWIGLU_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_swiglu_torch_faults[] = {"swiglu-halves-swapped", NULL};
static const char *const pf_swiglu_fused_faults[] = {"swiglu-halves-swapped", "swiglu-silu-in-storage", NULL};
#define PF_SWIGLU_CONTRACT                                                                                       \
  "each y within the running bound of the variant's fp32 evaluation, exp within 1 ulp (torch: SLEEF's, the C " \
  "library's) or 2 (fused: CUDA's), silu rounded to the storage dtype (torch) (swiglu_cpu.c); domain: finite "  \
  "inputs, y inside the storage dtype"

static const pf_kernel pf_swiglu_torch = {
    PF_KERNEL_ABI, &pf_swiglu_op, "torch",
    "F.silu(a) * b on PyTorch's CPU (torch 2.15): ATen's fp32 silu with SLEEF's expf, rounded, then the product",
    PF_SWIGLU_DTYPES, PF_DT(PF_FP32), pf_swiglu_torch_faults, PF_SWIGLU_CONTRACT, pf_swiglu_cpu, pf_swiglu_bound,
    pf_swiglu_in_domain, NULL, NULL, .algo = PF_SWIGLU_TORCH};
static const pf_kernel pf_swiglu_fused = {
    PF_KERNEL_ABI, &pf_swiglu_op, "fused",
    "a fused SwiGLU (Megatron's, Transformer Engine's): silu(a) b in fp32, one rounding to the storage dtype",
    PF_SWIGLU_DTYPES, PF_DT(PF_FP32), pf_swiglu_fused_faults, PF_SWIGLU_CONTRACT, pf_swiglu_cpu, pf_swiglu_bound,
    pf_swiglu_in_domain, NULL, PF_SWIGLU_RUN_CUDA, .algo = PF_SWIGLU_FUSED};

const pf_kernel *const pf_swiglu_kernels[] = {&pf_swiglu_torch, &pf_swiglu_fused, NULL};
