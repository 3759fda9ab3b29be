#include "runner.h"

#include "backend.h"
#include "exec_kernel.h"
#include "outputs.h"
#include "tensorfile.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <mpfr.h>

static double pf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int pf_mpfr_only_default; /* --oracle mpfr: every run of this process */

void pf_oracle_set_mpfr_only(int on) { pf_mpfr_only_default = on; }


void pf_oracle_opts_default(pf_oracle_opts *o) {
  memset(o, 0, sizeof *o); /* every field, backend (PF_BACKEND_CPU) included */
  o->prec = 256;
  o->prec_max = 16384;
  o->mpfr_only = pf_mpfr_only_default;
  o->hazard_limits = pf_hazard_limits_current();
}

const char *pf_fe_str(unsigned fe, char buf[48]) {
  buf[0] = 0;
  if (fe & PF_FE_OVERFLOW) strcat(buf, "overflow,");
  if (fe & PF_FE_UNDERFLOW) strcat(buf, "underflow,");
  if (fe & PF_FE_INVALID) strcat(buf, "invalid,");
  size_t n = strlen(buf);
  if (n) buf[n - 1] = 0;
  else strcpy(buf, "none");
  return buf;
}

/* Validates c, draws and prepares its inputs, decides the domain, allocates the outputs. */
static pf_status pf_run_setup(const pf_case *c, const pf_oracle_opts *opts, pf_run *r) {
  memset(r, 0, sizeof *r);
  pf_status st = pf_case_validate(c);
  if (st) return st;
  const pf_kernel *k = pf_case_kernel(c);
  const pf_op *op = k->op;
  r->kernel = k;
  for (int i = 0; i < op->ninputs; i++) {
    const pf_dtype dt = op->input_dtype ? op->input_dtype(c, i) : c->dtype;
    if ((st = pf_tensor_alloc(&r->in[i], dt, op->input_count(c, i)))) return st;
    r->ninputs = i + 1;
    if ((st = pf_tensor_generate(&r->in[i], &c->inputs[i]))) return st;
  }
  if (op->prepare) op->prepare(c, r->in);
  r->in_domain = k->in_domain(c, r->in, r->why, sizeof r->why);
  if (!r->in_domain && opts->domain_only) {
    r->skipped = 1;
    return PF_OK;
  }
  r->nout = op->output_count(c);
  r->out = calloc(r->nout ? r->nout : 1, sizeof(double));
  r->bound = calloc(r->nout ? r->nout : 1, sizeof(pf_bound));
  if (!r->out || !r->bound) return pf_error(PF_ERR_NOMEM, "cannot allocate %zu outputs", r->nout);
  r->backend = opts->backend;
  return PF_OK;
}

/* The kernel of case c on inputs in, on the options' backend. */
static pf_status pf_run_kernel(const pf_kernel *k, const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                               double *out, unsigned *fe) {
  if (opts->backend != PF_BACKEND_CUDA) return k->run_cpu(c, in, out, fe);
  if (!k->run_cuda)
    return pf_error(PF_ERR_UNSUPPORTED, "--backend cuda: %s/%s has no CUDA implementation%s", c->kernel, c->variant, pf_cuda_missing_hint());
  return k->run_cuda(c, in, out, fe);
}

/* The kernel on r's inputs. A kernel process that failed on the case (PF_ERR_KERNEL) gives a
 * verdict, not an error: no outputs (NaN), every element "failed" and why in the note. */
static pf_status pf_run_kernel_into(pf_run *r, const pf_case *c, const pf_oracle_opts *opts) {
  const double t0 = pf_now();
  pf_error_clear();
  pf_status st = pf_run_kernel(r->kernel, c, r->in, opts, r->out, &r->fe);
  r->seconds_kernel = pf_now() - t0;
  /* a user's C kernel (a plugin) that fails on a case is that case's verdict too, as a kernel
   * process's is; not a case it refuses (PF_ERR_UNSUPPORTED), not a built-in's error */
  const int user_failed = st && st != PF_ERR_UNSUPPORTED && st != PF_ERR_KERNEL && r->kernel->like &&
                          !pf_exec_is_process(r->kernel) && opts->backend != PF_BACKEND_CUDA;
  if (st != PF_ERR_KERNEL && !user_failed) return st;
  r->failed = 1;
  if (user_failed && !strcmp(pf_error_message(), "unspecified error"))
    snprintf(r->note, sizeof r->note, "%s/%s's run_cpu returned status %d without a message (pf_error)", c->kernel,
             c->variant, (int)st);
  else snprintf(r->note, sizeof r->note, "%s", pf_error_message());
  for (size_t i = 0; i < r->nout; i++) r->out[i] = NAN;
  r->fe = 0;
  return PF_OK;
}

/* The exact result; outputs made elsewhere (given: NULL for a kernel's own) must be values of
 * their element's dtype, and those not given are set to the correctly rounded result. */
static pf_status pf_run_oracle(const pf_case *c, const pf_oracle_opts *opts, pf_run *r, const unsigned char *given) {
  pf_status st;
  const double t1 = pf_now();
  if ((st = pf_oracle_result_alloc(&r->oracle, r->nout, opts->keep_hex))) return st;
  if ((st = r->kernel->op->oracle(c, r->in, opts, &r->oracle))) return st;
  r->seconds_oracle = pf_now() - t1;
  for (size_t i = 0; given && i < r->nout; i++) {
    const pf_dtype t = pf_oracle_dtype_of(&r->oracle, i, c->dtype);
    if (!given[i]) r->out[i] = r->oracle.rounded[i];
    else if (!pf_dtype_holds(t, r->out[i]))
      return pf_error(PF_ERR_ARG, "output %zu (%a) is not a %s value, the dtype that output is stored in", i, r->out[i],
                      pf_dtype_name(t));
  }
  return PF_OK;
}

/* The oracle, the bound, the comparison and the operation's own word on the outputs. */
static pf_status pf_run_judge(const pf_case *c, const pf_oracle_opts *opts, pf_run *r, const unsigned char *given) {
  const pf_kernel *k = r->kernel;
  const pf_op *op = k->op;
  pf_status st;
  if ((st = pf_run_oracle(c, opts, r, given))) return st;
  k->bound(c, r->in, r->bound);
  if ((st = pf_compare(c->dtype, r->out, r->nout, &r->oracle, r->bound, r->fe, &r->cmp))) return st;
  if (r->failed) { /* nothing to refine or review */
    for (size_t i = 0; i < r->nout; i++) pf_run_set_verdict(r, i, PF_V_FAILED);
    return PF_OK;
  }
  if (op->refine) {
    for (size_t i = 0; i < r->nout; i++)
      pf_run_set_verdict(r, i, op->refine(c, r->in, i, r->out[i], r->cmp.elem[i], r->oracle.rounded[i], r->bound[i]));
    pf_run_settle_verdict(r);
  }
  if (op->stages) {
    pf_stage stages[PF_MAX_STAGES];
    const int ns = op->stages(c, stages);
    /* An intermediate the kernel stores in its dtype is no input's fault when its exact
     * value does not fit there (the final output may well fit): that is an overflow. */
    for (int s = 0; s < ns; s++)
      for (size_t i = stages[s].offset; stages[s].internal && i < stages[s].offset + stages[s].count; i++)
        if (r->cmp.elem[i] == PF_V_RANGE && r->oracle.status[i] != PF_ORACLE_UNDEFINED && !isfinite(r->out[i]))
          pf_run_set_verdict(r, i, PF_V_OVERFLOW);
    for (int s = 0; s < ns && !r->born; s++)
      for (size_t i = stages[s].offset; i < stages[s].offset + stages[s].count; i++)
        if (pf_verdict_is_finding(r->cmp.elem[i])) {
          r->born = stages[s].name;
          r->born_at = i;
          break;
        }
  }
  if (op->review) {
    op->review(c, r);
    pf_run_settle_verdict(r);
  }
  pf_run_hazards(c, r, opts->hazard_limits);
  return PF_OK;
}

pf_status pf_run_case(const pf_case *c, const pf_oracle_opts *opts, pf_run *r) {
  pf_status st = pf_run_setup(c, opts, r);
  if (st || r->skipped) return st;
  if ((st = pf_run_kernel_into(r, c, opts))) return st;
  return pf_run_judge(c, opts, r, NULL);
}

/* Cases that may run as one: the same kernel, variant, dtypes, fault and parameters, and the
 * same shape but for dimension 0. */
static int pf_run_mergeable(const pf_case *a, const pf_case *b) {
  if (strcmp(a->kernel, b->kernel) || strcmp(a->variant, b->variant) || strcmp(a->fault, b->fault) ||
      a->dtype != b->dtype || a->accum != b->accum || a->ndims != b->ndims)
    return 0;
  for (int d = 1; d < a->ndims; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return memcmp(a->params, b->params, sizeof a->params) == 0;
}

pf_status pf_run_cases(const pf_case *cs, size_t n, const pf_oracle_opts *opts, pf_run *rs) {
  for (size_t i = 0; i < n; i++) memset(&rs[i], 0, sizeof rs[i]);
  const pf_op *op = n ? pf_op_find(cs[0].kernel) : NULL;
  int merge = op && op->batch_dim0 && n > 1;
  for (size_t i = 1; merge && i < n; i++) merge = pf_run_mergeable(&cs[0], &cs[i]);
  if (!merge) {
    for (size_t i = 0; i < n; i++) {
      pf_status st = pf_run_case(&cs[i], opts, &rs[i]);
      if (st) return st;
    }
    return PF_OK;
  }
  pf_status st = PF_OK;
  size_t rows = 0, nin[PF_MAX_INPUTS] = {0}, nout = 0;
  for (size_t i = 0; i < n; i++) {
    if ((st = pf_run_setup(&cs[i], opts, &rs[i]))) return st;
    if (rs[i].skipped) continue;
    rows += cs[i].shape[0];
    for (int t = 0; t < rs[i].ninputs; t++) nin[t] += rs[i].in[t].n;
    nout += rs[i].nout;
  }
  if (!rows) return PF_OK;
  /* one case over the slices of all: the kernel reads only its shape, parameters and inputs */
  pf_case m = cs[0];
  m.shape[0] = rows;
  pf_tensor min[PF_MAX_INPUTS];
  memset(min, 0, sizeof min);
  double *mout = calloc(nout ? nout : 1, sizeof(double));
  const pf_kernel *k = pf_case_kernel(&cs[0]);
  for (int t = 0; t < op->ninputs && !st; t++) st = pf_tensor_alloc(&min[t], rs[0].in[t].dtype, nin[t]);
  if (!st && !mout) st = pf_error(PF_ERR_NOMEM, "cannot allocate %zu outputs", nout);
  if (!st && op->output_count(&m) != nout)
    st = pf_error(PF_ERR_ARG, "%s: its outputs do not add up over dimension 0 (cannot batch)", m.kernel);
  for (int t = 0; t < op->ninputs && !st; t++)
    for (size_t i = 0, at = 0; i < n; i++)
      if (!rs[i].skipped) {
        memcpy(min[t].data + at, rs[i].in[t].data, rs[i].in[t].n * sizeof(double));
        at += rs[i].in[t].n;
      }
  unsigned fe = 0;
  const double t0 = pf_now();
  if (!st) st = pf_run_kernel(k, &m, min, opts, mout, &fe);
  const double secs = pf_now() - t0;
  /* a kernel process that failed on the batch: each case again on its own, so that the
   * failure is reported with the case that caused it */
  const int one_by_one = st == PF_ERR_KERNEL || fe;
  if (st == PF_ERR_KERNEL) st = PF_OK;
  if (!st && !one_by_one) {
    /* each stage of the merged outputs holds the cases' slices in order */
    pf_stage ms[PF_MAX_STAGES], cs_st[PF_MAX_STAGES];
    const int nst = pf_case_stages(&m, ms);
    size_t done[PF_MAX_STAGES] = {0};
    for (size_t i = 0; i < n; i++) {
      if (rs[i].skipped) continue;
      pf_case_stages(&cs[i], cs_st);
      for (int s = 0; s < nst; s++) {
        memcpy(rs[i].out + cs_st[s].offset, mout + ms[s].offset + done[s], cs_st[s].count * sizeof(double));
        done[s] += cs_st[s].count;
      }
      rs[i].seconds_kernel = secs * (double)cs[i].shape[0] / (double)rows;
    }
  }
  free(mout);
  for (int t = 0; t < op->ninputs; t++) pf_tensor_free(&min[t]);
  if (st) return st;
  /* Events are per case: with none in the batch every case has none; otherwise the cases run
   * again one by one, so that each case's events are its own. */
  for (size_t i = 0; i < n; i++) {
    if (rs[i].skipped) continue;
    if (one_by_one) {
      rs[i].fe = 0;
      if ((st = pf_run_kernel_into(&rs[i], &cs[i], opts))) return st;
    }
    if ((st = pf_run_judge(&cs[i], opts, &rs[i], NULL))) return st;
  }
  return PF_OK;
}

pf_status pf_judge_outputs(const pf_case *c, const pf_kernel *like, long ulps, const pf_tensorfile *ts, size_t nt,
                           const pf_oracle_opts *opts, pf_run *r, size_t *judged) {
  pf_oracle_opts o = *opts;
  o.domain_only = 0;
  *judged = 0;
  pf_status st = pf_run_setup(c, &o, r);
  if (st) return st;
  if (like) {
    if (like->op != r->kernel->op)
      return pf_error(PF_ERR_ARG, "--like: %s/%s is not a variant of %s", like->op->name, like->variant, c->kernel);
    if (!pf_kernel_accepts(like, c->dtype, c->accum))
      return pf_error(PF_ERR_UNSUPPORTED, "--like: %s/%s does not take dtype %s with accumulation %s", like->op->name,
                      like->variant, pf_dtype_name(c->dtype), pf_dtype_name(c->accum));
    r->kernel = like;
    r->in_domain = like->in_domain(c, r->in, r->why, sizeof r->why);
  }
  unsigned char *given = calloc(r->nout ? r->nout : 1, 1);
  if (!given) return pf_error(PF_ERR_NOMEM, "cannot allocate %zu outputs", r->nout);
  st = pf_outputs_from_tensors(c, ts, nt, r->out, r->nout, given, 0);
  if (!st && like) st = pf_run_judge(c, &o, r, given);
  /* or the correctly rounded result within ulps units of the output dtype */
  if (!st && !like) st = pf_run_oracle(c, &o, r, given);
  if (!st && !like) st = pf_compare_ulps(c->dtype, r->out, r->nout, &r->oracle, ulps, &r->cmp);
  if (!st && !like) pf_run_hazards(c, r, o.hazard_limits);
  for (size_t i = 0; !st && i < r->nout; i++) *judged += given[i];
  free(given);
  return st;
}

void pf_run_settle_verdict(pf_run *r) {
  pf_verdict v = PF_V_OK;
  for (int k = 0; k < PF_NVERDICTS; k++)
    if (r->cmp.counts[k]) v = (pf_verdict)k;
  if (v == r->cmp.verdict && (v == PF_V_OK || r->cmp.elem[r->cmp.first_bad] == v)) return;
  r->cmp.verdict = v;
  r->cmp.first_bad = 0;
  for (size_t i = 0; v != PF_V_OK && i < r->nout; i++)
    if (r->cmp.elem[i] == v) {
      r->cmp.first_bad = i;
      break;
    }
}

void pf_run_set_verdict(pf_run *r, size_t i, pf_verdict v) {
  if (v == r->cmp.elem[i]) return;
  r->cmp.counts[r->cmp.elem[i]]--;
  r->cmp.counts[v]++;
  r->cmp.elem[i] = v;
  if (v > r->cmp.verdict) {
    r->cmp.verdict = v;
    r->cmp.first_bad = i;
  }
}

/* The stage an output index belongs to, and its index within the stage. */
static const char *pf_stage_of(const pf_case *c, const pf_op *op, size_t i, size_t *local) {
  *local = i;
  if (!op->stages) return NULL;
  pf_stage stages[PF_MAX_STAGES];
  const int ns = op->stages(c, stages);
  for (int s = 0; s < ns; s++)
    if (i >= stages[s].offset && i < stages[s].offset + stages[s].count) {
      *local = i - stages[s].offset;
      return stages[s].name;
    }
  return NULL;
}

void pf_run_free(pf_run *r) {
  for (int i = 0; i < r->ninputs; i++) pf_tensor_free(&r->in[i]);
  free(r->out);
  free(r->bound);
  pf_oracle_result_free(&r->oracle);
  pf_comparison_free(&r->cmp);
  memset(r, 0, sizeof *r);
}

/* "[i]" for one-output operations with 2 dimensions as "[row,col]"; "stage[i]" otherwise. */
static void pf_index_str(const pf_case *c, const pf_op *op, size_t i, char *buf, size_t len) {
  size_t local;
  const char *stage = pf_stage_of(c, op, i, &local);
  if (stage) {
    snprintf(buf, len, "%s[%zu]", stage, local);
    return;
  }
  if (c->ndims == 2) snprintf(buf, len, "[%zu,%zu]", i / c->shape[1], i % c->shape[1]);
  else snprintf(buf, len, "[%zu]", i);
}

/* Why element i has no ulp distance (NULL: it has one): the exact result is undefined, or the
 * output is NaN. */
static const char *pf_ulps_why(const pf_run *r, size_t i) {
  if (r->cmp.ulps[i] != INT64_MAX) return NULL;
  if (r->oracle.status[i] == PF_ORACLE_UNDEFINED) return "the exact result is undefined";
  return isnan(r->out[i]) ? "the output is NaN" : "no distance in the dtype";
}
/* Why element i has no number of ulps allowed (NULL: it has one). */
static const char *pf_allowed_why(const pf_run *r, size_t i) {
  if (r->cmp.allowed[i] != INT64_MAX) return NULL;
  if (r->oracle.status[i] == PF_ORACLE_UNDEFINED) return "the exact result is undefined";
  return "the bound allows values beyond the dtype's range";
}

void pf_run_describe(const pf_case *c, const pf_run *r, char *buf, size_t len) {
  if (r->cmp.verdict == PF_V_FAILED) {
    snprintf(buf, len, "failed: %s", r->note);
    return;
  }
  const size_t i = r->born ? r->born_at : r->cmp.first_bad;
  char at[96], y[40], e[40], fe[48];
  pf_index_str(c, r->kernel->op, i, at, sizeof at);
  if (r->note_whole && r->born && r->note[0]) {
    snprintf(buf, len, "%s, born in %s at %s: %s", pf_verdict_name(r->cmp.elem[i]), r->born, at, r->note);
    return;
  }
  pf_hexfloat(y, r->out[i]);
  pf_hexfloat(e, r->oracle.exact[i]);
  char yd[32] = "", ed[32] = "";
  if (isfinite(r->out[i])) snprintf(yd, sizeof yd, " (%.9g)", r->out[i]);
  if (isfinite(r->oracle.exact[i])) snprintf(ed, sizeof ed, " (%.9g)", r->oracle.exact[i]);
  char ulps[80], allowed[80];
  const char *uw = pf_ulps_why(r, i), *aw = pf_allowed_why(r, i);
  if (uw) snprintf(ulps, sizeof ulps, "no ulps (%s)", uw);
  else snprintf(ulps, sizeof ulps, "%lld ulps", (long long)r->cmp.ulps[i]);
  if (aw) snprintf(allowed, sizeof allowed, "no ulps allowed (%s)", aw);
  else snprintf(allowed, sizeof allowed, "allowed %lld", (long long)r->cmp.allowed[i]);
  snprintf(buf, len, "%s%s%s at %s: got %s%s, exact %s%s, %s, %s; events %s", pf_verdict_name(r->cmp.elem[i]),
           r->born ? ", born in " : "", r->born ? r->born : "", at, y, yd, e, ed, ulps, allowed, pf_fe_str(r->fe, fe));
  if (r->note[0]) {
    const size_t used = strlen(buf);
    snprintf(buf + used, len - used, "; %s", r->note);
  }
}

/* a measure: a number, or null and "<name>_why" where it is not finite */
static void pf_add_measure(cJSON *j, const char *name, double v, const char *why_inf) {
  if (isfinite(v)) {
    cJSON_AddNumberToObject(j, name, v);
    return;
  }
  char key[64];
  cJSON_AddNullToObject(j, name);
  snprintf(key, sizeof key, "%s_why", name);
  cJSON_AddStringToObject(j, key, isnan(v) ? "not a number" : why_inf);
}

cJSON *pf_run_to_cjson(const pf_case *c, const pf_run *r, int per_element) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddItemToObject(j, "case", pf_case_to_cjson(c));
  cJSON_AddStringToObject(j, "verdict", pf_verdict_name(r->cmp.verdict));
  cJSON_AddBoolToObject(j, "finding", pf_verdict_is_finding(r->cmp.verdict));
  cJSON_AddStringToObject(j, "backend", pf_backend_name(r->backend));
  cJSON_AddBoolToObject(j, "in_domain", r->in_domain);
  if (!r->in_domain) cJSON_AddStringToObject(j, "outside_domain", r->why);
  char fe[48], b[40];
  cJSON_AddStringToObject(j, "events", pf_fe_str(r->fe, fe));
  cJSON *counts = cJSON_AddObjectToObject(j, "counts");
  for (int v = 0; v < PF_NVERDICTS; v++) cJSON_AddNumberToObject(counts, pf_verdict_name((pf_verdict)v), (double)r->cmp.counts[v]);
  cJSON_AddNumberToObject(j, "max_ulps", (double)r->cmp.max_ulps);
  /* measures are numbers (values of tensors are hex strings); JSON has no inf: null, and why */
  pf_add_measure(j, "max_rel", r->cmp.max_rel, "an output is nonzero where the exact result is 0");
  cJSON_AddNumberToObject(j, "oracle_max_prec", (double)r->oracle.max_prec);
  if (r->cmp.verdict != PF_V_OK) {
    char d[1024];
    pf_run_describe(c, r, d, sizeof d);
    cJSON_AddNumberToObject(j, "first_bad", (double)r->cmp.first_bad);
    if (r->born) cJSON_AddStringToObject(j, "born_in", r->born);
    cJSON_AddStringToObject(j, "detail", d);
    if (r->note[0]) cJSON_AddStringToObject(j, "why", r->note);
  }
  pf_add_measure(j, "error_measured", r->worst_err, "an infinite error");
  cJSON *hz = cJSON_AddArrayToObject(j, "hazards");
  for (int h = 0; h < PF_NHAZARDS; h++) {
    if (!(r->hazards & (1u << h))) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "hazard", pf_hazard_name((pf_hazard)h));
    cJSON_AddNumberToObject(e, "at", (double)r->hazard_at[h]);
    /* a t statistic of errors all alike is infinite: JSON has no inf, so null */
    if (isfinite(r->hazard_measure[h])) cJSON_AddNumberToObject(e, "measure", r->hazard_measure[h]);
    else cJSON_AddNullToObject(e, "measure");
    cJSON_AddStringToObject(e, "note", r->hazard_note[h]);
    cJSON_AddItemToArray(hz, e);
  }
  cJSON *tt = cJSON_AddObjectToObject(j, "torch_testing");
  cJSON_AddBoolToObject(tt, "passes", r->tt_fails == 0);
  cJSON_AddNumberToObject(tt, "rejected_elements", (double)r->tt_fails);
  if (r->tt_fails) cJSON_AddNumberToObject(tt, "first_rejected", (double)r->tt_at);
  if (per_element) {
    /* the actual stored inputs, so that anyone can recompute the exact result */
    cJSON *ins = cJSON_AddObjectToObject(j, "input_values");
    const pf_op *op = r->kernel->op;
    for (int t = 0; t < r->ninputs; t++) {
      cJSON *vals = cJSON_AddArrayToObject(ins, op->input_names[t]);
      for (size_t i = 0; i < r->in[t].n; i++) {
        pf_hexfloat(b, r->in[t].data[i]);
        cJSON_AddItemToArray(vals, cJSON_CreateString(b));
      }
    }
    cJSON *els = cJSON_AddArrayToObject(j, "elements");
    for (size_t i = 0; i < r->nout; i++) {
      cJSON *e = cJSON_CreateObject();
      pf_hexfloat(b, r->out[i]);
      cJSON_AddStringToObject(e, "y", b);
      if (r->oracle.hex && r->oracle.hex[i]) cJSON_AddStringToObject(e, "exact", r->oracle.hex[i]);
      else {
        pf_hexfloat(b, r->oracle.exact[i]);
        cJSON_AddStringToObject(e, "exact", b);
      }
      pf_hexfloat(b, r->oracle.rounded[i]);
      cJSON_AddStringToObject(e, "rounded", b);
      if (r->oracle.status[i] == PF_ORACLE_TINY) {
        /* 0 < |exact| < 2^(emin_min + 256): below MPFR's range (an operation's oracle may scale
         * such a value by at most 2^255, oracle_util.h) */
        char ub[64];
        snprintf(ub, sizeof ub, "0x1p%ld", (long)mpfr_get_emin_min() + 256);
        cJSON_AddStringToObject(e, "exact_upper", ub);
      }
      if (r->oracle.status[i] == PF_ORACLE_TIE || r->oracle.status[i] == PF_ORACLE_SET) {
        pf_hexfloat(b, r->oracle.rounded_alt[i]);
        cJSON_AddStringToObject(e, "rounded_alt", b);
      }
      /* no sentinel numbers: null, and a field saying why */
      const char *uw = pf_ulps_why(r, i), *aw = pf_allowed_why(r, i);
      if (uw) cJSON_AddNullToObject(e, "ulps"), cJSON_AddStringToObject(e, "ulps_why", uw);
      else cJSON_AddNumberToObject(e, "ulps", (double)r->cmp.ulps[i]);
      if (aw) cJSON_AddNullToObject(e, "allowed"), cJSON_AddStringToObject(e, "allowed_why", aw);
      else cJSON_AddNumberToObject(e, "allowed", (double)r->cmp.allowed[i]);
      cJSON_AddStringToObject(e, "verdict", pf_verdict_name(r->cmp.elem[i]));
      cJSON_AddItemToArray(els, e);
    }
  }
  return j;
}
