/* Boundary search (boundary.h). */
#include "boundary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"

static const char *const pf_bfmt_names[PF_BFMT_COUNT] = {"fp32", "fp16", "bf16", "binary64", "int"};

const char *pf_bfmt_name(int format) { return format >= 0 && format < PF_BFMT_COUNT ? pf_bfmt_names[format] : "?"; }

pf_status pf_bfmt_parse(const char *s, int *format) {
  for (int f = 0; f < PF_BFMT_COUNT; f++)
    if (strcmp(s, pf_bfmt_names[f]) == 0) {
      *format = f;
      return PF_OK;
    }
  return pf_error(PF_ERR_UNKNOWN, "unknown format '%s' (fp32, fp16, bf16, binary64, int)", s);
}

int64_t pf_bfmt_ordinal(int format, double x) {
  if (format == PF_BFMT_INT) return (int64_t)x;
  if (format == PF_BFMT_BINARY64) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    const int64_t mag = (int64_t)(b & 0x7fffffffffffffffull);
    return (b >> 63) ? -mag : mag;
  }
  return pf_ordinal((pf_dtype)format, x);
}

double pf_bfmt_value(int format, int64_t ord) {
  if (format == PF_BFMT_INT) return (double)ord;
  if (format == PF_BFMT_BINARY64) {
    const uint64_t b = ord < 0 ? (0x8000000000000000ull | (uint64_t)(-ord)) : (uint64_t)ord;
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
  }
  return pf_from_ordinal((pf_dtype)format, ord);
}

static pf_dtype pf_input_dtype(const pf_op *op, const pf_case *c, int i) {
  return op->input_dtype ? op->input_dtype(c, i) : c->dtype;
}

pf_status pf_axis_parse(const pf_case *c, const char *spec, pf_axis *a) {
  const pf_op *op = pf_case_op(c);
  if (!op) return pf_error(PF_ERR_UNKNOWN, "unknown kernel '%s'", c->kernel);
  const char *colon = strchr(spec, ':');
  const size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);
  const char *name = colon ? colon + 1 : NULL;
  memset(a, 0, sizeof *a);
  if ((klen == 5 && strncmp(spec, "value", 5) == 0) || (klen == 5 && strncmp(spec, "scale", 5) == 0) ||
      (klen == 6 && strncmp(spec, "offset", 6) == 0)) {
    a->kind = spec[0] == 'v' ? PF_AXIS_VALUE : spec[0] == 's' ? PF_AXIS_SCALE : PF_AXIS_OFFSET;
    a->index = -1;
    if (name) {
      for (int i = 0; i < op->ninputs; i++)
        if (strcmp(op->input_names[i], name) == 0) a->index = i;
      if (a->index < 0) return pf_error(PF_ERR_ARG, "--along %s: kernel %s has no input '%s'", spec, c->kernel, name);
    }
    if (a->kind == PF_AXIS_SCALE || a->kind == PF_AXIS_OFFSET) {
      a->format = PF_BFMT_BINARY64;
      return PF_OK;
    }
    a->format = pf_input_dtype(op, c, a->index < 0 ? 0 : a->index);
    for (int i = 0; a->index < 0 && i < op->ninputs; i++)
      if ((int)pf_input_dtype(op, c, i) != a->format)
        return pf_error(PF_ERR_ARG, "--along value: the inputs of %s differ in dtype; name one (value:%s)", c->kernel,
                        op->input_names[0]);
    return PF_OK;
  }
  if (klen == 5 && strncmp(spec, "param", 5) == 0 && name) {
    a->kind = PF_AXIS_PARAM;
    a->index = pf_op_param_index(op, name);
    if (a->index < 0) return pf_error(PF_ERR_ARG, "--along %s: kernel %s has no parameter '%s'", spec, c->kernel, name);
    const pf_param_desc *d = &op->params[a->index];
    if (d->type == PF_PARAM_CHOICE) return pf_error(PF_ERR_ARG, "--along %s: a choice has no order to search along", spec);
    a->format = d->type == PF_PARAM_INT ? PF_BFMT_INT : d->held ? d->held - 1 : PF_BFMT_BINARY64;
    return PF_OK;
  }
  if (klen == 3 && strncmp(spec, "dim", 3) == 0 && name) {
    a->kind = PF_AXIS_DIM;
    a->index = -1;
    for (int d = 0; d < op->ndims; d++)
      if (strcmp(op->dim_names[d], name) == 0) a->index = d;
    if (a->index < 0) return pf_error(PF_ERR_ARG, "--along %s: kernel %s has no dimension '%s'", spec, c->kernel, name);
    a->format = PF_BFMT_INT;
    return PF_OK;
  }
  return pf_error(PF_ERR_ARG, "--along: '%s' is not value[:INPUT], scale[:INPUT], offset[:INPUT], param:NAME or dim:NAME",
                  spec);
}

void pf_axis_describe(const pf_case *c, const pf_axis *a, char *buf, size_t len) {
  const pf_op *op = pf_case_op(c);
  switch (a->kind) {
  case PF_AXIS_VALUE:
    if (a->index < 0) snprintf(buf, len, "the value of every input element");
    else snprintf(buf, len, "the value of every element of %s", op->input_names[a->index]);
    break;
  case PF_AXIS_SCALE:
    if (a->index < 0) snprintf(buf, len, "the scale of every input");
    else snprintf(buf, len, "the scale of %s", op->input_names[a->index]);
    break;
  case PF_AXIS_OFFSET:
    if (a->index < 0) snprintf(buf, len, "the offset of every input");
    else snprintf(buf, len, "the offset of %s", op->input_names[a->index]);
    break;
  case PF_AXIS_PARAM: snprintf(buf, len, "parameter %s", op->params[a->index].name); break;
  case PF_AXIS_DIM: snprintf(buf, len, "dimension %s", op->dim_names[a->index]); break;
  }
}

void pf_axis_limits(const pf_case *c, const pf_axis *a, double *lo, double *hi) {
  const pf_op *op = pf_case_op(c);
  switch (a->kind) {
  case PF_AXIS_VALUE:
    *hi = pf_max_finite((pf_dtype)a->format);
    *lo = -*hi;
    break;
  case PF_AXIS_SCALE: *lo = 0, *hi = 0x1p1000; break;
  case PF_AXIS_OFFSET: *lo = -0x1p1000, *hi = 0x1p1000; break;
  case PF_AXIS_PARAM: *lo = op->params[a->index].min, *hi = op->params[a->index].max; break;
  case PF_AXIS_DIM: *lo = 1, *hi = (double)op->dim_max[a->index]; break;
  }
}

pf_status pf_axis_apply(const pf_case *tmpl, const pf_axis *a, double x, pf_case *out) {
  pf_status st = pf_case_copy(out, tmpl);
  if (st) return st;
  const pf_op *op = pf_op_find(out->kernel);
  switch (a->kind) {
  case PF_AXIS_PARAM: out->params[a->index] = x; break;
  case PF_AXIS_DIM:
    out->shape[a->index] = (size_t)x;
    /* a constant input (every element the same value) follows the new size */
    for (int i = 0; i < out->ninputs; i++) {
      pf_gen *g = &out->inputs[i];
      if (g->dist != PF_DIST_VALUES) continue;
      const size_t n = op->input_count(out, i);
      for (size_t k = 1; k < g->nvalues; k++)
        if (!(g->values[k] == g->values[0]) || signbit(g->values[k]) != signbit(g->values[0]))
          return pf_error(PF_ERR_ARG, "input %s holds explicit values that differ: its size cannot follow dimension %s",
                          op->input_names[i], op->dim_names[a->index]);
      const double v = g->nvalues ? g->values[0] : 0;
      double *nv = realloc(g->values, (n ? n : 1) * sizeof(double));
      if (!nv) return pf_error(PF_ERR_NOMEM, "cannot allocate %zu values", n);
      for (size_t k = 0; k < n; k++) nv[k] = v;
      g->values = nv, g->nvalues = n;
    }
    break;
  case PF_AXIS_SCALE:
  case PF_AXIS_OFFSET:
    for (int i = 0; i < out->ninputs; i++) {
      if (a->index >= 0 && i != a->index) continue;
      if (out->inputs[i].dist == PF_DIST_VALUES)
        return pf_error(PF_ERR_ARG, "input %s holds explicit values: it has no %s to search along", op->input_names[i],
                        a->kind == PF_AXIS_SCALE ? "scale" : "offset");
      if (a->kind == PF_AXIS_SCALE) out->inputs[i].scale = x;
      else out->inputs[i].offset = x;
    }
    break;
  case PF_AXIS_VALUE:
    for (int i = 0; i < out->ninputs; i++) {
      if (a->index >= 0 && i != a->index) continue;
      const size_t n = op->input_count(out, i);
      pf_gen_free(&out->inputs[i]);
      out->inputs[i].dist = PF_DIST_VALUES;
      out->inputs[i].values = malloc((n ? n : 1) * sizeof(double));
      if (!out->inputs[i].values) return pf_error(PF_ERR_NOMEM, "cannot allocate %zu values", n);
      for (size_t k = 0; k < n; k++) out->inputs[i].values[k] = x;
      out->inputs[i].nvalues = n;
    }
    break;
  }
  return PF_OK;
}

pf_status pf_fail_set_parse(const char *s, pf_fail_set *out) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  *out = 0;
  for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    if (strncmp(w, "event:", 6) == 0) {
      const char *e = w + 6;
      const unsigned bit = strcmp(e, "overflow") == 0 ? PF_FE_OVERFLOW : strcmp(e, "underflow") == 0 ? PF_FE_UNDERFLOW
                           : strcmp(e, "invalid") == 0 ? PF_FE_INVALID : 0;
      if (!bit) return pf_error(PF_ERR_ARG, "--fail: '%s' is not an event (event:overflow, event:underflow, event:invalid)", w);
      *out |= bit << PF_FAIL_EVENT_SHIFT;
      continue;
    }
    pf_hazard h;
    if (strcmp(w, "hazard") == 0 || !pf_hazard_parse(w, &h)) {
      const unsigned bits = strcmp(w, "hazard") == 0 ? (1u << PF_NHAZARDS) - 1 : 1u << h;
      *out |= bits << (PF_FAIL_EVENT_SHIFT + PF_OUTCOME_HAZARD_SHIFT);
      continue;
    }
    if (strcmp(w, "finding") == 0) {
      for (int v = 0; v < PF_NVERDICTS; v++)
        if (pf_verdict_is_finding((pf_verdict)v)) *out |= 1u << v;
      continue;
    }
    pf_verdict v;
    if (pf_verdict_parse(w, &v) || v == PF_V_OK)
      return pf_error(PF_ERR_ARG, "--fail: '%s' is not a verdict that fails (inaccurate, underflow, overflow, nan, "
                                  "divergent, range, finding for all but range, event:overflow|underflow|invalid, a hazard: "
                                  "saturated, stagnant, biased, imprecise, or hazard for any)", w);
    *out |= 1u << v;
  }
  if (!*out) return pf_error(PF_ERR_ARG, "--fail: no verdict given");
  return PF_OK;
}

void pf_fail_set_name(pf_fail_set f, char *buf, size_t len) {
  static const char *const ev[3] = {"event:overflow", "event:underflow", "event:invalid"};
  size_t n = 0;
  buf[0] = 0;
  for (int v = 0; v < PF_NVERDICTS && n < len; v++)
    if (f & (1u << v)) n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", pf_verdict_name((pf_verdict)v));
  for (int e = 0; e < 3 && n < len; e++)
    if ((f >> PF_FAIL_EVENT_SHIFT) & (1u << e)) n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", ev[e]);
  for (int h = 0; h < PF_NHAZARDS && n < len; h++)
    if ((f >> (PF_FAIL_EVENT_SHIFT + PF_OUTCOME_HAZARD_SHIFT)) & (1u << h))
      n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", pf_hazard_name((pf_hazard)h));
}

/* Progress of the search at hand (pf_boundary_progress_begin; NULL: none, as inside a sweep,
 * which shows its own): a line per point, as core/progress.h paces them. */
static pf_progress *pf_bp;
static const char *pf_bp_label;
static size_t pf_bp_points;

void pf_boundary_progress_begin(pf_progress *p, const char *label) {
  pf_bp = p;
  pf_bp_label = label;
  pf_bp_points = 0;
  if (p) pf_progress_start(p);
}

void pf_boundary_progress_end(void) {
  if (pf_bp) pf_progress_clear(pf_bp);
  pf_bp = NULL;
}

static void pf_bp_tick(const pf_axis *a, double x, unsigned cases) {
  if (!pf_bp) return;
  pf_bp_points++;
  (void)a;
  pf_progress_show(pf_bp, 0, "%s: %zu points searched (%u case%s each), now at %.6g", pf_bp_label, pf_bp_points, cases,
                   cases == 1 ? "" : "s", x);
}

/* One case at x: its verdict, and the description of its worst element when it fails. */
static pf_status pf_eval(const pf_case *tmpl, const pf_axis *a, double x, const pf_oracle_opts *oo, pf_verdict *v,
                         unsigned *fe, char *detail, size_t len) {
  pf_bp_tick(a, x, 1);
  pf_case c;
  pf_status st = pf_axis_apply(tmpl, a, x, &c);
  if (!st) {
    pf_run r;
    st = pf_run_case(&c, oo, &r);
    if (!st) {
      *v = r.cmp.verdict;
      *fe = pf_outcome(r.fe, r.hazards);
      if (detail) {
        detail[0] = 0;
        if (r.cmp.verdict != PF_V_OK) pf_run_describe(&c, &r, detail, len);
        for (int h = 0; h < PF_NHAZARDS; h++) /* and what each hazard was */
          if (r.hazards & (1u << h)) {
            const size_t used = strlen(detail);
            snprintf(detail + used, len - used, "%s%s: %s", used ? "; " : "", pf_hazard_name((pf_hazard)h), r.hazard_note[h]);
          }
      }
    }
    pf_run_free(&r);
  }
  pf_case_free(&c);
  return st;
}

int pf_fails(pf_fail_set f, pf_verdict v, unsigned fe) {
  return ((f >> v) & 1u) || ((f >> PF_FAIL_EVENT_SHIFT) & fe);
}

/* The k-th of `points` intervals' end between two ordinals, without overflow. */
static int64_t pf_grid(int64_t lo, int64_t hi, int k, int points) {
  return (int64_t)((__int128)lo + ((__int128)hi - lo) * k / points);
}

double pf_bfmt_grid(int format, double lo, double hi, int k, int points) {
  return pf_bfmt_value(format, pf_grid(pf_bfmt_ordinal(format, lo), pf_bfmt_ordinal(format, hi), k, points));
}

/* Rounds [lo, hi] into the format: lo up, hi down. */
static void pf_round_range(int format, double *lo, double *hi) {
  if (format == PF_BFMT_INT) {
    *lo = ceil(*lo), *hi = floor(*hi);
  } else if (format != PF_BFMT_BINARY64) {
    const pf_dtype t = (pf_dtype)format;
    const double m = pf_max_finite(t);
    if (*lo < -m) *lo = -m;
    if (*hi > m) *hi = m;
    double r = pf_round(t, *lo);
    *lo = r < *lo ? pf_next_up(t, r) : r;
    r = pf_round(t, *hi);
    *hi = r > *hi ? pf_next_down(t, r) : r;
  }
}

pf_status pf_boundary_threshold(const pf_case *tmpl, const pf_axis *a, double lo, double hi, pf_fail_set fail,
                                int points, const pf_oracle_opts *oo, pf_threshold *out) {
  memset(out, 0, sizeof *out);
  pf_round_range(a->format, &lo, &hi);
  if (!(lo <= hi)) return pf_error(PF_ERR_ARG, "the range holds no value of %s", pf_bfmt_name(a->format));
  if (points < 1) points = 1;
  out->lo = lo, out->hi = hi;
  const int64_t olo = pf_bfmt_ordinal(a->format, lo), ohi = pf_bfmt_ordinal(a->format, hi);
  pf_verdict v0, vprev, v;
  unsigned e0, eprev, e;
  pf_status st = pf_eval(tmpl, a, lo, oo, &v0, &e0, NULL, 0);
  if (st) return st;
  out->runs = 1;
  out->v_lo = v0, out->fe_lo = e0;
  const int f0 = pf_fails(fail, v0, e0);
  int64_t pa = olo, pb = olo; /* the first grid interval whose ends differ */
  pf_verdict va = v0, vb = v0;
  unsigned ea = e0, eb = e0;
  vprev = v0, eprev = e0;
  int64_t prev = olo;
  for (int k = 1; k <= points; k++) {
    const int64_t o = pf_grid(olo, ohi, k, points);
    if (o == prev) continue;
    if ((st = pf_eval(tmpl, a, pf_bfmt_value(a->format, o), oo, &v, &e, NULL, 0))) return st;
    out->runs++;
    if (pf_fails(fail, v, e) != pf_fails(fail, vprev, eprev)) {
      out->changes++;
      if (!out->found) out->found = 1, pa = prev, pb = o, va = vprev, vb = v, ea = eprev, eb = e;
    }
    prev = o, vprev = v, eprev = e;
  }
  out->v_hi = vprev, out->fe_hi = eprev;
  if (!out->found) return PF_OK;
  while (pb - pa > 1) {
    const int64_t m = (int64_t)(((__int128)pa + pb) / 2);
    if ((st = pf_eval(tmpl, a, pf_bfmt_value(a->format, m), oo, &v, &e, NULL, 0))) return st;
    out->runs++;
    if (pf_fails(fail, v, e) == f0) pa = m, va = v, ea = e;
    else pb = m, vb = v, eb = e;
  }
  out->bad_above = !f0;
  out->below = pf_bfmt_value(a->format, pa);
  out->above = pf_bfmt_value(a->format, pb);
  out->v_below = va, out->v_above = vb;
  out->fe_below = ea, out->fe_above = eb;
  /* the failing side's description */
  if ((st = pf_eval(tmpl, a, f0 ? out->below : out->above, oo, &v, &e, out->detail, sizeof out->detail))) return st;
  out->runs++;
  return PF_OK;
}

/* Failing cases of the N templates at x; with p, the point's other figures too. The cases
 * run together (pf_run_cases: one kernel run where the operation allows it). */
static pf_status pf_count(const pf_case *tmpls, unsigned n, const pf_axis *a, double x, pf_fail_set fail,
                          const pf_oracle_opts *oo, unsigned *fails, pf_prob_point *p) {
  pf_bp_tick(a, x, n);
  *fails = 0;
  if (p) {
    const double x0 = p->x;
    memset(p, 0, sizeof *p);
    p->x = x0, p->finding_case = -1;
  }
  pf_case *cs = calloc(n ? n : 1, sizeof *cs);
  pf_run *rs = calloc(n ? n : 1, sizeof *rs);
  unsigned built = 0;
  pf_status st = cs && rs ? PF_OK : pf_error(PF_ERR_NOMEM, "cannot allocate %u cases", n);
  while (!st && built < n) { /* a failed apply leaves a case that can be freed */
    st = pf_axis_apply(&tmpls[built], a, x, &cs[built]);
    built++;
  }
  if (!st) st = pf_run_cases(cs, n, oo, rs);
  for (unsigned i = 0; !st && i < n; i++) {
    const pf_run *r = &rs[i];
    *fails += pf_fails(fail, r->cmp.verdict, pf_outcome(r->fe, r->hazards));
    if (p && !r->in_domain) p->outside++;
    if (p && r->in_domain) {
      if (r->cmp.max_ulps > p->max_ulps) p->max_ulps = r->cmp.max_ulps;
      if (r->cmp.max_rel > p->max_rel) p->max_rel = r->cmp.max_rel;
      if (pf_verdict_is_finding(r->cmp.verdict) && !p->findings++) p->finding_case = (int)i;
      pf_hazard_tally_add(&p->hz, r);
    }
  }
  for (unsigned i = 0; rs && i < n; i++) pf_run_free(&rs[i]);
  for (unsigned i = 0; cs && i < built; i++) pf_case_free(&cs[i]);
  free(cs);
  free(rs);
  return st;
}

/* Narrows (below, above] where `enough` first holds, by bisection of ordinals. */
static pf_status pf_refine(const pf_case *tmpls, unsigned n, const pf_axis *a, pf_fail_set fail, int steps,
                           unsigned need, const pf_oracle_opts *oo, double *below, double *above, unsigned *fails_above,
                           size_t *runs) {
  int64_t pa = pf_bfmt_ordinal(a->format, *below), pb = pf_bfmt_ordinal(a->format, *above);
  for (int s = 0; s < steps && pb - pa > 1; s++) {
    const int64_t m = (int64_t)(((__int128)pa + pb) / 2);
    unsigned f;
    pf_status st = pf_count(tmpls, n, a, pf_bfmt_value(a->format, m), fail, oo, &f, NULL);
    if (st) return st;
    *runs += n;
    if (f >= need) pb = m, *fails_above = f;
    else pa = m;
  }
  *below = pf_bfmt_value(a->format, pa);
  *above = pf_bfmt_value(a->format, pb);
  return PF_OK;
}

pf_status pf_boundary_probability(const pf_case *tmpls, unsigned ncases, const pf_axis *a, double lo, double hi,
                                  pf_fail_set fail, int points, int refine, const pf_oracle_opts *oo,
                                  pf_probability *out) {
  memset(out, 0, sizeof *out);
  pf_round_range(a->format, &lo, &hi);
  if (!(lo <= hi)) return pf_error(PF_ERR_ARG, "the range holds no value of %s", pf_bfmt_name(a->format));
  if (points < 1) points = 1;
  out->cases = ncases;
  out->points = calloc((size_t)points + 1, sizeof *out->points);
  if (!out->points) return pf_error(PF_ERR_NOMEM, "cannot allocate %d points", points + 1);
  const int64_t olo = pf_bfmt_ordinal(a->format, lo), ohi = pf_bfmt_ordinal(a->format, hi);
  int64_t prev = olo - 1;
  for (int k = 0; k <= points; k++) {
    const int64_t o = pf_grid(olo, ohi, k, points);
    if (o == prev) continue;
    prev = o;
    pf_prob_point *p = &out->points[out->npoints++];
    p->x = pf_bfmt_value(a->format, o);
    pf_status st = pf_count(tmpls, ncases, a, p->x, fail, oo, &p->fails, p);
    if (st) return st;
    out->runs += ncases;
  }
  for (int which = 0; which < 2; which++) {
    const unsigned need = which ? (ncases + 1) / 2 : 1;
    for (size_t k = 0; k < out->npoints; k++) {
      if (out->points[k].fails < need) continue;
      double below = k ? out->points[k - 1].x : NAN, above = out->points[k].x;
      unsigned f = out->points[k].fails;
      if (k) {
        pf_status st = pf_refine(tmpls, ncases, a, fail, refine, need, oo, &below, &above, &f, &out->runs);
        if (st) return st;
      }
      if (which) out->half_found = 1, out->half_x = above, out->half_prev = below, out->half_fails = f;
      else out->first_found = 1, out->first_x = above, out->first_prev = below, out->first_fails = f;
      break;
    }
  }
  return PF_OK;
}

void pf_probability_free(pf_probability *p) {
  free(p->points);
  p->points = NULL;
  p->npoints = 0;
}

pf_status pf_boundary_every(const pf_case *tmpl, const pf_axis *a, double lo, double hi, pf_fail_set fail,
                            const pf_oracle_opts *oo, pf_every *out) {
  memset(out, 0, sizeof *out);
  pf_round_range(a->format, &lo, &hi);
  const int64_t o0 = pf_bfmt_ordinal(a->format, lo), o1 = pf_bfmt_ordinal(a->format, hi);
  if (o1 < o0) return pf_error(PF_ERR_ARG, "the range holds no value of %s", pf_bfmt_name(a->format));
  if ((__int128)o1 - o0 >= PF_EVERY_MAX) /* ordinals of a binary64 range may differ by more than int64 holds */
    return pf_error(PF_ERR_ARG, "--every: the range holds more than %d values of %s", PF_EVERY_MAX, pf_bfmt_name(a->format));
  int prev_bad = 0;
  for (int64_t o = o0; o <= o1; o++) {
    const double x = pf_bfmt_value(a->format, o);
    pf_verdict v;
    unsigned outcome;
    pf_status st = pf_eval(tmpl, a, x, oo, &v, &outcome, NULL, 0);
    if (st) return st;
    out->values++;
    const int bad = pf_fails(fail, v, outcome);
    if (bad) {
      out->failing++;
      if (prev_bad) {
        out->runs[out->nruns - 1].hi = x;
      } else {
        if (out->nruns == out->cap) {
          const size_t cap = out->cap ? 2 * out->cap : 16;
          pf_every_run *r = realloc(out->runs, cap * sizeof *r);
          if (!r) return pf_error(PF_ERR_NOMEM, "--every: out of memory");
          out->runs = r, out->cap = cap;
        }
        out->runs[out->nruns++] = (pf_every_run){x, x, v, outcome};
      }
    }
    prev_bad = bad;
  }
  return PF_OK;
}

void pf_every_free(pf_every *e) {
  free(e->runs);
  memset(e, 0, sizeof *e);
}
