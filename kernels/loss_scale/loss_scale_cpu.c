/* Dynamic loss scaling over T steps (one gradient tensor of n elements per step): CPU
 * emulation, contract and variant table.
 *
 * Each step: the backward pass holds the gradient of the scaled loss in the gradient dtype,
 * h = fl_T(S g) (g the true gradient); an inf or NaN anywhere is an overflow: the step is
 * skipped and the scaler reacts; otherwise the optimizer receives fl32(h * fl32(1/S)).
 * Variants: deepspeed (DynamicLossScaler, with its minimum-scale error), deepspeed-0.19 (the
 * same in DeepSpeed 0.19.8 as its ZeRO stages drive it), deepspeed-0.19-fp16 (0.19.8's
 * FP16_Optimizer without ZeRO), megatron (DynamicGradScaler), pytorch (GradScaler), static.
 * Fault loss-scale-no-skip: an overflowed step is applied.
 * Outputs per step, in data-flow order: the applied gradient (fp32; 0 when skipped), the
 * step's status (0 applied, 1 skipped, 2 stopped) and the scale after the step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runner.h"
#include "core/kernel.h"
#include "kernels/loss_scale/loss_scale.h"

#include "oracles/loss_scale_ref.h"

enum { P_SCALE0 = 0, P_MINSCALE, P_WINDOW, P_HYST, P_DECAY, P_SPIKE_STEP, P_SPIKE_MAG, P_NONFINITE };

static const char *const pf_ls_dims[] = {"steps", "n"};
static const char *const pf_ls_inputs[] = {"g"};
static const pf_param_desc pf_ls_params[] = {
    {"scale0", PF_PARAM_REAL, 0, 0, 0x1p64, NULL, "initial scale; 0: the variant's (2^32 deepspeed and megatron, 2^16 pytorch, static, deepspeed-0.19 and deepspeed-0.19-fp16)", PF_HELD(PF_FP32), "0,0x1p8,0x1p16,0x1p24"},
    {"min_scale", PF_PARAM_REAL, 0, 0, 0x1p64, NULL, "smallest scale; 0: the variant's (1; pytorch has none)", PF_HELD(PF_FP32), NULL},
    {"window", PF_PARAM_INT, 0, 0, 1e9, NULL, "steps without overflow before the scale doubles; 0: the variant's (1000; pytorch 2000)", 0, "0,2,4"},
    {"hysteresis", PF_PARAM_INT, 0, 0, 1e6, NULL, "overflows tolerated before the scale halves; 0: the variant's (2; pytorch 1); deepspeed-0.19-fp16 ignores it, as DeepSpeed's FP16_Optimizer does", 0, "0,1,2"},
    {"decay", PF_PARAM_REAL, 1, 0, 0x1p10, NULL, "the gradients of step s (from 0) are multiplied by decay^s", 0, NULL},
    {"spike_step", PF_PARAM_INT, 0, 0, 1e9, NULL, "a step (from 1) whose gradients are multiplied by spike_mag; 0: none", 0, NULL},
    {"spike_mag", PF_PARAM_REAL, 1, 0, 0x1p100, NULL, "the spike's factor", 0, NULL},
    {"nonfinite_from", PF_PARAM_INT, 0, 0, 1e9, NULL, "from this step (from 1) on the true gradients are inf; 0: never", 0, NULL},
};

static int pf_ls_variant(const pf_case *c) { return pf_case_algo(c); }

/* The scaler's starting state: the case's constants, or the variant's defaults. */
static pf_ls_state pf_ls_init(const pf_case *c) {
  return pf_ls_start(pf_ls_variant(c), c->params[P_SCALE0], c->params[P_MINSCALE], (long)c->params[P_WINDOW],
                     (long)c->params[P_HYST]);
}

static size_t pf_ls_input_count(const pf_case *c, int i) { return c->shape[0] * c->shape[1]; }
static pf_dtype pf_ls_input_dtype(const pf_case *c, int i) { return PF_FP32; }
static size_t pf_ls_output_count(const pf_case *c) { return c->shape[0] * (c->shape[1] + 2); }
static int pf_ls_stages(const pf_case *c, pf_stage *st) {
  const size_t T = c->shape[0], n = c->shape[1];
  /* the unscaled gradients, the step's status code and the scale after it, all fp32 */
  st[0] = (pf_stage){"grads", 0, T * n, 0, PF_HELD(PF_FP32), 2, {0, 1}, PF_MEASURE_ELEMENT};
  st[1] = (pf_stage){"status", T * n, T, 0, PF_HELD(PF_FP32), 1, {0}, PF_MEASURE_NONE};
  st[2] = (pf_stage){"scale", T * n + T, T, 0, PF_HELD(PF_FP32), 1, {0}, PF_MEASURE_ELEMENT};
  return 3;
}

/* The gradient stream: decay, a spike, non-finite gradients from a step on. */
static void pf_ls_prepare(const pf_case *c, pf_tensor *in) {
  const size_t T = c->shape[0], n = c->shape[1];
  const double decay = c->params[P_DECAY], mag = c->params[P_SPIKE_MAG];
  const long spike = (long)c->params[P_SPIKE_STEP], bad = (long)c->params[P_NONFINITE];
  double f = 1;
  for (size_t s = 0; s < T; s++, f *= decay)
    for (size_t i = 0; i < n; i++) {
      double g = in[0].data[s * n + i] * f;
      if ((long)s + 1 == spike) g *= mag;
      if (bad > 0 && (long)s + 1 >= bad) g = INFINITY;
      in[0].data[s * n + i] = pf_round(PF_FP32, g);
    }
}

/* A status or scale that differs from the reference scaler, or a stopped run, is divergent. */
static pf_verdict pf_ls_refine(const pf_case *c, const pf_tensor *in, size_t i, double y, pf_verdict v, double rounded,
                               pf_bound b) {
  const size_t T = c->shape[0], n = c->shape[1];
  if (i < T * n) return v;
  if (i < T * n + T && y == PF_LS_STOPPED) return PF_V_DIVERGENT;
  return v == PF_V_OK || v == PF_V_RANGE ? v : PF_V_DIVERGENT;
}

static int pf_ls_input_dims(const pf_case *c, int i, int *d) {
  d[0] = 0, d[1] = 1; /* g[step][element] */
  return 2;
}

/* imprecise: DeepSpeed 0.19's order (pf_ls_unscales_after_update) halves the gradients of a
 * step where the scale grows: the contract of those variants (their oracle unscales as they
 * do), but not the gradient the run should get. Recorded at the first such step.
 * stagnant: a loss scale that can never come back. An fp32 scale doubled past 2^127 is inf;
 * backing off halves inf to inf, 1/S is 0 and every later step overflows and is skipped
 * (Megatron's DynamicGradScaler). Recorded at the first step whose scale is inf while some
 * true gradient after it is finite. */
static void pf_ls_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  (void)l;
  const size_t T = c->shape[0], n = c->shape[1];
  const double *scale = r->out + T * n + T, *status = r->out + T * n;
  if (pf_ls_unscales_after_update(pf_ls_variant(c))) {
    size_t grown = 0, first = 0;
    double before = 0, after = 0, prev = pf_ls_init(c).scale;
    for (size_t t = 0; t < T; prev = scale[t], t++)
      if (status[t] == PF_LS_APPLIED && scale[t] > prev && !grown++) first = t, before = prev, after = scale[t];
    if (grown)
      pf_run_flag_hazard(r, PF_H_IMPRECISE, first * n, 1 - before / after,
                         "step %zu: the scale grew from %g to %g and DeepSpeed 0.19.8 unscales by the new one: the "
                         "optimizer receives %g of the true gradient (%zu such steps)",
                         first + 1, before, after, before / after, grown);
  }
  for (size_t t = 0; t + 1 < T; t++) {
    if (isfinite(scale[t])) continue;
    size_t skipped = 0;
    for (size_t s = t + 1; s < T; s++) skipped += status[s] != PF_LS_APPLIED;
    int finite_later = 0;
    for (size_t x = (t + 1) * n; x < T * n && !finite_later; x++) finite_later = isfinite(r->in[0].data[x]);
    if (finite_later)
      pf_run_flag_hazard(r, PF_H_STAGNANT, T * n + T + t, (double)skipped,
                         "the loss scale is %g after step %zu and can never come back (inf halves to inf): %zu of "
                         "the %zu later steps skipped",
                         scale[t], t + 1, skipped, T - t - 1);
    return;
  }
}

/* per step and gradient: the emulation about 7.5 ns, the oracle 185 (measured: 1000x1000) */
static void pf_ls_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 7.5e-9 * n;
  *oracle_s = 185e-9 * n;
}

/* the precision report's sweep: the scan along the gradients' scale, and where the initial
 * scale skips a step and where a scaled gradient is flushed to zero */
static const pf_op_sweep pf_loss_scale_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "8x16", .along = "scale", .lo = 0x1p-30, .hi = 0x1p16, .fail = "finding", .cases_div = 1,
    .searches = {{"skip at the initial scale", "1x16", "value", "event:overflow", 0, 0, {NULL}},
                 {"scaled gradient flushed to zero", "1x16", "value", "event:underflow", 0, 1, {NULL}}},
    /* the fault shows on a step where the scale grows: after 2 clean steps rather than 1000 */
    .fault_settings = (const pf_fault_setting[]){{"loss-scale-unscale-after-update", NULL, {"window=2"}}, {0}},
    .explanation =
        "The backward pass holds S g in the gradient dtype: at DeepSpeed's and Megatron's initial 2^32 (PyTorch 2^16) "
        "an fp16 gradient overflows above 65504 / S, and the scaler skips and halves; gradients below 2^-25 / S are "
        "flushed to 0 (lost, not skipped). DeepSpeed stops at its minimum scale (seed 000); Megatron and PyTorch keep "
        "skipping.",
};

int pf_decode_loss_scale_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* loss_scale_fuzzer.c */
const pf_op pf_loss_scale_op = {
    .name = "loss_scale",
    .summary = "dynamic loss scaling over a stream of gradient steps",
    .ndims = 2,
    .dim_names = pf_ls_dims,
    .dim_max = {100000, 65536},
    .dim_default = {8, 16},
    .elems_max = (size_t)1 << 22,
    .nparams = 8,
    .params = pf_ls_params,
    .ninputs = 1,
    .input_names = pf_ls_inputs,
    .input_count = pf_ls_input_count,
    .input_dtype = pf_ls_input_dtype,
    .output_count = pf_ls_output_count,
    .oracle = pf_loss_scale_ref,
    .stages = pf_ls_stages,
    .prepare = pf_ls_prepare,
    .refine = pf_ls_refine,
    .input_dims = pf_ls_input_dims,
    .hazards = pf_ls_hazards,
    .cost = pf_ls_cost,
    .fuzz_decode = pf_decode_loss_scale_fuzzer,
    .sweep = &pf_loss_scale_sweep,
};

pf_ls_launch pf_loss_scale_launch_of(const pf_case *c) {
  pf_ls_launch L;
  L.steps = c->shape[0];
  L.n = c->shape[1];
  L.variant = pf_ls_variant(c);
  L.no_skip = strcmp(c->fault, "loss-scale-no-skip") == 0;
  L.unscale_after = strcmp(c->fault, "loss-scale-unscale-after-update") == 0 || pf_ls_unscales_after_update(L.variant);
  L.dtype = c->dtype;
  L.start = pf_ls_init(c);
  return L;
}

pf_status pf_loss_scale_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_ls_launch L = pf_loss_scale_launch_of(c);
  const size_t T = L.steps, n = L.n;
  pf_ls_state s = L.start;
  double *h = malloc((n ? n : 1) * sizeof(double));
  if (!h) return pf_error(PF_ERR_NOMEM, "loss_scale: cannot allocate a step of %zu", n);
  for (size_t t = 0; t < T; t++) {
    const double S = s.scale;
    int overflow = 0;
    for (size_t i = 0; i < n; i++) h[i] = pf_ls_scale_elem(L.dtype, in[0].data[t * n + i], S, &overflow, fe);
    const int status = pf_ls_update(L.variant, &s, overflow);
    /* DeepSpeed 0.19 (or the fault) updates the scale before it unscales: on a step where the
     * scale grows the gradients are divided by the doubled scale */
    const double inv = pf_round(PF_FP32, 1.0 / (L.unscale_after ? s.scale : S));
    const int applied = status == PF_LS_APPLIED || (L.no_skip && status == PF_LS_SKIPPED);
    for (size_t i = 0; i < n; i++) out[t * n + i] = pf_ls_unscale_elem(h[i], inv, applied, fe);
    out[T * n + t] = status;
    out[T * n + T + t] = s.scale;
  }
  free(h);
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "kernels/loss_scale/loss_scale_cuda.h"
#include "core/cuda_module.h"
/* the CUDA kernel, in the module (core/cuda_module.h) */
pf_status pf_loss_scale_cuda(const pf_ls_launch *L, const double *g, double *out, unsigned *fe) {
  __typeof__(&pf_loss_scale_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_loss_scale_cuda", (void **)&fn);
  return st ? st : fn(L, g, out, fe);
}
static pf_status pf_loss_scale_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_ls_launch L = pf_loss_scale_launch_of(c);
  return pf_loss_scale_cuda(&L, in[0].data, out, fe);
}
#define PF_LS_RUN_CUDA pf_loss_scale_cuda_case
#else
#define PF_LS_RUN_CUDA NULL
#endif

/* Applied gradients: h = fl_T(S g) then times fl32(1/S): relative error within
 * (1 + u_T)(1 + u_32)(1 + |fl32(1/S) S - 1|) - 1 where S g is a normal number of T; the
 * status and the scale are exact. */
static double pf_ls_rel_bound(const pf_case *c) {
  const double uT = pf_unit_roundoff(c->dtype);
  /* every scale is scale0 times a power of two: fl32(1/S) S - 1 is the same for all */
  const double S0 = pf_ls_init(c).scale, einv = fabs(pf_round(PF_FP32, 1.0 / S0) * S0 - 1);
  return ((1 + uT) * (1 + 0x1p-24) * (1 + einv) - 1) * 1.0001;
}

void pf_loss_scale_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t T = c->shape[0], n = c->shape[1];
  const double rel = pf_ls_rel_bound(c);
  for (size_t x = 0; x < T * n; x++) out[x] = (pf_bound){rel, 0};
  for (size_t t = 0; t < 2 * T; t++) out[T * n + t] = (pf_bound){0, 0};
}

/* Domain: finite true gradients that fit the gradient dtype at the smallest scale (else no
 * scale can save the run), and every applied scaled gradient a normal number of T or 0. */
int pf_loss_scale_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t T = c->shape[0], n = c->shape[1];
  const pf_ls_state s0 = pf_ls_init(c);
  const double smin = pf_ls_variant(c) == PF_LS_STATIC ? s0.scale : s0.min_scale;
  for (size_t x = 0; x < T * n; x++) {
    const double g = in[0].data[x];
    if (!isfinite(g)) {
      snprintf(why, len, "step %zu: a non-finite true gradient", x / n + 1);
      return 0;
    }
    /* |g| smin is exact in binary64; it overflows T where rounding to nearest reaches inf:
     * at max + ulp(max)/2, as the reference scaler decides it (g = 65504 at scale 1 does not) */
    const double thr = pf_max_finite(c->dtype) + pf_ulp(c->dtype, pf_max_finite(c->dtype)) / 2;
    if (smin > 0 && fabs(g) * smin >= thr) {
      snprintf(why, len, "step %zu: |g| = %g overflows %s even at the smallest scale %g", x / n + 1, fabs(g),
               pf_dtype_name(c->dtype), smin);
      return 0;
    }
  }
  double *o = malloc(pf_ls_output_count(c) * sizeof(double));
  if (!o) return 0;
  unsigned fe = 0;
  pf_case k = *c;
  k.fault[0] = 0;
  pf_loss_scale_cpu(&k, in, o, &fe);
  int ok = 1;
  const double rel = pf_ls_rel_bound(c);
  /* DeepSpeed keeps its scale in a Python float (binary64), which doubles past fp32's range
   * where an fp32 scale (Megatron's, PyTorch's) stops or becomes inf; the operation's scale
   * output is fp32, so such a run is outside what it can report */
  const int ds = pf_ls_variant(c) == PF_LS_DEEPSPEED || pf_ls_variant(c) == PF_LS_DEEPSPEED_019 ||
                 pf_ls_variant(c) == PF_LS_DEEPSPEED_019_FP16;
  for (size_t t = 0; t < T && ok && ds; t++)
    if (o[T * n + T + t] >= 0x1p128) {
      ok = 0;
      snprintf(why, len, "step %zu: DeepSpeed's scale (a Python float) grows to %g, beyond the fp32 scale output", t + 1,
               o[T * n + T + t]);
    }
  for (size_t t = 0; t < T && ok; t++) {
    if (o[T * n + t] != PF_LS_APPLIED) continue;
    const double S = t ? o[T * n + T + t - 1] : s0.scale;
    for (size_t i = 0; i < n && ok; i++) {
      const double g = fabs(in[0].data[t * n + i]), sg = g * S;
      if (sg != 0 && sg < pf_min_normal(c->dtype)) {
        ok = 0;
        snprintf(why, len, "step %zu: |S g| = %g is below %s's normal range (gradient precision lost)", t + 1, sg,
                 pf_dtype_name(c->dtype));
      } else if (g * (1 + rel) >= pf_max_finite(PF_FP32)) {
        /* fl_T(S g) may round up, and its unscaling by 1/S > 1 then overflows fp32 after the
         * overflow check (PyTorch checks the scaled values, as every scaler here does) */
        ok = 0;
        snprintf(why, len, "step %zu: |g| = %g is within the scaled gradient's rounding of fp32's largest value: the "
                 "unscaled gradient may overflow after the overflow check", t + 1, g);
      }
    }
  }
  free(o);
  return ok;
}

static const char *const pf_ls_faults[] = {"loss-scale-no-skip", "loss-scale-unscale-after-update", NULL};
/* DeepSpeed 0.19's paths unscale after the update already */
static const char *const pf_ls_faults_ds019[] = {"loss-scale-no-skip", NULL};
/* a fixed scale never grows: unscaling after the update is unscaling before it */
static const char *const pf_ls_faults_static[] = {"loss-scale-no-skip", NULL};
#define PF_LS_KERNEL(var, algo, faults, summary)                                                                     \
  {PF_KERNEL_ABI, &pf_loss_scale_op, var, summary, PF_DT(PF_FP16) | PF_DT(PF_BF16) | PF_DT(PF_FP32),             \
   PF_DT(PF_FP32), faults,                                                                                        \
   "applied gradients within (1+u_T)(1+2^-24)(1+|fl32(1/S) S - 1|) - 1 relative of the true ones; skips, "        \
   "scales and stops exactly as the reference scaler; a stopped run is divergent. Domain: finite gradients that " \
   "fit T at the smallest scale, applied scaled gradients normal in T",                                           \
   pf_loss_scale_cpu, pf_loss_scale_bound, pf_loss_scale_in_domain, NULL, PF_LS_RUN_CUDA, algo, NULL, NULL}

static const pf_kernel pf_ls_tab[] = {
    PF_LS_KERNEL("deepspeed", PF_LS_DEEPSPEED, pf_ls_faults, "DeepSpeed DynamicLossScaler: hysteresis, window, error at the minimum scale"),
    PF_LS_KERNEL("megatron", PF_LS_MEGATRON, pf_ls_faults, "Megatron DynamicGradScaler: hysteresis, growth interval, keeps skipping at the minimum"),
    PF_LS_KERNEL("pytorch", PF_LS_PYTORCH, pf_ls_faults, "PyTorch GradScaler: backoff 0.5, growth 2 every 2000 clean steps, fp32 scale"),
    PF_LS_KERNEL("static", PF_LS_STATIC, pf_ls_faults_static, "a fixed scale; overflowed steps skipped"),
    PF_LS_KERNEL("deepspeed-0.19", PF_LS_DEEPSPEED_019, pf_ls_faults_ds019,
                 "DeepSpeed 0.19.8 ZeRO's DynamicLossScaler with its config's defaults (2^16, hysteresis 2): doubles after "
                 "window + 1 clean steps; unscales by the updated scale"),
    PF_LS_KERNEL("deepspeed-0.19-fp16", PF_LS_DEEPSPEED_019_FP16, pf_ls_faults_ds019,
                 "DeepSpeed 0.19.8 FP16_Optimizer (ZeRO off): no hysteresis, stays at the minimum; unscales by the "
                 "updated scale"),
};
const pf_kernel *const pf_loss_scale_kernels[] = {&pf_ls_tab[0], &pf_ls_tab[1], &pf_ls_tab[2], &pf_ls_tab[3],
                                                  &pf_ls_tab[4], &pf_ls_tab[5], NULL};
