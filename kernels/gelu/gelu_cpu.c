/* GELU forward: CPU emulation of every variant, their contracts and the variant table.
 *
 *   y = (x / 2) (1 + erf(x / sqrt 2)), or the tanh form (gelu_spec.h has the definition).
 *
 * Variants:
 *   torch  ATen's own CPU kernel (GeluKernelImpl, aten/src/ATen/native/cpu/Activation.cpp, torch
 *          2.15), in fp32 for every dtype: the erf form by Abramowitz and Stegun 7.1.26 with
 *          SLEEF's expf over the vectorized body, glibc's erff on the tensor's scalar tail; the
 *          tanh form by tanh. F.gelu runs it for fp16 and, with oneDNN off
 *          (torch.backends.mkldnn.flags(enabled=False)), for fp32 and bf16 (oneDNN's own gelu_erf
 *          otherwise: judged by this contract, not emulated)
 *   fused  the same formulas with erff and tanhf of fp32 (PyTorch's CUDA kernel, fused GPU
 *          activations): one rounding to the storage dtype at the end */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/gelu/gelu_math.h"

#include "oracles/gelu_mpfr.h"

static const char *const pf_gelu_dims[] = {"rows", "cols"};
static const char *const pf_gelu_inputs[] = {"x"};
static const char *const pf_gelu_forms[] = {"none", "tanh", NULL};

static const pf_param_desc pf_gelu_params[] = {
    {"approximate", PF_PARAM_CHOICE, PF_GELU_ERF, 0, 1, pf_gelu_forms,
     "F.gelu's approximate: none (the erf form, x Phi(x)) or tanh (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))",
     0, "none,none,tanh"},
};

static size_t pf_gelu_count(const pf_case *c) { return c->shape[0] * c->shape[1]; }
static size_t pf_gelu_input_count(const pf_case *c, int i) {
  (void)i;
  return pf_gelu_count(c);
}
static int pf_gelu_input_dims(const pf_case *c, int i, int *d) {
  (void)c, (void)i;
  d[0] = 0, d[1] = 1;
  return 2;
}

/* y element by element: the tail of the erf at large negative x is where precision goes */
static int pf_gelu_stages(const pf_case *c, pf_stage *st) {
  st[0] = (pf_stage){"y", 0, pf_gelu_count(c), 0, 0, 2, {0, 1}, PF_MEASURE_ELEMENT};
  return 1;
}

static int pf_gelu_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "gelu-tanh-for-erf") == 0 ? PF_GELU_F_TANH_FOR_ERF : 0) |
         (strcmp(c->fault, "gelu-erf-in-storage") == 0 ? PF_GELU_F_ERF_IN_STORAGE : 0);
}

pf_gelu_launch pf_gelu_launch_of(const pf_case *c, int faults) {
  pf_gelu_launch L;
  L.n = pf_gelu_count(c);
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.approximate = (int)c->params[PF_GELU_P_APPROXIMATE];
  L.dtype = c->dtype;
  return L;
}

/* the first element of ATen's scalar tail: two vectors a step (the storage dtype's lanes) */
static size_t pf_gelu_tail(const pf_gelu_launch *L) {
  const size_t step = 2 * (L->dtype == PF_FP32 ? PF_GELU_TORCH_LANES : 2 * PF_GELU_TORCH_LANES);
  return L->n - L->n % step;
}

pf_status pf_gelu_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_gelu_launch L = pf_gelu_launch_of(c, pf_gelu_faults_of(c));
  const size_t tail = pf_gelu_tail(&L);
  for (size_t q = 0; q < L.n; q++) {
    const double y = pf_gelu_fp32(&L, (float)in[0].data[q], q < tail);
    out[q] = pf_round_fe(L.dtype, y, fe);
    if (isinf(y) && isfinite(in[0].data[q])) *fe |= PF_FE_OVERFLOW;
  }
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/gelu/gelu_cuda.h"
static pf_status pf_gelu_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_gelu_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_gelu_cuda", (void **)&fn);
  if (st) return st;
  const pf_gelu_launch L = pf_gelu_launch_of(c, pf_gelu_faults_of(c));
  return fn(&L, in[0].data, out, fe);
}
#define PF_GELU_RUN_CUDA pf_gelu_cuda_case
#else
#define PF_GELU_RUN_CUDA NULL
#endif

/* ---- contracts ---------------------------------------------------------------------------
 * A running error bound along the variant's fp32 evaluation (u = 2^-24 per operation, each
 * operand's error carried), with the erf or tanh the kernel calls within
 *   fused: 2 ulps (CUDA's erff and tanhf); torch, tanh: 1 ulp (SLEEF's tanhf and glibc's);
 *   torch, erf: Abramowitz and Stegun's 1.5e-7 (their bound for 7.1.26's decimal coefficients),
 *   plus what the coefficients' rounding to fp32 changes at this x (both evaluated in binary64),
 *   plus the fp32 evaluation's own running bound, plus 1 ulp (the scalar tail's erff);
 * then erf or tanh moved by its argument's error (Lipschitz 2/sqrt(pi), 1). The final rounding
 * to the storage dtype is the comparison's; an fp32 product before a bf16 or fp16 rounding is
 * not, and is counted. */
#define PF_GELU_U 0x1p-24
static double pf_gelu_rerr(double v) { return PF_GELU_U * fabs(v) * (1 + 0x1p-20) + 0x1p-150; }

/* A&S 7.1.26 at a = |v| with the coefficients c (p, p1..p5), in binary64 */
static double pf_gelu_as(const double *c, double a) {
  const double t = 1 / (1 + c[0] * a);
  return 1 - ((((c[5] * t + c[4]) * t + c[3]) * t + c[2]) * t + c[1]) * t * exp(-a * a);
}

/* the bound on |erf_used - erf(v)| of ATen's vectorized erf at v (an fp32 value) */
static double pf_gelu_aten_erf_err(float v) {
  static const double dec[6] = {0.3275911, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
  const double f32[6] = {0.3275911f, 0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f, 1.061405429f};
  const double a = fabs((double)v);
  /* the fp32 evaluation, value and running bound side by side */
  const double t0 = fma(f32[0], a, 1.0), t0f = (float)t0, et0 = pf_gelu_rerr(t0f);
  const double t = (float)(1.0 / t0f), et = et0 / (t0f * (t0f - et0)) + pf_gelu_rerr(t);
  double r = f32[5], er = 0;
  for (int k = 4; k >= 1; k--) {
    const double nr = (float)fma(r, t, f32[k]);
    er = er * (t + et) + fabs(r) * et + pf_gelu_rerr(nr);
    r = nr;
  }
  const double arg = (float)(a * a), earg = pf_gelu_rerr(arg);
  const double e = pf_sleef_expf((float)-arg), ee = e * (earg * 1.01 + 0x1p-23) + 0x1p-149;
  const double et_ = (float)(e * t), eet = e * et + t * ee + et * ee + pf_gelu_rerr(et_);
  const double w = (float)fma(-et_, r, 1.0);
  const double ew = fabs(et_) * er + fabs(r) * eet + eet * er + pf_gelu_rerr(w);
  const double coef = fabs(pf_gelu_as(dec, a) - pf_gelu_as(f32, a)) + 0x1p-48;
  return 1.5e-7 + coef + ew + 0x1p-23 * fabs(w);
}

/* the bound on y (before the storage rounding) for x, and whether it is finite; e: the
 * intermediate values' worst magnitude, for the domain */
static double pf_gelu_err(const pf_gelu_launch *L, double x) {
  const float xf = (float)x;
  const int U = L->algo == PF_GELU_FUSED ? 2 : 1;
  double es, s;
  if (L->approximate == PF_GELU_TANH) {
    const double beta = 0.79788456080286535588, kappa = PF_GELU_KAPPA;
    const float b32 = (float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5), k32 = (float)kappa;
    const float x2 = xf * xf, cube = x2 * xf, kc = k32 * cube, sx = xf + kc, in = b32 * sx;
    if (!isfinite(in)) return INFINITY;
    const double ec = pf_gelu_rerr(x2) * fabs(x) + pf_gelu_rerr(cube);
    const double ekc = fabs(k32) * ec + fabs(cube) * fabs(k32 - kappa) + pf_gelu_rerr(kc);
    const double esx = ekc + pf_gelu_rerr(sx);
    const double ein = fabs(b32) * esx + fabs(sx) * fabs(b32 - beta) + pf_gelu_rerr(in);
    const float th = pf_gelu_tanh32(in);
    s = 1.0f + th;
    es = ein + U * 0x1p-23 * fabs(th) + 0x1p-149 + pf_gelu_rerr(s);
  } else {
    const float v = xf * (float)0.70710678118654752440;
    const double ev = fabs(x) * fabs((double)(float)0.70710678118654752440 - 0.70710678118654752440) + pf_gelu_rerr(v);
    double ee;
    float e;
    if (L->algo == PF_GELU_TORCH) e = pf_aten_erf(v), ee = pf_gelu_aten_erf_err(v);
    else e = pf_gelu_erf32(v), ee = U * 0x1p-23 * fabs(e) + 0x1p-149;
    s = 1.0f + e;
    es = ee + 1.1283791670955126 * ev * (1 + 0x1p-20) + pf_gelu_rerr(s);
  }
  const double m = 0.5 * x, y = (float)(m * s);
  return fabs(m) * es + (L->dtype != PF_FP32 ? pf_gelu_rerr(y) : 0) + 0x1p-149;
}

void pf_gelu_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const pf_gelu_launch L = pf_gelu_launch_of(c, 0);
  for (size_t q = 0; q < L.n; q++) {
    const double e = isfinite(in[0].data[q]) ? pf_gelu_err(&L, in[0].data[q]) : INFINITY;
    out[q] = e < INFINITY ? (pf_bound){0x1p-45, e * (1 + 0x1p-20)} : (pf_bound){INFINITY, INFINITY};
  }
}

/* Domain: finite x, and in the tanh form x^3 inside fp32 (|x| below about 7e12). */
int pf_gelu_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const pf_gelu_launch L = pf_gelu_launch_of(c, 0);
  for (size_t q = 0; q < L.n; q++) {
    const double x = in[0].data[q];
    if (!isfinite(x)) {
      snprintf(why, len, "x[%zu] is not finite", q);
      return 0;
    }
    if (!(pf_gelu_err(&L, x) < INFINITY)) {
      snprintf(why, len, "x[%zu] = %g: the tanh form's x^3 leaves fp32", q, x);
      return 0;
    }
  }
  return 1;
}

/* n elements: the emulation about 15 ns each, the MPFR oracle 4 us (erf or tanh at 64 bits) */
static void pf_gelu_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)pf_gelu_count(c);
  *emulation_s = 15e-9 * n;
  *oracle_s = 4e-6 * n;
}

static const pf_fault_setting pf_gelu_fault_settings[] = {
    {"gelu-tanh-for-erf", "fp32", {"approximate=none", NULL}},
    {"gelu-erf-in-storage", "bf16", {"approximate=none", NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the scale of normal x (the forms part around |x| ~ 2),
 * and where the negative tail's precision goes */
static const pf_op_sweep pf_gelu_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x64", .along = "scale:x", .lo = 0.125, .hi = 16, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_gelu_fault_settings,
    .searches = {{"y imprecise below", "1x64", "value:x", "imprecise", -30, -0.5, {NULL}},
                 {NULL, NULL, NULL, NULL, 0, 0, {NULL}}},
    .explanation =
        "GELU is x Phi(x): for negative x the exact value is a tail of the normal distribution, tiny, and an erf "
        "computed as 1 - something close to 1 cancels. ATen's CPU kernel approximates erf by Abramowitz and Stegun "
        "7.1.26, within 1.5e-7 absolutely: beside an erf tail that small the result loses its relative precision "
        "(the hazard imprecise) from a few units below 0 in fp32. erff and tanhf of fp32 lose it where 1 + erf itself "
        "cancels in fp32 arithmetic, further out.",
};

int pf_decode_gelu_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* gelu_fuzzer.c */
const pf_op pf_gelu_op = {
    .name = "gelu",
    .summary = "GELU forward, erf or tanh form, elementwise",
    .ndims = 2,
    .dim_names = pf_gelu_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 24},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 28,
    .nparams = PF_GELU_NPARAMS,
    .params = pf_gelu_params,
    .ninputs = 1,
    .input_names = pf_gelu_inputs,
    .input_count = pf_gelu_input_count,
    .output_count = pf_gelu_count,
    .oracle = pf_gelu_mpfr,
    .stages = pf_gelu_stages,
    .input_dims = pf_gelu_input_dims,
    .cost = pf_gelu_cost,
    .fuzz_decode = pf_decode_gelu_fuzzer,
    .sweep = &pf_gelu_sweep,
    .hazard_axis = {[PF_H_IMPRECISE] = "value:x"},
};

#define PF_GELU_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_gelu_faults[] = {"gelu-tanh-for-erf", "gelu-erf-in-storage", NULL};
#define PF_GELU_CONTRACT                                                                                        \
  "each y within the running bound of the variant's fp32 evaluation, erf within Abramowitz and Stegun's 1.5e-7 " \
  "plus its fp32 coefficients' change and 1 ulp (torch) or 2 ulps (fused), tanh within 1 ulp (torch) or 2 "     \
  "(fused) (gelu_cpu.c); domain: finite x, x^3 inside fp32 in the tanh form"

static const pf_kernel pf_gelu_torch = {
    PF_KERNEL_ABI, &pf_gelu_op, "torch",
    "ATen's CPU GELU (torch 2.15): fp32, Abramowitz-Stegun erf with SLEEF's expf (vector body), erff on the tail",
    PF_GELU_DTYPES, PF_DT(PF_FP32), pf_gelu_faults, PF_GELU_CONTRACT, pf_gelu_cpu, pf_gelu_bound, pf_gelu_in_domain,
    NULL, NULL, .algo = PF_GELU_TORCH};
static const pf_kernel pf_gelu_fused = {
    PF_KERNEL_ABI, &pf_gelu_op, "fused",
    "erff or tanhf of fp32 (PyTorch's CUDA GELU, fused GPU activations), one rounding to the storage dtype",
    PF_GELU_DTYPES, PF_DT(PF_FP32), pf_gelu_faults, PF_GELU_CONTRACT, pf_gelu_cpu, pf_gelu_bound, pf_gelu_in_domain,
    NULL, PF_GELU_RUN_CUDA, .algo = PF_GELU_FUSED};

const pf_kernel *const pf_gelu_kernels[] = {&pf_gelu_torch, &pf_gelu_fused, NULL};
