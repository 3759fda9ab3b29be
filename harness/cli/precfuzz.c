/* precfuzz: the command line. Exit status: 0 nothing found, 1 findings, 2 bad usage or
 * input (one line on stderr naming the flag, field or file). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <mpfr.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/boundary.h"
#include "harness/case.h"
#include "harness/cli/minimize.h"
#include "harness/runner.h"
#include "kernels/kernel.h"

#define EXIT_FINDINGS 1
#define EXIT_USAGE 2

static const char *prog = "precfuzz";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return EXIT_USAGE;
}

/* ---- strict number parsing ---------------------------------------------------------- */

static int parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (*end || errno) return -1;
  *out = v;
  return 0;
}

static int parse_real(const char *flag, const char *s, double lo, double hi, double *out) {
  double v;
  if (pf_parse_double(s, &v) || !isfinite(v))
    return usage_error("%s: '%s' is not a finite number", flag, s);
  if (v < lo || v > hi) return usage_error("%s: %s is outside [%g, %g]", flag, s, lo, hi);
  *out = v;
  return 0;
}

/* "4x256" -> dims; the count must match the kernel's. */
static int parse_shape(const char *s, const pf_op *op, size_t *shape) {
  const char *p = s;
  for (int d = 0; d < op->ndims; d++) {
    if (*p < '0' || *p > '9') goto bad;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || v > (unsigned long long)op->dim_max[d] * 16 + 16) {
      return usage_error("--shape: %s = %s is outside [1, %zu]", op->dim_names[d], p, op->dim_max[d]);
    }
    shape[d] = (size_t)v;
    p = end;
    if (d + 1 < op->ndims) {
      if (*p != 'x') goto bad;
      p++;
    }
  }
  if (*p) goto bad;
  return 0;
bad:;
  char dims[128] = "";
  for (int d = 0; d < op->ndims; d++) {
    strcat(dims, d ? "x" : "");
    strncat(dims, op->dim_names[d], 40);
  }
  return usage_error("--shape: '%s' is not %s (positive integers, e.g. 4x256)", s, dims);
}

/* ---- list ------------------------------------------------------------------------------- */

static void print_help_list(void) {
  printf("usage: precfuzz list [--json]\n\n"
         "Lists every registered kernel variant: dtypes, accumulations, parameters, faults,\n"
         "and the contract it is judged by.\n");
}

static cJSON *kernel_to_cjson(const pf_kernel *k) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "kernel", k->op->name);
  cJSON_AddStringToObject(o, "variant", k->variant);
  cJSON_AddStringToObject(o, "summary", k->summary);
  cJSON *dt = cJSON_AddArrayToObject(o, "dtypes");
  for (int t = 0; t < PF_NDTYPES; t++)
    if (k->dtypes & PF_DT(t)) cJSON_AddItemToArray(dt, cJSON_CreateString(pf_dtype_name((pf_dtype)t)));
  cJSON *ac = cJSON_AddArrayToObject(o, "accums");
  for (int t = 0; t < PF_NDTYPES; t++)
    if (k->accums & PF_DT(t)) cJSON_AddItemToArray(ac, cJSON_CreateString(pf_dtype_name((pf_dtype)t)));
  if (k->accums & PF_ACCUM_STORAGE) cJSON_AddItemToArray(ac, cJSON_CreateString("storage"));
  cJSON *dims = cJSON_AddArrayToObject(o, "shape");
  for (int d = 0; d < k->op->ndims; d++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", k->op->dim_names[d]);
    cJSON_AddNumberToObject(x, "max", (double)k->op->dim_max[d]);
    cJSON_AddNumberToObject(x, "default", (double)k->op->dim_default[d]);
    cJSON_AddItemToArray(dims, x);
  }
  cJSON *ps = cJSON_AddArrayToObject(o, "params");
  for (int i = 0; i < k->op->nparams; i++) {
    const pf_param_desc *d = &k->op->params[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", d->name);
    if (d->type == PF_PARAM_CHOICE) {
      cJSON *ch = cJSON_AddArrayToObject(x, "choices");
      for (int c = 0; d->choices[c]; c++) cJSON_AddItemToArray(ch, cJSON_CreateString(d->choices[c]));
      cJSON_AddStringToObject(x, "default", d->choices[(int)d->def]);
    } else {
      cJSON_AddNumberToObject(x, "min", d->min);
      cJSON_AddNumberToObject(x, "max", d->max);
      cJSON_AddNumberToObject(x, "default", d->def);
    }
    cJSON_AddStringToObject(x, "help", d->help);
    cJSON_AddItemToArray(ps, x);
  }
  cJSON *fs = cJSON_AddArrayToObject(o, "faults");
  for (int i = 0; k->faults[i]; i++) cJSON_AddItemToArray(fs, cJSON_CreateString(k->faults[i]));
  cJSON_AddStringToObject(o, "contract", k->contract);
  return o;
}

static int cmd_list(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { print_help_list(); return 0; }
    else return usage_error("list: unknown argument '%s' (see precfuzz list --help)", argv[i]);
  }
  if (json) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < pf_kernel_count(); i++) cJSON_AddItemToArray(a, kernel_to_cjson(pf_kernel_at(i)));
    char *s = cJSON_Print(a);
    puts(s);
    free(s);
    cJSON_Delete(a);
    return 0;
  }
  printf("%-10s %-13s %-15s %-13s %-32s %s\n", "kernel", "variant", "dtypes", "accum", "faults", "what");
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    char dts[64] = "", acs[64] = "", fs[128] = "";
    for (int t = 0; t < PF_NDTYPES; t++)
      if (k->dtypes & PF_DT(t)) { strcat(dts, dts[0] ? "," : ""); strcat(dts, pf_dtype_name((pf_dtype)t)); }
    for (int t = 0; t < PF_NDTYPES; t++)
      if (k->accums & PF_DT(t)) { strcat(acs, acs[0] ? "," : ""); strcat(acs, pf_dtype_name((pf_dtype)t)); }
    if (k->accums & PF_ACCUM_STORAGE) strcat(acs, acs[0] ? ",storage" : "storage");
    for (int f = 0; k->faults[f]; f++) { strcat(fs, fs[0] ? "," : ""); strncat(fs, k->faults[f], 60); }
    printf("%-10s %-13s %-15s %-13s %-32s %s\n", k->op->name, k->variant, dts, acs, fs[0] ? fs : "-", k->summary);
  }
  printf("\nparameters (--param NAME=VALUE):\n");
  const pf_op *seen[64];
  size_t nseen = 0;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_op *op = pf_kernel_at(i)->op;
    int dup = 0;
    for (size_t s = 0; s < nseen; s++) dup |= seen[s] == op;
    if (dup || nseen == 64) continue;
    seen[nseen++] = op;
    for (int p = 0; p < op->nparams; p++) {
      const pf_param_desc *d = &op->params[p];
      if (d->type == PF_PARAM_CHOICE) {
        char ch[128] = "";
        for (int c = 0; d->choices[c]; c++) { strcat(ch, c ? "|" : ""); strncat(ch, d->choices[c], 30); }
        printf("  %s %-10s %s (default %s): %s\n", op->name, d->name, ch, d->choices[(int)d->def], d->help);
      } else {
        printf("  %s %-10s [%g, %g] (default %g): %s\n", op->name, d->name, d->min, d->max, d->def, d->help);
      }
    }
  }
  return 0;
}

/* ---- run ------------------------------------------------------------------------------- */

static void print_help_run(void) {
  printf(
      "usage: precfuzz run -k KERNEL [-v VARIANT] [-t DTYPE] [-a ACCUM] [--shape RxC] [--scale S]\n"
      "                    [--dist NAME] [--seed N] [--cases N] [--fault NAME] [--backend cpu|cuda]\n"
      "                    [--param NAME=VALUE]... [--outliers N --outlier-magnitude M]\n"
      "                    [--special-rate R] [--exp-range LO:HI] [--oracle-prec BITS]\n"
      "                    [--input NAME:FIELD=VALUE,...]... [--json] [--save-findings DIR] [--max-print N]\n\n"
      "Runs N cases (seeds N, N+1, ...) of one kernel variant (every variant when -v is not given)\n"
      "against the MPFR oracle and prints each finding with the command that replays it.\n\n"
      "  -k, --kernel KERNEL      operation (precfuzz list)\n"
      "  -v, --variant VARIANT    variant; default: all variants of KERNEL\n"
      "  -t, --dtype DTYPE        storage dtype: fp32, fp16, bf16 (default fp16)\n"
      "  -a, --accum ACCUM        accumulation dtype: fp32 or the storage dtype (default fp32)\n"
      "      --shape RxC          shape (default: the kernel's, softmax 4x256)\n"
      "      --scale S            inputs are drawn from the distribution times S (default 1)\n"
      "      --dist NAME          normal, uniform, loguniform, heavy (default normal)\n"
      "      --exp-range LO:HI    loguniform: exponents LO..HI (default -8:8)\n"
      "      --outliers N         N elements per input set to +-M (--outlier-magnitude M)\n"
      "      --special-rate R     each element becomes a special value (0, subnormal, max, inf, NaN) with\n"
      "                           probability R\n"
      "      --seed N             first case seed (default 1); case k uses seed N+k\n"
      "      --cases N            number of cases (default 100)\n"
      "      --fault NAME         switch on a known fault of the variant\n"
      "      --param NAME=VALUE   a kernel parameter, e.g. alpha=0x1p-3, mask=causal\n"
      "      --backend cpu|cuda   where the kernel runs (default cpu)\n"
      "      --oracle-prec BITS   starting MPFR precision (default 256; raised when needed)\n"
      "      --json               results as JSON, with per-element outputs and exact values\n"
      "      --save-findings DIR  write every finding as a case file (replay with precfuzz replay)\n"
      "      --input NAME:F=V,... one input's generator differently: F is dist, scale, exp (LO:HI),\n"
      "                           outliers, outlier_magnitude, special_rate, or value (every element =\n"
      "                           V), e.g. --input g:scale=0x1p-20 --input m:value=0\n"
      "      --max-print N        finding lines printed per variant (default 10)\n\n"
      "Exit status: 0 no finding, 1 findings, 2 bad usage or input.\n");
}

typedef struct {
  const char *kernel, *variant, *fault, *save_dir;
  pf_dtype dtype, accum;
  int have_shape;
  size_t shape[PF_MAX_DIMS];
  pf_gen gen;
  uint64_t seed, cases;
  int nparams;
  const char *param_name[PF_MAX_PARAMS];
  const char *param_value[PF_MAX_PARAMS];
  int json;
  long oracle_prec;
  uint64_t max_print;
  int ninput_specs;
  const char *input_spec[16]; /* --input NAME:FIELD=VALUE,... */
} run_opts;

/* Applies NAME=VALUE parameters to a case, validating names and values. */
static int apply_params(pf_case *c, const run_opts *o) {
  const pf_op *op = pf_op_find(c->kernel);
  for (int i = 0; i < o->nparams; i++) {
    const int p = pf_op_param_index(op, o->param_name[i]);
    if (p < 0) return usage_error("--param: kernel %s has no parameter '%s' (see precfuzz list)", c->kernel, o->param_name[i]);
    const pf_param_desc *d = &op->params[p];
    if (d->type == PF_PARAM_CHOICE) {
      int found = -1;
      for (int k = 0; d->choices[k]; k++)
        if (strcmp(d->choices[k], o->param_value[i]) == 0) found = k;
      if (found < 0) return usage_error("--param %s: '%s' is not one of its choices (see precfuzz list)", d->name, o->param_value[i]);
      c->params[p] = found;
    } else {
      double v;
      if (pf_parse_double(o->param_value[i], &v))
        return usage_error("--param %s: '%s' is not a number", d->name, o->param_value[i]);
      c->params[p] = v;
    }
  }
  return 0;
}

/* Applies --input NAME:FIELD=VALUE[,FIELD=VALUE...] to the case's input generators. */
static int apply_input_specs(pf_case *c, const run_opts *o) {
  const pf_op *op = pf_op_find(c->kernel);
  for (int k = 0; k < o->ninput_specs; k++) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", o->input_spec[k]);
    char *colon = strchr(buf, ':');
    if (!colon || colon == buf || !colon[1])
      return usage_error("--input: '%s' is not NAME:FIELD=VALUE[,FIELD=VALUE...]", o->input_spec[k]);
    *colon = 0;
    int t = -1;
    for (int i = 0; i < op->ninputs; i++)
      if (strcmp(op->input_names[i], buf) == 0) t = i;
    if (t < 0) return usage_error("--input: kernel %s has no input '%s'", c->kernel, buf);
    pf_gen *g = &c->inputs[t];
    for (char *save = NULL, *f = strtok_r(colon + 1, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(f, '=');
      if (!eq || eq == f || !eq[1]) return usage_error("--input %s: '%s' is not FIELD=VALUE", buf, f);
      *eq = 0;
      const char *v = eq + 1;
      double d;
      uint64_t u;
      int lo, hi, n = 0;
      if (strcmp(f, "dist") == 0) {
        if (pf_dist_parse(v, &g->dist) || g->dist == PF_DIST_VALUES)
          return usage_error("--input %s: unknown dist '%s' (normal, uniform, loguniform, heavy)", buf, v);
      } else if (strcmp(f, "scale") == 0) {
        if (pf_parse_double(v, &d) || !isfinite(d) || d < 0) return usage_error("--input %s: scale '%s' is not a finite number >= 0", buf, v);
        g->scale = d;
      } else if (strcmp(f, "exp") == 0) {
        if (sscanf(v, "%d:%d%n", &lo, &hi, &n) != 2 || v[n] || lo > hi || lo < -1100 || hi > 1100)
          return usage_error("--input %s: exp '%s' is not LO:HI with -1100 <= LO <= HI <= 1100", buf, v);
        g->exp_min = lo;
        g->exp_max = hi;
      } else if (strcmp(f, "outliers") == 0) {
        if (parse_u64(v, &u) || u > 1000000000) return usage_error("--input %s: outliers '%s' is not a count", buf, v);
        g->outliers = (size_t)u;
      } else if (strcmp(f, "outlier_magnitude") == 0) {
        if (pf_parse_double(v, &d) || !isfinite(d) || d < 0) return usage_error("--input %s: outlier_magnitude '%s' is not a finite number >= 0", buf, v);
        g->outlier_mag = d;
      } else if (strcmp(f, "special_rate") == 0) {
        if (pf_parse_double(v, &d) || !(d >= 0 && d <= 1)) return usage_error("--input %s: special_rate '%s' is not in [0, 1]", buf, v);
        g->special_rate = d;
      } else if (strcmp(f, "value") == 0) {
        if (pf_parse_double(v, &d)) return usage_error("--input %s: value '%s' is not a number", buf, v);
        const size_t cnt = op->input_count(c, t);
        pf_gen_free(g);
        g->dist = PF_DIST_VALUES;
        g->values = malloc((cnt ? cnt : 1) * sizeof(double));
        if (!g->values) return usage_error("--input %s: out of memory", buf);
        for (size_t i = 0; i < cnt; i++) g->values[i] = d;
        g->nvalues = cnt;
      } else {
        return usage_error("--input %s: unknown field '%s' (dist, scale, exp, outliers, outlier_magnitude, special_rate, value)", buf, f);
      }
    }
  }
  return 0;
}

/* The command line that reproduces one case. */
static void reproduce_line(const pf_case *c, const run_opts *o, uint64_t seed, char *buf, size_t len) {
  const pf_op *op = pf_op_find(c->kernel);
  char sc[40];
  pf_hexfloat(sc, o->gen.scale);
  size_t n = (size_t)snprintf(buf, len, "precfuzz run -k %s -v %s -t %s -a %s --shape ", c->kernel, c->variant,
                              pf_dtype_name(c->dtype), pf_dtype_name(c->accum));
  for (int d = 0; d < c->ndims && n < len; d++) n += (size_t)snprintf(buf + n, len - n, d ? "x%zu" : "%zu", c->shape[d]);
  if (n < len) n += (size_t)snprintf(buf + n, len - n, " --dist %s --scale %s", pf_dist_name(o->gen.dist), sc);
  if (o->gen.dist == PF_DIST_LOGUNIFORM && n < len)
    n += (size_t)snprintf(buf + n, len - n, " --exp-range %d:%d", o->gen.exp_min, o->gen.exp_max);
  if (o->gen.outliers && n < len) {
    pf_hexfloat(sc, o->gen.outlier_mag);
    n += (size_t)snprintf(buf + n, len - n, " --outliers %zu --outlier-magnitude %s", o->gen.outliers, sc);
  }
  if (o->gen.special_rate > 0 && n < len) {
    pf_hexfloat(sc, o->gen.special_rate);
    n += (size_t)snprintf(buf + n, len - n, " --special-rate %s", sc);
  }
  for (int p = 0; p < op->nparams && n < len; p++) {
    const pf_param_desc *d = &op->params[p];
    if (c->params[p] == d->def) continue;
    if (d->type == PF_PARAM_CHOICE) n += (size_t)snprintf(buf + n, len - n, " --param %s=%s", d->name, d->choices[(int)c->params[p]]);
    else if (d->type == PF_PARAM_INT) n += (size_t)snprintf(buf + n, len - n, " --param %s=%.0f", d->name, c->params[p]);
    else {
      pf_hexfloat(sc, c->params[p]);
      n += (size_t)snprintf(buf + n, len - n, " --param %s=%s", d->name, sc);
    }
  }
  if (c->fault[0] && n < len) n += (size_t)snprintf(buf + n, len - n, " --fault %s", c->fault);
  for (int k = 0; k < o->ninput_specs && n < len; k++) n += (size_t)snprintf(buf + n, len - n, " --input %s", o->input_spec[k]);
  if (n < len) snprintf(buf + n, len - n, " --seed %llu --cases 1", (unsigned long long)seed);
}

static int save_finding(const pf_case *c, const pf_run *r, const char *dir, uint64_t seed, char *path, size_t len) {
  pf_case k;
  if (pf_case_copy(&k, c)) return -1;
  snprintf(k.expect, sizeof k.expect, "%s", pf_verdict_name(r->cmp.verdict));
  snprintf(path, len, "%s/%s-%s-%s-%s-seed%llu-%s.json", dir, c->kernel, c->variant, pf_dtype_name(c->dtype),
           pf_dtype_name(c->accum), (unsigned long long)seed, pf_verdict_name(r->cmp.verdict));
  pf_status st = pf_case_save(&k, path);
  pf_case_free(&k);
  if (st) fprintf(stderr, "%s: %s\n", prog, pf_error_message());
  return st ? -1 : 0;
}

/* The case of seed `seed` as the options say; an exit status on a bad option (c freed). */
static int build_case(const pf_kernel *k, const run_opts *o, uint64_t seed, pf_case *c) {
  pf_status st = pf_case_init(c, k->op->name, k->variant, seed);
  if (st) return usage_error("%s", pf_error_message());
  c->dtype = o->dtype;
  c->accum = o->accum;
  if (o->have_shape) memcpy(c->shape, o->shape, sizeof c->shape);
  if (o->fault) snprintf(c->fault, sizeof c->fault, "%s", o->fault);
  for (int t = 0; t < c->ninputs; t++) {
    const uint64_t s = c->inputs[t].seed;
    c->inputs[t] = o->gen;
    c->inputs[t].seed = s;
  }
  int rc = apply_params(c, o);
  if (!rc) rc = apply_input_specs(c, o);
  if (rc) pf_case_free(c);
  return rc;
}

static int run_variant(const pf_kernel *k, const run_opts *o, cJSON *jcases, int *any_finding) {
  size_t counts[PF_NVERDICTS] = {0};
  int64_t max_ulps = 0;
  double max_rel = 0, secs_k = 0, secs_o = 0;
  uint64_t printed = 0, findings = 0, outside = 0, cases_outside = 0, worst_seed = 0;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.prec = o->oracle_prec;
  oo.keep_hex = o->json;
  for (uint64_t i = 0; i < o->cases; i++) {
    const uint64_t seed = o->seed + i;
    pf_case c;
    int rc = build_case(k, o, seed, &c);
    if (rc) return rc;
    pf_run r;
    pf_status st = pf_run_case(&c, &oo, &r);
    if (st) {
      pf_run_free(&r);
      pf_case_free(&c);
      return usage_error("%s", pf_error_message());
    }
    counts[r.cmp.verdict]++;
    if (r.cmp.max_ulps > max_ulps) { max_ulps = r.cmp.max_ulps; worst_seed = seed; }
    if (r.cmp.max_rel > max_rel) max_rel = r.cmp.max_rel;
    secs_k += r.seconds_kernel;
    secs_o += r.seconds_oracle;
    const int finding = pf_verdict_is_finding(r.cmp.verdict);
    cases_outside += !r.in_domain;
    char saved[1024] = "";
    if (finding) {
      findings++;
      outside += !r.in_domain;
      *any_finding = 1;
      if (o->save_dir) save_finding(&c, &r, o->save_dir, seed, saved, sizeof saved);
    }
    if (jcases) {
      cJSON *jr = pf_run_to_cjson(&c, &r, 1);
      cJSON_AddNumberToObject(jr, "seed", (double)seed);
      if (saved[0]) cJSON_AddStringToObject(jr, "saved", saved);
      cJSON_AddItemToArray(jcases, jr);
    } else if (finding && printed < o->max_print) {
      char d[1024], rep[1536];
      pf_run_describe(&c, &r, d, sizeof d);
      reproduce_line(&c, o, seed, rep, sizeof rep);
      printf("FINDING %s/%s %s/%s seed %llu: %s\n", c.kernel, c.variant, pf_dtype_name(c.dtype),
             pf_dtype_name(c.accum), (unsigned long long)seed, d);
      if (!r.in_domain) printf("  outside the contract's domain: %s\n", r.why);
      if (saved[0]) printf("  reproduce with: precfuzz replay %s\n  or: %s\n", saved, rep);
      else printf("  reproduce with: %s\n", rep);
      printed++;
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  if (!jcases) {
    printf("%s/%s %s/%s: %llu cases (seeds %llu..%llu): ", k->op->name, k->variant, pf_dtype_name(o->dtype),
           pf_dtype_name(o->accum), (unsigned long long)o->cases, (unsigned long long)o->seed,
           (unsigned long long)(o->seed + o->cases - 1));
    for (int v = 0; v < PF_NVERDICTS; v++)
      if (counts[v]) printf("%s %zu  ", pf_verdict_name((pf_verdict)v), counts[v]);
    printf("\n  findings %llu (%llu outside the contract's domain); max ulps %lld (seed %llu); max rel error %.3g;"
           " kernel %.3fs, oracle %.3fs\n",
           (unsigned long long)findings, (unsigned long long)outside, (long long)max_ulps,
           (unsigned long long)worst_seed, max_rel, secs_k, secs_o);
    if (cases_outside)
      printf("  %llu of %llu cases outside the contract's domain (its bound does not apply there)\n",
             (unsigned long long)cases_outside, (unsigned long long)o->cases);
    if (findings > printed) printf("  (%llu more findings not shown; --max-print, --save-findings)\n", (unsigned long long)(findings - printed));
  }
  return 0;
}

/* The options run and boundary share (a case's kernel, settings and inputs). */
enum { O_SHAPE = 256, O_SCALE, O_DIST, O_SEED, O_CASES, O_FAULT, O_BACKEND, O_JSON, O_SAVE, O_PARAM,
       O_OUTLIERS, O_OUTMAG, O_SPECIAL, O_EXPRANGE, O_PREC, O_MAXPRINT, O_INPUT,
       O_ALONG, O_FROM, O_TO, O_FAIL, O_POINTS, O_FORMAT, O_REFINE };
#define PF_CASE_LONGOPTS                                                                                 \
  {"kernel", required_argument, 0, 'k'}, {"variant", required_argument, 0, 'v'},                          \
      {"dtype", required_argument, 0, 't'}, {"accum", required_argument, 0, 'a'},                         \
      {"shape", required_argument, 0, O_SHAPE}, {"scale", required_argument, 0, O_SCALE},                 \
      {"dist", required_argument, 0, O_DIST}, {"seed", required_argument, 0, O_SEED},                     \
      {"cases", required_argument, 0, O_CASES}, {"fault", required_argument, 0, O_FAULT},                 \
      {"backend", required_argument, 0, O_BACKEND}, {"json", no_argument, 0, O_JSON},                     \
      {"param", required_argument, 0, O_PARAM}, {"outliers", required_argument, 0, O_OUTLIERS},           \
      {"outlier-magnitude", required_argument, 0, O_OUTMAG}, {"special-rate", required_argument, 0, O_SPECIAL}, \
      {"exp-range", required_argument, 0, O_EXPRANGE}, {"oracle-prec", required_argument, 0, O_PREC},     \
      {"input", required_argument, 0, O_INPUT}, {"help", no_argument, 0, 'h'}

/* Returns 0 when handled, an exit status on a bad value, -1 when ch is not a shared option. */
static int case_option(int ch, char *optarg, run_opts *o, const char **shape_arg, const char **backend) {
  int rc;
  uint64_t u;
  switch (ch) {
    case 'k': o->kernel = optarg; break;
    case 'v': o->variant = optarg; break;
    case 't':
      if (pf_dtype_parse(optarg, &o->dtype)) return usage_error("-t: unknown dtype '%s' (fp32, fp16, bf16)", optarg);
      break;
    case 'a':
      if (pf_dtype_parse(optarg, &o->accum)) return usage_error("-a: unknown accumulation dtype '%s' (fp32, fp16, bf16)", optarg);
      break;
    case O_SHAPE: *shape_arg = optarg; break;
    case O_SCALE:
      if ((rc = parse_real("--scale", optarg, 0, 0x1p1000, &o->gen.scale))) return rc;
      break;
    case O_DIST:
      if (pf_dist_parse(optarg, &o->gen.dist) || o->gen.dist == PF_DIST_VALUES)
        return usage_error("--dist: unknown distribution '%s' (normal, uniform, loguniform, heavy)", optarg);
      break;
    case O_SEED:
      if (parse_u64(optarg, &o->seed)) return usage_error("--seed: '%s' is not an unsigned 64-bit integer", optarg);
      break;
    case O_CASES:
      if (parse_u64(optarg, &o->cases) || o->cases < 1 || o->cases > 1000000000)
        return usage_error("--cases: '%s' is not an integer in [1, 1000000000]", optarg);
      break;
    case O_FAULT: o->fault = optarg; break;
    case O_BACKEND: *backend = optarg; break;
    case O_JSON: o->json = 1; break;
    case O_PARAM: {
      char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg || !eq[1]) return usage_error("--param: '%s' is not NAME=VALUE", optarg);
      if (o->nparams == PF_MAX_PARAMS) return usage_error("--param: more than %d parameters", PF_MAX_PARAMS);
      *eq = 0;
      o->param_name[o->nparams] = optarg;
      o->param_value[o->nparams++] = eq + 1;
      break;
    }
    case O_OUTLIERS:
      if (parse_u64(optarg, &u) || u > 1000000000) return usage_error("--outliers: '%s' is not a count", optarg);
      o->gen.outliers = (size_t)u;
      break;
    case O_OUTMAG:
      if ((rc = parse_real("--outlier-magnitude", optarg, 0, 0x1p1000, &o->gen.outlier_mag))) return rc;
      break;
    case O_SPECIAL:
      if ((rc = parse_real("--special-rate", optarg, 0, 1, &o->gen.special_rate))) return rc;
      break;
    case O_EXPRANGE: {
      int lo, hi, n = 0;
      if (sscanf(optarg, "%d:%d%n", &lo, &hi, &n) != 2 || optarg[n] || lo > hi || lo < -1100 || hi > 1100)
        return usage_error("--exp-range: '%s' is not LO:HI with -1100 <= LO <= HI <= 1100", optarg);
      o->gen.exp_min = lo;
      o->gen.exp_max = hi;
      break;
    }
    case O_PREC:
      if (parse_u64(optarg, &u) || u < 64 || u > 16384) return usage_error("--oracle-prec: '%s' is not in [64, 16384]", optarg);
      o->oracle_prec = (long)u;
      break;
    case O_INPUT:
      if (o->ninput_specs == 16) return usage_error("--input: more than 16 given");
      o->input_spec[o->ninput_specs++] = optarg;
      break;
  default: return -1;
  }
  return 0;
}

static int cmd_run(int argc, char **argv) {
  run_opts o;
  memset(&o, 0, sizeof o);
  o.dtype = PF_FP16;
  o.accum = PF_FP32;
  o.seed = 1;
  o.cases = 100;
  o.oracle_prec = 256;
  o.max_print = 10;
  pf_gen_default(&o.gen);
  const char *shape_arg = NULL, *backend = "cpu";
  static const struct option longopts[] = {PF_CASE_LONGOPTS,
                                           {"save-findings", required_argument, 0, O_SAVE},
                                           {"max-print", required_argument, 0, O_MAXPRINT},
                                           {0, 0, 0, 0}};
  opterr = 0;
  optind = 1;
  int ch, rc;
  while ((ch = getopt_long(argc, argv, ":k:v:t:a:h", longopts, NULL)) != -1) {
    if ((rc = case_option(ch, optarg, &o, &shape_arg, &backend)) >= 0) {
      if (rc) return rc;
      continue;
    }
    switch (ch) {
    case O_SAVE: o.save_dir = optarg; break;
    case O_MAXPRINT:
      if (parse_u64(optarg, &o.max_print)) return usage_error("--max-print: '%s' is not a count", optarg);
      break;
    case 'h': print_help_run(); return 0;
    case ':': return usage_error("run: %s needs a value", argv[optind - 1]);
    default: return usage_error("run: unknown option '%s' (see precfuzz run --help)", argv[optind - 1]);
    }
  }
  if (optind < argc) return usage_error("run: unexpected argument '%s'", argv[optind]);
  if (!o.kernel) return usage_error("run: -k KERNEL is required (see precfuzz list)");
  const pf_op *op = pf_op_find(o.kernel);
  if (!op) return usage_error("-k: unknown kernel '%s' (see precfuzz list)", o.kernel);
  if (o.variant && !pf_kernel_find(o.kernel, o.variant))
    return usage_error("-v: unknown variant '%s' of kernel %s (see precfuzz list)", o.variant, o.kernel);
  if (shape_arg) {
    if ((rc = parse_shape(shape_arg, op, o.shape))) return rc;
    o.have_shape = 1;
  }
  if (strcmp(backend, "cpu") != 0) {
    if (strcmp(backend, "cuda") == 0)
      return usage_error("--backend cuda: the CUDA backend is not wired into 'run' yet; use --backend cpu");
    return usage_error("--backend: '%s' is not cpu or cuda", backend);
  }
  if (o.save_dir) {
    struct stat sb;
    if (stat(o.save_dir, &sb) != 0 && mkdir(o.save_dir, 0777) != 0)
      return usage_error("--save-findings: cannot create directory '%s' (%s)", o.save_dir, strerror(errno));
    if (stat(o.save_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return usage_error("--save-findings: '%s' is not a directory", o.save_dir);
  }
  if (o.fault && o.variant && !pf_kernel_has_fault(pf_kernel_find(o.kernel, o.variant), o.fault))
    return usage_error("--fault: '%s' does not exist for %s/%s (see precfuzz list)", o.fault, o.kernel, o.variant);

  cJSON *root = NULL, *jcases = NULL;
  if (o.json) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "precfuzz", PF_VERSION);
    jcases = cJSON_AddArrayToObject(root, "cases");
  }
  int any_finding = 0, ran = 0;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, o.kernel) != 0 || (o.variant && strcmp(k->variant, o.variant) != 0)) continue;
    if (!o.variant && (!pf_kernel_accepts(k, o.dtype, o.accum) || (o.fault && !pf_kernel_has_fault(k, o.fault))))
      continue; /* running all variants: skip those that cannot take these settings */
    ran++;
    if ((rc = run_variant(k, &o, jcases, &any_finding))) {
      cJSON_Delete(root);
      return rc;
    }
  }
  if (!ran) {
    cJSON_Delete(root);
    return usage_error("run: no variant of %s supports dtype %s with accumulation %s%s%s", o.kernel,
                       pf_dtype_name(o.dtype), pf_dtype_name(o.accum), o.fault ? " and fault " : "", o.fault ? o.fault : "");
  }
  if (root) {
    cJSON_AddBoolToObject(root, "findings", any_finding);
    char *s = cJSON_Print(root);
    puts(s);
    free(s);
    cJSON_Delete(root);
  }
  return any_finding ? EXIT_FINDINGS : 0;
}

/* ---- replay ---------------------------------------------------------------------------- */

static void print_help_replay(void) {
  printf("usage: precfuzz replay FILE... [--json] [--driver NAME] [--fault NAME]\n\n"
         "Runs each case file, or raw fuzz-driver input, again and prints its verdict. A case file is\n"
         "named *.json or is JSON text; anything else is a raw input of the driver named by --driver\n"
         "or by a directory in its path (build/fuzz/findings/<driver>[-<fault>]/, corpora/<driver>/),\n"
         "with the fault of --fault, that directory or $PF_FUZZ_FAULT. A case with \"expect\" (a regression)\n"
         "passes when its verdict equals the expected one; otherwise a finding fails.\n"
         "Exit status: 0 all as expected (or no finding), 1 otherwise, 2 bad usage or input.\n");
}

static int cmd_replay(int argc, char **argv) {
  int json = 0, nfiles = 0;
  const char *driver = NULL, *fault = NULL;
  const char **files = calloc((size_t)argc, sizeof(char *));
  if (!files) return usage_error("replay: out of memory");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { free(files); print_help_replay(); return 0; }
    else if (strcmp(argv[i], "--driver") == 0 || strcmp(argv[i], "--fault") == 0) {
      if (i + 1 >= argc) { free(files); return usage_error("replay: %s needs a value", argv[i]); }
      if (argv[i][2] == 'd') driver = argv[i + 1];
      else fault = argv[i + 1];
      i++;
    } else if (argv[i][0] == '-' && argv[i][1]) { free(files); return usage_error("replay: unknown option '%s'", argv[i]); }
    else files[nfiles++] = argv[i];
  }
  if (!nfiles) {
    free(files);
    return usage_error("replay: no FILE given (see precfuzz replay --help)");
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.keep_hex = json;
  int failed = 0;
  cJSON *arr = json ? cJSON_CreateArray() : NULL;
  for (int f = 0; f < nfiles; f++) {
    const char *file = files[f];
    pf_case c;
    char what[128];
    pf_status st = pf_load_input(file, driver, fault, &c, what, sizeof what);
    if (st) {
      pf_case_free(&c);
      cJSON_Delete(arr);
      free(files);
      return usage_error("%s", pf_error_message());
    }
    pf_run r;
    st = pf_run_case(&c, &oo, &r);
    if (st) {
      pf_run_free(&r);
      pf_case_free(&c);
      cJSON_Delete(arr);
      free(files);
      return usage_error("%s: %s", file, pf_error_message());
    }
    const char *got = pf_verdict_name(r.cmp.verdict);
    const int ok = c.expect[0] ? strcmp(c.expect, got) == 0 : !pf_verdict_is_finding(r.cmp.verdict);
    failed |= !ok;
    if (json) {
      cJSON *j = pf_run_to_cjson(&c, &r, 1);
      cJSON_AddStringToObject(j, "file", file);
      cJSON_AddBoolToObject(j, "as_expected", ok);
      cJSON_AddItemToArray(arr, j);
    } else {
      char d[1024] = "";
      if (r.cmp.verdict != PF_V_OK) pf_run_describe(&c, &r, d, sizeof d);
      printf("%s: %s/%s %s/%s: %s%s%s%s%s\n", file, c.kernel, c.variant, pf_dtype_name(c.dtype),
             pf_dtype_name(c.accum), got, d[0] ? " (" : "", d, d[0] ? ")" : "",
             c.expect[0] ? (ok ? " [as expected]" : " [EXPECTED DIFFERENT VERDICT]") : "");
      if (c.expect[0] && !ok) printf("  expected %s\n", c.expect);
      if (!r.in_domain && pf_verdict_is_finding(r.cmp.verdict))
        printf("  outside the contract's domain (the fuzz drivers do not report it): %s\n", r.why);
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  if (arr) {
    char *s = cJSON_Print(arr);
    puts(s);
    free(s);
    cJSON_Delete(arr);
  }
  free(files);
  return failed ? EXIT_FINDINGS : 0;
}

/* ---- boundary: where along one parameter a variant starts to fail ------------------------ */

static void print_help_boundary(void) {
  printf(
      "usage: precfuzz boundary -k KERNEL -v VARIANT [-t DTYPE] [-a ACCUM] --along AXIS [--from X] [--to X]\n"
      "                         [--fail VERDICTS] [--cases N] [--seed N] [--points G] [--refine K]\n"
      "                         [--format FORMAT] [--json] [run's case options: --shape, --param, --input, ...]\n\n"
      "Finds where along one number of the case the variant starts to fail.\n"
      "  --along AXIS        value (every input element), value:INPUT, scale (every input's generator\n"
      "                      scale), scale:INPUT, param:NAME, dim:NAME\n"
      "  --from X, --to X    the range (default: value: the format's least positive value to its largest;\n"
      "                      scale: 2^-30 to 2^30; param and dim: their limits, precfuzz list)\n"
      "  --fail VERDICTS     the verdicts that count as failing, comma-separated: inaccurate, underflow,\n"
      "                      overflow, nan, divergent, range, or finding (every verdict but ok and range;\n"
      "                      the default); event:overflow, event:underflow (a nonzero result rounded to\n"
      "                      zero), event:invalid: the kernel's own arithmetic raised it anywhere, whatever\n"
      "                      the verdict. Verdicts count in the contract's domain or not.\n"
      "  --cases N           1 (default): a threshold of one case (seed --seed): a grid of --points\n"
      "                      intervals (default 64, evenly spaced in the format's values, so logarithmic\n"
      "                      for a positive range) finds the first change, bisection narrows it to two\n"
      "                      adjacent values of the format, printed as the last good and the first bad.\n"
      "                      N > 1: the failure depends on the drawn tensors: the fraction of N cases\n"
      "                      (seeds --seed.., the same at every point) failing at each grid point, and\n"
      "                      where it first is non-zero and first reaches 50%%, each narrowed by --refine\n"
      "                      bisection steps (default 8) with the same N cases.\n"
      "  --format FORMAT     the values stepped over: fp32, fp16, bf16, binary64, int (default: the\n"
      "                      input's dtype for values, binary64 for scales and real parameters, int\n"
      "                      for integer parameters and dimensions)\n"
      "Exit status: 0 the search ran (whether or not it found a boundary), 2 bad usage or input.\n");
}

/* "overflow", or "ok (events underflow)" when the kernel's arithmetic raised events */
static const char *verdict_events(pf_verdict v, unsigned fe, char *buf, size_t len) {
  char e[48];
  if (!fe) snprintf(buf, len, "%s", pf_verdict_name(v));
  else snprintf(buf, len, "%s (events %s)", pf_verdict_name(v), pf_fe_str(fe, e));
  return buf;
}

/* "0x1.63p+3 (11.09375)" */
static void fmt_value(char *buf, size_t len, int format, double x) {
  if (format == PF_BFMT_INT) {
    snprintf(buf, len, "%.0f", x);
    return;
  }
  char h[40];
  pf_hexfloat(h, x);
  snprintf(buf, len, "%s (%.9g)", h, x);
}

/* The command that runs the case at x (the options, the axis set to x). */
static void axis_reproduce_line(const pf_case *c, const run_opts *o, const pf_axis *a, double x, uint64_t seed,
                                char *buf, size_t len) {
  run_opts r = *o;
  char specs[PF_MAX_INPUTS][96];
  char h[40];
  pf_hexfloat(h, x);
  const pf_op *op = pf_op_find(c->kernel);
  if (a->kind == PF_AXIS_SCALE && a->index < 0) r.gen.scale = x;
  if (a->kind == PF_AXIS_VALUE || (a->kind == PF_AXIS_SCALE && a->index >= 0))
    for (int i = 0; i < op->ninputs && r.ninput_specs < 16; i++) {
      if (a->index >= 0 && i != a->index) continue;
      snprintf(specs[i], sizeof specs[i], "%s:%s=%s", op->input_names[i], a->kind == PF_AXIS_VALUE ? "value" : "scale", h);
      r.input_spec[r.ninput_specs++] = specs[i];
    }
  pf_case k;
  if (pf_axis_apply(c, a, x, &k)) {
    snprintf(buf, len, "(cannot build the case: %s)", pf_error_message());
    return;
  }
  reproduce_line(&k, &r, seed, buf, len);
  pf_case_free(&k);
}

static cJSON *json_value(double x, int format) {
  if (format == PF_BFMT_INT) return cJSON_CreateNumber(x);
  char h[40];
  pf_hexfloat(h, x);
  return cJSON_CreateString(h);
}

static int cmd_boundary(int argc, char **argv) {
  run_opts o;
  memset(&o, 0, sizeof o);
  o.dtype = PF_FP16;
  o.accum = PF_FP32;
  o.seed = 1;
  o.cases = 1;
  o.oracle_prec = 256;
  pf_gen_default(&o.gen);
  const char *shape_arg = NULL, *backend = "cpu", *along = NULL, *fail_arg = "finding", *format_arg = NULL;
  const char *from_arg = NULL, *to_arg = NULL;
  uint64_t points = 64, refine = 8;
  static const struct option longopts[] = {PF_CASE_LONGOPTS,
                                           {"along", required_argument, 0, O_ALONG},
                                           {"from", required_argument, 0, O_FROM},
                                           {"to", required_argument, 0, O_TO},
                                           {"fail", required_argument, 0, O_FAIL},
                                           {"points", required_argument, 0, O_POINTS},
                                           {"refine", required_argument, 0, O_REFINE},
                                           {"format", required_argument, 0, O_FORMAT},
                                           {0, 0, 0, 0}};
  opterr = 0;
  optind = 1;
  int ch, rc;
  while ((ch = getopt_long(argc, argv, ":k:v:t:a:h", longopts, NULL)) != -1) {
    if ((rc = case_option(ch, optarg, &o, &shape_arg, &backend)) >= 0) {
      if (rc) return rc;
      continue;
    }
    switch (ch) {
    case O_ALONG: along = optarg; break;
    case O_FROM: from_arg = optarg; break;
    case O_TO: to_arg = optarg; break;
    case O_FAIL: fail_arg = optarg; break;
    case O_FORMAT: format_arg = optarg; break;
    case O_POINTS:
      if (parse_u64(optarg, &points) || points < 1 || points > 100000)
        return usage_error("--points: '%s' is not an integer in [1, 100000]", optarg);
      break;
    case O_REFINE:
      if (parse_u64(optarg, &refine) || refine > 64) return usage_error("--refine: '%s' is not an integer in [0, 64]", optarg);
      break;
    case 'h': print_help_boundary(); return 0;
    case ':': return usage_error("boundary: %s needs a value", argv[optind - 1]);
    default: return usage_error("boundary: unknown option '%s' (see precfuzz boundary --help)", argv[optind - 1]);
    }
  }
  if (optind < argc) return usage_error("boundary: unexpected argument '%s'", argv[optind]);
  if (!o.kernel) return usage_error("boundary: -k KERNEL is required (see precfuzz list)");
  if (!o.variant) return usage_error("boundary: -v VARIANT is required (see precfuzz list)");
  if (!along) return usage_error("boundary: --along AXIS is required (value, value:INPUT, scale, scale:INPUT, param:NAME, dim:NAME)");
  const pf_op *op = pf_op_find(o.kernel);
  if (!op) return usage_error("-k: unknown kernel '%s' (see precfuzz list)", o.kernel);
  const pf_kernel *k = pf_kernel_find(o.kernel, o.variant);
  if (!k) return usage_error("-v: unknown variant '%s' of kernel %s (see precfuzz list)", o.variant, o.kernel);
  if (shape_arg) {
    if ((rc = parse_shape(shape_arg, op, o.shape))) return rc;
    o.have_shape = 1;
  }
  if (strcmp(backend, "cpu") != 0)
    return usage_error(strcmp(backend, "cuda") == 0 ? "--backend cuda: the CUDA backend is not wired into 'boundary' yet; use --backend cpu"
                                                    : "--backend: '%s' is not cpu or cuda", backend);
  if (o.fault && !pf_kernel_has_fault(k, o.fault))
    return usage_error("--fault: '%s' does not exist for %s/%s (see precfuzz list)", o.fault, o.kernel, o.variant);
  if (!pf_kernel_accepts(k, o.dtype, o.accum))
    return usage_error("boundary: %s/%s does not take dtype %s with accumulation %s (see precfuzz list)", o.kernel,
                       o.variant, pf_dtype_name(o.dtype), pf_dtype_name(o.accum));
  pf_fail_set fail;
  if (pf_fail_set_parse(fail_arg, &fail)) return usage_error("%s", pf_error_message());
  pf_case *tmpls = calloc((size_t)o.cases, sizeof *tmpls);
  if (!tmpls) return usage_error("boundary: cannot hold %llu cases", (unsigned long long)o.cases);
  unsigned built = 0;
  rc = 0;
  for (; built < o.cases; built++)
    if ((rc = build_case(k, &o, o.seed + built, &tmpls[built]))) break;
  pf_axis a;
  double lo = 0, hi = 0;
  if (!rc && pf_axis_parse(&tmpls[0], along, &a)) rc = usage_error("%s", pf_error_message());
  if (!rc && format_arg && pf_bfmt_parse(format_arg, &a.format)) rc = usage_error("--format: %s", pf_error_message());
  if (!rc && a.format != PF_BFMT_INT && (a.kind == PF_AXIS_DIM || (a.kind == PF_AXIS_PARAM && op->params[a.index].type == PF_PARAM_INT)))
    rc = usage_error("--format: %s takes integers only (int)", along);
  if (!rc && a.format == PF_BFMT_INT && (a.kind == PF_AXIS_VALUE || a.kind == PF_AXIS_SCALE))
    rc = usage_error("--format int: %s takes floating-point values", along);
  if (!rc) {
    double lim_lo, lim_hi;
    pf_axis_limits(&tmpls[0], &a, &lim_lo, &lim_hi);
    if (a.kind == PF_AXIS_VALUE) {
      lo = a.format < PF_NDTYPES ? pf_min_subnormal((pf_dtype)a.format) : 0x1p-1074;
      hi = a.format < PF_NDTYPES ? pf_max_finite((pf_dtype)a.format) : 0x1p1023;
    } else if (a.kind == PF_AXIS_SCALE) {
      lo = 0x1p-30, hi = 0x1p30;
    } else {
      lo = lim_lo, hi = lim_hi;
    }
    if (from_arg && (pf_parse_double(from_arg, &lo) || !isfinite(lo)))
      rc = usage_error("--from: '%s' is not a finite number", from_arg);
    else if (to_arg && (pf_parse_double(to_arg, &hi) || !isfinite(hi)))
      rc = usage_error("--to: '%s' is not a finite number", to_arg);
    else if (!(lo < hi))
      rc = usage_error("boundary: the range [%g, %g] is empty (--from must be below --to)", lo, hi);
    else if (lo < lim_lo || hi > lim_hi)
      rc = usage_error("boundary: the range [%g, %g] leaves %s's limits [%g, %g]", lo, hi, along, lim_lo, lim_hi);
  }
  if (rc) {
    for (unsigned i = 0; i < built; i++) pf_case_free(&tmpls[i]);
    free(tmpls);
    return rc;
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.prec = o.oracle_prec;
  char axis_name[128], fails[128], shape[64] = "", lo_s[80], hi_s[80];
  pf_axis_describe(&tmpls[0], &a, axis_name, sizeof axis_name);
  pf_fail_set_name(fail, fails, sizeof fails);
  for (int d = 0, n = 0; d < tmpls[0].ndims; d++)
    n += snprintf(shape + n, sizeof shape - (size_t)n, d ? "x%zu" : "%zu", tmpls[0].shape[d]);
  cJSON *j = o.json ? cJSON_CreateObject() : NULL;
  if (j) {
    cJSON_AddStringToObject(j, "precfuzz", PF_VERSION);
    cJSON_AddStringToObject(j, "kernel", o.kernel);
    cJSON_AddStringToObject(j, "variant", o.variant);
    cJSON_AddStringToObject(j, "dtype", pf_dtype_name(o.dtype));
    cJSON_AddStringToObject(j, "accum", pf_dtype_name(o.accum));
    cJSON_AddStringToObject(j, "shape", shape);
    cJSON_AddStringToObject(j, "along", along);
    cJSON_AddStringToObject(j, "axis", axis_name);
    cJSON_AddStringToObject(j, "format", pf_bfmt_name(a.format));
    cJSON_AddStringToObject(j, "fail", fails);
    cJSON_AddNumberToObject(j, "seed", (double)o.seed);
    cJSON_AddNumberToObject(j, "cases", (double)o.cases);
  } else {
    printf("boundary %s/%s %s/%s shape %s%s%s along %s (%s), failing: %s\n", o.kernel, o.variant, pf_dtype_name(o.dtype),
           pf_dtype_name(o.accum), shape, o.fault ? " fault " : "", o.fault ? o.fault : "", axis_name,
           pf_bfmt_name(a.format), fails);
  }
  pf_status st;
  char line[1536];
  if (o.cases == 1) {
    pf_threshold t;
    st = pf_boundary_threshold(&tmpls[0], &a, lo, hi, fail, (int)points, &oo, &t);
    if (!st) {
      fmt_value(lo_s, sizeof lo_s, a.format, t.lo);
      fmt_value(hi_s, sizeof hi_s, a.format, t.hi);
      if (j) {
        cJSON *jt = cJSON_AddObjectToObject(j, "threshold");
        cJSON_AddItemToObject(jt, "lo", json_value(t.lo, a.format));
        cJSON_AddItemToObject(jt, "hi", json_value(t.hi, a.format));
        cJSON_AddStringToObject(jt, "verdict_lo", pf_verdict_name(t.v_lo));
        cJSON_AddStringToObject(jt, "verdict_hi", pf_verdict_name(t.v_hi));
        cJSON_AddBoolToObject(jt, "found", t.found);
        cJSON_AddNumberToObject(jt, "grid_changes", t.changes);
        cJSON_AddNumberToObject(jt, "runs", (double)t.runs);
        if (t.found) {
          const double good = t.bad_above ? t.below : t.above, bad = t.bad_above ? t.above : t.below;
          cJSON_AddStringToObject(jt, "bad", t.bad_above ? "above" : "below");
          cJSON_AddItemToObject(jt, "last_good", json_value(good, a.format));
          cJSON_AddNumberToObject(jt, "last_good_decimal", good);
          cJSON_AddStringToObject(jt, "last_good_verdict", pf_verdict_name(t.bad_above ? t.v_below : t.v_above));
          cJSON_AddItemToObject(jt, "first_bad", json_value(bad, a.format));
          cJSON_AddNumberToObject(jt, "first_bad_decimal", bad);
          cJSON_AddStringToObject(jt, "first_bad_verdict", pf_verdict_name(t.bad_above ? t.v_above : t.v_below));
          char e1[48], e2[48];
          cJSON_AddStringToObject(jt, "last_good_events", pf_fe_str(t.bad_above ? t.fe_below : t.fe_above, e1));
          cJSON_AddStringToObject(jt, "first_bad_events", pf_fe_str(t.bad_above ? t.fe_above : t.fe_below, e2));
          cJSON_AddStringToObject(jt, "detail", t.detail);
          axis_reproduce_line(&tmpls[0], &o, &a, bad, o.seed, line, sizeof line);
          cJSON_AddStringToObject(jt, "replay_first_bad", line);
          axis_reproduce_line(&tmpls[0], &o, &a, good, o.seed, line, sizeof line);
          cJSON_AddStringToObject(jt, "replay_last_good", line);
        }
      } else {
        char ve1[96], ve2[96];
        printf("  range %s .. %s: %s at the low end, %s at the high end; %d change%s on a grid of %llu intervals, %zu runs\n",
               lo_s, hi_s, verdict_events(t.v_lo, t.fe_lo, ve1, sizeof ve1), verdict_events(t.v_hi, t.fe_hi, ve2, sizeof ve2),
               t.changes, t.changes == 1 ? "" : "s", (unsigned long long)points, t.runs);
        if (!t.found) {
          printf("  no boundary in the range: every grid point %s\n", pf_fails(fail, t.v_lo, t.fe_lo) ? "fails" : "passes");
        } else {
          const double good = t.bad_above ? t.below : t.above, bad = t.bad_above ? t.above : t.below;
          char g_s[80], b_s[80];
          fmt_value(g_s, sizeof g_s, a.format, good);
          fmt_value(b_s, sizeof b_s, a.format, bad);
          verdict_events(t.v_below, t.fe_below, ve1, sizeof ve1);
          verdict_events(t.v_above, t.fe_above, ve2, sizeof ve2);
          if (t.bad_above)
            printf("  passes up to %s: %s; fails from %s: %s (adjacent %s values)\n", g_s, ve1, b_s, ve2, pf_bfmt_name(a.format));
          else
            printf("  fails up to %s: %s; passes from %s: %s (adjacent %s values)\n", b_s, ve1, g_s, ve2, pf_bfmt_name(a.format));
          if (t.detail[0]) printf("  the failing one: %s\n", t.detail);
          axis_reproduce_line(&tmpls[0], &o, &a, bad, o.seed, line, sizeof line);
          printf("  replay the failing one: %s\n", line);
          axis_reproduce_line(&tmpls[0], &o, &a, good, o.seed, line, sizeof line);
          printf("  replay the passing one: %s\n", line);
          if (t.changes > 1)
            printf("  note: the verdict changes %d times on the grid (not monotone): the first change is reported\n", t.changes);
        }
      }
    }
  } else {
    pf_probability p;
    st = pf_boundary_probability(tmpls, (unsigned)o.cases, &a, lo, hi, fail, (int)points, (int)refine, &oo, &p);
    if (!st) {
      if (j) {
        cJSON *jp = cJSON_AddObjectToObject(j, "probability");
        cJSON *arr = cJSON_AddArrayToObject(jp, "points");
        for (size_t i = 0; i < p.npoints; i++) {
          cJSON *q = cJSON_CreateObject();
          cJSON_AddItemToObject(q, "x", json_value(p.points[i].x, a.format));
          cJSON_AddNumberToObject(q, "x_decimal", p.points[i].x);
          cJSON_AddNumberToObject(q, "fails", p.points[i].fails);
          cJSON_AddNumberToObject(q, "outside_domain", p.points[i].outside);
          cJSON_AddItemToArray(arr, q);
        }
        for (int w = 0; w < 2; w++) {
          const int found = w ? p.half_found : p.first_found;
          cJSON *q = cJSON_AddObjectToObject(jp, w ? "half" : "first_nonzero");
          cJSON_AddBoolToObject(q, "found", found);
          if (!found) continue;
          const double x = w ? p.half_x : p.first_x, prev = w ? p.half_prev : p.first_prev;
          cJSON_AddItemToObject(q, "x", json_value(x, a.format));
          cJSON_AddNumberToObject(q, "x_decimal", x);
          if (!isnan(prev)) cJSON_AddItemToObject(q, "below", json_value(prev, a.format));
          cJSON_AddNumberToObject(q, "fails", w ? p.half_fails : p.first_fails);
        }
        cJSON_AddNumberToObject(jp, "runs", (double)p.runs);
      } else {
        printf("  %u cases per point (seeds %llu..%llu), %zu points, %zu runs\n", p.cases, (unsigned long long)o.seed,
               (unsigned long long)(o.seed + o.cases - 1), p.npoints, p.runs);
        printf("  %-34s %8s %8s\n", "x", "failing", "outside");
        for (size_t i = 0; i < p.npoints; i++) {
          char x_s[80];
          fmt_value(x_s, sizeof x_s, a.format, p.points[i].x);
          printf("  %-34s %8u %8u\n", x_s, p.points[i].fails, p.points[i].outside);
        }
        for (int w = 0; w < 2; w++) {
          const int found = w ? p.half_found : p.first_found;
          const char *what = w ? "at least half fail" : "a case first fails";
          if (!found) {
            printf("  %s: nowhere in the range\n", what);
            continue;
          }
          char x_s[80], b_s[80] = "below the range";
          const double x = w ? p.half_x : p.first_x, prev = w ? p.half_prev : p.first_prev;
          fmt_value(x_s, sizeof x_s, a.format, x);
          if (!isnan(prev)) fmt_value(b_s, sizeof b_s, a.format, prev);
          printf("  %s: at %s (%u of %u), not yet at %s\n", what, x_s, w ? p.half_fails : p.first_fails, p.cases, b_s);
        }
      }
    }
    pf_probability_free(&p);
  }
  for (unsigned i = 0; i < built; i++) pf_case_free(&tmpls[i]);
  free(tmpls);
  if (st) {
    cJSON_Delete(j);
    return usage_error("boundary: %s", pf_error_message());
  }
  if (j) {
    char *s = cJSON_Print(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
  }
  return 0;
}

/* ---- diff-tp: run -k tp_diff with its defaults ------------------------------------------- */

static int cmd_diff_tp(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: precfuzz diff-tp [--fault NAME] [--cases N] [--seed N] [--json] [-t bf16|fp16]\n"
             "                       [--shape STEPSxHIDDENxFFNxVOCABxSEQ] [--param NAME=VALUE]... [run's options]\n\n"
             "Runs the mixed-precision optimizer step of a transformer layer's parameters as TP=1 and as\n"
             "TP=2 (PP=2 when the embedding is tied to the LM head), one thread per rank, and checks that\n"
             "replicated parameters and tied copies stay bitwise equal on every rank and that both runs'\n"
             "master, parameter, m and v stay in the set every summation order of the norm allows\n"
             "(the kernel tp_diff; precfuzz list shows its parameters). Default dtype bf16.\n"
             "Faults: tp-replicated-unclipped, norm-no-dedup, norm-not-allreduced, tied-grad-unreduced.\n"
             "Exit status: 0 no finding, 1 findings, 2 bad usage or input.\n");
      return 0;
    }
    if (strcmp(argv[i], "-k") == 0 || strncmp(argv[i], "--kernel", 8) == 0 || strncmp(argv[i], "-k", 2) == 0)
      return usage_error("diff-tp: -k is not an option here (diff-tp is run -k tp_diff)");
  }
  char **args = calloc((size_t)argc + 6, sizeof(char *));
  if (!args) return usage_error("diff-tp: out of memory");
  int n = 0;
  args[n++] = argv[0];
  args[n++] = "-k";
  args[n++] = "tp_diff";
  args[n++] = "-t";
  args[n++] = "bf16";
  for (int i = 1; i < argc; i++) args[n++] = argv[i];
  const int rc = cmd_run(n, args);
  free(args);
  return rc;
}

/* ---- main ---------------------------------------------------------------------------- */

static void print_help(void) {
  printf("usage: precfuzz COMMAND [options]   (precfuzz COMMAND --help for each)\n\n"
         "  list      the kernels, variants, dtypes, parameters, faults and contracts\n"
         "  run       run generated cases of a kernel against the MPFR oracle\n"
         "  replay    run case files again (findings, regressions)\n"
         "  diff-tp   TP=1 against TP=2 optimizer steps: replicated copies and rounding sets\n"
         "  boundary  where along one value, scale, parameter or dimension a variant starts to fail\n"
         "  minimize  shrink a finding (case file or raw driver input) to a small readable case\n"
         "  version   versions of precfuzz, MPFR, GMP and cJSON\n\n"
         "Exit status: 0 nothing found, 1 findings, 2 bad usage or input.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_help();
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    print_help();
    return 0;
  }
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("precfuzz %s (MPFR %s, GMP %s, cJSON %s)\n", PF_VERSION, mpfr_get_version(), gmp_version, cJSON_Version());
    return 0;
  }
  if (strcmp(cmd, "list") == 0) return cmd_list(argc - 1, argv + 1);
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(cmd, "replay") == 0) return cmd_replay(argc - 1, argv + 1);
  if (strcmp(cmd, "diff-tp") == 0) return cmd_diff_tp(argc - 1, argv + 1);
  if (strcmp(cmd, "boundary") == 0) return cmd_boundary(argc - 1, argv + 1);
  if (strcmp(cmd, "minimize") == 0) return pf_cmd_minimize(argc - 1, argv + 1);
  return usage_error("unknown command '%s' (list, run, replay, diff-tp, boundary, minimize, version; see precfuzz --help)", cmd);
}
