/* Hazards (hazard.h): imprecise and biased from the outputs and the exact values, the
 * operation's own, and torch.testing's default tolerance beside them. */
#include "hazard.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"
#include "runner.h"

static const char *const pf_hazard_names[PF_NHAZARDS] = {"saturated", "stagnant", "biased", "imprecise"};

const char *pf_hazard_name(pf_hazard h) { return h < PF_NHAZARDS ? pf_hazard_names[h] : "?"; }

pf_status pf_hazard_parse(const char *s, pf_hazard *out) {
  for (int h = 0; h < PF_NHAZARDS; h++)
    if (!strcmp(s, pf_hazard_names[h])) {
      *out = (pf_hazard)h;
      return PF_OK;
    }
  return PF_ERR_UNKNOWN;
}

const char *pf_hazards_str(unsigned mask, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (int h = 0; h < PF_NHAZARDS; h++)
    if (mask & (1u << h)) used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s", used ? "," : "", pf_hazard_names[h]);
  if (!mask) snprintf(buf, len, "none");
  return buf;
}

void pf_hazard_limits_default(pf_hazard_limits *l) {
  for (int t = 0; t < PF_NDTYPES; t++) {
    const double u16 = 16 * pf_unit_roundoff((pf_dtype)t);
    l->imprecise[t] = u16 > 0x1p-10 ? u16 : 0x1p-10;
  }
  l->bias_z = 6;
  l->bias_ulps = 0.25;
  l->bias_min = 32;
}

pf_status pf_hazard_limits_parse(const char *s, pf_hazard_limits *l) {
  char buf[256];
  if (!*s || strlen(s) >= sizeof buf) return pf_error(PF_ERR_ARG, "--imprecise: expected DTYPE=VALUE[,DTYPE=VALUE...], got '%s'", s);
  strcpy(buf, s);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) return pf_error(PF_ERR_ARG, "--imprecise: '%s' is not DTYPE=VALUE", item);
    *eq = 0;
    pf_dtype t;
    if (pf_dtype_parse(item, &t)) return pf_error(PF_ERR_ARG, "--imprecise: '%s' is not a dtype (fp32, fp16, bf16)", item);
    char *end;
    const double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !(v > 0 && v < 1))
      return pf_error(PF_ERR_ARG, "--imprecise: %s=%s is not a relative error in (0, 1)", item, eq + 1);
    l->imprecise[t] = v;
  }
  return PF_OK;
}

void pf_torch_testing_tolerance(pf_dtype t, double *rtol, double *atol) {
  *atol = 1e-5;
  *rtol = t == PF_FP16 ? 1e-3 : t == PF_BF16 ? 1.6e-2 : 1.3e-6;
}

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

/* the dtype output i is stored in */
static pf_dtype pf_elem_dtype(const pf_case *c, const pf_run *r, size_t i) {
  return pf_oracle_dtype_of(&r->oracle, i, c->dtype);
}

/* The measure |y - E| / |E| is computed from E rounded to binary64, which moves it by up to
 * 2^-53 (1 + 1/measure) relative: within 2^-40 of the threshold (a measure equal to it) is not
 * beyond it. */
int pf_hazard_beyond(double err, double thr) { return err > thr * (1 + 0x1p-40); }

double pf_hazard_threshold(const pf_case *c, const pf_hazard_limits *l, pf_dtype t) {
  return fmax(l->imprecise[t], l->imprecise[c->dtype]);
}

/* An element whose error means something: the exact value known and finite, the output finite. */
static int pf_judgeable(const pf_run *r, size_t i) {
  const unsigned char s = r->oracle.status[i];
  /* not an element whose exact value is beyond its dtype (rounded to inf: verdict range) */
  return (s == PF_ORACLE_NUMBER || s == PF_ORACLE_TIE) && isfinite(r->oracle.exact[i]) &&
         isfinite(r->oracle.rounded[i]) && isfinite(r->out[i]);
}

/* imprecise over the elements [from, from + count), one measure unit */
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

/* the stages of the run's operation, or the one output as a stage of its own, measured by rows */
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

/* biased: the signed difference between an output y and what unbiased rounding gives, the
 * correctly rounded R (either neighbour of a tie), in ulps of the stage's dtype at the exact E,
 * as it is (upward or downward) and times sign(E) (away from zero or toward it), averaged over
 * independent units and tested against 0 with a one-sample t statistic:
 *   - a stage with rows (2 or more dimensions): a unit is a row's mean. Errors the row shares
 *     (one rounded denominator, one coefficient) have a sign of their own in every row and
 *     average out; a rounding bias has the same sign in every row.
 *   - a vector: a unit is one distinct (E, y) pair, where the contract pins the value before
 *     the final rounding to within 1/8 ulp of E (bound.rel |E| + bound.abs), so that the final
 *     rounding decides y: nearest gives R but within 1/8 ulp of a midpoint, a directed rounding
 *     gives the other neighbour on about half of the elements. Elements whose error the
 *     algorithm may have made are left out; repeated pairs count once. */
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

static pf_hazard_limits pf_limits_set;
static int pf_limits_have;

void pf_hazard_limits_set_default(const pf_hazard_limits *l) {
  pf_limits_set = *l;
  pf_limits_have = 1;
}

const pf_hazard_limits *pf_hazard_limits_current(void) { return pf_limits_have ? &pf_limits_set : NULL; }

const pf_hazard_limits *pf_hazard_limits_or_default(const pf_hazard_limits *l, pf_hazard_limits *def) {
  if (l) return l;
  pf_hazard_limits_default(def);
  return def;
}

_Static_assert(PF_BIAS_STAGES == PF_MAX_STAGES, "a bias pool holds every stage");

void pf_bias_pool_add(pf_bias_pool *p, const pf_bias_pool *u) {
  if (!p->nstages) {
    *p = *u;
    return;
  }
  for (int k = 0; k < p->nstages && k < u->nstages; k++) {
    /* the same stage (a case of another operation's stages is not pooled with these) */
    if (!p->st[k].name || !u->st[k].name || strcmp(p->st[k].name, u->st[k].name)) continue;
    p->st[k].n += u->st[k].n;
    for (int j = 0; j < 2; j++) p->st[k].sum[j] += u->st[k].sum[j], p->st[k].sq[j] += u->st[k].sq[j];
  }
}

int pf_bias_pool_test(const pf_bias_pool *p, int k, const pf_hazard_limits *l, double mean[2], double t[2]) {
  const size_t m = p->st[k].n;
  int biased = -1;
  for (int j = 0; j < 2; j++) {
    mean[j] = m ? p->st[k].sum[j] / (double)m : 0;
    const double var = m > 1 ? (p->st[k].sq[j] - (double)m * mean[j] * mean[j]) / (double)(m - 1) : 0;
    t[j] = var > 0 ? mean[j] / sqrt(var / (double)m) : (mean[j] != 0 ? copysign(INFINITY, mean[j]) : 0);
    if (biased < 0 && m >= l->bias_min && m >= 2 && fabs(t[j]) >= l->bias_z && fabs(mean[j]) >= l->bias_ulps) biased = j;
  }
  return biased;
}

void pf_hazard_tally_add(pf_hazard_tally *t, const pf_run *r) {
  const int finding = pf_verdict_is_finding(r->cmp.verdict);
  for (int h = 0; h < PF_NHAZARDS; h++) t->hazard[h] += (r->hazards >> h) & 1;
  t->any += r->hazards != 0;
  t->tt_rejects += r->tt_fails != 0;
  if (!r->tt_fails) t->tt_pass_finding += finding, t->tt_pass_hazard += !finding && r->hazards;
  else t->tt_reject_sound += !finding && !r->hazards && r->cmp.verdict == PF_V_OK;
  if (r->worst_err > t->max_err) t->max_err = r->worst_err;
  pf_bias_pool_add(&t->bias, &r->bias);
}

void pf_hazard_tally_merge(pf_hazard_tally *t, const pf_hazard_tally *u) {
  for (int h = 0; h < PF_NHAZARDS; h++) t->hazard[h] += u->hazard[h];
  t->any += u->any;
  t->tt_rejects += u->tt_rejects, t->tt_pass_finding += u->tt_pass_finding;
  t->tt_pass_hazard += u->tt_pass_hazard, t->tt_reject_sound += u->tt_reject_sound;
  if (u->max_err > t->max_err) t->max_err = u->max_err;
  pf_bias_pool_add(&t->bias, &u->bias);
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
