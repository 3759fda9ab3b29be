/* The hazards of one run (declared in hazard.h): imprecise and biased from its outputs and exact
 * values, the operation's own, torch.testing's default tolerance beside them, and a run's share
 * of a tally. Apart from hazard.c, whose limits, names and pools the run itself holds: this side
 * reads the run (run.h), that side is below it. */
#include "hazard.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "run.h"

void pf_run_flag_hazard(pf_run *r, pf_hazard h, size_t at, double measure, const char *fmt, ...) {
  if (r->hazards & (1u << h)) return;
  r->hazards |= 1u << h;
  r->hazard_at[h] = at;
  r->hazard_measure[h] = measure;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->hazard_note[h], sizeof r->hazard_note[h], fmt, ap);
  va_end(ap);
}

static pf_dtype pf_elem_dtype(const pf_case *c, const pf_run *r, size_t i) {
  return pf_oracle_dtype_of(&r->oracle, i, c->dtype);
}

static int pf_judgeable(const pf_run *r, size_t i) {
  const unsigned char s = r->oracle.status[i];
  /* not an element whose exact value is beyond its dtype (rounded to inf: verdict range) */
  return (s == PF_ORACLE_NUMBER || s == PF_ORACLE_TIE) && isfinite(r->oracle.exact[i]) &&
         isfinite(r->oracle.rounded[i]) && isfinite(r->out[i]);
}

static void pf_imprecise_unit(const pf_case *c, pf_run *r, const pf_stage *s, size_t from, size_t count, int measure,
                              const pf_hazard_limits *l) {
  if (measure == PF_MEASURE_ELEMENT) { /* the element furthest beyond its threshold */
    double worst = 1;
    size_t at = 0;
    for (size_t i = from; i < from + count; i++) {
      if (!pf_judgeable(r, i)) continue;
      const pf_dtype t = pf_elem_dtype(c, r, i);
      const double E = r->oracle.exact[i], err = fabs(r->out[i] - E) / fmax(fabs(E), pf_min_normal(t));
      const double thr = pf_hazard_threshold(c, l, t);
      if (err > r->worst_err) r->worst_err = err;
      if (pf_hazard_beyond(err, thr) && err / thr > worst) worst = err / thr, at = i;
    }
    if (worst > 1) {
      const pf_dtype t = pf_elem_dtype(c, r, at);
      const double thr = pf_hazard_threshold(c, l, t);
      pf_run_flag_hazard(r, PF_H_IMPRECISE, at, worst * thr,
                         "%s[%zu]: relative error %.3g against its exact value %.6g (threshold %.3g for %s)", s->name,
                         at - s->offset, worst * thr, r->oracle.exact[at], thr, pf_dtype_name(thr == l->imprecise[t] ? t : c->dtype));
    }
    return;
  }
  double num = 0, den = 0, worst = -1;
  size_t at = from;
  pf_dtype t = c->dtype;
  for (size_t i = from; i < from + count; i++) {
    if (!pf_judgeable(r, i)) continue;
    const double d = r->out[i] - r->oracle.exact[i];
    num += d * d;
    den += r->oracle.exact[i] * r->oracle.exact[i];
    if (fabs(d) > worst) worst = fabs(d), at = i, t = pf_elem_dtype(c, r, i);
  }
  if (worst <= 0) return;
  /* an all-zero exact slice: the error against the smallest normal, as for one element */
  const double err = sqrt(num) / fmax(sqrt(den), pf_min_normal(t));
  if (err > r->worst_err) r->worst_err = err;
  const double thr = pf_hazard_threshold(c, l, t);
  if (pf_hazard_beyond(err, thr))
    pf_run_flag_hazard(r, PF_H_IMPRECISE, at, err,
                       "%s%s: normwise relative error %.3g (threshold %.3g for %s); worst at %s[%zu]", s->name,
                       measure == PF_MEASURE_ROW ? " row" : "", err, thr, pf_dtype_name(thr == l->imprecise[t] ? t : c->dtype),
                       s->name, at - s->offset);
}

static int pf_stages_of(const pf_case *c, const pf_run *r, pf_stage *st) {
  const pf_op *op = r->kernel->op;
  if (op->stages) return op->stages(c, st);
  /* rows along the last dimension (a row of probabilities, say, whose tiny entries do not
   * matter beside its large ones) */
  st[0] = (pf_stage){"output", 0, r->nout, 0, 0, c->ndims, {0}, PF_MEASURE_ROW};
  for (int d = 0; d < c->ndims; d++) st[0].dims[d] = d;
  return 1;
}

static int pf_cmp_pair(const void *a, const void *b) {
  const double *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void pf_biased_stage(const pf_case *c, pf_run *r, int sk, const pf_stage *s, const pf_hazard_limits *l) {
  const pf_dtype t = s->held > 0 ? (pf_dtype)(s->held - 1) : c->dtype;
  size_t w = s->ndims >= 2 ? c->shape[s->dims[s->ndims - 1]] : 0; /* row length; 0: a vector */
  /* rows of w elements at stride 1, or for a trajectory columns of count / w at stride w */
  const int traj = s->measure == PF_MEASURE_TRAJECTORY && w;
  const size_t nunits = w ? (traj ? w : s->count / w) : 0, len = w ? (traj ? s->count / w : w) : 0;
  const size_t ustride = traj ? 1 : w, estride = traj ? w : 1;
  double *buf = malloc(2 * (s->count ? s->count : 1) * sizeof *buf);
  if (!buf) return;
  double *units = buf; /* pairs (raw, toward-zero) */
  size_t m = 0;
  /* a stage judged against its whole norm (its elements cancel: gradients): errors in ulps at
   * the stage's root mean square exact value, not at each element's, where an element that
   * cancelled to near 0 would make its ulps huge and the mean all noise */
  double ulp_rms = 0;
  if (w && s->measure == PF_MEASURE_TENSOR) {
    double sq = 0;
    size_t k = 0;
    for (size_t i = s->offset; i < s->offset + s->count; i++)
      if (pf_judgeable(r, i)) sq += r->oracle.exact[i] * r->oracle.exact[i], k++;
    ulp_rms = pf_ulp(t, k ? sqrt(sq / (double)k) : 0);
  }
  if (w) {
    for (size_t u = 0; u < nunits; u++) {
      double sum[2] = {0, 0};
      size_t k = 0;
      for (size_t q = 0; q < len; q++) {
        const size_t i = s->offset + u * ustride + q * estride;
        const double E = r->oracle.exact[i];
        if (!pf_judgeable(r, i) || E == 0) continue;
        const double y = r->out[i];
        const double d = r->oracle.status[i] == PF_ORACLE_TIE && y == r->oracle.rounded_alt[i] ? 0 : y - r->oracle.rounded[i];
        const double e = d / (ulp_rms > 0 ? ulp_rms : pf_ulp(t, E));
        sum[0] += e, sum[1] += E < 0 ? -e : e, k++;
      }
      if (!k) continue;
      units[2 * m] = sum[0] / (double)k, units[2 * m + 1] = sum[1] / (double)k;
      m++;
    }
  } else {
    for (size_t i = s->offset; i < s->offset + s->count; i++) {
      const double E = r->oracle.exact[i];
      if (!pf_judgeable(r, i) || E == 0 || fabs(E) < pf_min_normal(t)) continue;
      const pf_bound b = r->bound[i];
      if (!(b.rel * fabs(E) + b.abs <= pf_ulp(t, E) / 8)) continue;
      const double y = r->out[i];
      units[2 * m] = E;
      units[2 * m + 1] = r->oracle.status[i] == PF_ORACLE_TIE && y == r->oracle.rounded_alt[i] ? 0 : y - r->oracle.rounded[i];
      m++;
    }
    qsort(units, m, 2 * sizeof *units, pf_cmp_pair);
    size_t k = 0;
    for (size_t j = 0; j < m; j++) {
      if (j && units[2 * j] == units[2 * j - 2] && units[2 * j + 1] == units[2 * j - 1]) continue;
      const double E = units[2 * j], e = units[2 * j + 1] / pf_ulp(t, E);
      units[2 * k] = e, units[2 * k + 1] = E < 0 ? -e : e; /* k <= j: overwrites only what was read */
      k++;
    }
    m = k;
  }
  static const char *const how[2] = {"upward (+) or downward (-)", "away from zero (+) or toward it (-)"};
  pf_bias_pool one = {.nstages = sk + 1};
  one.st[sk].name = s->name, one.st[sk].n = m;
  for (size_t k = 0; k < m; k++)
    for (int j = 0; j < 2; j++) one.st[sk].sum[j] += units[2 * k + j], one.st[sk].sq[j] += units[2 * k + j] * units[2 * k + j];
  r->bias.st[sk] = one.st[sk];
  double means[2], zs[2];
  const int j = pf_bias_pool_test(&one, sk, l, means, zs);
  if (j >= 0)
    pf_run_flag_hazard(r, PF_H_BIASED, s->offset, zs[j],
                       "%s: the rounding is biased: %+.3f ulps %s from the correctly rounded result on average "
                       "over %zu %s, t = %.1f (biased at |t| >= %g and |mean| >= %g ulps)",
                       s->name, means[j], how[j], m, w ? (traj ? "values (each over its steps)" : "rows") : "distinct values",
                       zs[j], l->bias_z, l->bias_ulps);
  free(buf);
}

void pf_hazard_tally_add(pf_hazard_tally *t, const pf_run *r) {
  const int finding = pf_verdict_is_finding(r->cmp.verdict);
  for (int h = 0; h < PF_NHAZARDS; h++) t->hazard[h] += (r->hazards >> h) & 1;
  t->any += r->hazards != 0;
  t->tt_rejects += r->tt_fails != 0;
  if (!r->tt_fails) t->tt_pass_finding += finding, t->tt_pass_hazard += !finding && r->hazards;
  else t->tt_reject_sound += !finding && !r->hazards && r->cmp.verdict == PF_V_OK;
  if (r->worst_err > t->max_err) t->max_err = r->worst_err;
  for (size_t i = 0; r->cmp.ulps && r->cmp.allowed && i < r->nout; i++) {
    const int64_t u = r->cmp.ulps[i], a = r->cmp.allowed[i];
    if (a == INT64_MAX) continue; /* an element the bound does not limit */
    const double use = u == INT64_MAX ? INFINITY : a > 0 ? (double)u / (double)a : u > 0 ? INFINITY : 0;
    if (use > t->max_use) t->max_use = use;
  }
  pf_bias_pool_add(&t->bias, &r->bias);
}

void pf_run_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *lim) {
  pf_hazard_limits def;
  lim = pf_hazard_limits_or_default(lim, &def);
  r->hazards = 0;
  r->tt_fails = 0;
  r->worst_err = 0;
  memset(&r->bias, 0, sizeof r->bias);
  if (r->failed) return;
  pf_stage st[PF_MAX_STAGES];
  const int ns = pf_stages_of(c, r, st);
  r->bias.nstages = ns;
  for (int k = 0; k < ns; k++) r->bias.st[k].name = st[k].name;
  for (int k = 0; k < ns; k++) {
    const pf_stage *s = &st[k];
    if (s->measure == PF_MEASURE_NONE || s->held == PF_STAGE_MIXED || !s->count) continue;
    if ((s->measure == PF_MEASURE_ROW || s->measure == PF_MEASURE_TRAJECTORY) && s->ndims > 0) {
      const size_t w = c->shape[s->dims[s->ndims - 1]];
      for (size_t row = 0; w && row < s->count / w; row++)
        pf_imprecise_unit(c, r, s, s->offset + row * w, w, PF_MEASURE_ROW, lim);
    } else { /* a row of a vector is the whole of it */
      pf_imprecise_unit(c, r, s, s->offset, s->count, s->measure == PF_MEASURE_ELEMENT ? PF_MEASURE_ELEMENT : PF_MEASURE_TENSOR,
                        lim);
    }
    pf_biased_stage(c, r, k, s, lim);
  }
  if (r->kernel->op->hazards) r->kernel->op->hazards(c, r, lim);
  /* torch.testing.assert_close(y, rounded) over the stages of values: |y - E| <= atol + rtol
   * |E|, NaN never equal, an inf only equal to itself */
  for (int k = 0; k < ns; k++) {
    if (st[k].measure == PF_MEASURE_NONE) continue;
    for (size_t i = st[k].offset; i < st[k].offset + st[k].count; i++) {
      const unsigned char os = r->oracle.status[i];
      if (os == PF_ORACLE_UNDEFINED || os == PF_ORACLE_SET) continue;
      double rtol, atol;
      pf_torch_testing_tolerance(pf_elem_dtype(c, r, i), &rtol, &atol);
      const double y = r->out[i], E = r->oracle.rounded[i];
      const int close = isfinite(y) && isfinite(E) ? fabs(y - E) <= atol + rtol * fabs(E) : y == E;
      if (!close && !r->tt_fails++) r->tt_at = i;
    }
  }
}
