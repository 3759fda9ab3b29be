/* A one-step kernel over N steps against the exact trajectory: trajectory.h. */
#include "core/trajectory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "core/runner.h"
#include "core/kernel.h"

static int pf_cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Input k of c as explicit values (the state carried into a step). */
static pf_status pf_set_input_values(pf_case *c, int k, const double *v, size_t n) {
  pf_gen_free(&c->inputs[k]);
  c->inputs[k].dist = PF_DIST_VALUES;
  c->inputs[k].values = malloc((n ? n : 1) * sizeof(double));
  if (!c->inputs[k].values) return pf_error(PF_ERR_NOMEM, "trajectory: out of memory");
  memcpy(c->inputs[k].values, v, n * sizeof(double));
  c->inputs[k].nvalues = n;
  return PF_OK;
}

pf_status pf_trajectory_run(const pf_case *c0, uint64_t steps, const pf_oracle_opts *opts, pf_trajectory *t) {
  memset(t, 0, sizeof *t);
  const pf_op *op = pf_op_find(c0->kernel);
  if (!op) return pf_error(PF_ERR_UNKNOWN, "unknown kernel '%s'", c0->kernel);
  if (!op->carry)
    return pf_error(PF_ERR_UNSUPPORTED, "--steps: %s carries no state from one step to the next (adam does)", op->name);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pf_case c; /* the case of the step at hand: the kernel's state, the step's fresh inputs */
  pf_status st = pf_case_copy(&c, c0);
  if (st) return st;
  pf_tensor kstate[PF_MAX_INPUTS], xstate[PF_MAX_INPUTS]; /* carried inputs: the kernel's, the exact */
  memset(kstate, 0, sizeof kstate);
  memset(xstate, 0, sizeof xstate);
  uint64_t gen_seed[PF_MAX_INPUTS];
  for (int k = 0; k < c.ninputs; k++) gen_seed[k] = c.inputs[k].seed;
  pf_oracle_result x = {0};
  double *start_w = NULL;
  unsigned carried = 0;
  const int w = op->carry_watch;
  pf_dtype wt = PF_FP32;
  for (uint64_t s = 0; s < steps; s++) {
    /* the inputs not carried are drawn afresh: the step's own stream of each generator */
    for (int k = 0; k < c.ninputs; k++)
      if (!(carried >> k & 1) && c.inputs[k].dist != PF_DIST_VALUES) c.inputs[k].seed = pf_seed_mix(gen_seed[k], s);
    pf_run r;
    if ((st = pf_run_case(&c, opts, &r))) {
      pf_run_free(&r);
      break;
    }
    if (s == 0) { /* the start: both trajectories from the generated state */
      for (int k = 0; k < c.ninputs; k++) {
        kstate[k] = (pf_tensor){r.in[k].dtype, r.in[k].n, malloc((r.in[k].n ? r.in[k].n : 1) * sizeof(double))};
        xstate[k] = (pf_tensor){r.in[k].dtype, r.in[k].n, malloc((r.in[k].n ? r.in[k].n : 1) * sizeof(double))};
        if (!kstate[k].data || !xstate[k].data) {
          pf_run_free(&r);
          st = pf_error(PF_ERR_NOMEM, "trajectory: out of memory");
          goto done;
        }
        memcpy(kstate[k].data, r.in[k].data, r.in[k].n * sizeof(double));
        memcpy(xstate[k].data, r.in[k].data, r.in[k].n * sizeof(double));
      }
      t->n = r.in[w].n;
      wt = r.in[w].dtype;
      if (!(start_w = malloc((t->n ? t->n : 1) * sizeof(double)))) {
        pf_run_free(&r);
        st = pf_error(PF_ERR_NOMEM, "trajectory: out of memory");
        goto done;
      }
      memcpy(start_w, r.in[w].data, t->n * sizeof(double));
    }
    if (r.failed) {
      snprintf(t->first, sizeof t->first, "%s", r.note[0] ? r.note : "the kernel failed");
      t->findings++, t->first_step = s + 1;
      pf_run_free(&r);
      t->steps = s + 1;
      break;
    }
    if (pf_verdict_is_finding(r.cmp.verdict) && r.in_domain) {
      if (!t->findings) {
        t->first_step = s + 1;
        pf_run_describe(&c, &r, t->first, sizeof t->first);
      }
      t->findings++;
    }
    /* the exact step from the exact state, with the same fresh inputs */
    pf_tensor xin[PF_MAX_INPUTS];
    for (int k = 0; k < c.ninputs; k++) xin[k] = (s > 0 && (carried >> k & 1)) ? xstate[k] : r.in[k];
    if (!x.n && (st = pf_oracle_result_alloc(&x, r.nout, 0))) {
      pf_run_free(&r);
      break;
    }
    if ((st = op->oracle(&c, xin, opts, &x))) {
      pf_run_free(&r);
      break;
    }
    /* the next step's state: the exact values (the parameters' advance undone: carry touches
     * nothing else of the case), then the kernel's outputs */
    double params[PF_MAX_PARAMS];
    memcpy(params, c.params, sizeof params);
    (void)op->carry(&c, x.exact, xstate);
    memcpy(c.params, params, sizeof params);
    carried = op->carry(&c, r.out, kstate);
    for (int k = 0; k < c.ninputs && !st; k++)
      if (carried >> k & 1) st = pf_set_input_values(&c, k, kstate[k].data, kstate[k].n);
    pf_run_free(&r);
    t->steps = s + 1;
    if (st) break;
  }
  if (!st && t->steps && start_w) { /* the watched input after the last step, against the exact trajectory */
    const size_t n = t->n;
    double *d = malloc((n ? n : 1) * sizeof(double)), *mv = malloc((n ? n : 1) * sizeof(double));
    if (!d || !mv) {
      free(d);
      free(mv);
      st = pf_error(PF_ERR_NOMEM, "trajectory: out of memory");
      goto done;
    }
    double sum = 0, sum2 = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++) {
      const double k = kstate[w].data[i], e = xstate[w].data[i], p0 = start_w[i];
      const double u = pf_ulp(wt, e), u0 = pf_ulp(wt, p0);
      mv[i] = isfinite(e) ? fabs(e - p0) / u0 : 0;
      d[i] = isfinite(k) && isfinite(e) ? fabs(k - e) / u : INFINITY;
      if (d[i] > t->max_ulps) t->max_ulps = d[i], t->max_at = i;
      if (isfinite(k) && isfinite(e)) {
        const double sg = (k - e) / u;
        sum += sg, sum2 += sg * sg, cnt++;
      }
      if (mv[i] >= 1) {
        t->moved++;
        if (k == p0) {
          if (!t->stuck) t->stuck_at = i, t->stuck_from = p0, t->stuck_exact = e;
          t->stuck++;
        }
      }
    }
    qsort(d, n, sizeof *d, pf_cmp_double);
    qsort(mv, n, sizeof *mv, pf_cmp_double);
    t->median_ulps = n ? d[n / 2] : 0;
    t->exact_moved_ulps = n ? mv[n / 2] : 0;
    if (cnt > 1) {
      t->bias_mean = sum / (double)cnt;
      const double var = (sum2 - sum * sum / (double)cnt) / (double)(cnt - 1);
      t->bias_t = var > 0 ? t->bias_mean / sqrt(var / (double)cnt) : (t->bias_mean != 0 ? copysign(INFINITY, t->bias_mean) : 0);
    }
    /* stagnant when half the elements that should have moved did not; biased when the error
     * leans one way (|t| >= 6) by an ulp or more and by a sixteenth or more of how far the exact
     * trajectory moved (an fp32 master 20 ulps off after moving 10^6 is no hazard) */
    if (t->moved && 2 * t->stuck >= t->moved) t->hazards |= 1u << PF_H_STAGNANT;
    if (fabs(t->bias_t) >= 6 && fabs(t->bias_mean) >= 1 && fabs(t->bias_mean) >= t->exact_moved_ulps / 16)
      t->hazards |= 1u << PF_H_BIASED;
    free(d);
    free(mv);
  }
done:
  for (int k = 0; k < PF_MAX_INPUTS; k++) {
    free(kstate[k].data);
    free(xstate[k].data);
  }
  free(start_w);
  pf_oracle_result_free(&x);
  pf_case_free(&c);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  t->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return st;
}
