/* Adam / AdamW, one optimizer step over n elements: CPU emulation, contracts, variant table.
 *
 * Variants, from apex's FusedAdam (apex/optimizers/fused_adam.py, csrc/multi_tensor_adam.cu; DeepSpeed
 * uses the same kernel) and PyTorch's AdamW (torch/optim/adamw.py over torch/optim/adam.py's
 * _multi_tensor_adam), T the case's dtype (the parameter's):
 *   fused             FusedAdam (apex, DeepSpeed): fp32 math, fp32 master p and state,
 *                     the parameter written back as fl_T(master); mode adamw or l2
 *   torch             PyTorch AdamW, single-tensor path (foreach=False, the CPU default): decay,
 *                     lerp and addcmul as fmas, sqrt(v)/sqrt(bc2) + eps, p + fl(-ss m)/d;
 *                     no master copy, gradient and state in T, each tensor op stored in T
 *   no-master         FusedAdam math, fp32 state, the parameter kept in T only
 *   state-lowp        FusedAdam with fp32 master but m and v stored in T
 *   eps-inside        FusedAdam with denom = sqrt(v/bc2 + eps)
 *   no-bias-correction FusedAdam with bc1 = bc2 = 1
 * Inputs: p (the fp32 master, or the T parameter without one), g (fp32, or T for torch),
 * m and v (fp32, or T for torch and state-lowp; v is taken as |drawn value|: a second moment).
 * Outputs, in data-flow order: m, v, p (in p's dtype), then for master variants the
 * parameter written back to T. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/errbound.h"
#include "kernels/adam/adam_cuda.h"
#include "kernels/adam/adam_math.h"
#include "core/runner.h"
#include "core/kernel.h"

#include "oracles/adam_mpfr.h"

enum { P_LR = 0, P_BETA1, P_BETA2, P_EPS, P_WD, P_STEP, P_MODE, P_EMA, P_BC, P_SCALARS, P_GSCALE, P_FOUNDINF };

static const char *const pf_adam_dims[] = {"n"};
static const char *const pf_adam_inputs[] = {"p", "g", "m", "v"};
static const char *const pf_adam_modes[] = {"adamw", "l2", NULL};
static const char *const pf_adam_emas[] = {"products", "lerp", NULL};
static const char *const pf_adam_bcs[] = {"host", "device", NULL};
static const char *const pf_adam_scalars[] = {"fp32", "binary64", NULL};
static const pf_param_desc pf_adam_params[] = {
    {"lr", PF_PARAM_REAL, 1e-3, 0, 10, NULL, "learning rate", 0, "1e-5,3e-5,1e-4,3e-4,6e-4,1e-3,3e-3"},
    {"beta1", PF_PARAM_REAL, 0.9, 0, 0.999999, NULL, "first-moment decay", 0, NULL},
    {"beta2", PF_PARAM_REAL, 0.999, 0, 0.9999999, NULL, "second-moment decay", 0, "0.95,0.98,0.99,0.999"},
    {"eps", PF_PARAM_REAL, 1e-8, 0, 1, NULL, "added to the denominator", 0, "1e-8,1e-6,1e-5"},
    {"wd", PF_PARAM_REAL, 0, 0, 10, NULL, "weight decay", 0, "0,0.01,0.1"},
    {"step", PF_PARAM_INT, 1, 1, 1e9, NULL, "the step count t, from 1", 0, "1..1000000"},
    {"mode", PF_PARAM_CHOICE, 0, 0, 1, pf_adam_modes, "adamw: decoupled decay; l2: wd p added to g (not torch)", 0, NULL},
    /* legitimate choices of an fp32 Adam, the contract's too (the FusedAdam family; PyTorch's
     * paths fix their own): a user's kernel judged like=fused says which it makes */
    {"ema", PF_PARAM_CHOICE, 0, 0, 1, pf_adam_emas,
     "the moments: beta m + (1 - beta) g (apex), or lerp fma(beta, m, fma(-beta, g, g)) (llm.c) (not torch)", 0, NULL},
    {"bias_correction", PF_PARAM_CHOICE, 0, 0, 1, pf_adam_bcs,
     "1 - beta^t: on the host in binary64, stored in fp32 (apex), or on the device as 1 - powf(beta, t) in fp32 "
     "(llm.c) (not torch)", 0, NULL},
    {"scalars", PF_PARAM_CHOICE, 0, 0, 1, pf_adam_scalars,
     "1 - beta: in fp32 from the fp32 beta (apex's kernel), or the binary64 1 - beta rounded once (a Python-side "
     "constant) (not torch)", 0, NULL},
    /* what GradScaler hands torch.optim.AdamW(fused=True) (_fused_adamw_'s grad_scale and
     * found_inf): the fused variants only; elsewhere the scaler unscales before the step */
    {"grad_scale", PF_PARAM_REAL, 1, 0x1p-64, 0x1p64, NULL,
     "the loss scale S the gradients arrive multiplied by, divided out in fp32 inside the step (torch-fused, "
     "torch-fused-cuda)", PF_HELD(PF_FP32), "1,0x1p16"},
    {"found_inf", PF_PARAM_INT, 0, 0, 1, NULL,
     "1: the scaler found an inf (g[0] = inf): the step must leave p, m, v as they are (torch-fused, "
     "torch-fused-cuda)", 0, "0,0,0,1"},
};

static int pf_adam_variant(const pf_case *c) { return pf_case_algo(c); }
static int pf_adam_has_master(int var) { return !pf_adam_is_torch(var) && var != PF_ADAM_NO_MASTER; }
static pf_dtype pf_adam_pdt(const pf_case *c) { return pf_adam_has_master(pf_adam_variant(c)) ? PF_FP32 : c->dtype; }
static pf_dtype pf_adam_sdt(const pf_case *c) {
  const int var = pf_adam_variant(c);
  return pf_adam_is_torch(var) || var == PF_ADAM_STATE_LOWP ? c->dtype : PF_FP32;
}

static pf_dtype pf_adam_input_dtype(const pf_case *c, int i) {
  if (i == 0) return pf_adam_pdt(c);
  if (i == 1) return pf_adam_is_torch(pf_adam_variant(c)) ? c->dtype : PF_FP32;
  return pf_adam_sdt(c);
}
static size_t pf_adam_input_count(const pf_case *c, int i) { return c->shape[0]; }
static size_t pf_adam_output_count(const pf_case *c) {
  return c->shape[0] * (pf_adam_has_master(pf_adam_variant(c)) ? 4 : 3);
}
static int pf_adam_stages(const pf_case *c, pf_stage *st) {
  const size_t n = c->shape[0];
  const int var = pf_adam_variant(c);
  /* the state in the parameters' dtype for torch and state-lowp, else fp32 */
  const int sh = PF_HELD(pf_adam_is_torch(var) || var == PF_ADAM_STATE_LOWP ? c->dtype : PF_FP32);
  st[0] = (pf_stage){"m", 0, n, 0, sh, 1, {0}, PF_MEASURE_TENSOR};
  st[1] = (pf_stage){"v", n, n, 0, sh, 1, {0}, PF_MEASURE_ELEMENT};
  st[2] = (pf_stage){pf_adam_has_master(var) ? "master" : "param", 2 * n, n, 0, PF_HELD(pf_adam_pdt(c)), 1, {0}, PF_MEASURE_TENSOR};
  if (!pf_adam_has_master(var)) return 3;
  st[3] = (pf_stage){"param", 3 * n, n, 0, 0, 1, {0}, PF_MEASURE_TENSOR};
  return 4;
}

/* v is a second moment: its generator's draws are taken by magnitude. A step the scaler skips
 * (found_inf = 1) comes with the inf it found, in g[0]. */
static void pf_adam_prepare(const pf_case *c, pf_tensor *in) {
  for (size_t i = 0; i < in[3].n; i++) in[3].data[i] = fabs(in[3].data[i]);
  if (c->params[P_FOUNDINF] && in[1].n) in[1].data[0] = INFINITY;
}

/* Update lost: the kernel left the parameter where it was while the exact step moves it
 * (its correctly rounded result differs from the old value). Within a finite bound that
 * admits it, it is no finding; outside one, or with no bound at all, it is an underflow. */
static pf_verdict pf_adam_refine(const pf_case *c, const pf_tensor *in, size_t i, double y, pf_verdict v,
                                 double rounded, pf_bound b) {
  const size_t n = c->shape[0];
  if (i < 2 * n || !(v == PF_V_INACCURATE || (v == PF_V_OK && !isfinite(b.rel)))) return v;
  const double p0 = in[0].data[i % n];
  if (i >= 3 * n) { /* the written-back parameter: compare with the old one in T */
    if (y != pf_round(c->dtype, p0) || rounded == pf_round(c->dtype, p0)) return v;
    return PF_V_UNDERFLOW;
  }
  return (y == p0 && rounded != p0) ? PF_V_UNDERFLOW : v;
}

/* run --steps: the new p (the master where there is one), m and v are the next step's p, m, v;
 * the gradient is drawn afresh; the step count advances */
static unsigned pf_adam_carry(pf_case *c, const double *out, pf_tensor *state) {
  const size_t n = c->shape[0];
  for (size_t i = 0; i < n; i++) {
    state[0].data[i] = out[2 * n + i];
    state[2].data[i] = out[i];
    state[3].data[i] = out[n + i];
  }
  c->params[P_STEP] += 1;
  return 1u << 0 | 1u << 2 | 1u << 3;
}

static int pf_adam_input_dims(const pf_case *c, int i, int *d) {
  d[0] = 0; /* p, g, m, v [element] */
  return 1;
}

/* stagnant (pf_stuck): a moment the step should move but whose stored value stays where it
 * was. Of the elements whose exact new state differs from the old, at least half kept the old
 * value bit for bit: the updates round away in the state's dtype (bf16 v with beta2 close to 1 cannot
 * decay: beta2 v rounds back to v, and every step is correctly rounded all the same). */
static void pf_adam_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  (void)l;
  const size_t n = c->shape[0];
  static const char *const names[2] = {"m", "v"};
  for (int k = 0; k < 2; k++) {
    const double *old = r->in[2 + k].data;
    pf_stuck s = {0};
    for (size_t i = 0; i < n; i++) {
      const size_t x = (size_t)k * n + i;
      if (r->oracle.status[x] == PF_ORACLE_NUMBER && isfinite(r->out[x]))
        pf_stuck_add(&s, x, old[i], r->out[x], old[i], r->oracle.exact[x]);
    }
    if (pf_stuck_stagnant(&s)) {
      const size_t i = s.first - (size_t)k * n;
      pf_run_flag_hazard(r, PF_H_STAGNANT, s.first, (double)s.stuck / (double)s.moved,
                         "%s: %zu of the %zu elements the step should move kept their old value (%s[%zu] stayed "
                         "%.6g, exact %.9g): the updates round away in %s",
                         names[k], s.stuck, s.moved, names[k], i, old[i], r->oracle.exact[s.first],
                         pf_dtype_name(pf_adam_sdt(c)));
      return;
    }
  }
}

/* per element: the emulation about 145 ns, the oracle 85 (measured: 65536, fused) */
static void pf_adam_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  *emulation_s = 145e-9 * (double)c->shape[0];
  *oracle_s = 85e-9 * (double)c->shape[0];
}

/* the precision report's sweep: the scan along the gradients' scale, and where one step from
 * m = v = 0 at p = 1 is lost (small gradients) or overflows (large ones) */
/* the faults show past step 256 (the count held in bf16) and on a step GradScaler skips */
static const pf_fault_setting pf_adam_fault_settings[] = {
    {"adam-step-bf16", NULL, {"step=1000"}}, {"adam-ignores-found-inf", NULL, {"found_inf=1"}}, {0}};
static const pf_op_sweep pf_adam_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "64", .along = "scale:g", .lo = 0x1p-40, .hi = 0x1p16, .fail = "finding", .cases_div = 1,
    .searches = {{"lost update (small gradients)", "1", "value:g", "finding", 0x1p-40, 1, {"p:value=1", "m:value=0", "v:value=0"}},
                 {"overflow (large gradients)", "1", "value:g", "overflow,nan", 1, 0, {"p:value=1", "m:value=0", "v:value=0"}}},
    .fault_settings = pf_adam_fault_settings,
    .explanation =
        "One step from m = v = 0 at p = 1: the exact step is lr g / (|g| + eps), about lr whatever g. With the state in "
        "fp16, v = (1 - beta2) g^2 underflows to 0 below |g| of about 5e-3 and eps = 1e-8 rounds to 0 in fp16, so m / "
        "(sqrt(v) + eps) divides by zero; (1 - beta2) g^2 leaves fp16 above |g| of about 8.1e3 (the scan of 64 drawn "
        "gradients fails from a scale of a few thousand on, where the largest of them gets there). bf16 has fp32's "
        "exponent range, so its failures are rounding (an lr step below half an ulp of p is lost), not range; the fp32 "
        "master of FusedAdam keeps the step.",
};

int pf_decode_adam_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* adam_fuzzer.c */
const pf_op pf_adam_op = {
    .name = "adam",
    .summary = "one Adam/AdamW optimizer step over n parameters",
    .ndims = 1,
    .dim_names = pf_adam_dims,
    .dim_max = {(size_t)1 << 20},
    .dim_default = {1024},
    .elems_max = (size_t)1 << 20,
    .nparams = sizeof pf_adam_params / sizeof pf_adam_params[0],
    .params = pf_adam_params,
    .ninputs = 4,
    .input_names = pf_adam_inputs,
    .input_count = pf_adam_input_count,
    .input_dtype = pf_adam_input_dtype,
    .output_count = pf_adam_output_count,
    .oracle = pf_adam_step_mpfr,
    .stages = pf_adam_stages,
    .batch_dim0 = 1,
    .prepare = pf_adam_prepare,
    .refine = pf_adam_refine,
    .input_dims = pf_adam_input_dims,
    .hazards = pf_adam_hazards,
    .cost = pf_adam_cost,
    .fuzz_decode = pf_decode_adam_fuzzer,
    .sweep = &pf_adam_sweep,
    .carry = pf_adam_carry,
    .carry_watch = 0,
    .hazard_axis = {[PF_H_STAGNANT] = "param:beta2"},
};

static pf_status pf_adam_check(const pf_case *c) {
  const int var = pf_adam_variant(c);
  if (pf_adam_is_torch(var) && c->params[P_MODE] != PF_ADAM_MODE_ADAMW)
    return pf_error(PF_ERR_ARG, "torch (AdamW) has no l2 mode");
  if (pf_adam_is_torch(var) && (c->params[P_EMA] || c->params[P_BC] || c->params[P_SCALARS]))
    return pf_error(PF_ERR_ARG, "ema, bias_correction, scalars: %s/%s computes PyTorch's own way (they are the FusedAdam "
                                "family's)", c->kernel, c->variant);
  if (var == PF_ADAM_NO_BIAS_CORRECTION && c->params[P_BC])
    return pf_error(PF_ERR_ARG, "bias_correction: %s/%s has none", c->kernel, c->variant);
  if ((c->params[P_GSCALE] != 1 || c->params[P_FOUNDINF]) && var != PF_ADAM_TORCH_FUSED && var != PF_ADAM_TORCH_FUSED_CUDA)
    return pf_error(PF_ERR_ARG, "grad_scale, found_inf: only the fused kernels take them (torch-fused, torch-fused-cuda); "
                                "%s/%s gets gradients the scaler has already unscaled", c->kernel, c->variant);
  return PF_OK;
}

/* the mode and the options, as pf_adam_step takes them */
static int pf_adam_mode(const pf_case *c) {
  return (int)c->params[P_MODE] | (c->params[P_EMA] ? PF_ADAM_OPT_LERP : 0) | (c->params[P_BC] ? PF_ADAM_OPT_BC_DEVICE : 0) |
         (c->params[P_SCALARS] ? PF_ADAM_OPT_SCALARS64 : 0);
}

/* The hyperparameters as the kernels receive them. */
static pf_adam_hyper pf_adam_hyper_of(const pf_case *c) {
  pf_adam_hyper h = pf_adam_hyper_make(c->params[P_LR], c->params[P_BETA1], c->params[P_BETA2], c->params[P_EPS],
                                       c->params[P_WD], c->params[P_STEP], pf_adam_variant(c) != PF_ADAM_NO_BIAS_CORRECTION);
  h.gscale = c->params[P_GSCALE];
  h.skip = c->params[P_FOUNDINF] != 0;
  return h;
}

/* The hyperparameters the kernel runs with: the case's, but for the fault adam-step-bf16 (torchao's
 * low-bit optimizers before its PR 4915 kept the step count in bf16: 256 + 1 rounds back to 256,
 * so the count stops there and every later step's bias correction uses t = 256). */
static pf_adam_hyper pf_adam_hyper_run(const pf_case *c) {
  pf_case k = *c;
  if (strcmp(c->fault, "adam-step-bf16") == 0 && k.params[P_STEP] > 256) k.params[P_STEP] = 256;
  pf_adam_hyper h = pf_adam_hyper_of(&k);
  /* adam-ignores-found-inf (PyTorch issue 95781: a fused step that updated with the inf the
   * scaler had found) */
  if (strcmp(c->fault, "adam-ignores-found-inf") == 0) h.skip = 0;
  return h;
}

pf_status pf_adam_step_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t n = c->shape[0];
  const int var = pf_adam_variant(c), mode = pf_adam_mode(c);
  const pf_adam_hyper h = pf_adam_hyper_run(c);
  const pf_dtype pt = pf_adam_pdt(c), st = pf_adam_sdt(c);
  for (size_t i = 0; i < n; i++) {
    double p = in[0].data[i], m = in[2].data[i], v = in[3].data[i];
    pf_adam_step(var, mode, pt, st, &h, &p, in[1].data[i], &m, &v, fe);
    out[i] = m;
    out[n + i] = v;
    out[2 * n + i] = p;
    if (pf_adam_has_master(var)) out[3 * n + i] = pf_round_fe(c->dtype, p, fe); /* write-back */
  }
  return PF_OK;
}

size_t pf_adam_chunks(const size_t *sizes, size_t ntensors, size_t chunk, pf_adam_chunk *out, size_t cap) {
  size_t k = 0;
  for (size_t t = 0; t < ntensors; t++)
    for (size_t start = 0; start < sizes[t]; start += chunk, k++)
      if (k < cap) out[k] = (pf_adam_chunk){t, start, sizes[t] - start < chunk ? sizes[t] - start : chunk};
  return k;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
/* the CUDA kernel, in the module (core/cuda_module.h) */
pf_status pf_adam_step_cuda(int variant, int mode, pf_dtype pt, pf_dtype sdt, const pf_adam_hyper *h,
                            const pf_adam_tensor *tensors, size_t ntensors, unsigned *fe) {
  __typeof__(&pf_adam_step_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_adam_step_cuda", (void **)&fn);
  return st ? st : fn(variant, mode, pt, sdt, h, tensors, ntensors, fe);
}
/* The case-to-launch translation: the same hyperparameters and layout as the CPU run; the
 * case's n elements are one tensor of the list (a batch of cases is one longer tensor). */
static pf_status pf_adam_step_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t n = c->shape[0];
  const int var = pf_adam_variant(c);
  const pf_adam_hyper h = pf_adam_hyper_run(c);
  const pf_adam_tensor t = {out + 2 * n, in[1].data, out, out + n, n};
  memcpy(t.p, in[0].data, n * sizeof(double));
  memcpy(t.m, in[2].data, n * sizeof(double));
  memcpy(t.v, in[3].data, n * sizeof(double));
  pf_status st = pf_adam_step_cuda(var, pf_adam_mode(c), pf_adam_pdt(c), pf_adam_sdt(c), &h, &t, 1, fe);
  if (st == PF_OK && pf_adam_has_master(var))
    for (size_t i = 0; i < n; i++) out[3 * n + i] = pf_round_fe(c->dtype, t.p[i], fe); /* write-back */
  return st;
}
#define PF_ADAM_RUN_CUDA pf_adam_step_cuda_case
#else
#define PF_ADAM_RUN_CUDA NULL
#endif

/* ---- contract: the same operation sequence in running-error arithmetic (errbound.h) --- */

/* The bounds of m', v', p' from their running errors, and their exact values into vals (optional). */
static void pf_adam_bound_put(pf_eb mn, pf_eb vn, pf_eb pn, pf_bound *bm, pf_bound *bv, pf_bound *bp, double *vals) {
  *bm = pf_eb_bound(mn), *bv = pf_eb_bound(vn), *bp = pf_eb_bound(pn);
  if (vals) vals[0] = mn.v, vals[1] = vn.v, vals[2] = pn.v;
}

/* Bounds of m', v', p'; vals (optional) receives the exact values (binary64). */
static void pf_adam_elem_bound(const pf_case *c, const pf_adam_hyper *h, double p0, double g0, double m0, double v0,
                               pf_bound *bm, pf_bound *bv, pf_bound *bp, double *vals) {
  const int var = pf_adam_variant(c), mode = (int)c->params[P_MODE];
  const pf_dtype F = PF_FP32;
  const double lr = c->params[P_LR], b1 = c->params[P_BETA1], b2 = c->params[P_BETA2], eps = c->params[P_EPS],
               wd = c->params[P_WD], t = c->params[P_STEP];
  const int nobc = var == PF_ADAM_NO_BIAS_CORRECTION;
  /* exact bias corrections; the kernel's differ by the rounding of the host computation */
  const double bc1x = nobc ? 1 : -expm1(t * log(b1)), bc2x = nobc ? 1 : -expm1(t * log(b2)); /* 1 - b^t */
  const pf_eb p = pf_eb_exact(p0), m = pf_eb_exact(m0), v = pf_eb_exact(v0);
  /* the fused kernels' unscaling: fl32(g / S), used unrounded */
  const pf_eb g = h->gscale != 1 ? pf_eb_div(F, pf_eb_exact(g0), pf_eb_exact(h->gscale)) : pf_eb_exact(g0);
  if (var == PF_ADAM_TORCH_FUSED_CUDA) {
    /* its operations (adam_math.h), each in fp32, the scalars rounded to fp32 */
    const pf_eb b1k = pf_eb_const(F, b1), b2k = pf_eb_const(F, b2), nb1 = {-b1k.v, b1k.e}, nb2 = {-b2k.v, b2k.e};
    const pf_eb lrwd = pf_eb_mul(F, pf_eb_const(F, lr), pf_eb_const(F, wd)), nlrwd = {-lrwd.v, lrwd.e};
    const pf_eb p1 = pf_eb_fma(F, nlrwd, p, p);
    const pf_eb mn = pf_eb_fma(F, b1k, m, pf_eb_fma(F, nb1, g, g));
    const pf_eb g2 = pf_eb_mul(F, g, g);
    const pf_eb vn = pf_eb_fma(F, b2k, v, pf_eb_fma(F, nb2, g2, g2));
    /* 1 - beta^t in fp32 from the fp32 beta: pow_ within 2 ulps (CUDA's powf), then the
     * subtraction's rounding: |c_bc - (1 - beta^t)| plus 4 ulps of beta^t and one of 1 - beta^t */
    const double pw1 = 1 - bc1x, pw2 = 1 - bc2x;
    const pf_eb bc1 = {bc1x, fabs(h->c_bc1 - bc1x) + 0x1p-22 * pw1 + 0x1p-24 * bc1x};
    const pf_eb bc2 = {bc2x, fabs(h->c_bc2 - bc2x) + 0x1p-22 * pw2 + 0x1p-24 * bc2x};
    const pf_eb ss = pf_eb_div(F, pf_eb_const(F, lr), bc1);
    const pf_eb d = pf_eb_add(F, pf_eb_div(F, pf_eb_sqrt(F, vn), pf_eb_sqrt(F, bc2)), pf_eb_const(F, eps));
    const pf_eb pn = pf_eb_sub(F, p1, pf_eb_div(F, pf_eb_mul(F, ss, mn), d));
    pf_adam_bound_put(mn, vn, pn, bm, bv, bp, vals);
    return;
  }
  if (pf_adam_is_torch(var)) {
    const pf_dtype T = c->dtype;
    /* the foreach path's _foreach_mul_ scalars are rounded to T, the others to fp32 */
    const pf_dtype S = var == PF_ADAM_TORCH_FOREACH ? T : F;
    const pf_eb wdec = (pf_eb){1 - lr * wd, fabs(pf_round(S, pf_round(F, h->t_decay)) - (1 - lr * wd)) + 0x1p-52};
    const pf_eb p1 = pf_eb_store(T, pf_eb_mul(F, p, wdec));
    const pf_eb w = (pf_eb){1 - b1, fabs(pf_round(F, h->t_omb1) - (1 - b1)) + 0x1p-53};
    const pf_eb mn = pf_eb_add(F, m, pf_eb_mul(F, w, pf_eb_sub(F, g, m)));
    const pf_eb vb = pf_eb_store(T, pf_eb_mul(F, v, (pf_eb){b2, fabs(pf_round(S, pf_round(F, h->t_beta2)) - b2) + 0x1p-53}));
    const pf_eb omb2 = (pf_eb){1 - b2, fabs(pf_round(F, h->t_omb2) - (1 - b2)) + 0x1p-53};
    const pf_eb vn = pf_eb_add(F, vb, pf_eb_mul(F, omb2, pf_eb_mul(F, g, g)));
    const pf_eb ms = pf_eb_store(T, mn), vs = pf_eb_store(T, vn);
    pf_eb d = pf_eb_store(T, pf_eb_sqrt(F, vs));
    const double bcs = sqrt(bc2x);
    d = pf_eb_store(T, pf_eb_div(F, d, (pf_eb){bcs, fabs(pf_round(F, h->t_bc2_sqrt) - bcs) + bcs * 0x1p-50}));
    /* eps as add_ takes it: rounded to the state's dtype (fp32 on the fused path) */
    d = pf_eb_store(T, pf_eb_add(F, d, pf_eb_const(var == PF_ADAM_TORCH_FUSED ? F : T, eps)));
    const double ssx = lr / bc1x;
    const pf_eb ss = (pf_eb){ssx, fabs(pf_round(F, h->t_step_size) - ssx) + ssx * 0x1p-48};
    /* addcdiv_: p + fl(fl(-ss m) / d): the product is rounded first, so a subnormal m times
     * a small step size loses its digits there (the bound's absolute term says how many) */
    const pf_eb pn = pf_eb_sub(F, p1, pf_eb_div(F, pf_eb_mul(F, ss, ms), d));
    pf_adam_bound_put(mn, vn, pn, bm, bv, bp, vals);
    return;
  }
  const pf_eb lrk = pf_eb_const(F, lr), wdk = pf_eb_const(F, wd), b1k = pf_eb_const(F, b1), b2k = pf_eb_const(F, b2);
  const pf_eb epsk = pf_eb_const(F, eps);
  const int lerp = c->params[P_EMA] != 0, bcd = c->params[P_BC] != 0, s64 = c->params[P_SCALARS] != 0;
  /* fl32(1 - pow(beta_f, t)) against the exact 1 - beta^t: the rounding of beta, of pow's
   * binary64 result (within 2^-50 relative of it), and of the store to fp32. On the device
   * (bias_correction=device): 1 - powf(beta_f, t) in fp32, powf within 2 ulps (CUDA's), then
   * the subtraction's rounding */
  const double pw1 = 1 - bc1x, pw2 = 1 - bc2x;
  const pf_eb bc1 = nobc ? pf_eb_exact(1)
                    : bcd ? (pf_eb){bc1x, fabs(h->c_bc1 - bc1x) + 0x1p-22 * pw1 + 0x1p-24 * bc1x}
                          : (pf_eb){bc1x, fabs(h->bc1 - bc1x) + 0x1p-48};
  const pf_eb bc2 = nobc ? pf_eb_exact(1)
                    : bcd ? (pf_eb){bc2x, fabs(h->c_bc2 - bc2x) + 0x1p-22 * pw2 + 0x1p-24 * bc2x}
                          : (pf_eb){bc2x, fabs(h->bc2 - bc2x) + 0x1p-48};
  pf_eb gg = g;
  if (mode == PF_ADAM_MODE_L2) gg = pf_eb_add(F, gg, pf_eb_mul(F, wdk, p));
  /* 1 - beta: in fp32 from the fp32 beta, or the binary64 1 - beta (itself within 2^-53 of the
   * exact) rounded once */
  pf_eb omb1 = s64 ? pf_eb_const(F, 1 - b1) : pf_eb_sub(F, pf_eb_exact(1), b1k);
  pf_eb omb2 = s64 ? pf_eb_const(F, 1 - b2) : pf_eb_sub(F, pf_eb_exact(1), b2k);
  if (s64) omb1.e += fabs(1 - b1) * 0x1p-53, omb2.e += fabs(1 - b2) * 0x1p-53;
  const pf_eb nb1 = {-b1k.v, b1k.e}, nb2 = {-b2k.v, b2k.e}, g2 = pf_eb_mul(F, gg, gg);
  const pf_eb mn = lerp ? pf_eb_fma(F, b1k, m, pf_eb_fma(F, nb1, gg, gg)) : pf_eb_add(F, pf_eb_mul(F, b1k, m), pf_eb_mul(F, omb1, gg));
  const pf_eb vn = lerp ? pf_eb_fma(F, b2k, v, pf_eb_fma(F, nb2, g2, g2))
                        : pf_eb_add(F, pf_eb_mul(F, b2k, v), pf_eb_mul(F, pf_eb_mul(F, omb2, gg), gg));
  const pf_eb mhat = pf_eb_div(F, mn, bc1), vhat = pf_eb_div(F, vn, bc2);
  const pf_eb denom = var == PF_ADAM_EPS_INSIDE ? pf_eb_sqrt(F, pf_eb_add(F, vhat, epsk))
                                                : pf_eb_add(F, pf_eb_sqrt(F, vhat), epsk);
  pf_eb upd = pf_eb_div(F, mhat, denom);
  if (mode == PF_ADAM_MODE_ADAMW) upd = pf_eb_add(F, upd, pf_eb_mul(F, wdk, p));
  const pf_eb pn = pf_eb_sub(F, p, pf_eb_mul(F, lrk, upd));
  pf_adam_bound_put(mn, vn, pn, bm, bv, bp, vals);
  /* a state kept in T (state-lowp) is the fp32 value stored: its final rounding is the compare's */
}

void pf_adam_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t n = c->shape[0];
  const pf_adam_hyper h = pf_adam_hyper_of(c);
  const int master = pf_adam_has_master(pf_adam_variant(c));
  if (h.skip) { /* a skipped step: p, m, v exactly as they were */
    for (size_t i = 0; i < 3 * n; i++) out[i] = (pf_bound){0, 0};
    return;
  }
  for (size_t i = 0; i < n; i++) {
    pf_bound bm, bv, bp;
    pf_adam_elem_bound(c, &h, in[0].data[i], in[1].data[i], in[2].data[i], in[3].data[i], &bm, &bv, &bp, NULL);
    out[i] = bm;
    out[n + i] = bv;
    out[2 * n + i] = bp;
    /* the parameter written back: fl_T(fl32(master)), one fp32 rounding more than bp covers */
    if (master) out[3 * n + i] = (pf_bound){bp.rel + 0x1p-24, bp.abs + 0x1p-150};
  }
}

/* Domain: a finite bound for every output (in particular a denominator that cannot reach
 * 0), and nothing that can overflow the dtypes on the way. */
int pf_adam_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t n = c->shape[0];
  const pf_adam_hyper h = pf_adam_hyper_of(c);
  const pf_dtype st = pf_adam_sdt(c);
  if (h.skip) return 1; /* nothing computed: the inf in g is why */
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < 4; k++)
      if (!isfinite(in[k].data[i])) {
        snprintf(why, len, "element %zu: a non-finite %s", i, pf_adam_inputs[k]);
        return 0;
      }
    pf_bound bm, bv, bp;
    double vals[3];
    pf_adam_elem_bound(c, &h, in[0].data[i], in[1].data[i], in[2].data[i], in[3].data[i], &bm, &bv, &bp, vals);
    if (!isfinite(bm.abs) || !isfinite(bv.abs) || !isfinite(bp.abs)) {
      snprintf(why, len, "element %zu: no error bound holds (the denominator may reach 0)", i);
      return 0;
    }
    const double g = in[1].data[i] / h.gscale; /* as the step sees it, unscaled */
    if (fabs(g) * fabs(g) >= pf_max_finite(st) / 2) {
      snprintf(why, len, "element %zu: g*g = %g exceeds %s's range", i, g * g, pf_dtype_name(st));
      return 0;
    }
    /* every result, with its bound, inside its dtype: beyond, the exact result is range */
    const pf_dtype pt = pf_adam_pdt(c);
    const double big[3] = {pf_max_finite(st), pf_max_finite(st), pf_max_finite(pt)};
    const pf_bound bs[3] = {bm, bv, bp};
    int beyond = 0;
    for (int k = 0; k < 3; k++)
      beyond |= fabs(vals[k]) * (1 + bs[k].rel) + bs[k].abs >= big[k] * (1 - 0x1p-10);
    /* and the parameter written back to T from the master */
    if (pf_adam_has_master(pf_adam_variant(c)))
      beyond |= fabs(vals[2]) * (1 + bp.rel + 0x1p-24) + bp.abs >= pf_max_finite(c->dtype);
    if (beyond) {
      snprintf(why, len, "element %zu: a result within its bound may leave its dtype's range", i);
      return 0;
    }
  }
  return 1;
}

#define PF_ADAM_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
/* adam-step-bf16 holds the step count in bf16: only the bias corrections read it, so a variant
 * without them has no such fault */
static const char *const pf_adam_faults[] = {"adam-step-bf16", NULL};
static const char *const pf_adam_fused_faults[] = {"adam-step-bf16", "adam-ignores-found-inf", NULL};
#define PF_ADAM_KERNEL(var, algo, summary, contract)                                                                 \
  {PF_KERNEL_ABI, &pf_adam_op, var, summary, PF_ADAM_DTYPES, PF_DT(PF_FP32),                       \
   (algo) == PF_ADAM_TORCH_FUSED || (algo) == PF_ADAM_TORCH_FUSED_CUDA ? pf_adam_fused_faults                   \
   : (algo) == PF_ADAM_NO_BIAS_CORRECTION ? NULL : pf_adam_faults,                                              \
   contract, pf_adam_step_cpu, pf_adam_bound, pf_adam_in_domain, pf_adam_check, PF_ADAM_RUN_CUDA, algo, NULL, NULL}

static const pf_kernel pf_adam_kernels_tab[] = {
    PF_ADAM_KERNEL("fused", PF_ADAM_FUSED, "FusedAdam: fp32 math, fp32 master and state, parameter written back to T",
                   "each output within the running error bound of its fp32 operation sequence (errbound.h): "
                   "every op adds u|z| + s/2 and propagates its operands' bounds; domain: finite bound, g^2 in range"),
    PF_ADAM_KERNEL("torch", PF_ADAM_TORCH, "PyTorch AdamW (single-tensor, the CPU default): decay, lerp; state and gradient in T, no master",
                   "as fused, over PyTorch's order with every tensor op stored in T"),
    PF_ADAM_KERNEL("torch-foreach", PF_ADAM_TORCH_FOREACH,
                   "PyTorch AdamW (foreach, the CUDA default): as torch, but _foreach_mul_ rounds its scalars to T",
                   "as torch"),
    PF_ADAM_KERNEL("torch-fused", PF_ADAM_TORCH_FUSED,
                   "PyTorch AdamW (fused=True) on the CPU: as torch, every intermediate kept in fp32, p, m, v stored once",
                   "as torch"),
    PF_ADAM_KERNEL("no-master", PF_ADAM_NO_MASTER, "FusedAdam math, the parameter kept in T (no fp32 master)", "as fused"),
    PF_ADAM_KERNEL("state-lowp", PF_ADAM_STATE_LOWP, "FusedAdam with m and v stored in T", "as fused"),
    PF_ADAM_KERNEL("eps-inside", PF_ADAM_EPS_INSIDE, "FusedAdam with denom = sqrt(v/bc2 + eps)", "as fused"),
    PF_ADAM_KERNEL("no-bias-correction", PF_ADAM_NO_BIAS_CORRECTION, "FusedAdam with bc1 = bc2 = 1", "as fused"),
    PF_ADAM_KERNEL("torch-fused-cuda", PF_ADAM_TORCH_FUSED_CUDA,
                   "PyTorch AdamW (fused=True) on CUDA: fp32 math, m and v as fma(beta, s, fma(-beta, x, x)), p, m, v stored once",
                   "as torch, over the CUDA kernel's operations"),
};
const pf_kernel *const pf_adam_kernels[] = {&pf_adam_kernels_tab[0], &pf_adam_kernels_tab[1], &pf_adam_kernels_tab[2],
                                            &pf_adam_kernels_tab[3], &pf_adam_kernels_tab[4], &pf_adam_kernels_tab[5],
                                            &pf_adam_kernels_tab[6], &pf_adam_kernels_tab[7], &pf_adam_kernels_tab[8],
                                            NULL};
