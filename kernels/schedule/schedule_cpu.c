/* Training trajectories: T optimizer steps on a synthetic objective, in a chosen precision
 * configuration, against the same steps in exact arithmetic (issue 4).
 *
 * Objective: f(p) = sum_i h_i p_i^2 / 2 with curvatures h_i > 0 (the magnitudes drawn for
 * input "curv"), so the true gradient is g_i = h_i p_i + noise_{t,i} (input "noise", one row
 * per step, shaped by the gradient-stream parameters: decay, a spike on some tensors, tiny
 * values, non-finite values from a step on). The n parameters form `tensors` tensors.
 * Each step (the loss scaler, clipping and Adam of kernels/loss_scale, kernels/clip and
 * kernels/adam, whose comments name their framework sources): the gradient from the parameter the model
 * holds; with a loss scaler the backward pass holds fl_T(S g), an inf or NaN anywhere skips
 * the step and the scaler reacts (kernels/loss_scale), else it is unscaled in fp32; clip by
 * global norm (per-tensor sums of squares in fp32); one Adam step (kernels/adam) with the
 * learning rate of the schedule at the number of applied steps; write-back.
 * Variants: fp32-state (FusedAdam, fp32 master and state, parameter in T) and lowp-state
 * (PyTorch AdamW with gradient, state and parameter in T).
 * Outputs, in data-flow order: each step's status (0 applied, 1 skipped, 2 stopped), the
 * scale after it, the value Adam updates (the master, or the parameter for lowp-state) and
 * the parameter the model holds, each T x n. The oracle runs the exact trajectory. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runner.h"
#include "kernels/adam/adam_math.h"
#include "core/kernel.h"
#include "kernels/loss_scale/loss_scale_math.h"
#include "kernels/schedule/schedule_spec.h"

#include "oracles/schedule_mpfr.h"

static const char *const pf_sched_dims[] = {"steps", "n"};
static const char *const pf_sched_inputs[] = {"p0", "curv", "noise"};
static const char *const pf_sched_decays[] = {"constant", "linear", "cosine", NULL};
static const char *const pf_sched_scalers[] = {"none", "deepspeed", "megatron", "pytorch", "static", NULL};
static const pf_param_desc pf_sched_params[PF_SCHED_NPARAMS] = {
    {"lr", PF_PARAM_REAL, 1e-3, 0, 10, NULL, "peak learning rate", 0, NULL},
    {"lr_final", PF_PARAM_REAL, 0, 0, 10, NULL, "learning rate after the decay (<= lr)", 0, NULL},
    {"warmup", PF_PARAM_INT, 0, 0, 1e9, NULL, "linear warm-up steps", 0, NULL},
    {"decay", PF_PARAM_CHOICE, 2, 0, 2, pf_sched_decays, "decay after warm-up, over the remaining steps", 0, NULL},
    {"beta1", PF_PARAM_REAL, 0.9, 0, 0.999999, NULL, "Adam beta1", 0, NULL},
    {"beta2", PF_PARAM_REAL, 0.999, 0, 0.9999999, NULL, "Adam beta2", 0, NULL},
    {"eps", PF_PARAM_REAL, 1e-8, 0, 1, NULL, "Adam eps", 0, NULL},
    {"wd", PF_PARAM_REAL, 0, 0, 10, NULL, "weight decay (AdamW)", 0, NULL},
    {"max_norm", PF_PARAM_REAL, 0, 0, 0x1p100, NULL, "clip the gradient's global norm to this; 0: no clipping", 0, NULL},
    {"tolerance", PF_PARAM_REAL, 0.01, 0x1p-60, 1e6, NULL,
     "divergent when |p - p_exact| > tolerance (|p_exact| + lr) at any step", 0, NULL},
    {"tensors", PF_PARAM_INT, 1, 1, 65536, NULL, "the n parameters form this many tensors (contiguous, sizes within one)", 0, NULL},
    {"noise_decay", PF_PARAM_REAL, 1, 0, 0x1p10, NULL, "the noise of step t (from 1) is multiplied by noise_decay^(t-1)", 0, NULL},
    {"spike_step", PF_PARAM_INT, 0, 0, 1e9, NULL, "a step (from 1) whose noise is multiplied by spike_mag; 0: none", 0, NULL},
    {"spike_mag", PF_PARAM_REAL, 1, 0, 0x1p100, NULL, "the spike's factor", 0, NULL},
    {"spike_tensor", PF_PARAM_INT, 0, 0, 65536, NULL, "the tensor (from 1) the spike hits; 0: all", 0, NULL},
    {"tiny_fraction", PF_PARAM_REAL, 0, 0, 1, NULL, "this fraction of the noise values becomes +-tiny_mag", 0, NULL},
    {"tiny_mag", PF_PARAM_REAL, 0x1p-20, 0x1p-126, 1, NULL, "the magnitude of the tiny noise values (fp16 normals start at 2^-14)", 0, NULL},
    {"nonfinite_from", PF_PARAM_INT, 0, 0, 1e9, NULL, "from this step (from 1) on the noise is +inf; 0: never", 0, NULL},
    {"scaler", PF_PARAM_CHOICE, 0, 0, 4, pf_sched_scalers, "loss scaler (the gradient is then held in T as fl_T(S g))", 0, NULL},
    {"scale0", PF_PARAM_REAL, 0, 0, 0x1p64, NULL, "initial loss scale; 0: the scaler's default", PF_HELD(PF_FP32), NULL},
    {"min_scale", PF_PARAM_REAL, 0, 0, 0x1p64, NULL, "smallest loss scale; 0: the scaler's default", PF_HELD(PF_FP32), NULL},
    {"window", PF_PARAM_INT, 0, 0, 1e9, NULL, "steps without overflow before the scale doubles; 0: the scaler's default", 0, NULL},
    {"hysteresis", PF_PARAM_INT, 0, 0, 1e6, NULL, "overflows tolerated before the scale halves; 0: the scaler's default", 0, NULL},
};

static size_t pf_sched_input_count(const pf_case *c, int i) { return i == 2 ? c->shape[0] * c->shape[1] : c->shape[1]; }
static pf_dtype pf_sched_input_dtype(const pf_case *c, int i) { return PF_FP32; }
static size_t pf_sched_output_count(const pf_case *c) { return 2 * c->shape[0] + 4 * c->shape[0] * c->shape[1]; }
static int pf_sched_lowp(const pf_case *c) { return pf_case_algo(c) == PF_SCHED_LOWP_STATE; }

static int pf_sched_stages(const pf_case *c, pf_stage *st) {
  const size_t T = c->shape[0], n = c->shape[1];
  const int f32 = PF_HELD(PF_FP32);
  st[0] = (pf_stage){"status", PF_SCHED_STATUS(T), T, 0, f32, 1, {0}, PF_MEASURE_NONE};
  st[1] = (pf_stage){"scale", PF_SCHED_SCALE(T), T, 0, f32, 1, {0}, PF_MEASURE_ELEMENT};
  /* the least step the run must take: binary64 bounds, not values of a dtype */
  st[2] = (pf_stage){"step", PF_SCHED_STEP(T), T * n, 0, PF_STAGE_MIXED, 2, {0, 1}, PF_MEASURE_NONE};
  st[3] = (pf_stage){"master", PF_SCHED_MASTER(T, n), T * n, 0, PF_HELD(pf_schedule_master_dtype(c)), 2, {0, 1}, PF_MEASURE_TRAJECTORY};
  st[4] = (pf_stage){"params", PF_SCHED_PARAMS(T, n), T * n, 0, 0, 2, {0, 1}, PF_MEASURE_TRAJECTORY};
  /* the second moment: what the stagnant hazard reads, not judged against the exact one */
  st[5] = (pf_stage){"v", PF_SCHED_V(T, n), T * n, 0, PF_HELD(pf_schedule_master_dtype(c)), 2, {0, 1}, PF_MEASURE_NONE};
  return 6;
}

static uint64_t pf_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Curvatures are magnitudes; the noise becomes the gradient stream. The tiny values are
 * chosen by a hash of the noise tensor's seed and the element's index (same case, same
 * positions). Every stream value is an fp32 value (the input's dtype). */
static void pf_sched_prepare(const pf_case *c, pf_tensor *in) {
  const size_t T = c->shape[0], n = c->shape[1];
  const double decay = c->params[PF_SP_NOISE_DECAY], mag = c->params[PF_SP_SPIKE_MAG];
  const double tiny = c->params[PF_SP_TINY_FRACTION], tiny_mag = pf_round(PF_FP32, c->params[PF_SP_TINY_MAG]);
  const long spike = (long)c->params[PF_SP_SPIKE_STEP], bad = (long)c->params[PF_SP_NONFINITE];
  const size_t spike_tensor = (size_t)c->params[PF_SP_SPIKE_TENSOR];
  for (size_t i = 0; i < in[1].n; i++) in[1].data[i] = fabs(in[1].data[i]);
  double f = 1;
  for (size_t t = 0; t < T; t++, f *= decay)
    for (size_t i = 0; i < n; i++) {
      double g = in[2].data[t * n + i] * f;
      if ((long)t + 1 == spike && (spike_tensor == 0 || pf_schedule_tensor_of(c, i) + 1 == spike_tensor)) g *= mag;
      if (tiny > 0 && (double)(pf_splitmix64(c->inputs[2].seed ^ (t * n + i) * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53 < tiny)
        g = copysign(tiny_mag, g);
      if (bad > 0 && (long)t + 1 >= bad) g = INFINITY;
      in[2].data[t * n + i] = pf_round(PF_FP32, g);
    }
}

static pf_status pf_sched_check(const pf_case *c) {
  const size_t T = c->shape[0], n = c->shape[1];
  const pf_lr_schedule s = pf_schedule_lr(c);
  if (s.decay_steps < 0) return pf_error(PF_ERR_ARG, "warmup (%ld) is longer than the trajectory", s.warmup_steps);
  if (c->params[PF_SP_TENSORS] > (double)n)
    return pf_error(PF_ERR_ARG, "tensors (%.0f) is more than the %zu parameters", c->params[PF_SP_TENSORS], n);
  if (c->params[PF_SP_SPIKE_TENSOR] > c->params[PF_SP_TENSORS])
    return pf_error(PF_ERR_ARG, "spike_tensor (%.0f) is past the last tensor (%.0f)", c->params[PF_SP_SPIKE_TENSOR],
                    c->params[PF_SP_TENSORS]);
  if (c->params[PF_SP_SPIKE_STEP] > (double)T)
    return pf_error(PF_ERR_ARG, "spike_step (%.0f) is past the last step (%zu)", c->params[PF_SP_SPIKE_STEP], T);
  if (c->params[PF_SP_NONFINITE] > (double)T)
    return pf_error(PF_ERR_ARG, "nonfinite_from (%.0f) is past the last step (%zu)", c->params[PF_SP_NONFINITE], T);
  if (pf_schedule_scaler(c) < 0)
    for (int k = PF_SP_SCALE0; k <= PF_SP_HYST; k++)
      if (c->params[k] != 0)
        return pf_error(PF_ERR_ARG, "%s is set but scaler is none", pf_sched_params[k].name);
  return pf_lr_schedule_check(&s);
}

/* A stopped run, or a step applied although the true gradient is not finite, is divergent; a
 * step skipped for overflow is the scaler's decision (its cost shows in the parameters). The
 * scale is the scaler's state: reported, not judged. Values off the tolerance are divergent. */
static pf_verdict pf_sched_refine(const pf_case *c, const pf_tensor *in, size_t i, double y, pf_verdict v,
                                  double rounded, pf_bound b) {
  const size_t T = c->shape[0], n = c->shape[1];
  if (i < PF_SCHED_SCALE(T))
    return y == PF_LS_STOPPED || (y == PF_LS_APPLIED && rounded == PF_LS_SKIPPED) ? PF_V_DIVERGENT : PF_V_OK;
  if (i < PF_SCHED_MASTER(T, n) || i >= PF_SCHED_V(T, n)) return PF_V_OK;
  return v == PF_V_OK || v == PF_V_RANGE ? v : PF_V_DIVERGENT;
}

static void pf_sched_review(const pf_case *c, pf_run *r);

/* stagnant (pf_stuck): Adam's second moment stopped moving. Over the steps both runs applied,
 * the exact trajectory's v changed at (element, step) pairs; at least half of them the run's v kept its
 * previous value bit for bit: its updates round away in the state's dtype (bf16 with beta2
 * close to 1: beta2 v rounds back to v, and (1 - beta2) g^2 is below half an ulp of v). */
static void pf_sched_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  (void)l;
  const size_t T = c->shape[0], n = c->shape[1];
  const double *y = r->out, *E = r->oracle.exact;
  pf_stuck s = {0};
  for (size_t t = 0; t < T; t++) {
    if (y[PF_SCHED_STATUS(T) + t] != PF_LS_APPLIED || E[PF_SCHED_STATUS(T) + t] != PF_LS_APPLIED) continue;
    for (size_t i = 0; i < n; i++) {
      const size_t x = PF_SCHED_V(T, n) + t * n + i;
      if (r->oracle.status[x] == PF_ORACLE_NUMBER && isfinite(y[x]))
        pf_stuck_add(&s, x, t ? y[x - n] : 0, y[x], t ? E[x - n] : 0, E[x]);
    }
  }
  if (pf_stuck_stagnant(&s)) {
    const size_t t = (s.first - PF_SCHED_V(T, n)) / n, i = (s.first - PF_SCHED_V(T, n)) % n;
    pf_run_flag_hazard(r, PF_H_STAGNANT, s.first, (double)s.stuck / (double)s.moved,
                       "v: at %zu of the %zu (step, parameter) pairs where the exact second moment moved, the run's "
                       "kept its value (first: parameter %zu at step %zu, %.6g): its updates round away in %s",
                       s.stuck, s.moved, i, t + 1, y[s.first], pf_dtype_name(pf_schedule_master_dtype(c)));
  }
}

static int pf_sched_input_dims(const pf_case *c, int i, int *d) {
  if (i == 2) { /* noise[step][parameter] */
    d[0] = 0, d[1] = 1;
    return 2;
  }
  d[0] = 1; /* p0, curv [parameter] */
  return 1;
}

/* per step and element: the emulation about 160 ns, the oracle 1.6 us (measured: 1000x1000) */
static void pf_sched_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 160e-9 * n;
  *oracle_s = 1.6e-6 * n;
}

/* The deviation from the exact trajectory per step: max over parameters of |p - p*| / (|p*| + lr). */
static size_t pf_schedule_deviation(const pf_case *c, const pf_run *r, double *dev, size_t max) {
  const size_t T = c->shape[0], n = c->shape[1];
  const double lr = pf_case_param(c, "lr");
  for (size_t t = 0; t < T && t < max; t++) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
      const size_t x = PF_SCHED_PARAMS(T, n) + t * n + i;
      const double e = fabs(r->out[x] - r->oracle.exact[x]) / (fabs(r->oracle.exact[x]) + lr);
      if (!(e <= d)) d = e;
    }
    dev[t] = d;
  }
  return T < max ? T : max;
}

/* the precision report's sweep: the scan along the learning rate, and a trajectory of each
 * variant and dtype against the exact one */
static const pf_op_sweep pf_schedule_sweep = {
    .kind = PF_SWEEP_TRAJECTORIES,
    .shape = "100x8", .along = "param:lr", .lo = 1e-4, .hi = 1e-1, .fail = "divergent", .cases_div = 2,
    .inputs = {"curv:scale=1", "noise:scale=0x1.47ae147ae147bp-7"},
    .fault_params = {"scaler=static", "scale0=1", "nonfinite_from=50"},
    .trajectory_shape = "200x8", .trajectory_shape_quick = "60x8",
    .trajectory_inputs = {"curv:scale=1", "noise:scale=0x1.47ae147ae147bp-7"},
    .trajectory_param = "lr",
    .trajectory = pf_schedule_deviation,
    .explanation =
        "Trajectories of loss scaling, clipping and AdamW on a quadratic with curvatures |N(0,1)| and gradient noise "
        "0.01, against the exact trajectory: divergent when a parameter leaves tolerance (|p*| + lr) (1%), an update is "
        "lost or the run stops. With fp32 masters (fp32-state) the run follows the exact trajectory; with the state and "
        "parameter in bf16 or fp16 (lowp-state, PyTorch) the decay and steps below half an ulp are lost and the "
        "parameters drift (the deviation versus step plot).",
};

int pf_decode_schedule_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* schedule_fuzzer.c */
const pf_op pf_schedule_op = {
    .name = "schedule",
    .summary = "T Adam steps with a learning-rate schedule, loss scaling and clipping on a quadratic, against the exact trajectory",
    .ndims = 2,
    .dim_names = pf_sched_dims,
    .dim_max = {100000, 65536},
    .dim_default = {200, 8},
    .elems_max = (size_t)1 << 22,
    .nparams = PF_SCHED_NPARAMS,
    .params = pf_sched_params,
    .ninputs = 3,
    .input_names = pf_sched_inputs,
    .input_count = pf_sched_input_count,
    .input_dtype = pf_sched_input_dtype,
    .output_count = pf_sched_output_count,
    .oracle = pf_schedule_mpfr,
    .stages = pf_sched_stages,
    .prepare = pf_sched_prepare,
    .refine = pf_sched_refine,
    .review = pf_sched_review,
    .input_dims = pf_sched_input_dims,
    .hazards = pf_sched_hazards,
    .cost = pf_sched_cost,
    .fuzz_decode = pf_decode_schedule_fuzzer,
    .sweep = &pf_schedule_sweep,
};

/* The step stage: the least step the run's own arithmetic must take from its state (p, g,
 * m, v) at Adam step t, for the lost-update check. The step u is computed in binary64, and
 * moved toward zero by a bound on the error of the run's arithmetic, which is absolute: the
 * terms of m and of the decoupled decay can cancel (u = lr (mhat/denom + wd p)), so a
 * relative margin on u is not one.
 * - fp32-state (FusedAdam): u from the hyperparameters as the kernel receives them in fp32.
 *   About 13 fp32 roundings (m: 3, v and the denominator: 4.5 relative to mhat/denom, the
 *   quotient 2, the decay and the sum 2, lr 1), each at most 2^-24 of a quantity bounded by
 *   A = lr (|b1 m| + |(1-b1) g|) / (bc1 denom) + lr |wd p|: 2^-19 A covers them.
 * - state in T (PyTorch): u with the exact hyperparameters; the split decay is what the check
 *   is for, so only binary64's own error (2^-48 A). */
typedef struct {
  double lr, b1, b2, eps, wd, bc1, bc2, k; /* the step's hyperparameters and the error factor */
} pf_sched_step_hyper;

static pf_sched_step_hyper pf_sched_step_hyper_of(const pf_case *c, const pf_lr_schedule *sched,
                                                  const pf_adam_hyper *h, long t) {
  if (pf_sched_lowp(c)) {
    const double b1 = c->params[PF_SP_BETA1], b2 = c->params[PF_SP_BETA2];
    return (pf_sched_step_hyper){pf_lr_at(sched, t), b1, b2, c->params[PF_SP_EPS], c->params[PF_SP_WD],
                                 1 - pow(b1, (double)t), 1 - pow(b2, (double)t), 0x1p-48};
  }
  return (pf_sched_step_hyper){h->lr, h->beta1, h->beta2, h->eps, h->wd, h->bc1, h->bc2, 0x1p-19};
}

static double pf_sched_least_step(const pf_sched_step_hyper *s, double p, double g, double m, double v) {
  const double mn = s->b1 * m + (1 - s->b1) * g, vn = s->b2 * v + (1 - s->b2) * g * g;
  const double denom = sqrt(vn / s->bc2) + s->eps;
  const double u = s->lr * (mn / s->bc1 / denom + s->wd * p);
  const double err = s->k * s->lr * ((fabs(s->b1 * m) + fabs((1 - s->b1) * g)) / s->bc1 / denom + fabs(s->wd * p));
  return fabs(u) <= err ? 0 : u > 0 ? u - err : u + err;
}

/* Where a run left fp32's range from finite values: the first step (from 1; 0: never) and
 * what overflowed. */
typedef struct {
  size_t step;
  const char *what;
} pf_sched_range;

static void pf_sched_range_note(pf_sched_range *rg, size_t t, const char *what) {
  if (rg && !rg->step) rg->step = t + 1, rg->what = what;
}

/* The run; rg (when given) receives the first overflow of an applied step's fp32 quantities
 * from a finite gradient. */
static pf_status pf_schedule_steps(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe,
                                   pf_sched_range *rg) {
  const size_t T = c->shape[0], n = c->shape[1], K = (size_t)c->params[PF_SP_TENSORS];
  if (rg) rg->step = 0, rg->what = NULL;
  const pf_dtype D = c->dtype, F = PF_FP32;
  const int lowp = pf_sched_lowp(c), scaler = pf_schedule_scaler(c);
  const int no_skip = strcmp(c->fault, "loss-scale-no-skip") == 0;
  const pf_lr_schedule sched = pf_schedule_lr(c);
  pf_ls_state ls = pf_schedule_scaler_start(c);
  double *p = malloc(n * sizeof(double)), *pm = malloc(n * sizeof(double)), *m = calloc(n, sizeof(double)),
         *v = calloc(n, sizeof(double)), *g = malloc(n * sizeof(double)), *part = malloc(K * sizeof(double));
  if (!p || !pm || !m || !v || !g || !part) {
    free(p), free(pm), free(m), free(v), free(g), free(part);
    return pf_error(PF_ERR_NOMEM, "schedule: cannot allocate %zu parameters", n);
  }
  for (size_t i = 0; i < n; i++) {
    pm[i] = in[0].data[i];            /* the fp32 master (fp32-state) */
    p[i] = pf_round_fe(D, pm[i], fe); /* the parameter the model holds */
    if (lowp) pm[i] = p[i];
  }
  double *step = out + PF_SCHED_STEP(T);
  long applied = 0; /* Adam's step count and the schedule's: skipped steps do not count */
  int status = PF_LS_APPLIED;
  for (size_t t = 0; t < T; t++) {
    if (status != PF_LS_STOPPED) {
      /* the true gradient from the model's parameter, in fp32 */
      for (size_t i = 0; i < n; i++) g[i] = pf_add(F, pf_mul(F, in[1].data[i], p[i], fe), in[2].data[t * n + i], fe);
      status = PF_LS_APPLIED;
      if (scaler >= 0) {
        /* backward of the scaled loss holds fl_T(S g); the overflow check; unscale in fp32 */
        const double S = ls.scale, inv = pf_round(F, 1.0 / S);
        int overflow = 0;
        for (size_t i = 0; i < n; i++) {
          g[i] = pf_round_fe(D, g[i] * S, fe);
          overflow |= !(g[i] - g[i] == 0);
        }
        status = pf_ls_update(scaler, &ls, overflow);
        if (no_skip && status == PF_LS_SKIPPED) status = PF_LS_APPLIED;
        for (size_t i = 0; i < n && status == PF_LS_APPLIED; i++) {
          const int finite = g[i] - g[i] == 0;
          g[i] = pf_mul(F, g[i], inv, fe);
          if (rg && finite && !(g[i] - g[i] == 0))
            pf_sched_range_note(rg, t, "the unscaled gradient fl32(h fl32(1/S)) (a loss scale below 1)");
        }
      }
      if (lowp)
        for (size_t i = 0; i < n; i++) g[i] = pf_round_fe(D, g[i], fe);
      if (status == PF_LS_APPLIED) {
        applied++;
        if (c->params[PF_SP_MAXNORM] > 0) {
          /* per-tensor sums of squares in fp32, summed in tensor order, sqrt in fp32 */
          for (size_t k = 0; k < K; k++) part[k] = 0;
          for (size_t i = 0; i < n; i++) {
            const size_t k = pf_schedule_tensor_of(c, i);
            part[k] = pf_add(F, part[k], pf_mul(F, g[i], g[i], fe), fe);
          }
          double sumsq = 0;
          for (size_t k = 0; k < K; k++) sumsq = pf_add(F, sumsq, part[k], fe);
          if (rg && !(sumsq - sumsq == 0)) { /* only the domain's run asks */
            int finite = 1;
            for (size_t i = 0; i < n; i++) finite &= g[i] - g[i] == 0;
            if (finite) pf_sched_range_note(rg, t, "the clipping norm's fp32 sum of squares");
          }
          const double norm = pf_round(F, sqrt(sumsq));
          const double coef = pf_div(F, pf_round(F, c->params[PF_SP_MAXNORM]), pf_add(F, norm, pf_round(F, 1e-6), fe), fe);
          if (coef < 1)
            for (size_t i = 0; i < n; i++) g[i] = pf_round_fe(lowp ? D : F, pf_mul(F, g[i], coef, fe), fe);
        }
        /* this step's hyperparameters, as the kernels receive them */
        const pf_adam_hyper h = pf_adam_hyper_make(pf_lr_at(&sched, applied), c->params[PF_SP_BETA1],
                                                   c->params[PF_SP_BETA2], c->params[PF_SP_EPS], c->params[PF_SP_WD],
                                                   (double)applied, 1);
        const pf_sched_step_hyper sh = pf_sched_step_hyper_of(c, &sched, &h, applied); /* once per step */
        for (size_t i = 0; i < n; i++) {
          step[t * n + i] = pf_sched_least_step(&sh, pm[i], g[i], m[i], v[i]);
          const int finite = rg && g[i] - g[i] == 0 && m[i] - m[i] == 0 && v[i] - v[i] == 0 && pm[i] - pm[i] == 0;
          unsigned afe = 0; /* this element's Adam step alone */
          if (lowp) {
            pf_adam_step(PF_ADAM_TORCH, PF_ADAM_MODE_ADAMW, D, D, &h, &p[i], g[i], &m[i], &v[i], &afe);
            pm[i] = p[i];
          } else {
            pf_adam_step(PF_ADAM_FUSED, PF_ADAM_MODE_ADAMW, F, F, &h, &pm[i], g[i], &m[i], &v[i], &afe);
            p[i] = pf_round_fe(D, pm[i], fe); /* write-back */
          }
          *fe |= afe;
          if (finite && (afe & PF_FE_OVERFLOW))
            pf_sched_range_note(rg, t, "Adam's arithmetic (g*g, v, or v over its bias correction)");
        }
      }
    }
    if (status != PF_LS_APPLIED)
      for (size_t i = 0; i < n; i++) step[t * n + i] = 0;
    out[PF_SCHED_STATUS(T) + t] = status;
    out[PF_SCHED_SCALE(T) + t] = scaler >= 0 ? ls.scale : 1;
    for (size_t i = 0; i < n; i++) {
      out[PF_SCHED_STEP(T) + t * n + i] = step[t * n + i];
      out[PF_SCHED_MASTER(T, n) + t * n + i] = pm[i];
      out[PF_SCHED_PARAMS(T, n) + t * n + i] = p[i];
      out[PF_SCHED_V(T, n) + t * n + i] = v[i];
    }
  }
  free(p), free(pm), free(m), free(v), free(g), free(part);
  return PF_OK;
}

pf_status pf_schedule_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  return pf_schedule_steps(c, in, out, fe, NULL);
}

/* The tolerance, stated per element against the exact trajectory: tolerance (|p*| + lr); the
 * status, the scale and the step are judged by refine and review. */
void pf_schedule_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t T = c->shape[0], n = c->shape[1], N = pf_sched_output_count(c);
  const double tol = c->params[PF_SP_TOL];
  for (size_t x = 0; x < N; x++) out[x] = x < PF_SCHED_MASTER(T, n) ? (pf_bound){0, 0} : (pf_bound){tol, tol * c->params[PF_SP_LR]};
}

/* Domain: finite starting point and curvatures; a non-finite gradient stream only with a
 * scaler that skips it for ever (megatron, pytorch, static: the exact run skips those steps
 * too). DeepSpeed stops by design (seed 000) and without a scaler nothing protects the
 * parameters: both are reported, outside the domain. */
int pf_schedule_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  if (pf_sched_lowp(c)) {
    snprintf(why, len, "PyTorch AdamW with its state in %s rounds the state and splits the decay from the step: "
             "measured (lost updates, departures), not promised", pf_dtype_name(c->dtype));
    return 0;
  }
  for (size_t x = 0; x < in[0].n; x++)
    if (fabs(in[0].data[x]) > pf_max_finite(c->dtype) / 2) {
      snprintf(why, len, "p0[%zu] = %g is beyond half of %s's range", x, in[0].data[x], pf_dtype_name(c->dtype));
      return 0;
    }
  for (int k = 0; k < 2; k++)
    for (size_t x = 0; x < in[k].n; x++)
      if (!isfinite(in[k].data[x])) {
        snprintf(why, len, "input %s has a non-finite value", pf_sched_inputs[k]);
        return 0;
      }
  if (c->params[PF_SP_EPS] == 0) {
    snprintf(why, len, "eps = 0: a v that underflows to 0 divides by 0");
    return 0;
  }
  const int scaler = pf_schedule_scaler(c);
  for (size_t x = 0; x < in[2].n; x++)
    if (!isfinite(in[2].data[x]) && (scaler < 0 || scaler == PF_LS_DEEPSPEED)) {
      snprintf(why, len, "step %zu: a non-finite gradient with %s", x / c->shape[1] + 1,
               scaler < 0 ? "no loss scaler to skip it" : "the deepspeed scaler, which stops the run");
      return 0;
    }
  /* The run itself (without a fault) says the rest:
   * - a step the scaler skips for an overflow of fl_T(S g) with a finite true gradient is how
   *   dynamic scaling probes its scale; the run then trails the exact one by a step, which no
   *   tolerance can bound near a minimum;
   * - an applied step whose fp32 arithmetic overflows from a finite gradient: a loss scale
   *   below 1 leaves fl_T(S g) finite while its unscaling overflows (the scaler checked the
   *   scaled values, as loss_scale's domain says), a gradient beyond about 2^64 overflows
   *   FusedAdam's (1 - beta2) g g, v or v / bc2 (the element's update is then 0, and with v
   *   infinite for ever after), or the norm's sum of squares overflows; the exact run has no
   *   range.
   * Both are reported, not promised; the earlier one names the reason. */
  const size_t T = c->shape[0], n = c->shape[1];
  double *o = malloc(pf_sched_output_count(c) * sizeof(double));
  if (!o) {
    snprintf(why, len, "cannot allocate the domain's run");
    return 0;
  }
  pf_case k = *c;
  k.fault[0] = 0;
  unsigned fe = 0;
  pf_sched_range rg;
  if (pf_schedule_steps(&k, in, o, &fe, &rg) != PF_OK) {
    free(o);
    snprintf(why, len, "the domain's run failed: %s", pf_error_message());
    return 0;
  }
  size_t skipped = 0;
  for (size_t t = 0; t < T && scaler >= 0 && !skipped; t++) {
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(in[2].data[t * n + i]) != 0;
    if (finite && o[PF_SCHED_STATUS(T) + t] == PF_LS_SKIPPED) skipped = t + 1;
  }
  int ok = 1;
  if (skipped && (!rg.step || skipped <= rg.step)) {
    snprintf(why, len, "step %zu skipped: fl_%s(S g) overflowed at scale %g while the true gradient is finite", skipped,
             pf_dtype_name(c->dtype), skipped > 1 ? o[PF_SCHED_SCALE(T) + skipped - 2] : pf_schedule_scaler_start(c).scale);
    ok = 0;
  } else if (rg.step) {
    snprintf(why, len, "step %zu: %s overflowed fp32 although the step's gradient was finite", rg.step, rg.what);
    ok = 0;
  }
  free(o);
  return ok;
}

/* The verdict's last word: lost updates, and the first step and parameter that left.
 * Lost update: the run applied step t and the value Adam updates stayed the same, although
 * the least step its arithmetic can take from its own state and gradient (the step stage:
 * pf_sched_least_step) moves it by more than half the gap to its neighbour in that
 * direction, so that rounding to nearest must have moved it: the step itself lost it (a
 * split decay, an underflowed state), whatever the trajectory did before. */
static void pf_sched_review(const pf_case *c, pf_run *r) {
  const size_t T = c->shape[0], n = c->shape[1];
  const pf_dtype Dm = pf_schedule_master_dtype(c);
  const double *y = r->out, *E = r->oracle.exact;
  size_t lost_at = (size_t)-1;
  double lost_u = 0, lost_gap = 0;
  /* the accuracy figures are the trajectory's: status and scale are control state */
  r->cmp.max_ulps = 0;
  r->cmp.max_rel = 0;
  for (size_t x = PF_SCHED_MASTER(T, n); x < PF_SCHED_V(T, n); x++) {
    const pf_dtype t = x < PF_SCHED_PARAMS(T, n) ? Dm : c->dtype;
    if (r->cmp.ulps[x] != INT64_MAX && r->cmp.ulps[x] > r->cmp.max_ulps) r->cmp.max_ulps = r->cmp.ulps[x], r->cmp.max_ulps_at = x;
    if (isfinite(y[x]) && isfinite(E[x]) && fabs(r->oracle.rounded[x]) >= pf_min_normal(t) && E[x] != 0 &&
        fabs(y[x] - E[x]) / fabs(E[x]) > r->cmp.max_rel)
      r->cmp.max_rel = fabs(y[x] - E[x]) / fabs(E[x]);
  }
  for (size_t t = 0; t < T; t++) {
    if (y[PF_SCHED_STATUS(T) + t] != PF_LS_APPLIED) continue;
    for (size_t i = 0; i < n; i++) {
      const size_t x = PF_SCHED_MASTER(T, n) + t * n + i;
      const double prev = t ? y[x - n] : pf_round(Dm, r->in[0].data[i]);
      if (y[x] != prev || !isfinite(prev) || r->cmp.elem[x] != PF_V_OK) continue;
      const double u = y[PF_SCHED_STEP(T) + t * n + i]; /* a decrease of the value */
      const double gap = fabs((u < 0 ? pf_next_up(Dm, prev) : pf_next_down(Dm, prev)) - prev);
      if (fabs(u) > gap / 2) {
        pf_run_set_verdict(r, x, PF_V_DIVERGENT);
        if (x < lost_at) lost_at = x, lost_u = u, lost_gap = gap;
      }
    }
  }
  /* the earliest step with a finding: its status, then its master, then its parameter */
  size_t at = (size_t)-1;
  for (size_t t = 0; t < T && at == (size_t)-1; t++) {
    if (pf_verdict_is_finding(r->cmp.elem[PF_SCHED_STATUS(T) + t])) at = PF_SCHED_STATUS(T) + t;
    for (int s = 0; s < 2 && at == (size_t)-1; s++)
      for (size_t i = 0; i < n && at == (size_t)-1; i++) {
        const size_t x = (s ? PF_SCHED_PARAMS(T, n) : PF_SCHED_MASTER(T, n)) + t * n + i;
        if (pf_verdict_is_finding(r->cmp.elem[x])) at = x;
      }
  }
  if (at == (size_t)-1) return;
  size_t skipped = 0, t = at < PF_SCHED_SCALE(T) ? at : (at - PF_SCHED_MASTER(T, n)) % (T * n) / n;
  for (size_t s = 0; s < t; s++) skipped += y[PF_SCHED_STATUS(T) + s] == PF_LS_SKIPPED && E[PF_SCHED_STATUS(T) + s] == PF_LS_APPLIED;
  char skips[96] = "";
  if (skipped) snprintf(skips, sizeof skips, " (the run had skipped %zu step%s for overflow that the exact run applied)", skipped, skipped > 1 ? "s" : "");
  r->born = at < PF_SCHED_SCALE(T) ? "status" : at < PF_SCHED_PARAMS(T, n) ? "master" : "params";
  r->born_at = at;
  const double S = y[PF_SCHED_SCALE(T) + t];
  if (at < PF_SCHED_SCALE(T)) {
    if (y[at] == PF_LS_STOPPED)
      snprintf(r->note, sizeof r->note,
               "the run stopped at step %zu: the gradients overflowed with the loss scale already at its minimum %g "
               "(DeepSpeed: \"Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\")",
               t + 1, S);
    else
      snprintf(r->note, sizeof r->note, "step %zu applied a gradient whose true value is not finite (it must be skipped)", t + 1);
    return;
  }
  const size_t i = (at - PF_SCHED_MASTER(T, n)) % n;
  const char *what = at < PF_SCHED_PARAMS(T, n) ? (Dm == c->dtype ? "the parameter" : "the fp32 master") : "the parameter";
  if (!isfinite(y[at]))
    snprintf(r->note, sizeof r->note, "%s %zu is not finite after step %zu (exact %.9g)%s", what, i, t + 1, E[at], skips);
  else if (at == lost_at)
    snprintf(r->note, sizeof r->note,
             "update lost at step %zu: %s %zu stayed %.9g while the step from the run's state is at least %.3g, more "
             "than half the gap %.3g to its neighbour%s",
             t + 1, what, i, y[at], lost_u, lost_gap, skips);
  else
    snprintf(r->note, sizeof r->note,
             "%s %zu left the exact trajectory at step %zu: %.9g, exact %.9g, allowed +-%.3g (tolerance (|p*| + lr))%s",
             what, i, t + 1, y[at], E[at], r->bound[at].rel * fabs(E[at]) + r->bound[at].abs, skips);
}

static const char *const pf_sched_faults[] = {"loss-scale-no-skip", NULL};
static const pf_kernel pf_sched_tab[] = {
    {PF_KERNEL_ABI, &pf_schedule_op, "fp32-state", "FusedAdam with fp32 master and state; the parameter in T",
     PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16), PF_DT(PF_FP32), pf_sched_faults,
     "every step's master and parameter within tolerance (|p_exact| + lr) of the exact trajectory, no update lost, "
     "no stop, no non-finite step applied",
     pf_schedule_cpu, pf_schedule_bound, pf_schedule_in_domain, pf_sched_check, NULL, PF_SCHED_FP32_STATE, NULL, NULL},
    {PF_KERNEL_ABI, &pf_schedule_op, "lowp-state", "PyTorch AdamW with gradient, state and parameter in T",
     PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16), PF_DT(PF_FP32), pf_sched_faults,
     "every step's parameter within tolerance (|p_exact| + lr) of the exact trajectory, no update lost, no stop, "
     "no non-finite step applied",
     pf_schedule_cpu, pf_schedule_bound, pf_schedule_in_domain, pf_sched_check, NULL, PF_SCHED_LOWP_STATE, NULL, NULL},
};
const pf_kernel *const pf_schedule_kernels[] = {&pf_sched_tab[0], &pf_sched_tab[1], NULL};
