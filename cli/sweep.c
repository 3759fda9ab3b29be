/* The sweep (sweep.h): what each operation says to search (pf_op.sweep), run over every variant,
 * dtype and accumulation on a pool of threads; each job writes its own part of the results,
 * assembled in a fixed order, so the document does not depend on the number of threads. */
#include "cli/sweep.h"
#include "core/tensorfile.h"

#include <cjson/cJSON.h>
#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/boundary.h"
#include "cli/caseopts.h"
#include "cli/minimize.h"
#include "core/progress.h"
#include "core/runner.h"

#ifndef PF_C_COMPILER
#define PF_C_COMPILER "unknown"
#endif
#ifndef PF_CUDA_TOOLKIT
#define PF_CUDA_TOOLKIT "none found at build time"
#endif

/* What to search for each operation is its own (pf_op.sweep, kernels/<op>/): the sweep runs
 * every operation that has one, in registry order. */

/* ---- the jobs ------------------------------------------------------------------------------ */

typedef enum { J_CONFIG, J_TRAJECTORY, J_FAULT, J_DIFFERENTIAL } pf_job_kind;

typedef struct {
  pf_job_kind kind;
  const pf_op *op;
  const pf_kernel *k;
  pf_dtype dtype, accum;
  const char *fault;
  cJSON *result;
  int skipped; /* the backend cannot run this configuration (said in the results' environment) */
  char error[512];
} pf_job;

typedef struct {
  const pf_sweep_opts *o;
  pf_job *jobs;
  size_t njobs, next, done;
  pthread_mutex_t lock;
  pf_progress progress; /* a terminal's line, a log's line every 30 s (core/progress.h) */
} pf_pool;

static const char *pf_accum_name(pf_dtype dtype, pf_dtype accum) {
  return accum == dtype && dtype != PF_FP32 ? "storage" : pf_dtype_name(accum);
}

/* run_opts for kernel/variant/dtype/accum with a shape, input specs and parameters. */
static int pf_sweep_opts_for(run_opts *r, const pf_kernel *k, pf_dtype t, pf_dtype a, const char *shape,
                             const char *const *inputs, const char *const *params, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->kernel = k->op->name;
  r->variant = k->variant;
  r->dtype = t;
  r->accum = a;
  r->seed = seed;
  r->cases = 1;
  r->oracle_prec = 256;
  pf_gen_default(&r->gen);
  if (shape) {
    if (pf_parse_shape(shape, k->op, r->shape)) return -1;
    r->have_shape = 1;
  }
  for (int i = 0; inputs && i < 3 && inputs[i]; i++) r->input_spec[r->ninput_specs++] = inputs[i];
  for (int i = 0; params && i < 3 && params[i]; i++) {
    const char *eq = strchr(params[i], '=');
    if (!eq) return -1;
    r->param_name[r->nparams] = strndup(params[i], (size_t)(eq - params[i]));
    r->param_value[r->nparams++] = eq + 1;
  }
  return 0;
}

static void pf_sweep_opts_release(run_opts *r) {
  for (int i = 0; i < r->nparams; i++) free((char *)r->param_name[i]);
}

static cJSON *pf_num_or_null(double x) { return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

static void pf_add_value(cJSON *o, const char *key, double x) {
  char h[40], k2[64];
  pf_hexfloat(h, x);
  cJSON_AddItemToObject(o, key, pf_num_or_null(x));
  snprintf(k2, sizeof k2, "%s_hex", key);
  cJSON_AddStringToObject(o, k2, h);
}

/* One threshold search, as JSON. */
static cJSON *pf_sweep_threshold_json(const pf_sweep_search *th, const pf_kernel *k, pf_dtype t, pf_dtype a,
                                      const pf_sweep_opts *so, const pf_oracle_opts *oo, char *err, size_t elen) {
  run_opts r;
  pf_case c;
  if (pf_sweep_opts_for(&r, k, t, a, th->shape, th->inputs, NULL, so->seed)) {
    snprintf(err, elen, "%s: bad shape '%s'", th->name, th->shape);
    return NULL;
  }
  if (pf_build_case(k, &r, so->seed, &c)) {
    snprintf(err, elen, "%s: cannot build its case", th->name);
    return NULL;
  }
  pf_axis ax;
  pf_fail_set fail;
  cJSON *j = NULL;
  if (pf_axis_parse(&c, th->along, &ax) || pf_fail_set_parse(th->fail, &fail)) {
    snprintf(err, elen, "%s: %s", th->name, pf_error_message());
    goto out;
  }
  double lo, hi, llo, lhi;
  pf_axis_limits(&c, &ax, &llo, &lhi);
  const double least = ax.format < PF_NDTYPES ? pf_min_subnormal((pf_dtype)ax.format) : llo;
  lo = th->lo == 0 ? least : th->lo == -1 ? llo : th->lo;
  hi = th->hi == 0 ? lhi : th->hi == -1 ? -least : th->hi;
  pf_threshold res;
  if (pf_boundary_threshold(&c, &ax, lo, hi, fail, so->points, oo, &res)) {
    snprintf(err, elen, "%s: %s", th->name, pf_error_message());
    goto out;
  }
  j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "name", th->name);
  cJSON_AddStringToObject(j, "shape", th->shape);
  cJSON_AddStringToObject(j, "along", th->along);
  cJSON_AddStringToObject(j, "format", pf_bfmt_name(ax.format));
  cJSON_AddStringToObject(j, "fail", th->fail);
  pf_add_value(j, "lo", res.lo);
  pf_add_value(j, "hi", res.hi);
  cJSON_AddBoolToObject(j, "found", res.found);
  cJSON_AddNumberToObject(j, "grid_changes", res.changes);
  cJSON_AddNumberToObject(j, "runs", (double)res.runs);
  if (res.found) {
    const double good = res.bad_above ? res.below : res.above, bad = res.bad_above ? res.above : res.below;
    char line[1536], e[48];
    cJSON_AddStringToObject(j, "bad", res.bad_above ? "above" : "below");
    pf_add_value(j, "last_good", good);
    pf_add_value(j, "first_bad", bad);
    cJSON_AddStringToObject(j, "first_bad_verdict", pf_verdict_name(res.bad_above ? res.v_above : res.v_below));
    cJSON_AddStringToObject(j, "first_bad_events", pf_fe_str(res.bad_above ? res.fe_above : res.fe_below, e));
    cJSON_AddStringToObject(j, "detail", res.detail);
    pf_axis_reproduce_line(&c, &r, &ax, bad, so->seed, line, sizeof line);
    cJSON_AddStringToObject(j, "replay", line);
  }
out:
  pf_case_free(&c);
  pf_sweep_opts_release(&r);
  return j;
}

/* A finding of the scan: the case, its description, minimized, and the command that runs it. */
static cJSON *pf_sweep_finding_json(const pf_case *tmpl, const run_opts *r, const pf_axis *ax, double x, uint64_t seed,
                                    const pf_oracle_opts *oo) {
  pf_case c;
  if (pf_axis_apply(tmpl, ax, x, &c)) return NULL;
  pf_run run;
  cJSON *j = NULL;
  if (!pf_run_case(&c, oo, &run)) {
    char d[1024], line[1536];
    pf_run_describe(&c, &run, d, sizeof d);
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "verdict", pf_verdict_name(run.cmp.verdict));
    cJSON_AddStringToObject(j, "line", d);
    if (run.note[0]) cJSON_AddStringToObject(j, "why", run.note);
    pf_axis_reproduce_line(tmpl, r, ax, x, seed, line, sizeof line);
    cJSON_AddStringToObject(j, "replay", line);
    size_t runs = 0;
    const size_t after = pf_minimize_case(&c, run.cmp.verdict, &runs);
    cJSON_AddNumberToObject(j, "minimized_elements", (double)after);
    cJSON_AddItemToObject(j, "minimized", pf_case_to_cjson(&c));
  }
  pf_run_free(&run);
  pf_case_free(&c);
  return j;
}

/* The rounding-bias probe: the operation's probe cases (one shape, one scale) in this
 * configuration, biased's test over all their units at once, by stage (run's "rounding bias
 * pooled over the cases"): a bias too small for one case shows over many, and a training run
 * takes many steps. NULL when the operation has no probe; on an error, jb->error or skipped. */
static cJSON *pf_sweep_bias_json(pf_job *jb, const pf_sweep_opts *so, const pf_oracle_opts *oo) {
  const pf_op_sweep *sp = jb->op->sweep;
  const pf_kernel *k = jb->k;
  const unsigned n = so->quick ? sp->bias_cases_quick : sp->bias_cases;
  if (!sp->bias_shape || !n) return NULL;
  run_opts r;
  if (pf_sweep_opts_for(&r, k, jb->dtype, jb->accum, sp->bias_shape, NULL, NULL, so->seed)) {
    snprintf(jb->error, sizeof jb->error, "%s/%s: cannot set up the bias probe", k->op->name, k->variant);
    return NULL;
  }
  r.gen.scale = sp->bias_scale;
  pf_hazard_tally hz = {0};
  unsigned inside = 0;
  for (unsigned i = 0; i < n && !jb->error[0] && !jb->skipped; i++) {
    pf_case c;
    if (pf_build_case(k, &r, so->seed + i, &c)) {
      snprintf(jb->error, sizeof jb->error, "%s/%s: bias probe: %s", k->op->name, k->variant, pf_error_message());
      break;
    }
    pf_run run;
    const pf_status st = pf_run_case(&c, oo, &run);
    if (st == PF_ERR_UNSUPPORTED) jb->skipped = 1;
    else if (st)
      snprintf(jb->error, sizeof jb->error, "%s/%s %s: bias probe: %s", k->op->name, k->variant, pf_dtype_name(jb->dtype),
               pf_error_message());
    else if (run.in_domain && !run.skipped)
      pf_hazard_tally_add(&hz, &run), inside++;
    pf_run_free(&run);
    pf_case_free(&c);
  }
  pf_sweep_opts_release(&r);
  if (jb->error[0] || jb->skipped) return NULL;
  pf_hazard_limits def; /* the limits the probe's runs were judged with */
  const pf_hazard_limits *lim = pf_hazard_limits_or_default(oo->hazard_limits, &def);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "shape", sp->bias_shape);
  cJSON_AddNumberToObject(b, "scale", sp->bias_scale);
  cJSON_AddNumberToObject(b, "cases", inside);
  cJSON_AddNumberToObject(b, "t_limit", lim->bias_z);
  cJSON_AddNumberToObject(b, "mean_limit", lim->bias_ulps);
  cJSON *stages = cJSON_AddArrayToObject(b, "stages");
  for (int si = 0; si < hz.bias.nstages; si++) {
    if (hz.bias.st[si].n < 2) continue;
    double mean[2], t[2];
    const int how = pf_bias_pool_test(&hz.bias, si, lim, mean, t);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "stage", hz.bias.st[si].name);
    cJSON_AddNumberToObject(e, "units", (double)hz.bias.st[si].n);
    cJSON_AddItemToObject(e, "mean_upward", pf_num_or_null(mean[0]));
    cJSON_AddItemToObject(e, "t_upward", pf_num_or_null(t[0]));
    cJSON_AddItemToObject(e, "mean_away", pf_num_or_null(mean[1]));
    cJSON_AddItemToObject(e, "t_away", pf_num_or_null(t[1]));
    cJSON_AddStringToObject(e, "biased", how < 0    ? ""
                                         : how == 0 ? (mean[0] > 0 ? "upward" : "downward")
                                                    : (mean[1] > 0 ? "away from zero" : "toward zero"));
    cJSON_AddItemToArray(stages, e);
  }
  return b;
}

static void pf_job_config(pf_job *jb, const pf_sweep_opts *so) {
  const pf_op_sweep *sp = jb->op->sweep;
  const pf_kernel *k = jb->k;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.backend = so->backend;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "kernel", k->op->name);
  cJSON_AddStringToObject(j, "variant", k->variant);
  cJSON_AddStringToObject(j, "dtype", pf_dtype_name(jb->dtype));
  cJSON_AddStringToObject(j, "accum", pf_accum_name(jb->dtype, jb->accum));
  cJSON_AddStringToObject(j, "contract", k->contract);
  /* the accuracy scan */
  unsigned n = so->cases / (sp->cases_div ? sp->cases_div : 1);
  if (n < 1) n = 1;
  run_opts r;
  pf_case *tm = calloc(n, sizeof *tm);
  unsigned built = 0;
  if (!tm || pf_sweep_opts_for(&r, k, jb->dtype, jb->accum, sp->shape, sp->inputs, sp->params, so->seed)) {
    snprintf(jb->error, sizeof jb->error, "%s/%s: cannot set up the scan", k->op->name, k->variant);
    free(tm);
    cJSON_Delete(j);
    return;
  }
  for (; built < n; built++)
    if (pf_build_case(k, &r, so->seed + built, &tm[built])) break;
  pf_axis ax;
  pf_fail_set fail;
  pf_probability p;
  memset(&p, 0, sizeof p);
  pf_status pst = PF_OK;
  if (built < n || pf_axis_parse(&tm[0], sp->along, &ax) || pf_fail_set_parse(sp->fail, &fail) ||
      (pst = pf_boundary_probability(tm, n, &ax, sp->lo, sp->hi, fail, so->points, 6, &oo, &p))) {
    if (pst == PF_ERR_UNSUPPORTED) jb->skipped = 1; /* e.g. a GEMM accumulation cuBLAS has no compute type for */
    else
      snprintf(jb->error, sizeof jb->error, "%s/%s %s: scan: %s", k->op->name, k->variant, pf_dtype_name(jb->dtype),
               pf_error_message());
  } else {
    cJSON *s = cJSON_AddObjectToObject(j, "scan");
    cJSON_AddStringToObject(s, "along", sp->along);
    cJSON_AddStringToObject(s, "shape", sp->shape);
    cJSON_AddStringToObject(s, "fail", sp->fail);
    cJSON_AddNumberToObject(s, "cases", n);
    cJSON *pts = cJSON_AddArrayToObject(s, "points");
    int64_t max_ulps = 0;
    double max_rel = 0;
    unsigned findings = 0, outside = 0;
    pf_hazard_tally hz = {0};
    const pf_prob_point *first_finding = NULL;
    for (size_t i = 0; i < p.npoints; i++) {
      const pf_prob_point *q = &p.points[i];
      cJSON *e = cJSON_CreateObject();
      pf_add_value(e, "x", q->x);
      cJSON_AddNumberToObject(e, "fails", q->fails);
      cJSON_AddNumberToObject(e, "outside_domain", q->outside);
      cJSON_AddNumberToObject(e, "findings", q->findings);
      cJSON_AddItemToObject(e, "max_ulps", q->outside < n ? cJSON_CreateNumber((double)q->max_ulps) : cJSON_CreateNull());
      cJSON_AddItemToObject(e, "max_rel", q->outside < n ? pf_num_or_null(q->max_rel) : cJSON_CreateNull());
      cJSON_AddItemToObject(e, "max_error", q->outside < n ? pf_num_or_null(q->hz.max_err) : cJSON_CreateNull());
      cJSON_AddItemToObject(e, "max_bound_use", q->outside < n ? pf_num_or_null(q->hz.max_use) : cJSON_CreateNull());
      cJSON_AddItemToArray(pts, e);
      if (q->max_ulps > max_ulps) max_ulps = q->max_ulps;
      if (q->max_rel > max_rel) max_rel = q->max_rel;
      pf_hazard_tally_merge(&hz, &q->hz);
      findings += q->findings;
      outside += q->outside;
      if (q->findings && !first_finding) first_finding = q;
    }
    for (int w = 0; w < 2; w++) {
      cJSON *q = cJSON_AddObjectToObject(s, w ? "half" : "first_failure");
      const int found = w ? p.half_found : p.first_found;
      cJSON_AddBoolToObject(q, "found", found);
      if (!found) continue;
      pf_add_value(q, "x", w ? p.half_x : p.first_x);
      const double prev = w ? p.half_prev : p.first_prev;
      if (!isnan(prev)) pf_add_value(q, "below", prev);
      cJSON_AddNumberToObject(q, "fails", w ? p.half_fails : p.first_fails);
    }
    cJSON_AddNumberToObject(s, "runs", (double)p.runs);
    cJSON_AddNumberToObject(j, "max_ulps", (double)max_ulps);
    cJSON_AddNumberToObject(j, "max_rel", max_rel);
    cJSON_AddNumberToObject(j, "findings", findings);
    cJSON_AddNumberToObject(j, "cases_outside_domain", outside);
    /* hazards and torch.testing over the scan's cases inside the domain */
    cJSON_AddNumberToObject(j, "max_error", hz.max_err);
    cJSON_AddItemToObject(j, "max_bound_use", pf_num_or_null(hz.max_use));
    cJSON_AddNumberToObject(j, "hazard_cases", (double)hz.any);
    cJSON *hj = cJSON_AddObjectToObject(j, "hazards");
    for (int h = 0; h < PF_NHAZARDS; h++) cJSON_AddNumberToObject(hj, pf_hazard_name((pf_hazard)h), (double)hz.hazard[h]);
    cJSON *tj = cJSON_AddObjectToObject(j, "torch_testing");
    cJSON_AddNumberToObject(tj, "rejects", (double)hz.tt_rejects);
    cJSON_AddNumberToObject(tj, "passes_finding", (double)hz.tt_pass_finding);
    cJSON_AddNumberToObject(tj, "passes_hazard", (double)hz.tt_pass_hazard);
    cJSON_AddNumberToObject(tj, "rejects_sound", (double)hz.tt_reject_sound);
    cJSON *fs = cJSON_AddArrayToObject(j, "finding_cases");
    if (first_finding) {
      cJSON *f = pf_sweep_finding_json(&tm[first_finding->finding_case], &r, &ax, first_finding->x,
                                       so->seed + (uint64_t)first_finding->finding_case, &oo);
      if (f) cJSON_AddItemToArray(fs, f);
    }
  }
  pf_probability_free(&p);
  for (unsigned i = 0; i < built; i++) pf_case_free(&tm[i]);
  free(tm);
  pf_sweep_opts_release(&r);
  if (!jb->error[0] && !jb->skipped) {
    cJSON *bias = pf_sweep_bias_json(jb, so, &oo);
    if (bias) cJSON_AddItemToObject(j, "bias", bias);
  }
  cJSON *ths = cJSON_AddArrayToObject(j, "thresholds");
  for (int t = 0; t < 3 && sp->searches[t].name && !jb->error[0] && !jb->skipped; t++) {
    cJSON *tj = pf_sweep_threshold_json(&sp->searches[t], k, jb->dtype, jb->accum, so, &oo, jb->error, sizeof jb->error);
    if (tj) cJSON_AddItemToArray(ths, tj);
  }
  if (jb->error[0] || jb->skipped) {
    cJSON_Delete(j);
    return;
  }
  jb->result = j;
}

/* One trajectory of the variant against the exact one: its deviation at each step (the
 * operation's measure, pf_op_sweep.trajectory). */
static void pf_job_trajectory(pf_job *jb, const pf_sweep_opts *so) {
  const pf_kernel *k = jb->k;
  const pf_op_sweep *sp = jb->op->sweep;
  run_opts r;
  pf_case c;
  const char *shape = so->quick ? sp->trajectory_shape_quick : sp->trajectory_shape;
  if (pf_sweep_opts_for(&r, k, jb->dtype, PF_FP32, shape, sp->trajectory_inputs, NULL, so->seed) ||
      pf_build_case(k, &r, so->seed, &c)) {
    snprintf(jb->error, sizeof jb->error, "trajectory %s: cannot build its case", k->variant);
    return;
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.backend = so->backend;
  pf_run run;
  double *dev = NULL;
  const size_t steps = c.shape[0];
  if (pf_run_case(&c, &oo, &run)) {
    snprintf(jb->error, sizeof jb->error, "trajectory %s: %s", k->variant, pf_error_message());
  } else if (!(dev = malloc((steps ? steps : 1) * sizeof *dev))) {
    snprintf(jb->error, sizeof jb->error, "trajectory %s: out of memory", k->variant);
  } else {
    const size_t nd = sp->trajectory(&c, &run, dev, steps);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "variant", k->variant);
    cJSON_AddStringToObject(j, "dtype", pf_dtype_name(jb->dtype));
    cJSON_AddStringToObject(j, "shape", shape);
    cJSON_AddNumberToObject(j, sp->trajectory_param, pf_case_param(&c, sp->trajectory_param));
    cJSON_AddStringToObject(j, "verdict", pf_verdict_name(run.cmp.verdict));
    if (run.note[0]) cJSON_AddStringToObject(j, "why", run.note);
    cJSON *da = cJSON_AddArrayToObject(j, "deviation");
    for (size_t t = 0; t < nd; t++) cJSON_AddItemToArray(da, pf_num_or_null(dev[t]));
    char line[1536];
    pf_reproduce_line(&c, &r, so->seed, line, sizeof line);
    cJSON_AddStringToObject(j, "replay", line);
    jb->result = j;
  }
  free(dev);
  pf_run_free(&run);
  pf_case_free(&c);
  pf_sweep_opts_release(&r);
}

/* What the fault's own runs need (pf_op_sweep.fault_settings): its dtype into *t, its
 * parameters added to r. */
static void pf_fault_settings_apply(const pf_op_sweep *sp, const char *fault, run_opts *r, pf_dtype *t) {
  for (const pf_fault_setting *s = sp->fault_settings; s && s->fault; s++) {
    if (strcmp(s->fault, fault) != 0) continue;
    if (s->dtype) pf_dtype_parse(s->dtype, t);
    for (int i = 0; i < 4 && s->params[i] && r->nparams < PF_MAX_PARAMS; i++) {
      const char *eq = strchr(s->params[i], '=');
      if (!eq) continue;
      r->param_name[r->nparams] = strndup(s->params[i], (size_t)(eq - s->params[i]));
      r->param_value[r->nparams++] = eq + 1;
    }
  }
}

/* Runs along the variant's scan (every case at each grid point, in order) until the fault
 * gives a finding on a case where the variant without the fault gives none. */
static void pf_job_fault(pf_job *jb, const pf_sweep_opts *so) {
  const pf_op_sweep *sp = jb->op->sweep;
  const pf_kernel *k = jb->k;
  const unsigned n = so->quick ? 2 : 4;
  run_opts r;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.backend = so->backend;
  if (pf_sweep_opts_for(&r, k, jb->dtype, jb->accum, sp->shape, sp->inputs, sp->fault_params, so->seed)) {
    snprintf(jb->error, sizeof jb->error, "fault %s: cannot set up", jb->fault);
    return;
  }
  r.fault = jb->fault;
  pf_fault_settings_apply(sp, jb->fault, &r, &r.dtype);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "kernel", k->op->name);
  cJSON_AddStringToObject(j, "variant", k->variant);
  cJSON_AddStringToObject(j, "dtype", pf_dtype_name(r.dtype));
  cJSON_AddStringToObject(j, "fault", jb->fault);
  size_t runs = 0;
  int found = 0;
  pf_case tm[4];
  pf_axis ax;
  unsigned built = 0;
  for (; built < n; built++)
    if (pf_build_case(k, &r, so->seed + built, &tm[built])) break;
  if (built < n || pf_axis_parse(&tm[0], sp->along, &ax))
    snprintf(jb->error, sizeof jb->error, "fault %s: cannot build its cases: %s", jb->fault, pf_error_message());
  for (int g = 0; g <= so->points && !found && !jb->error[0] && !jb->skipped; g++) {
    const double x = pf_bfmt_grid(ax.format, sp->lo, sp->hi, g, so->points);
    for (unsigned i = 0; i < n && !found && !jb->error[0] && !jb->skipped; i++) {
      pf_case at;
      pf_run run;
      memset(&run, 0, sizeof run);
      pf_status st = pf_axis_apply(&tm[i], &ax, x, &at);
      if (!st) st = pf_run_case(&at, &oo, &run);
      int detected = !st && pf_verdict_is_finding(run.cmp.verdict);
      runs += !st;
      if (detected) { /* and the same case without the fault has none */
        pf_case clean;
        pf_run cr;
        if ((st = pf_case_copy(&clean, &at)) == PF_OK) {
          clean.fault[0] = 0;
          st = pf_run_case(&clean, &oo, &cr);
          detected = !st && !pf_verdict_is_finding(cr.cmp.verdict);
          pf_run_free(&cr);
          pf_case_free(&clean);
        }
      }
      if (st == PF_ERR_UNSUPPORTED) jb->skipped = 1; /* the backend cannot run it */
      else if (st) snprintf(jb->error, sizeof jb->error, "fault %s: %s", jb->fault, pf_error_message());
      if (detected) {
        char line[1536], d[1024];
        found = 1;
        pf_run_describe(&at, &run, d, sizeof d);
        pf_axis_reproduce_line(&tm[i], &r, &ax, x, so->seed + i, line, sizeof line);
        cJSON_AddStringToObject(j, "line", d);
        cJSON_AddStringToObject(j, "replay", line);
        pf_case m;
        if (!pf_case_copy(&m, &at)) {
          size_t mr = 0;
          const size_t left = pf_minimize_case(&m, run.cmp.verdict, &mr);
          cJSON_AddNumberToObject(j, "minimized_elements", (double)left);
          cJSON_AddItemToObject(j, "minimized", pf_case_to_cjson(&m));
          pf_case_free(&m);
        }
      }
      pf_run_free(&run);
      pf_case_free(&at);
    }
  }
  for (unsigned i = 0; i < built; i++) pf_case_free(&tm[i]);
  cJSON_AddBoolToObject(j, "found", found);
  cJSON_AddNumberToObject(j, "runs", (double)runs);
  pf_sweep_opts_release(&r);
  if (jb->error[0] || jb->skipped) cJSON_Delete(j);
  else jb->result = j;
}

/* The dtypes a differential runs in, from the lowest precision up (its faults: the first). */
static const pf_dtype pf_diff_dtypes[] = {PF_BF16, PF_FP16, PF_FP32};

/* A differential operation: clean runs of its first variant in each dtype (every one must
 * pass) and each fault's cases to its first finding. */
static void pf_job_differential(pf_job *jb, const pf_sweep_opts *so) {
  const pf_kernel *k = pf_op_first_kernel(jb->op);
  const pf_op_sweep *sp = jb->op->sweep;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.backend = so->backend;
  cJSON *j = cJSON_CreateObject();
  cJSON *clean = cJSON_AddArrayToObject(j, "clean");
  const unsigned cases = so->quick ? sp->clean_cases_quick : sp->clean_cases;
  int first = -1;
  for (size_t d = 0; d < sizeof pf_diff_dtypes / sizeof pf_diff_dtypes[0]; d++) {
    const pf_dtype t = pf_diff_dtypes[d];
    if (!pf_kernel_accepts(k, t, PF_FP32)) continue;
    if (first < 0) first = (int)t;
    run_opts r;
    pf_sweep_opts_for(&r, k, t, PF_FP32, NULL, NULL, NULL, so->seed);
    unsigned findings = 0, outside = 0;
    for (unsigned i = 0; i < cases; i++) {
      pf_case c;
      pf_run run;
      if (pf_build_case(k, &r, so->seed + i, &c)) break;
      if (!pf_run_case(&c, &oo, &run)) {
        findings += pf_verdict_is_finding(run.cmp.verdict) && run.in_domain;
        outside += !run.in_domain;
      }
      pf_run_free(&run);
      pf_case_free(&c);
    }
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "dtype", pf_dtype_name(t));
    cJSON_AddNumberToObject(e, "cases", cases);
    cJSON_AddNumberToObject(e, "outside_domain", outside);
    cJSON_AddNumberToObject(e, "findings", findings);
    cJSON_AddItemToArray(clean, e);
  }
  cJSON *faults = cJSON_AddArrayToObject(j, "faults");
  for (int f = 0; first >= 0 && k->faults && k->faults[f]; f++) {
    run_opts r;
    pf_sweep_opts_for(&r, k, (pf_dtype)first, PF_FP32, NULL, NULL, NULL, so->seed);
    r.fault = k->faults[f];
    pf_fault_settings_apply(sp, r.fault, &r, &r.dtype);
    int found = 0;
    unsigned i = 0;
    char note[320] = "", line[1536] = "";
    for (; i < sp->fault_cases && !found; i++) {
      pf_case c;
      pf_run run;
      if (pf_build_case(k, &r, so->seed + i, &c)) break;
      if (!pf_run_case(&c, &oo, &run) && pf_verdict_is_finding(run.cmp.verdict)) {
        found = 1;
        snprintf(note, sizeof note, "%s", run.note);
        pf_reproduce_line(&c, &r, so->seed + i, line, sizeof line);
      }
      pf_run_free(&run);
      pf_case_free(&c);
    }
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "fault", k->faults[f]);
    cJSON_AddBoolToObject(e, "found", found);
    cJSON_AddNumberToObject(e, "cases_to_find", found ? i : 0);
    if (found) {
      cJSON_AddStringToObject(e, "why", note);
      cJSON_AddStringToObject(e, "replay", line);
    }
    cJSON_AddItemToArray(faults, e);
    pf_sweep_opts_release(&r);
  }
  jb->result = j;
}

static void *pf_worker(void *arg) {
  pf_pool *pool = arg;
  for (;;) {
    pthread_mutex_lock(&pool->lock);
    const size_t i = pool->next++;
    pthread_mutex_unlock(&pool->lock);
    if (i >= pool->njobs) {
      mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* this thread's constants (pi, log 2, ...) */
      return NULL;
    }
    pf_job *jb = &pool->jobs[i];
    switch (jb->kind) {
    case J_CONFIG: pf_job_config(jb, pool->o); break;
    case J_TRAJECTORY: pf_job_trajectory(jb, pool->o); break;
    case J_FAULT: pf_job_fault(jb, pool->o); break;
    case J_DIFFERENTIAL: pf_job_differential(jb, pool->o); break;
    }
    pthread_mutex_lock(&pool->lock);
    pool->done++;
    if (pool->done == pool->njobs) pf_progress_clear(&pool->progress);
    else
      pf_progress_show(&pool->progress, 0, "precfuzz sweep: %zu of %zu jobs (%s %s)", pool->done, pool->njobs,
                       jb->op->name, jb->kind == J_DIFFERENTIAL ? "differential" : jb->kind == J_FAULT ? jb->fault : jb->k->variant);
    pthread_mutex_unlock(&pool->lock);
  }
}

void pf_sweep_opts_default(pf_sweep_opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->cases = 16;
  o->points = 32;
  const long np = sysconf(_SC_NPROCESSORS_ONLN);
  o->jobs = np > 0 ? (int)np : 1;
}

cJSON *pf_sweep_environment(const pf_sweep_opts *o) {
  cJSON *e = cJSON_CreateObject();
  char b[128];
  cJSON_AddStringToObject(e, "precfuzz", PF_VERSION);
  cJSON_AddStringToObject(e, "mpfr", mpfr_get_version());
  cJSON_AddStringToObject(e, "gmp", gmp_version);
  cJSON_AddStringToObject(e, "cjson", cJSON_Version());
  cJSON_AddStringToObject(e, "compiler", PF_C_COMPILER);
  cJSON_AddStringToObject(e, "cuda_toolkit", PF_CUDA_TOOLKIT);
  cJSON_AddStringToObject(e, "backend", o->backend == PF_BACKEND_CUDA ? "cuda (the variants with a CUDA implementation)"
                                                                      : "cpu (the CPU emulation of each kernel)");
  cJSON_AddStringToObject(e, "device", o->backend == PF_BACKEND_CUDA ? o->device : "none: no GPU used");
  cJSON_AddStringToObject(e, "oracle", "MPFR interval arithmetic from 256 bits, doubled until both ends round alike");
  snprintf(b, sizeof b, "%llu..%llu", (unsigned long long)o->seed, (unsigned long long)(o->seed + o->cases - 1));
  cJSON_AddStringToObject(e, "seeds", b);
  cJSON_AddNumberToObject(e, "cases_per_point", o->cases);
  cJSON_AddNumberToObject(e, "grid_intervals", o->points);
  cJSON_AddBoolToObject(e, "quick", o->quick);
  return e;
}

/* The operations the sweep runs (those with pf_op.sweep), in registry order: at most max. */
static size_t pf_sweep_ops(const pf_op **ops, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < pf_op_count() && n < max; i++)
    if (pf_op_at(i)->sweep) ops[n++] = pf_op_at(i);
  return n;
}

cJSON *pf_sweep_run(const pf_sweep_opts *o) {
  size_t cap = 512, n = 0;
  pf_job *jobs = calloc(cap, sizeof *jobs);
  if (!jobs) {
    pf_error(PF_ERR_NOMEM, "sweep: out of memory");
    return NULL;
  }
  const pf_op *ops[64];
  const size_t nops = pf_sweep_ops(ops, 64);
  for (size_t s = 0; s < nops; s++) {
    const pf_op *op = ops[s];
    if (o->only && strcmp(o->only, op->name) != 0) continue;
    if (op->sweep->kind == PF_SWEEP_DIFFERENTIAL) {
      const pf_kernel *k = pf_op_first_kernel(op);
      if (o->backend != PF_BACKEND_CUDA || k->run_cuda)
        jobs[n++] = (pf_job){J_DIFFERENTIAL, op, k, PF_BF16, PF_FP32, NULL, NULL, 0, ""};
      continue;
    }
    for (size_t i = 0; i < pf_kernel_count() && n + 16 < cap; i++) {
      const pf_kernel *k = pf_kernel_at(i);
      if (k->op != op || (o->backend == PF_BACKEND_CUDA && !k->run_cuda)) continue;
      for (int t = 0; t < PF_NDTYPES; t++) {
        if (!(k->dtypes & (1u << t))) continue;
        if (o->quick && t != PF_FP16) continue;
        for (int st = 0; st < 2; st++) {
          const pf_dtype acc = st ? (pf_dtype)t : PF_FP32;
          if ((st && t == PF_FP32) || !pf_kernel_accepts(k, (pf_dtype)t, acc)) continue;
          if (o->quick && st) continue;
          jobs[n++] = (pf_job){J_CONFIG, op, k, (pf_dtype)t, acc, NULL, NULL, 0, ""};
        }
        if (op->sweep->kind == PF_SWEEP_TRAJECTORIES)
          jobs[n++] = (pf_job){J_TRAJECTORY, op, k, (pf_dtype)t, PF_FP32, NULL, NULL, 0, ""};
      }
      for (int f = 0; k->faults && k->faults[f]; f++)
        jobs[n++] = (pf_job){J_FAULT, op, k, PF_FP16, PF_FP32, k->faults[f], NULL, 0, ""};
    }
  }
  pf_pool pool = {o, jobs, n, 0, 0, PTHREAD_MUTEX_INITIALIZER, {0}};
  pf_progress_start(&pool.progress);
  if (!o->progress) pool.progress.mode = 0;
  const int nt = o->jobs < 1 ? 1 : o->jobs > 64 ? 64 : o->jobs;
  pthread_t th[64];
  int started = 0;
  for (; started < nt; started++)
    if (pthread_create(&th[started], NULL, pf_worker, &pool)) break;
  if (!started) pf_worker(&pool);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);

  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "precfuzz-results/2");
  cJSON_AddItemToObject(root, "environment", pf_sweep_environment(o));
  cJSON *kernels = cJSON_AddArrayToObject(root, "kernels");
  cJSON *faults = cJSON_AddArrayToObject(root, "faults");
  const char *err = NULL;
  for (size_t s = 0; s < nops; s++) {
    const pf_op *op = ops[s];
    if ((o->only && strcmp(o->only, op->name) != 0) || op->sweep->kind == PF_SWEEP_DIFFERENTIAL) continue;
    cJSON *kj = cJSON_CreateObject();
    cJSON_AddStringToObject(kj, "kernel", op->name);
    cJSON_AddStringToObject(kj, "summary", op->summary);
    cJSON_AddStringToObject(kj, "explanation", op->sweep->explanation ? op->sweep->explanation : "");
    cJSON *cfgs = cJSON_AddArrayToObject(kj, "configs");
    cJSON *trs = op->sweep->kind == PF_SWEEP_TRAJECTORIES ? cJSON_AddArrayToObject(kj, "trajectories") : NULL;
    for (size_t i = 0; i < n; i++) {
      pf_job *jb = &jobs[i];
      if (jb->op != op) continue;
      if (jb->error[0] && !err) err = jb->error;
      if (!jb->result) continue;
      if (jb->kind == J_CONFIG) cJSON_AddItemToArray(cfgs, jb->result);
      else if (jb->kind == J_TRAJECTORY && trs) cJSON_AddItemToArray(trs, jb->result);
      else if (jb->kind == J_FAULT) cJSON_AddItemToArray(faults, jb->result);
      jb->result = NULL;
    }
    cJSON_AddItemToArray(kernels, kj);
  }
  cJSON *sk = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++)
    if (jobs[i].skipped) {
      char b[160];
      snprintf(b, sizeof b, "%s/%s %s/%s", jobs[i].k->op->name, jobs[i].k->variant, pf_dtype_name(jobs[i].dtype),
               jobs[i].accum == jobs[i].dtype && jobs[i].dtype != PF_FP32 ? "storage" : pf_dtype_name(jobs[i].accum));
      cJSON_AddItemToArray(sk, cJSON_CreateString(b));
    }
  if (cJSON_GetArraySize(sk)) {
    char *t = cJSON_PrintUnformatted(sk);
    cJSON_AddStringToObject(cJSON_GetObjectItem(root, "environment"), "not_run_on_this_backend", t);
    free(t);
  }
  cJSON_Delete(sk);
  /* the differentials' summaries, each with its operation's name, words and first variant */
  cJSON *diffs = cJSON_AddArrayToObject(root, "differentials");
  for (size_t i = 0; i < n; i++)
    if (jobs[i].kind == J_DIFFERENTIAL) {
      if (jobs[i].error[0] && !err) err = jobs[i].error;
      if (!jobs[i].result) continue;
      cJSON *d = cJSON_CreateObject();
      cJSON_AddStringToObject(d, "kernel", jobs[i].op->name);
      cJSON_AddStringToObject(d, "variant", jobs[i].k->variant);
      cJSON_AddStringToObject(d, "summary", jobs[i].op->summary);
      cJSON_AddStringToObject(d, "explanation", jobs[i].op->sweep->explanation ? jobs[i].op->sweep->explanation : "");
      cJSON *item;
      while ((item = jobs[i].result->child)) cJSON_AddItemToObject(d, item->string, cJSON_DetachItemViaPointer(jobs[i].result, item));
      cJSON_AddItemToArray(diffs, d);
    }
  for (size_t i = 0; i < n; i++) cJSON_Delete(jobs[i].result);
  if (err) pf_error(PF_ERR_ARG, "sweep: %s", err); /* before err's job is freed */
  free(jobs);
  if (err) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}
