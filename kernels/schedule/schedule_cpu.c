/* Training trajectories: T optimizer steps on a synthetic objective, in a chosen precision
 * configuration, against the same steps in exact arithmetic (issue 4).
 *
 * Objective: f(p) = sum_i h_i p_i^2 / 2 with curvatures h_i > 0 (the magnitudes drawn for
 * input "curv"), so the gradient is g_i = h_i p_i + noise_{t,i} (input "noise", one row per
 * step). Each step: g from the parameter the model holds, optional clipping by global norm
 * (Megatron, fp32), one Adam step (kernels/adam) with the learning rate of the schedule
 * (harness/schedule.h) at that step, write-back.
 * Variants: fp32-state (FusedAdam, fp32 master and state, parameter in T) and lowp-state
 * (PyTorch AdamW with gradient, state and parameter in T).
 * Outputs: the parameter after every step (steps x n, in T). The oracle runs the exact
 * trajectory; a parameter that leaves it by more than the tolerance is divergent, and the
 * first such element names the first step and parameter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/schedule.h"
#include "kernels/adam/adam_math.h"
#include "kernels/kernel.h"

pf_status pf_schedule_mpfr(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out);

enum { P_LR = 0, P_LR_FINAL, P_WARMUP, P_DECAY, P_BETA1, P_BETA2, P_EPS, P_WD, P_MAXNORM, P_TOL };

static const char *const pf_sched_dims[] = {"steps", "n"};
static const char *const pf_sched_inputs[] = {"p0", "curv", "noise"};
static const char *const pf_sched_decays[] = {"constant", "linear", "cosine", NULL};
static const pf_param_desc pf_sched_params[] = {
    {"lr", PF_PARAM_REAL, 1e-3, 0, 10, NULL, "peak learning rate"},
    {"lr_final", PF_PARAM_REAL, 0, 0, 10, NULL, "learning rate after the decay (<= lr)"},
    {"warmup", PF_PARAM_INT, 0, 0, 1e9, NULL, "linear warm-up steps"},
    {"decay", PF_PARAM_CHOICE, 2, 0, 2, pf_sched_decays, "decay after warm-up, over the remaining steps"},
    {"beta1", PF_PARAM_REAL, 0.9, 0, 0.999999, NULL, "Adam beta1"},
    {"beta2", PF_PARAM_REAL, 0.999, 0, 0.9999999, NULL, "Adam beta2"},
    {"eps", PF_PARAM_REAL, 1e-8, 0, 1, NULL, "Adam eps"},
    {"wd", PF_PARAM_REAL, 0, 0, 10, NULL, "weight decay (AdamW)"},
    {"max_norm", PF_PARAM_REAL, 0, 0, 0x1p100, NULL, "clip the gradient's global norm to this; 0: no clipping"},
    {"tolerance", PF_PARAM_REAL, 0.01, 0x1p-60, 1e6, NULL,
     "divergent when |p - p_exact| > tolerance (|p_exact| + lr) at any step"},
};

static size_t pf_sched_input_count(const pf_case *c, int i) { return i == 2 ? c->shape[0] * c->shape[1] : c->shape[1]; }
static pf_dtype pf_sched_input_dtype(const pf_case *c, int i) { return PF_FP32; }
static size_t pf_sched_output_count(const pf_case *c) { return c->shape[0] * c->shape[1]; }
static int pf_sched_lowp(const pf_case *c) { return strcmp(c->variant, "lowp-state") == 0; }

/* curvatures are magnitudes */
static void pf_sched_prepare(const pf_case *c, pf_tensor *in) {
  for (size_t i = 0; i < in[1].n; i++) in[1].data[i] = fabs(in[1].data[i]);
}

static pf_lr_schedule pf_sched_lr(const pf_case *c) {
  const pf_lr_schedule s = {c->params[P_LR], c->params[P_LR_FINAL], (long)c->params[P_WARMUP],
                            (long)c->shape[0] - (long)c->params[P_WARMUP], (pf_decay_kind)(int)c->params[P_DECAY]};
  return s;
}

static pf_status pf_sched_check(const pf_case *c) {
  const pf_lr_schedule s = pf_sched_lr(c);
  if (s.decay_steps < 0) return pf_error(PF_ERR_ARG, "warmup (%ld) is longer than the trajectory", s.warmup_steps);
  return pf_lr_schedule_check(&s);
}

/* Divergent: an element out of its tolerance, or not finite where the exact one is. */
static pf_verdict pf_sched_refine(const pf_case *c, const pf_tensor *in, size_t i, double y, pf_verdict v,
                                  double rounded, pf_bound b) {
  return v == PF_V_OK || v == PF_V_RANGE ? v : PF_V_DIVERGENT;
}

const pf_op pf_schedule_op = {
    .name = "schedule",
    .summary = "T Adam steps with a learning-rate schedule on a quadratic, against the exact trajectory",
    .ndims = 2,
    .dim_names = pf_sched_dims,
    .dim_max = {100000, 65536},
    .dim_default = {200, 8},
    .elems_max = (size_t)1 << 22,
    .nparams = 10,
    .params = pf_sched_params,
    .ninputs = 3,
    .input_names = pf_sched_inputs,
    .input_count = pf_sched_input_count,
    .input_dtype = pf_sched_input_dtype,
    .output_count = pf_sched_output_count,
    .oracle = pf_schedule_mpfr,
    .prepare = pf_sched_prepare,
    .refine = pf_sched_refine,
};

pf_status pf_schedule_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t T = c->shape[0], n = c->shape[1];
  const pf_dtype D = c->dtype, F = PF_FP32;
  const int lowp = pf_sched_lowp(c);
  const pf_lr_schedule sched = pf_sched_lr(c);
  double *p = malloc(n * sizeof(double)), *pm = malloc(n * sizeof(double)), *m = calloc(n, sizeof(double)),
         *v = calloc(n, sizeof(double)), *g = malloc(n * sizeof(double));
  if (!p || !pm || !m || !v || !g) {
    free(p), free(pm), free(m), free(v), free(g);
    return pf_error(PF_ERR_NOMEM, "schedule: cannot allocate %zu parameters", n);
  }
  for (size_t i = 0; i < n; i++) {
    pm[i] = in[0].data[i];          /* the fp32 master (fp32-state) */
    p[i] = pf_round_fe(D, pm[i], fe); /* the parameter the model holds */
  }
  for (size_t t = 0; t < T; t++) {
    /* gradient from the model's parameter, in fp32; stored in D for lowp-state */
    double sumsq = 0;
    for (size_t i = 0; i < n; i++) {
      g[i] = pf_add(F, pf_mul(F, in[1].data[i], p[i], fe), in[2].data[t * n + i], fe);
      if (lowp) g[i] = pf_round_fe(D, g[i], fe);
      sumsq = pf_add(F, sumsq, pf_mul(F, g[i], g[i], fe), fe);
    }
    if (c->params[P_MAXNORM] > 0) {
      const double norm = pf_round(F, sqrt(sumsq));
      const double coef = pf_div(F, pf_round(F, c->params[P_MAXNORM]), pf_add(F, norm, pf_round(F, 1e-6), fe), fe);
      if (coef < 1)
        for (size_t i = 0; i < n; i++) g[i] = pf_round_fe(lowp ? D : F, pf_mul(F, g[i], coef, fe), fe);
    }
    /* this step's hyperparameters, as the kernels receive them */
    const pf_adam_hyper h = pf_adam_hyper_make(pf_lr_at(&sched, (long)t + 1), c->params[P_BETA1], c->params[P_BETA2],
                                               c->params[P_EPS], c->params[P_WD], (double)t + 1, 1);
    for (size_t i = 0; i < n; i++) {
      if (lowp) {
        pf_adam_step(PF_ADAM_TORCH, PF_ADAM_MODE_ADAMW, D, D, &h, &p[i], g[i], &m[i], &v[i], fe);
      } else {
        pf_adam_step(PF_ADAM_FUSED, PF_ADAM_MODE_ADAMW, F, F, &h, &pm[i], g[i], &m[i], &v[i], fe);
        p[i] = pf_round_fe(D, pm[i], fe); /* write-back */
      }
      out[t * n + i] = p[i];
    }
  }
  free(p), free(pm), free(m), free(v), free(g);
  return PF_OK;
}

/* The tolerance, stated per element against the exact trajectory: tolerance (|p*| + lr). */
void pf_schedule_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t N = c->shape[0] * c->shape[1];
  const double tol = c->params[P_TOL];
  for (size_t x = 0; x < N; x++) out[x] = (pf_bound){tol, tol * c->params[P_LR]};
}

/* Domain: finite inputs. The tolerance is the contract; leaving it anywhere is a finding. */
int pf_schedule_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  for (int k = 0; k < 3; k++)
    for (size_t x = 0; x < in[k].n; x++)
      if (!isfinite(in[k].data[x])) {
        snprintf(why, len, "input %s has a non-finite value", pf_sched_inputs[k]);
        return 0;
      }
  return 1;
}

static const char *const pf_sched_no_faults[] = {NULL};
static const pf_kernel pf_sched_tab[] = {
    {PF_KERNEL_ABI, &pf_schedule_op, "fp32-state", "FusedAdam with fp32 master and state; the parameter in T",
     PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16), PF_DT(PF_FP32), pf_sched_no_faults,
     "every step's parameter within tolerance (|p_exact| + lr) of the exact trajectory", pf_schedule_cpu,
     pf_schedule_bound, pf_schedule_in_domain, pf_sched_check, NULL},
    {PF_KERNEL_ABI, &pf_schedule_op, "lowp-state", "PyTorch AdamW with gradient, state and parameter in T",
     PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16), PF_DT(PF_FP32), pf_sched_no_faults,
     "every step's parameter within tolerance (|p_exact| + lr) of the exact trajectory", pf_schedule_cpu,
     pf_schedule_bound, pf_schedule_in_domain, pf_sched_check, NULL},
};
const pf_kernel *const pf_schedule_kernels[] = {&pf_sched_tab[0], &pf_sched_tab[1], NULL};
