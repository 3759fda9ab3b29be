/* precision-report's pages (report.h). The HTML is also well-formed XML (every element closed,
 * every attribute quoted, text escaped), so a test can parse it strictly. */
#include "reports/report.h"

#include "core/hazard.h"
#include "core/xml.h"
#include "core/kernel.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checking the results ------------------------------------------------------------------- */

enum { T_STR, T_NUM, T_NUMNULL, T_BOOL, T_ARR, T_OBJ, T_COUNT, T_DTYPE, T_ACCUM };
static const char *const pf_type_names[] = {"a string", "a number", "a number or null", "true or false", "an array",
                                            "an object", "a count: an integer >= 0", "a dtype: fp32, fp16 or bf16",
                                            "an accumulation: fp32, fp16, bf16 or storage"};

typedef struct {
  char *err;
  size_t len;
  int bad;
} pf_chk;

static const cJSON *need(pf_chk *k, const cJSON *o, const char *path, const char *key, int type) {
  if (k->bad) return NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  int ok = v != NULL;
  if (ok) switch (type) {
    case T_STR: ok = cJSON_IsString(v); break;
    case T_NUM: ok = cJSON_IsNumber(v); break;
    case T_NUMNULL: ok = cJSON_IsNumber(v) || cJSON_IsNull(v); break;
    case T_BOOL: ok = cJSON_IsBool(v); break;
    case T_ARR: ok = cJSON_IsArray(v); break;
    case T_OBJ: ok = cJSON_IsObject(v); break;
    case T_COUNT: ok = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 0x1p53 && v->valuedouble == floor(v->valuedouble); break;
    case T_DTYPE:
    case T_ACCUM: { /* the sweep names an accumulation in the storage dtype "storage" */
      pf_dtype t;
      ok = cJSON_IsString(v) && (pf_dtype_parse(v->valuestring, &t) == PF_OK ||
                                 (type == T_ACCUM && strcmp(v->valuestring, "storage") == 0));
      break;
    }
    }
  if (!ok) {
    snprintf(k->err, k->len, "%.200s%s%.40s: %s (%s)", path, path[0] ? "." : "", key,
             !v                                                                          ? "missing"
             : (type == T_COUNT && cJSON_IsNumber(v)) || (type >= T_DTYPE && cJSON_IsString(v)) ? "not allowed"
                                                                                              : "wrong type",
             pf_type_names[type]);
    k->bad = 1;
    return NULL;
  }
  return v;
}

static const char *str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}
static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static int flag(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }
static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static void sub(char *buf, size_t len, const char *path, const char *key, int i) {
  /* paths stay short: kernels[2].configs[5].scan.points[3] */
  if (i >= 0) snprintf(buf, len, "%.150s%s%.40s[%d]", path, path[0] && key[0] ? "." : "", key, i);
  else snprintf(buf, len, "%.150s%s%.40s", path, path[0] ? "." : "", key);
}

/* key_hex, when o has it, is the hex spelling of o's number key (the report prints the hex) */
static void hex_matches(pf_chk *k, const cJSON *o, const char *p, const char *key, const char *key_hex) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key), *h = cJSON_GetObjectItemCaseSensitive(o, key_hex);
  if (k->bad || !h || !cJSON_IsNumber(x)) return;
  double v; /* cJSON prints 15 digits where they read back within its epsilon: an ulp or so apart */
  if (!cJSON_IsString(h) || pf_parse_double(h->valuestring, &v) ||
      !(fabs(v - x->valuedouble) <= 2 * DBL_EPSILON * fmax(fabs(v), fabs(x->valuedouble))))
    snprintf(k->err, k->len, "%.200s.%s: not the hex spelling of %s (%.17g)", p, key_hex, key, x->valuedouble), k->bad = 1;
}

/* a count of cases that cannot exceed the cases run */
static void at_most(pf_chk *k, const cJSON *o, const char *p, const char *key, double cases) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!k->bad && cJSON_IsNumber(x) && x->valuedouble > cases)
    snprintf(k->err, k->len, "%.200s.%s: %.0f, more than the %.0f cases run", p, key, x->valuedouble, cases), k->bad = 1;
}

/* s, printable and at most 40 characters: a message stays one line whatever a file holds */
static const char *shown(const char *s, char buf[48]) {
  size_t n = 0;
  for (; *s && n < 40; s++) buf[n++] = *s >= 0x20 && *s < 0x7f ? *s : '?';
  buf[n] = 0;
  return buf;
}

/* o holds only the keys named (NULL-terminated): an unknown one is a typo or another format */
static void only_keys(pf_chk *k, const cJSON *o, const char *p, const char *const *keys) {
  const cJSON *it;
  char b[48];
  cJSON_ArrayForEach(it, o) {
    int known = 0;
    for (int i = 0; keys[i] && !known; i++) known = strcmp(it->string, keys[i]) == 0;
    if (!known && !k->bad)
      snprintf(k->err, k->len, "%s%s%s: an unknown field", p, p[0] ? "." : "", shown(it->string, b)), k->bad = 1;
  }
}

static void check_threshold(pf_chk *k, const cJSON *t, const char *p) {
  need(k, t, p, "name", T_STR), need(k, t, p, "along", T_STR), need(k, t, p, "fail", T_STR);
  need(k, t, p, "shape", T_STR), need(k, t, p, "format", T_STR);
  const cJSON *f = need(k, t, p, "found", T_BOOL);
  if (f && cJSON_IsTrue(f)) {
    need(k, t, p, "bad", T_STR), need(k, t, p, "last_good", T_NUMNULL), need(k, t, p, "first_bad", T_NUMNULL);
    need(k, t, p, "last_good_hex", T_STR), need(k, t, p, "first_bad_hex", T_STR);
    need(k, t, p, "first_bad_verdict", T_STR), need(k, t, p, "replay", T_STR);
    hex_matches(k, t, p, "last_good", "last_good_hex"), hex_matches(k, t, p, "first_bad", "first_bad_hex");
  }
  hex_matches(k, t, p, "lo", "lo_hex"), hex_matches(k, t, p, "hi", "hi_hex");
}

static void check_found_point(pf_chk *k, const cJSON *o, const char *p) {
  const cJSON *f = need(k, o, p, "found", T_BOOL);
  if (f && cJSON_IsTrue(f)) need(k, o, p, "x", T_NUM), need(k, o, p, "fails", T_COUNT);
  hex_matches(k, o, p, "x", "x_hex"), hex_matches(k, o, p, "below", "below_hex");
}

static void check_config(pf_chk *k, const cJSON *c, const char *p) {
  char q[256], r[256];
  need(k, c, p, "variant", T_STR), need(k, c, p, "dtype", T_DTYPE), need(k, c, p, "accum", T_ACCUM);
  need(k, c, p, "contract", T_STR);
  need(k, c, p, "max_ulps", T_NUM), need(k, c, p, "max_rel", T_NUM), need(k, c, p, "findings", T_COUNT);
  need(k, c, p, "cases_outside_domain", T_COUNT);
  need(k, c, p, "max_error", T_NUM), need(k, c, p, "hazard_cases", T_COUNT);
  if (get(c, "max_bound_use")) need(k, c, p, "max_bound_use", T_NUMNULL);
  const cJSON *hz = need(k, c, p, "hazards", T_OBJ);
  sub(q, sizeof q, p, "hazards", -1);
  for (int h = 0; hz && h < PF_NHAZARDS; h++) need(k, hz, q, pf_hazard_name((pf_hazard)h), T_COUNT);
  const cJSON *tt = need(k, c, p, "torch_testing", T_OBJ);
  sub(q, sizeof q, p, "torch_testing", -1);
  if (tt) {
    need(k, tt, q, "rejects", T_COUNT), need(k, tt, q, "passes_finding", T_COUNT);
    need(k, tt, q, "passes_hazard", T_COUNT), need(k, tt, q, "rejects_sound", T_COUNT);
  }
  const cJSON *s = need(k, c, p, "scan", T_OBJ);
  if (s) {
    sub(q, sizeof q, p, "scan", -1);
    need(k, s, q, "along", T_STR), need(k, s, q, "shape", T_STR), need(k, s, q, "fail", T_STR);
    const cJSON *nc = need(k, s, q, "cases", T_COUNT);
    const double cases = nc ? nc->valuedouble : 0;
    const cJSON *pts = need(k, s, q, "points", T_ARR);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, pts) {
      sub(r, sizeof r, q, "points", i++);
      if (!cJSON_IsObject(e) && !k->bad) snprintf(k->err, k->len, "%s: not an object", r), k->bad = 1;
      need(k, e, r, "x", T_NUM), need(k, e, r, "fails", T_COUNT), need(k, e, r, "outside_domain", T_COUNT);
      need(k, e, r, "findings", T_COUNT), need(k, e, r, "max_ulps", T_NUMNULL), need(k, e, r, "max_rel", T_NUMNULL);
      need(k, e, r, "max_error", T_NUMNULL);
      if (get(e, "max_bound_use")) need(k, e, r, "max_bound_use", T_NUMNULL); /* results since 2026-11-28 */
      at_most(k, e, r, "fails", cases), at_most(k, e, r, "outside_domain", cases), at_most(k, e, r, "findings", cases);
      hex_matches(k, e, r, "x", "x_hex");
    }
    const cJSON *o = need(k, s, q, "first_failure", T_OBJ);
    sub(r, sizeof r, q, "first_failure", -1);
    if (o) check_found_point(k, o, r);
    o = need(k, s, q, "half", T_OBJ);
    sub(r, sizeof r, q, "half", -1);
    if (o) check_found_point(k, o, r);
  }
  const cJSON *ths = need(k, c, p, "thresholds", T_ARR), *e;
  int i = 0;
  cJSON_ArrayForEach(e, ths) {
    sub(q, sizeof q, p, "thresholds", i++);
    check_threshold(k, e, q);
  }
  /* the rounding-bias probe: only where the operation has one */
  const cJSON *bias = cJSON_GetObjectItemCaseSensitive(c, "bias");
  if (bias && need(k, c, p, "bias", T_OBJ)) {
    sub(r, sizeof r, p, "bias", -1);
    need(k, bias, r, "shape", T_STR), need(k, bias, r, "scale", T_NUM), need(k, bias, r, "cases", T_COUNT);
    need(k, bias, r, "t_limit", T_NUM), need(k, bias, r, "mean_limit", T_NUM);
    i = 0;
    cJSON_ArrayForEach(e, need(k, bias, r, "stages", T_ARR)) {
      sub(q, sizeof q, r, "stages", i++);
      need(k, e, q, "stage", T_STR), need(k, e, q, "units", T_COUNT), need(k, e, q, "mean_upward", T_NUMNULL);
      need(k, e, q, "t_upward", T_NUMNULL), need(k, e, q, "mean_away", T_NUMNULL), need(k, e, q, "t_away", T_NUMNULL);
      const cJSON *how = need(k, e, q, "biased", T_STR);
      static const char *const senses[] = {"", "upward", "downward", "away from zero", "toward zero"};
      int known = 0;
      for (int h = 0; how && h < 5; h++) known |= !strcmp(how->valuestring, senses[h]);
      if (how && !known && !k->bad)
        snprintf(k->err, k->len, "%.200s.biased: not one of '', upward, downward, away from zero, toward zero", q), k->bad = 1;
    }
  }
  const cJSON *fs = need(k, c, p, "finding_cases", T_ARR);
  i = 0;
  cJSON_ArrayForEach(e, fs) {
    sub(q, sizeof q, p, "finding_cases", i++);
    need(k, e, q, "verdict", T_STR), need(k, e, q, "line", T_STR), need(k, e, q, "replay", T_STR);
    need(k, e, q, "minimized", T_OBJ), need(k, e, q, "minimized_elements", T_COUNT);
  }
}

int pf_results_check(const cJSON *root, char *err, size_t len) {
  pf_chk k = {err, len, 0};
  char p[256], q[256];
  if (!cJSON_IsObject(root)) {
    snprintf(err, len, "not a JSON object (a precfuzz-results/2 document from precfuzz sweep)");
    return -1;
  }
  const cJSON *fmt = need(&k, root, "", "format", T_STR);
  if (fmt && strcmp(fmt->valuestring, "precfuzz-results/2") != 0) {
    char shown[48]; /* the value, printable and short: the message stays one line */
    size_t n = 0;
    for (const char *c = fmt->valuestring; *c && n < sizeof shown - 4; c++) shown[n++] = *c >= 0x20 && *c < 0x7f ? *c : '?';
    if (strlen(fmt->valuestring) > n) shown[n++] = '.', shown[n++] = '.', shown[n++] = '.';
    shown[n] = 0;
    snprintf(err, len, "format: '%s' is not precfuzz-results/2", shown);
    return -1;
  }
  static const char *const top[] = {"format", "environment", "kernels", "faults", "differentials", NULL};
  only_keys(&k, root, "", top);
  const cJSON *env = need(&k, root, "", "environment", T_OBJ);
  if (env && cJSON_GetObjectItemCaseSensitive(env, "quick")) need(&k, env, "environment", "quick", T_BOOL);
  if (env && cJSON_GetObjectItemCaseSensitive(env, "cases_per_point")) need(&k, env, "environment", "cases_per_point", T_COUNT);
  if (env && cJSON_GetObjectItemCaseSensitive(env, "grid_intervals")) need(&k, env, "environment", "grid_intervals", T_COUNT);
  static const char *const env_keys[] = {"precfuzz", "mpfr", "gmp", "compiler", "cuda_toolkit", "backend", "device",
                                         "oracle", "seeds"};
  for (size_t i = 0; env && i < sizeof env_keys / sizeof env_keys[0]; i++) need(&k, env, "environment", env_keys[i], T_STR);
  const cJSON *ks = need(&k, root, "", "kernels", T_ARR), *kj;
  int i = 0;
  cJSON_ArrayForEach(kj, ks) {
    sub(p, sizeof p, "", "kernels", i++);
    const cJSON *kn = need(&k, kj, p, "kernel", T_STR);
    char sb[48];
    if (kn && !pf_op_find(kn->valuestring) && !k.bad) /* a plugin's operation: its library, with --kernels */
      snprintf(err, len, "%s.kernel: no operation '%s' (a plugin's? give its --kernels)", p, shown(kn->valuestring, sb)), k.bad = 1;
    need(&k, kj, p, "explanation", T_STR), need(&k, kj, p, "summary", T_STR);
    const cJSON *cs = need(&k, kj, p, "configs", T_ARR), *c;
    int j = 0;
    cJSON_ArrayForEach(c, cs) {
      sub(q, sizeof q, p, "configs", j++);
      if (!cJSON_IsObject(c) && !k.bad) snprintf(err, len, "%s: not an object", q), k.bad = 1;
      check_config(&k, c, q);
    }
    const cJSON *trs = cJSON_GetObjectItemCaseSensitive(kj, "trajectories");
    if (trs) {
      need(&k, kj, p, "trajectories", T_ARR);
      j = 0;
      cJSON_ArrayForEach(c, trs) {
        sub(q, sizeof q, p, "trajectories", j++);
        need(&k, c, q, "variant", T_STR), need(&k, c, q, "dtype", T_DTYPE), need(&k, c, q, "lr", T_NUM);
        need(&k, c, q, "verdict", T_STR), need(&k, c, q, "replay", T_STR);
        const cJSON *d = need(&k, c, q, "deviation", T_ARR), *x;
        int m = 0;
        cJSON_ArrayForEach(x, d) {
          if (!k.bad && !cJSON_IsNumber(x) && !cJSON_IsNull(x))
            snprintf(err, len, "%s.deviation[%d]: wrong type (a number or null)", q, m), k.bad = 1;
          m++;
        }
      }
    }
  }
  const cJSON *fs = need(&k, root, "", "faults", T_ARR), *f;
  i = 0;
  cJSON_ArrayForEach(f, fs) {
    sub(p, sizeof p, "", "faults", i++);
    need(&k, f, p, "kernel", T_STR), need(&k, f, p, "variant", T_STR), need(&k, f, p, "dtype", T_DTYPE);
    need(&k, f, p, "fault", T_STR), need(&k, f, p, "runs", T_COUNT);
    const cJSON *fd = need(&k, f, p, "found", T_BOOL);
    if (fd && cJSON_IsTrue(fd)) need(&k, f, p, "line", T_STR), need(&k, f, p, "replay", T_STR);
  }
  const cJSON *ds = need(&k, root, "", "differentials", T_ARR), *d;
  i = 0;
  cJSON_ArrayForEach(d, ds) {
    char dp[64];
    sub(dp, sizeof dp, "", "differentials", i++);
    need(&k, d, dp, "kernel", T_STR), need(&k, d, dp, "variant", T_STR), need(&k, d, dp, "summary", T_STR);
    need(&k, d, dp, "explanation", T_STR);
    const cJSON *cl = need(&k, d, dp, "clean", T_ARR), *e;
    int j = 0;
    cJSON_ArrayForEach(e, cl) {
      sub(p, sizeof p, dp, "clean", j++);
      need(&k, e, p, "dtype", T_DTYPE);
      const cJSON *nc = need(&k, e, p, "cases", T_COUNT);
      need(&k, e, p, "outside_domain", T_COUNT), need(&k, e, p, "findings", T_COUNT);
      if (nc) at_most(&k, e, p, "outside_domain", nc->valuedouble), at_most(&k, e, p, "findings", nc->valuedouble);
    }
    const cJSON *tf = need(&k, d, dp, "faults", T_ARR);
    j = 0;
    cJSON_ArrayForEach(e, tf) {
      sub(p, sizeof p, dp, "faults", j++);
      need(&k, e, p, "fault", T_STR), need(&k, e, p, "found", T_BOOL), need(&k, e, p, "cases_to_find", T_NUM);
    }
  }
  return k.bad ? -1 : 0;
}

/* ---- helpers ----------------------------------------------------------------------------------- */


/* Text escaped for HTML and XML. */
static void escf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void escf(FILE *f, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pf_xml_escape(f, buf);
}

/* "11.09", "1.5e-05", with the hex value when it is not short */
static void fmt_num(char *b, size_t n, double x) {
  if (!isfinite(x)) snprintf(b, n, "%s", isnan(x) ? "-" : x > 0 ? "inf" : "-inf");
  else snprintf(b, n, "%.6g", x);
}

static const char *const pf_combos[] = {"fp32/fp32", "fp16/fp32", "fp16/storage", "bf16/fp32", "bf16/storage"};
#define PF_NCOMBOS 5
static const char *const pf_colors[] = {"#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf"};

static int combo_of(const cJSON *c) {
  char b[64];
  snprintf(b, sizeof b, "%s/%s", str(c, "dtype"), str(c, "accum"));
  for (int i = 0; i < PF_NCOMBOS; i++)
    if (strcmp(b, pf_combos[i]) == 0) return i;
  return -1;
}

/* A kernel's variants, in order of first appearance (at most 32). */
static int variants_of(const cJSON *kj, const char *seen[32]) {
  int nseen = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, get(kj, "configs")) {
    int dup = 0;
    for (int i = 0; i < nseen; i++) dup |= strcmp(seen[i], str(c, "variant")) == 0;
    if (!dup && nseen < 32) seen[nseen++] = str(c, "variant");
  }
  return nseen;
}

/* 0 good, 1 boundary reached (failures, none inside the domain), 2 a hazard inside the domain
 * (contract kept, result useless), 3 a broken contract (a bug) */
static int severity(const cJSON *c) {
  if (num(c, "findings") > 0) return 3;
  if (num(c, "hazard_cases") > 0) return 2;
  const cJSON *e;
  cJSON_ArrayForEach(e, get(get(c, "bias"), "stages")) if (str(e, "biased")[0]) return 2; /* the bias probe */
  cJSON_ArrayForEach(e, get(c, "thresholds")) if (flag(e, "found")) return 1;
  cJSON_ArrayForEach(e, get(get(c, "scan"), "points")) if (num(e, "fails") > 0) return 1;
  return 0;
}

/* ---- SVG plots --------------------------------------------------------------------------------- */

typedef struct {
  char name[64];
  const char *color;
  size_t n;
  double *x, *y;
} pf_series;

typedef struct {
  double x;
  const char *color;
  const char *dash; /* stroke-dasharray */
} pf_mark;

static double tr(double v, int lg) { return lg ? log10(v) : v; }

/* A line plot: log or linear axes; points with y <= 0 on a log axis are drawn at the bottom. */
static void svg_plot(FILE *f, const char *title, const char *xl, const char *yl, int logx, int logy, pf_series *s, int ns,
                     const pf_mark *marks, int nm) {
  const double W = 600, H = 280, L = 64, R = 130, T = 28, B = 44;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (int i = 0; i < ns; i++)
    for (size_t j = 0; j < s[i].n; j++) {
      const double x = s[i].x[j], y = s[i].y[j];
      if (isfinite(x) && (!logx || x > 0)) x0 = fmin(x0, tr(x, logx)), x1 = fmax(x1, tr(x, logx));
      if (isfinite(y) && (!logy || y > 0)) y0 = fmin(y0, tr(y, logy)), y1 = fmax(y1, tr(y, logy));
    }
  if (!isfinite(x0)) x0 = 0, x1 = 1;
  if (!isfinite(y0)) y0 = 0, y1 = 1;
  if (logy) y0 = floor(y0), y1 = ceil(y1);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  if (!logy && y0 > 0) y0 = 0;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n",
          W, H, W, H);
  fputs("<title>", f);
  pf_xml_escape(f, title);
  fputs("</title>\n", f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", W, H);
  fprintf(f, "<text x=\"%.0f\" y=\"18\" class=\"pt\">", L);
  pf_xml_escape(f, title);
  fputs("</text>\n", f);
  const double pw = W - L - R, ph = H - T - B;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (T + ph - ((v) - y0) / (y1 - y0) * ph)
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", L, T, pw, ph);
  /* ticks: decades on log axes, five steps on linear ones */
  for (int ax = 0; ax < 2; ax++) {
    const int lg = ax ? logy : logx;
    const double a = ax ? y0 : x0, b = ax ? y1 : x1;
    double step = lg ? ceil((b - a) / 8) : (b - a) / 4;
    if (step <= 0) step = 1;
    for (double v = lg ? ceil(a) : a; v <= b + 1e-9; v += step) {
      char lab[32];
      if (lg) snprintf(lab, sizeof lab, "1e%d", (int)lround(v));
      else snprintf(lab, sizeof lab, "%.3g", v);
      if (ax)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/><text x=\"%.1f\" y=\"%.1f\" class=\"tk\" text-anchor=\"end\">%s</text>\n",
                L, PY(v), L + pw, PY(v), L - 4, PY(v) + 4, lab);
      else
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/><text x=\"%.1f\" y=\"%.1f\" class=\"tk\" text-anchor=\"middle\">%s</text>\n",
                PX(v), T, PX(v), T + ph, PX(v), T + ph + 14, lab);
    }
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"al\" text-anchor=\"middle\">", L + pw / 2, H - 8);
  pf_xml_escape(f, xl);
  fprintf(f, "</text>\n<text x=\"14\" y=\"%.1f\" class=\"al\" text-anchor=\"middle\" transform=\"rotate(-90 14 %.1f)\">", T + ph / 2,
          T + ph / 2);
  pf_xml_escape(f, yl);
  fputs("</text>\n", f);
  for (int m = 0; m < nm; m++) {
    if (!isfinite(marks[m].x) || (logx && marks[m].x <= 0)) continue;
    const double v = tr(marks[m].x, logx);
    if (v < x0 || v > x1) continue;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"%s\"/>\n", PX(v), T,
            PX(v), T + ph, marks[m].color, marks[m].dash);
  }
  for (int i = 0; i < ns; i++) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", s[i].color);
    for (size_t j = 0; j < s[i].n; j++) {
      const double x = s[i].x[j], y = s[i].y[j];
      if (!isfinite(x) || (logx && x <= 0) || !isfinite(y)) continue;
      const double yy = logy ? (y > 0 ? log10(y) : y0) : y;
      fprintf(f, "%.1f,%.1f ", PX(tr(x, logx)), PY(fmax(y0, fmin(y1, yy))));
    }
    fputs("\"/>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"3\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" class=\"tk\">", W - R + 8,
            T + 8 + 16.0 * i, s[i].color, W - R + 22, T + 12 + 16.0 * i);
    pf_xml_escape(f, s[i].name);
    fputs("</text>\n", f);
  }
#undef PX
#undef PY
  fputs("</svg>\n", f);
}

static void series_free(pf_series *s, int n) {
  for (int i = 0; i < n; i++) free(s[i].x), free(s[i].y);
}

/* ---- HTML --------------------------------------------------------------------------------------- */

static const char *pf_css =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1300px}"
    "table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;"
    "vertical-align:top}th{background:#f2f2f2}.good{background:#dff0d8}.warn{background:#fcf0c8}"
    ".bad{background:#f4c7c3}.hazard{background:#f9d9b0}.na{background:#e4e4e4;color:#555}.neutral{background:#fff;color:#444}"
    ".none{background:#fff}table.summary td{min-width:120px}.sw{padding:1px 6px;border:1px solid #ccc;margin:0 2px}"
    ".legend{font-size:13px;line-height:1.9}code,pre{font-family:monospace;font-size:12px}"
    "pre{background:#f7f7f7;padding:6px;overflow-x:auto;max-height:320px}.pt{font:bold 13px sans-serif}"
    ".tk{font:11px sans-serif;fill:#333}.al{font:12px sans-serif;fill:#333}.grid{stroke:#e3e3e3}"
    "section{border-top:2px solid #ddd;margin-top:24px}.plots{display:flex;flex-wrap:wrap;gap:12px}"
    ".small{font-size:12px;color:#555}";

static void threshold_text(FILE *f, const cJSON *t) {
  if (!flag(t, "found")) {
    fputs("none in ", f);
    escf(f, "[%s, %s]", str(t, "lo_hex"), str(t, "hi_hex"));
    return;
  }
  char g[40], b[40];
  fmt_num(g, sizeof g, num(t, "last_good"));
  fmt_num(b, sizeof b, num(t, "first_bad"));
  if (strcmp(str(t, "bad"), "above") == 0) escf(f, "passes up to %s (%s), fails from %s (%s)", g, str(t, "last_good_hex"), b, str(t, "first_bad_hex"));
  else escf(f, "fails up to %s (%s), passes from %s (%s)", b, str(t, "first_bad_hex"), g, str(t, "last_good_hex"));
}

/* The scan's cases inside the contract's domain (what error and hazards are measured over). */
static double inside_domain(const cJSON *c) {
  const cJSON *scan = get(c, "scan");
  return num(scan, "cases") * cJSON_GetArraySize(get(scan, "points")) - num(c, "cases_outside_domain");
}

/* "saturated 3, imprecise 5" (cases with each hazard), then each stage the pooled test finds
 * biased ("dQ biased toward zero over all cases: -0.31 ulps, t -9.2"), or "" */
static void hazard_list(char *buf, size_t len, const cJSON *c) {
  size_t n = 0;
  buf[0] = 0;
  for (int h = 0; h < PF_NHAZARDS && n < len; h++) {
    const double k = num(get(c, "hazards"), pf_hazard_name((pf_hazard)h));
    if (k > 0) n += (size_t)snprintf(buf + n, len - n, "%s%s %.0f", n ? ", " : "", pf_hazard_name((pf_hazard)h), k);
  }
  const cJSON *b;
  cJSON_ArrayForEach(b, get(get(c, "bias"), "stages")) {
    const char *how = str(b, "biased");
    if (!how[0] || n >= len) continue;
    const int up = !strcmp(how, "upward") || !strcmp(how, "downward");
    n += (size_t)snprintf(buf + n, len - n, "%s%s biased %s over %.0f cases: %+.2g ulps, t %.1f", n ? ", " : "", str(b, "stage"),
                          how, num(get(c, "bias"), "cases"), num(b, up ? "mean_upward" : "mean_away"), num(b, up ? "t_upward" : "t_away"));
  }
}

/* Where a configuration works, in decimal: each boundary found as the range on its good side
 * ("value <= 88.72 (overflow)"), and the scan's first failing point ("scale < 25.88 (first
 * failure)"); "" when nothing was found. */
static void safe_range(char *buf, size_t len, const cJSON *c) {
  size_t n = 0;
  buf[0] = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, get(c, "thresholds")) if (flag(t, "found") && n < len) {
    const int above = strcmp(str(t, "bad"), "above") == 0;
    n += (size_t)snprintf(buf + n, len - n, "%s%s %s %.4g (%s)", n ? ", " : "", str(t, "along"), above ? "\u2264" : "\u2265",
                          num(t, "last_good"), str(t, "name"));
  }
  const cJSON *scan = get(c, "scan"), *ff = get(scan, "first_failure");
  if (flag(ff, "found") && n < len) {
    if (isnan(num(ff, "below")))
      n += (size_t)snprintf(buf + n, len - n, "%sfails at every %s scanned, from %.4g", n ? ", " : "", str(scan, "along"), num(ff, "x"));
    else
      n += (size_t)snprintf(buf + n, len - n, "%s%s \u2264 %.4g (scan)", n ? ", " : "", str(scan, "along"), num(ff, "below"));
  }
}

/* A configuration's state for the summary: 0 ok, 1 boundary, 2 hazard, 3 bug, 4 not measured
 * (no case of the scan inside the contract's domain: no error or hazard was measured). */
static int cell_state(const cJSON *c) {
  const int sev = severity(c);
  if (sev < 2 && inside_domain(c) <= 0) return 4;
  return sev;
}

static void html_summary(FILE *f, const cJSON *root) {
  static const char *const cls[] = {"good", "warn", "hazard", "bad", "na"};
  static const char *const word[] = {"ok", "boundary", "hazard", "bug", "not measured"};
  fputs("<h2 id=\"summary\">Summary</h2>\n<p class=\"legend\">"
        "<span class=\"sw good\">ok</span> the contract kept on every case inside its domain "
        "<span class=\"sw warn\">boundary</span> failures only outside the domain, where the variant stops working "
        "<span class=\"sw hazard\">hazard</span> the contract kept, the result useless for training "
        "<span class=\"sw bad\">bug</span> the contract broken "
        "<span class=\"sw na\">not measured</span> no case inside the domain. "
        "Under each word: where the variant is safe (decimal; the kernel's section has the exact values) and the "
        "largest share of its contract's error bound any element used (1: at the bound).</p>\n<table class=\"summary\">\n"
        "<tr><th>kernel</th><th>variant</th>",
        f);
  for (int i = 0; i < PF_NCOMBOS; i++) fprintf(f, "<th>%s</th>", pf_combos[i]);
  fputs("<th class=\"neutral\">torch.testing.assert_close at its default tolerance <a href=\"#torch-testing\">(not a "
        "verdict)</a></th></tr>\n",
        f);
  const cJSON *kj;
  cJSON_ArrayForEach(kj, get(root, "kernels")) {
    const char *seen[32];
    const int nseen = variants_of(kj, seen);
    const cJSON *c;
    for (int v = 0; v < nseen; v++) {
      fputs("<tr><td>", f);
      fprintf(f, "<a href=\"#kernel-");
      pf_xml_escape(f, str(kj, "kernel"));
      fputs("\">", f);
      pf_xml_escape(f, str(kj, "kernel"));
      fputs("</a></td><td>", f);
      pf_xml_escape(f, seen[v]);
      fputs("</td>", f);
      double tt[3] = {0, 0, 0}; /* passes with a finding, passes with a hazard, rejects correct */
      for (int k = 0; k < PF_NCOMBOS; k++) {
        const cJSON *hit = NULL;
        cJSON_ArrayForEach(c, get(kj, "configs")) if (strcmp(str(c, "variant"), seen[v]) == 0 && combo_of(c) == k) hit = c;
        if (!hit) {
          fputs("<td class=\"none\"></td>", f); /* the variant does not take this dtype */
          continue;
        }
        const int st = cell_state(hit);
        fprintf(f, "<td class=\"%s\"><b>%s</b>", cls[st], word[st]);
        const double nf = num(hit, "findings");
        if (nf > 0) escf(f, ": %.0f finding%s", nf, nf == 1 ? "" : "s");
        char hl[512];
        hazard_list(hl, sizeof hl, hit);
        if (hl[0]) escf(f, ": %s", hl);
        char safe[768];
        safe_range(safe, sizeof safe, hit);
        if (safe[0]) {
          fputs("<br/>safe for ", f);
          pf_xml_escape(f, safe);
        }
        const cJSON *use = get(hit, "max_bound_use");
        if (st != 4 && cJSON_IsNumber(use)) fprintf(f, "<br/><span class=\"small\">bound used: %.2g</span>", use->valuedouble);
        fputs("</td>", f);
        const cJSON *tj = get(hit, "torch_testing");
        tt[0] += num(tj, "passes_finding"), tt[1] += num(tj, "passes_hazard"), tt[2] += num(tj, "rejects_sound");
      }
      fputs("<td class=\"neutral\">", f);
      escf(f, "rejects %.0f correct case%s; passes %.0f with a finding, %.0f with a hazard", tt[2], tt[2] == 1 ? "" : "s",
           tt[0], tt[1]);
      fputs("</td></tr>\n", f);
    }
  }
  fputs("</table>\n<details><summary>How to read it</summary>\n<ul class=\"small\">"
        "<li>Each row is one variant of a kernel, each column a storage/accumulation dtype (an empty cell: the "
        "variant does not take it); each cell sums up an accuracy scan (cases along one axis, see the kernel's "
        "section) and the boundary searches.</li>"
        "<li><b>bug</b>: the kernel broke its own contract on a case inside the contract's domain (the count is of "
        "cases).</li>"
        "<li><b>hazard</b>: the kernel kept its contract, but the result is useless for training: <i>saturated</i> (a "
        "sum or norm stopped absorbing its terms), <i>stagnant</i> (optimizer state that cannot move), <i>biased</i> "
        "(rounding errors with one sign), <i>imprecise</i> (error beyond the dtype's usability threshold); the count "
        "is of cases.</li>"
        "<li><b>boundary</b>: failures only outside the contract's domain; <i>safe for</i> gives the values on the "
        "good side of each boundary found (the last value that passes) and of the scan's first failing case.</li>"
        "<li><b>not measured</b>: no case of the scan lay inside the contract's domain, so no error or hazard was "
        "measured; its boundaries still are.</li>"
        "<li><b>bound used</b>: over the scan's cases inside the domain, the largest error of an element in ulps "
        "divided by the ulps its contract allows it: what the contract judges (above 1 is a finding).</li>"
        "<li id=\"torch-testing\"><b>torch.testing</b> (neutral, not a verdict): what "
        "<code>torch.testing.assert_close</code> with its default tolerance for the dtype says of the same outputs "
        "against the correctly rounded result: correct cases (no finding, no hazard) it rejects, because its "
        "tolerance is stricter than the kernel's contract there, and cases it passes although they have a finding or "
        "a hazard, where it would miss a problem.</li></ul>\n</details>\n",
        f);
}

/* The rounding-bias probe of one variant's configurations, stage by stage: the mean signed
 * error in ulps of the correctly rounded result and its t statistic, both senses. */
static void bias_table(FILE *f, const cJSON *kj, const char *variant) {
  const cJSON *c, *b, *probe = NULL;
  cJSON_ArrayForEach(c, get(kj, "configs")) if (!strcmp(str(c, "variant"), variant) && get(c, "bias")) probe = get(c, "bias");
  if (!probe) return;
  fputs("<p>", f);
  escf(f, "Rounding bias over many cases (cases of shape %s at scale %g inside the domain, stage by stage): the mean "
          "signed error in ulps against the correctly rounded result and its t statistic, upward and away from zero "
          "(biased at |t| >= %g and |mean| >= %g ulps). A bias too small for one case adds up over a training run's "
          "steps.",
       str(probe, "shape"), num(probe, "scale"), num(probe, "t_limit"), num(probe, "mean_limit"));
  fputs("</p>\n", f);
  fputs("<table>\n<tr><th>dtype/accum</th><th>cases</th><th>stage</th><th>units</th><th>upward: mean (t)</th><th>away from "
        "zero: mean (t)</th><th>verdict</th></tr>\n",
        f);
  cJSON_ArrayForEach(c, get(kj, "configs")) {
    if (strcmp(str(c, "variant"), variant) != 0 || !get(c, "bias")) continue;
    if (cJSON_GetArraySize(get(get(c, "bias"), "stages")) == 0) {
      fputs("<tr><td>", f);
      escf(f, "%s/%s", str(c, "dtype"), str(c, "accum"));
      fprintf(f, "</td><td>%.0f</td><td colspan=\"5\">no probe case inside the contract's domain</td></tr>\n",
              num(get(c, "bias"), "cases"));
    }
    cJSON_ArrayForEach(b, get(get(c, "bias"), "stages")) {
      const char *how = str(b, "biased");
      fputs("<tr><td>", f);
      escf(f, "%s/%s", str(c, "dtype"), str(c, "accum"));
      fprintf(f, "</td><td>%.0f", num(get(c, "bias"), "cases"));
      fputs("</td><td>", f);
      pf_xml_escape(f, str(b, "stage"));
      fprintf(f, "</td><td>%.0f</td><td>%+.4f (%.1f)</td><td>%+.4f (%.1f)</td>", num(b, "units"), num(b, "mean_upward"),
              num(b, "t_upward"), num(b, "mean_away"), num(b, "t_away"));
      fprintf(f, "<td class=\"%s\">", how[0] ? "warn" : "good");
      if (how[0]) escf(f, "biased %s", how);
      else fputs("no bias shown", f);
      fputs("</td></tr>\n", f);
    }
  }
  fputs("</table>\n", f);
}

static void html_kernel(FILE *f, const cJSON *kj) {
  const char *name = str(kj, "kernel");
  fputs("<section id=\"kernel-", f);
  pf_xml_escape(f, name);
  fputs("\">\n<h2>", f);
  pf_xml_escape(f, name);
  fputs("</h2>\n<p>", f);
  pf_xml_escape(f, str(kj, "summary"));
  fputs("</p>\n<p>", f);
  pf_xml_escape(f, str(kj, "explanation"));
  fputs("</p>\n", f);
  const char *seen[32];
  const int nseen = variants_of(kj, seen);
  const cJSON *c;
  for (int v = 0; v < nseen; v++) {
    fputs("<h3>", f);
    escf(f, "%s / %s", name, seen[v]);
    fputs("</h3>\n", f);
    pf_series err[PF_NCOMBOS + 1], prob[PF_NCOMBOS];
    pf_mark marks[2 * PF_NCOMBOS + 2];
    int ns = 0, nm = 0, any_err = 0, any_fail = 0, old_results = 0;
    double xlo = INFINITY, xhi = -INFINITY;
    const char *along = "scale", *fail = "finding", *shape = "";
    double cases = 0;
    cJSON_ArrayForEach(c, get(kj, "configs")) {
      if (strcmp(str(c, "variant"), seen[v]) != 0 || ns == PF_NCOMBOS) continue;
      const cJSON *scan = get(c, "scan"), *pts = get(scan, "points"), *p;
      along = str(scan, "along"), fail = str(scan, "fail"), shape = str(scan, "shape"), cases = num(scan, "cases");
      const size_t n = (size_t)cJSON_GetArraySize(pts);
      pf_series *e = &err[ns], *q = &prob[ns];
      snprintf(e->name, sizeof e->name, "%s/%s", str(c, "dtype"), str(c, "accum"));
      memcpy(q->name, e->name, sizeof q->name);
      e->color = q->color = pf_colors[ns % 7];
      e->n = q->n = n;
      e->x = calloc(n + 1, sizeof(double)), e->y = calloc(n + 1, sizeof(double));
      q->x = calloc(n + 1, sizeof(double)), q->y = calloc(n + 1, sizeof(double));
      size_t i = 0;
      cJSON_ArrayForEach(p, pts) {
        e->x[i] = q->x[i] = num(p, "x");
        if (e->x[i] > 0) xlo = fmin(xlo, e->x[i]), xhi = fmax(xhi, e->x[i]);
        /* what the contract judges: the largest share of its bound an element used; no point where
         * no case was inside the domain; 0 (exact) at the floor; beyond any share (NaN, or an error
         * where no ulp is allowed: a finding) at the top. Results from before it: the error. */
        const cJSON *u = get(p, "max_bound_use");
        if (!u) e->y[i] = cJSON_IsNumber(get(p, "max_error")) ? fmax(num(p, "max_error"), 0x1p-60) : NAN, old_results = 1;
        else if (cJSON_IsNumber(u)) e->y[i] = fmin(fmax(u->valuedouble, 1e-3), 1e3);
        else e->y[i] = num(p, "findings") > 0 ? 1e3 : NAN;
        any_err |= isfinite(e->y[i]);
        any_fail |= num(p, "fails") > 0;
        q->y[i] = num(p, "fails") / (cases > 0 ? cases : 1);
        i++;
      }
      const cJSON *ff = get(scan, "first_failure"), *hf = get(scan, "half");
      if (flag(ff, "found")) marks[nm++] = (pf_mark){num(ff, "x"), e->color, "5 3"};
      if (flag(hf, "found")) marks[nm++] = (pf_mark){num(hf, "x"), e->color, "1 3"};
      ns++;
    }
    char t1[256], t2[256], xl[128];
    snprintf(t1, sizeof t1, old_results ? "%s/%s: error in the domain (dashed: first failure, dotted: half)"
                                        : "%s/%s: share of the contract's bound used",
             name, seen[v]);
    snprintf(t2, sizeof t2, "%s/%s: fraction of %.0f cases failing (%s, any domain)", name, seen[v], cases, fail);
    snprintf(xl, sizeof xl, "%s (cases of shape %s)", along, shape);
    int nerr = ns;
    if (!old_results && any_err && xlo < xhi) { /* the bound itself: a share of 1 */
      pf_series *b = &err[nerr++];
      snprintf(b->name, sizeof b->name, "the bound");
      b->color = "#888888", b->n = 2;
      b->x = calloc(2, sizeof(double)), b->y = calloc(2, sizeof(double));
      b->x[0] = xlo, b->x[1] = xhi, b->y[0] = b->y[1] = 1;
    }
    /* a plot only of something: no empty frame */
    if (any_err || any_fail) fputs("<div class=\"plots\">\n", f);
    if (any_err)
      svg_plot(f, t1, xl, old_results ? "largest relative error (2^-60: exact)" : "largest ulps / ulps allowed (0.001: exact)",
               1, 1, err, nerr, marks, nm);
    if (any_fail) svg_plot(f, t2, xl, "fraction failing", 1, 0, prob, ns, marks, nm);
    if (any_err || any_fail) fputs("</div>\n", f);
    if (any_err && !old_results)
      fputs("<p class=\"small\">The share of the bound: at each point, over its cases inside the contract's domain, the "
            "largest error of an element in ulps over the ulps its contract allows it (1, the grey line: at the bound; "
            "above: a finding; 0.001: exact). Dashed lines: the first point with a failing case; dotted: the first where "
            "half fail.</p>\n",
            f);
    if (!any_err) fputs("<p class=\"small\">No case of the scan lay inside the contract's domain: nothing to plot of the error.</p>\n", f);
    if (!any_fail) {
      fputs("<p class=\"small\">", f);
      escf(f, "No case failed (%s) anywhere along %s: the fraction failing is 0 at every point scanned.", fail, along);
      fputs("</p>\n", f);
    }
    series_free(err, nerr);
    series_free(prob, ns);
    /* the boundary table */
    fputs("<table>\n<tr><th>dtype/accum</th><th>boundary</th><th>along</th><th>failing</th><th>result (adjacent "
          "values)</th><th>replay the failing side</th></tr>\n",
          f);
    cJSON_ArrayForEach(c, get(kj, "configs")) {
      if (strcmp(str(c, "variant"), seen[v]) != 0) continue;
      const cJSON *t;
      cJSON_ArrayForEach(t, get(c, "thresholds")) {
        fputs("<tr><td>", f);
        escf(f, "%s/%s", str(c, "dtype"), str(c, "accum"));
        fputs("</td><td>", f);
        pf_xml_escape(f, str(t, "name"));
        fputs("</td><td>", f);
        escf(f, "%s (%s, shape %s)", str(t, "along"), str(t, "format"), str(t, "shape"));
        fputs("</td><td>", f);
        pf_xml_escape(f, str(t, "fail"));
        fprintf(f, "</td><td class=\"%s\">", flag(t, "found") ? "warn" : "good");
        threshold_text(f, t);
        fputs("</td><td><code>", f);
        pf_xml_escape(f, str(t, "replay"));
        fputs("</code></td></tr>\n", f);
      }
      const cJSON *scan = get(c, "scan");
      for (int w = 0; w < 2; w++) {
        const cJSON *q = get(scan, w ? "half" : "first_failure");
        fputs("<tr><td>", f);
        escf(f, "%s/%s", str(c, "dtype"), str(c, "accum"));
        fputs("</td><td>", f);
        pf_xml_escape(f, w ? "half the cases fail" : "first failing case");
        fputs("</td><td>", f);
        escf(f, "%s (%.0f cases per point, shape %s)", str(scan, "along"), num(scan, "cases"), str(scan, "shape"));
        fputs("</td><td>", f);
        pf_xml_escape(f, str(scan, "fail"));
        fprintf(f, "</td><td class=\"%s\">", flag(q, "found") ? "warn" : "good");
        if (flag(q, "found")) {
          char a[40], b[40];
          fmt_num(a, sizeof a, num(q, "x"));
          fmt_num(b, sizeof b, num(q, "below"));
          if (isnan(num(q, "below"))) escf(f, "at %s (%.0f of %.0f fail), the lowest point scanned", a, num(q, "fails"), num(scan, "cases"));
          else escf(f, "at %s (%.0f of %.0f fail), not at %s", a, num(q, "fails"), num(scan, "cases"), b);
        } else {
          fputs("nowhere in the scan", f);
        }
        fputs("</td><td></td></tr>\n", f);
      }
    }
    fputs("</table>\n", f);
    bias_table(f, kj, seen[v]);
  }
  /* trajectories */
  const cJSON *trs = get(kj, "trajectories");
  if (cJSON_GetArraySize(trs) > 0) {
    pf_series s[8];
    int ns = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, trs) {
      if (ns == 8) break;
      const cJSON *d = get(t, "deviation"), *x;
      const size_t n = (size_t)cJSON_GetArraySize(d);
      s[ns].n = n;
      s[ns].x = calloc(n + 1, sizeof(double));
      s[ns].y = calloc(n + 1, sizeof(double));
      snprintf(s[ns].name, sizeof s[ns].name, "%s %s", str(t, "variant"), str(t, "dtype"));
      s[ns].color = pf_colors[ns % 7];
      size_t i = 0;
      cJSON_ArrayForEach(x, d) {
        s[ns].x[i] = (double)(i + 1);
        s[ns].y[i] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        i++;
      }
      ns++;
    }
    fputs("<h3>Trajectories</h3>\n<div class=\"plots\">\n", f);
    svg_plot(f, "deviation from the exact trajectory: max |p - p*| / (|p*| + lr)", "step", "deviation", 0, 1, s, ns, NULL, 0);
    fputs("</div>\n<table>\n<tr><th>run</th><th>verdict</th><th>why</th><th>replay</th></tr>\n", f);
    cJSON_ArrayForEach(t, trs) {
      fputs("<tr><td>", f);
      escf(f, "%s %s, lr %g", str(t, "variant"), str(t, "dtype"), num(t, "lr"));
      fputs("</td><td>", f);
      pf_xml_escape(f, str(t, "verdict"));
      fputs("</td><td>", f);
      pf_xml_escape(f, str(t, "why"));
      fputs("</td><td><code>", f);
      pf_xml_escape(f, str(t, "replay"));
      fputs("</code></td></tr>\n", f);
    }
    fputs("</table>\n", f);
    series_free(s, ns);
  }
  /* contracts */
  fputs("<details><summary>Contracts</summary>\n<table>\n<tr><th>variant</th><th>contract</th></tr>\n", f);
  for (int v = 0; v < nseen; v++) {
    cJSON_ArrayForEach(c, get(kj, "configs")) if (strcmp(str(c, "variant"), seen[v]) == 0) {
      fputs("<tr><td>", f);
      pf_xml_escape(f, seen[v]);
      fputs("</td><td>", f);
      pf_xml_escape(f, str(c, "contract"));
      fputs("</td></tr>\n", f);
      break;
    }
  }
  fputs("</table>\n</details>\n</section>\n", f);
}

static void html_case(FILE *f, const cJSON *c) {
  char *s = cJSON_Print(c);
  fputs("<pre>", f);
  pf_xml_escape(f, s ? s : "");
  fputs("</pre>\n", f);
  free(s);
}

int pf_report_html(const cJSON *root, FILE *f) {
  const cJSON *env = get(root, "environment");
  fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
        "<title>precfuzz precision report</title>\n<style>",
        f);
  fputs(pf_css, f);
  fputs("</style>\n</head>\n<body>\n<h1>precfuzz precision report</h1>\n<p>Where each kernel variant of large-model "
        "training overflows, underflows and diverges, and how accurate it is inside that range, judged against exact "
        "arithmetic (MPFR). Contents: <a href=\"#summary\">summary</a>",
        f);
  const cJSON *kj;
  cJSON_ArrayForEach(kj, get(root, "kernels")) {
    fputs(", <a href=\"#kernel-", f);
    pf_xml_escape(f, str(kj, "kernel"));
    fputs("\">", f);
    pf_xml_escape(f, str(kj, "kernel"));
    fputs("</a>", f);
  }
  const cJSON *dj;
  cJSON_ArrayForEach(dj, get(root, "differentials")) {
    fputs(", <a href=\"#diff-", f);
    pf_xml_escape(f, str(dj, "kernel"));
    fputs("\">", f);
    pf_xml_escape(f, str(dj, "kernel"));
    fputs("</a>", f);
  }
  fputs(", <a href=\"#faults\">fault detection</a>, <a href=\"#findings\">findings</a>, "
        "<a href=\"#environment\">environment</a>.</p>\n",
        f);
  html_summary(f, root);
  cJSON_ArrayForEach(kj, get(root, "kernels")) html_kernel(f, kj);
  /* the differentials: each its clean runs and its faults */
  cJSON_ArrayForEach(dj, get(root, "differentials")) {
    fputs("<section id=\"diff-", f);
    pf_xml_escape(f, str(dj, "kernel"));
    fputs("\">\n<h2>", f);
    pf_xml_escape(f, str(dj, "summary"));
    fputs(" (", f);
    pf_xml_escape(f, str(dj, "kernel"));
    fputs("/", f);
    pf_xml_escape(f, str(dj, "variant"));
    fputs(")</h2>\n<p>", f);
    pf_xml_escape(f, str(dj, "explanation"));
    fputs("</p>\n<table>\n<tr><th>dtype</th><th>cases</th><th>outside the domain</th><th>findings</th></tr>\n", f);
    const cJSON *e;
    cJSON_ArrayForEach(e, get(dj, "clean")) {
      fprintf(f, "<tr><td>");
      pf_xml_escape(f, str(e, "dtype"));
      fprintf(f, "</td><td>%.0f</td><td>%.0f</td><td class=\"%s\">%.0f</td></tr>\n", num(e, "cases"), num(e, "outside_domain"),
              num(e, "findings") > 0 ? "bad" : "good", num(e, "findings"));
    }
    fputs("</table>\n<table>\n<tr><th>fault</th><th>found</th><th>cases to the first finding</th><th>the finding</th>"
          "<th>replay</th></tr>\n",
          f);
    cJSON_ArrayForEach(e, get(dj, "faults")) {
      fputs("<tr><td>", f);
      pf_xml_escape(f, str(e, "fault"));
      fprintf(f, "</td><td class=\"%s\">%s</td><td>%.0f</td><td>", flag(e, "found") ? "good" : "bad", flag(e, "found") ? "yes" : "no",
              num(e, "cases_to_find"));
      pf_xml_escape(f, str(e, "why"));
      fputs("</td><td><code>", f);
      pf_xml_escape(f, str(e, "replay"));
      fputs("</code></td></tr>\n", f);
    }
    fputs("</table>\n</section>\n", f);
  }
  /* faults */
  fputs("<section id=\"faults\">\n<h2>Fault detection</h2>\n<p>Each fault switch (a known bug put back into a "
        "variant) run along its variant's scan until a case gives a finding that the variant without the fault does "
        "not give.</p>\n<table>\n<tr><th>kernel</th><th>variant</th><th>dtype</th><th>fault</th><th>found</th>"
        "<th>runs</th><th>the finding</th></tr>\n",
        f);
  const cJSON *e;
  cJSON_ArrayForEach(e, get(root, "faults")) {
    fputs("<tr><td>", f);
    pf_xml_escape(f, str(e, "kernel"));
    fputs("</td><td>", f);
    pf_xml_escape(f, str(e, "variant"));
    fputs("</td><td>", f);
    pf_xml_escape(f, str(e, "dtype"));
    fputs("</td><td>", f);
    pf_xml_escape(f, str(e, "fault"));
    fprintf(f, "</td><td class=\"%s\">%s</td><td>%.0f</td><td>", flag(e, "found") ? "good" : "bad", flag(e, "found") ? "yes" : "no",
            num(e, "runs"));
    pf_xml_escape(f, str(e, "line"));
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n</section>\n", f);
  /* findings */
  fputs("<section id=\"findings\">\n<h2>Findings</h2>\n", f);
  int nf = 0;
  cJSON_ArrayForEach(kj, get(root, "kernels")) {
    const cJSON *c;
    cJSON_ArrayForEach(c, get(kj, "configs")) {
      const cJSON *fc;
      cJSON_ArrayForEach(fc, get(c, "finding_cases")) {
        nf++;
        fputs("<h3>", f);
        escf(f, "%s/%s %s/%s: %s", str(kj, "kernel"), str(c, "variant"), str(c, "dtype"), str(c, "accum"), str(fc, "verdict"));
        fputs("</h3>\n<p>", f);
        pf_xml_escape(f, str(fc, "line"));
        fputs("</p>\n<p>replay: <code>", f);
        pf_xml_escape(f, str(fc, "replay"));
        fputs("</code></p>\n", f);
        escf(f, "minimized (%.0f input elements; save as a file and run precfuzz replay FILE):", num(fc, "minimized_elements"));
        html_case(f, get(fc, "minimized"));
      }
    }
  }
  if (!nf) fputs("<p class=\"good\">No finding: no variant broke its contract inside its domain in this sweep.</p>\n", f);
  fputs("<h3>The fault switches' findings (injected bugs), minimized</h3>\n", f);
  cJSON_ArrayForEach(e, get(root, "faults")) {
    if (!flag(e, "found")) continue;
    fputs("<p>", f);
    escf(f, "%s/%s %s, fault %s: %s", str(e, "kernel"), str(e, "variant"), str(e, "dtype"), str(e, "fault"), str(e, "line"));
    fputs("<br/>replay: <code>", f);
    pf_xml_escape(f, str(e, "replay"));
    fputs("</code></p>\n", f);
    if (get(e, "minimized")) html_case(f, get(e, "minimized"));
  }
  fputs("</section>\n", f);
  /* environment */
  fputs("<section id=\"environment\">\n<h2>Environment</h2>\n<table>\n", f);
  const cJSON *x;
  cJSON_ArrayForEach(x, env) {
    fputs("<tr><th>", f);
    pf_xml_escape(f, x->string);
    fputs("</th><td>", f);
    if (cJSON_IsString(x)) pf_xml_escape(f, x->valuestring);
    else if (cJSON_IsNumber(x)) fprintf(f, "%g", x->valuedouble);
    else if (cJSON_IsBool(x)) fputs(cJSON_IsTrue(x) ? "yes" : "no", f);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n</section>\n</body>\n</html>\n", f);
  return ferror(f) ? -1 : 0;
}

/* ---- Markdown and JSON summaries ----------------------------------------------------------------- */

int pf_report_md(const cJSON *root, FILE *f) {
  const cJSON *env = get(root, "environment"), *kj, *c, *t;
  fprintf(f, "# precfuzz precision report\n\nprecfuzz %s, MPFR %s, %s; backend %s\n\n", str(env, "precfuzz"), str(env, "mpfr"),
          str(env, "compiler"), str(env, "backend"));
  fputs("State: ok, boundary (failures only outside the contract's domain), hazard (the contract kept, the result "
        "useless for training: cases with each), bug (findings: the contract broken inside its domain), not measured "
        "(no case inside the domain). Safe for: the good side of each boundary found and of the scan's first failing "
        "case, in decimal. Bound used: the largest error of an element in ulps over the ulps its contract allows (1: at "
        "the bound). torch.testing (not a verdict): cases assert_close at its default tolerance passes with a finding "
        "or a hazard / correct cases it rejects.\n\n"
        "| kernel | variant | dtype/accum | state | findings (bugs) | hazards | bound used | safe for | torch.testing |\n"
        "|---|---|---|---|---:|---|---:|---|---|\n",
        f);
  cJSON_ArrayForEach(kj, get(root, "kernels")) cJSON_ArrayForEach(c, get(kj, "configs")) {
    char hl[512], safe[768], used[48] = "-";
    static const char *const word[] = {"ok", "boundary", "hazard", "bug", "not measured"};
    hazard_list(hl, sizeof hl, c);
    safe_range(safe, sizeof safe, c);
    const int state = cell_state(c);
    const cJSON *use = get(c, "max_bound_use");
    if (state != 4 && cJSON_IsNumber(use)) snprintf(used, sizeof used, "%.2g", use->valuedouble);
    else if (state != 4 && use && num(c, "findings") > 0) snprintf(used, sizeof used, "beyond");
    const cJSON *tj = get(c, "torch_testing");
    fprintf(f, "| %s | %s | %s/%s | %s | %.0f | %s | %s | %s | %.0f + %.0f / %.0f |\n", str(kj, "kernel"), str(c, "variant"),
            str(c, "dtype"), str(c, "accum"), word[state], num(c, "findings"), hl[0] ? hl : "-", used, safe[0] ? safe : "-",
            num(tj, "passes_finding"), num(tj, "passes_hazard"), num(tj, "rejects_sound"));
  }
  fputs("\n| fault | variant | found | runs |\n|---|---|---|---:|\n", f);
  cJSON_ArrayForEach(t, get(root, "faults"))
    fprintf(f, "| %s | %s/%s | %s | %.0f |\n", str(t, "fault"), str(t, "kernel"), str(t, "variant"), flag(t, "found") ? "yes" : "NO",
            num(t, "runs"));
  const cJSON *dj;
  cJSON_ArrayForEach(dj, get(root, "differentials")) {
    cJSON_ArrayForEach(t, get(dj, "clean"))
      fprintf(f, "\n%s/%s differential %s: %.0f cases, %.0f findings", str(dj, "kernel"), str(dj, "variant"), str(t, "dtype"),
              num(t, "cases"), num(t, "findings"));
    fputs("\n", f);
  }
  return ferror(f) ? -1 : 0;
}

int pf_report_json(const cJSON *root, FILE *f) {
  cJSON *out = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(out, "summary");
  const cJSON *kj, *c, *t;
  cJSON_AddItemToObject(out, "environment", cJSON_Duplicate(get(root, "environment"), 1));
  cJSON_ArrayForEach(kj, get(root, "kernels")) cJSON_ArrayForEach(c, get(kj, "configs")) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "kernel", str(kj, "kernel"));
    cJSON_AddStringToObject(r, "variant", str(c, "variant"));
    cJSON_AddStringToObject(r, "dtype", str(c, "dtype"));
    cJSON_AddStringToObject(r, "accum", str(c, "accum"));
    cJSON_AddNumberToObject(r, "max_ulps", num(c, "max_ulps"));
    cJSON_AddNumberToObject(r, "findings", num(c, "findings"));
    cJSON_AddNumberToObject(r, "max_error", num(c, "max_error"));
    cJSON_AddItemToObject(r, "hazards", cJSON_Duplicate(get(c, "hazards"), 1));
    cJSON_AddItemToObject(r, "torch_testing", cJSON_Duplicate(get(c, "torch_testing"), 1));
    if (get(c, "bias")) cJSON_AddItemToObject(r, "bias", cJSON_Duplicate(get(c, "bias"), 1));
    static const char *const sev[] = {"ok", "boundary", "hazard", "finding"};
    cJSON_AddStringToObject(r, "severity", sev[severity(c)]);
    static const char *const state[] = {"ok", "boundary", "hazard", "bug", "not measured"};
    cJSON_AddStringToObject(r, "state", state[cell_state(c)]); /* the summary's word */
    const cJSON *use = get(c, "max_bound_use");
    if (use) cJSON_AddItemToObject(r, "max_bound_use", cJSON_Duplicate(use, 1));
    cJSON *b = cJSON_AddArrayToObject(r, "boundaries");
    cJSON_ArrayForEach(t, get(c, "thresholds")) if (flag(t, "found")) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "name", str(t, "name"));
      cJSON_AddStringToObject(e, "bad", str(t, "bad"));
      cJSON_AddStringToObject(e, "last_good", str(t, "last_good_hex"));
      cJSON_AddStringToObject(e, "first_bad", str(t, "first_bad_hex"));
      cJSON_AddItemToArray(b, e);
    }
    cJSON_AddItemToArray(rows, r);
  }
  cJSON_AddItemToObject(out, "faults", cJSON_Duplicate(get(root, "faults"), 1));
  cJSON_AddItemToObject(out, "differentials", cJSON_Duplicate(get(root, "differentials"), 1));
  char *s = cJSON_Print(out);
  fputs(s, f);
  fputc('\n', f);
  free(s);
  cJSON_Delete(out);
  return ferror(f) ? -1 : 0;
}
