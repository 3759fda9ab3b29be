#define _XOPEN_SOURCE 700 /* realpath */
#include "case.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/parallel.h"
#include "core/kernel.h"
#include "jsonfile.h"
#include "rng.h"
#include "tensorfile.h"
#include "verdict.h"

#define PF_CASE_FORMAT "precfuzz-case/1"
#define PF_MAX_SEED_EXACT 9007199254740992.0 /* 2^53: larger seeds are written as strings */

/* ---- construction ------------------------------------------------------------------ */

const pf_kernel *pf_case_kernel(const pf_case *c) {
  /* resolved by pf_case_init; a case whose names were set otherwise is looked up by them */
  if (c->k && strcmp(c->k->variant, c->variant) == 0 && strcmp(c->k->op->name, c->kernel) == 0) return c->k;
  return pf_kernel_find(c->kernel, c->variant);
}

pf_status pf_case_init(pf_case *c, const char *kernel, const char *variant, uint64_t seed) {
  memset(c, 0, sizeof *c);
  const pf_op *op = pf_op_find(kernel);
  if (!op) return pf_error(PF_ERR_UNKNOWN, "unknown kernel '%s' (see 'precfuzz list')", kernel);
  const pf_kernel *k = pf_kernel_find(kernel, variant);
  if (!k) return pf_error(PF_ERR_UNKNOWN, "unknown variant '%s' of kernel %s (see 'precfuzz list')", variant, kernel);
  snprintf(c->kernel, sizeof c->kernel, "%s", kernel);
  snprintf(c->variant, sizeof c->variant, "%s", variant);
  c->k = k;
  c->dtype = PF_FP32;
  for (int t = 0; t < PF_NDTYPES; t++)
    if (k->dtypes & PF_DT(t)) { c->dtype = (pf_dtype)t; break; }
  c->accum = PF_FP32;
  c->ndims = op->ndims;
  for (int i = 0; i < op->ndims; i++) c->shape[i] = op->dim_default[i];
  for (int i = 0; i < op->nparams; i++) c->params[i] = op->params[i].def;
  pf_kernel_param_defaults(k, c); /* the variant's own defaults, where it narrows a parameter */
  c->ninputs = op->ninputs;
  for (int i = 0; i < op->ninputs; i++) {
    pf_gen_default(&c->inputs[i]);
    c->inputs[i].seed = pf_seed_mix(seed, (uint64_t)i);
  }
  return PF_OK;
}

void pf_case_free(pf_case *c) {
  for (int i = 0; i < c->ninputs; i++) pf_gen_free(&c->inputs[i]);
}

pf_status pf_case_copy(pf_case *dst, const pf_case *src) {
  *dst = *src;
  for (int i = 0; i < src->ninputs; i++) {
    if (pf_gen_copy(&dst->inputs[i], &src->inputs[i])) {
      for (int j = 0; j < i; j++) pf_gen_free(&dst->inputs[j]);
      dst->ninputs = 0;
      return PF_ERR_NOMEM;
    }
  }
  return PF_OK;
}

double pf_case_param(const pf_case *c, const char *name) {
  const pf_op *op = pf_case_op(c);
  int i = op ? pf_op_param_index(op, name) : -1;
  if (i < 0) abort(); /* a kernel asked for a parameter its own table lacks */
  return c->params[i];
}

pf_status pf_case_set_param(pf_case *c, const char *name, double v) {
  const pf_op *op = pf_case_op(c);
  int i = op ? pf_op_param_index(op, name) : -1;
  if (i < 0) return pf_error(PF_ERR_UNKNOWN, "kernel %s has no parameter '%s'", c->kernel, name);
  c->params[i] = v;
  return PF_OK;
}

/* ---- validation ----------------------------------------------------------------------- */

static pf_status pf_check_param(const pf_param_desc *d, double v) {
  if (isnan(v)) return pf_error(PF_ERR_ARG, "parameter '%s' is NaN", d->name);
  if (d->type != PF_PARAM_REAL && v != floor(v))
    return pf_error(PF_ERR_ARG, "parameter '%s' must be an integer, got %g", d->name, v);
  if (v < d->min || v > d->max) {
    if (d->type == PF_PARAM_CHOICE) return pf_error(PF_ERR_ARG, "parameter '%s': choice out of range", d->name);
    return pf_error(PF_ERR_ARG, "parameter '%s' = %g is outside [%g, %g]", d->name, v, d->min, d->max);
  }
  if (d->held && !pf_dtype_holds((pf_dtype)(d->held - 1), v))
    return pf_error(PF_ERR_ARG, "parameter '%s' = %.17g is not a %s value (the frameworks hold it in %s)", d->name, v,
                    pf_dtype_name((pf_dtype)(d->held - 1)), pf_dtype_name((pf_dtype)(d->held - 1)));
  return PF_OK;
}

static pf_status pf_check_gen(const pf_gen *g, const char *name, size_t n, pf_dtype t) {
  if (g->dist == PF_DIST_VALUES) {
    if (g->nvalues != n)
      return pf_error(PF_ERR_ARG, "input '%s': %zu values given, the shape needs %zu", name, g->nvalues, n);
    for (size_t i = 0; i < n; i++)
      if (!pf_dtype_holds(t, g->values[i]))
        return pf_error(PF_ERR_ARG, "input '%s': value %zu (%a) is not representable in %s", name, i,
                        g->values[i], pf_dtype_name(t));
    return PF_OK;
  }
  if ((unsigned)g->dist >= PF_NDISTS) return pf_error(PF_ERR_ARG, "input '%s': bad distribution", name);
  if (!isfinite(g->scale) || g->scale < 0)
    return pf_error(PF_ERR_ARG, "input '%s': scale must be finite and >= 0, got %g", name, g->scale);
  if (!isfinite(g->offset))
    return pf_error(PF_ERR_ARG, "input '%s': offset must be finite, got %g", name, g->offset);
  if (g->exp_min > g->exp_max || g->exp_min < -1100 || g->exp_max > 1100)
    return pf_error(PF_ERR_ARG, "input '%s': need -1100 <= exp_min <= exp_max <= 1100, got [%d, %d]", name,
                    g->exp_min, g->exp_max);
  if (g->outliers > n)
    return pf_error(PF_ERR_ARG, "input '%s': %zu outliers in %zu elements", name, g->outliers, n);
  if (!isfinite(g->outlier_mag) || g->outlier_mag < 0)
    return pf_error(PF_ERR_ARG, "input '%s': outlier_magnitude must be finite and >= 0", name);
  if (!(g->special_rate >= 0 && g->special_rate <= 1))
    return pf_error(PF_ERR_ARG, "input '%s': special_rate must lie in [0, 1]", name);
  return PF_OK;
}

/* "2.0 GiB", "512.0 MiB", "64.0 KiB" */
static void pf_bytes_str(char *buf, size_t len, double b) {
  if (b >= 0x1p30) snprintf(buf, len, "%.1f GiB", b / 0x1p30);
  else if (b >= 0x1p20) snprintf(buf, len, "%.1f MiB", b / 0x1p20);
  else snprintf(buf, len, "%.1f KiB", b / 0x1p10);
}

/* The time limit on judging one case (pf_case_set_time_limit), and whether the CPU emulation
 * counts (not with the CUDA backend). */
static double pf_time_limit = PF_CASE_SECONDS_DEFAULT;
static int pf_time_emulation = 1;
void pf_case_set_time_limit(double seconds) { pf_time_limit = seconds; }
void pf_case_time_counts_emulation(int on) { pf_time_emulation = on; }

/* "0.4 s", "40 s", "12 min", "67 h", "3.2 days" */
void pf_secs_str(char *buf, size_t len, double s) {
  if (s < 10) snprintf(buf, len, "%.1f s", s);
  else if (s < 120) snprintf(buf, len, "%.0f s", s);
  else if (s < 7200) snprintf(buf, len, "%.0f min", s / 60);
  else if (s < 172800) snprintf(buf, len, "%.0f h", s / 3600);
  else snprintf(buf, len, "%.1f days", s / 86400);
}

static pf_status pf_op_estimate(const pf_op *op, const pf_case *c, double *seconds) {
  double em = 0, orc = 0;
  if (op && op->cost) op->cost(c, &em, &orc);
  if (!pf_time_emulation) em = 0; /* the CUDA backend: the oracle alone */
  *seconds = orc + em;
  if (!(*seconds <= pf_time_limit)) {
    char est[32], lim[32], part[64] = "";
    pf_secs_str(est, sizeof est, *seconds);
    pf_secs_str(lim, sizeof lim, pf_time_limit);
    if (em > 0) snprintf(part, sizeof part, "CPU emulation %.3g s; ", em);
    return pf_error(PF_ERR_ARG,
                    "shape: judging one case is estimated at %s on one processor (%soracle %.3g s), more than the "
                    "limit of %s (--max-case-seconds)",
                    est, part, orc, lim);
  }
  return PF_OK;
}

pf_status pf_case_estimate(const pf_case *c, double *seconds) {
  return pf_op_estimate(pf_case_op(c), c, seconds);
}

/* Each input's element count, and what judging the case holds in memory (each input element
 * as binary64, each output element with its exact, rounded and alternative values, status,
 * bound, verdict and ulps) against the budget: all from the shape, before anything is made. */
static pf_status pf_case_sizes(const pf_op *op, const pf_case *c) {
  double bytes = (double)PF_BYTES_PER_OUTPUT * (double)op->output_count(c);
  for (int i = 0; i < op->ninputs; i++) {
    const size_t n = op->input_count(c, i);
    if (n > op->elems_max)
      return pf_error(PF_ERR_ARG, "input '%s' would have %zu elements, more than %zu", op->input_names[i], n,
                      op->elems_max);
    bytes += (double)PF_BYTES_PER_INPUT * (double)n;
  }
  double budget;
  pf_status st = pf_memory_budget(&budget);
  if (!st) st = pf_simd_setting_check();
  if (st) return st;
  if (bytes > budget) {
    char need[32], have[32];
    pf_bytes_str(need, sizeof need, bytes);
    pf_bytes_str(have, sizeof have, budget);
    return pf_error(PF_ERR_ARG,
                    "shape: the case needs about %s (%d bytes per output element, %d per input element), more than "
                    "the %s precfuzz may use (PRECFUZZ_MEMORY_BYTES; default: half of this machine's memory)",
                    need, PF_BYTES_PER_OUTPUT, PF_BYTES_PER_INPUT, have);
  }
  double secs;
  return pf_op_estimate(op, c, &secs);
}

pf_status pf_case_check_size(const pf_case *c) {
  const pf_op *op = pf_case_op(c);
  if (!op) return pf_error(PF_ERR_UNKNOWN, "unknown kernel '%s' (see 'precfuzz list')", c->kernel);
  if (c->ndims != op->ndims)
    return pf_error(PF_ERR_ARG, "shape: kernel %s needs %d dimensions, got %d", c->kernel, op->ndims, c->ndims);
  for (int i = 0; i < op->ndims; i++)
    if (c->shape[i] < 1 || c->shape[i] > op->dim_max[i])
      return pf_error(PF_ERR_ARG, "shape: %s = %zu is outside [1, %zu]", op->dim_names[i], c->shape[i],
                      op->dim_max[i]);
  return pf_case_sizes(op, c);
}

pf_status pf_case_set_checkpoint(pf_case *c, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return pf_error(PF_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return pf_error(PF_ERR_IO, "checkpoint %s: not a directory", path);
  char *abs = realpath(path, NULL);
  if (!abs) return pf_error(PF_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
  const size_t n = strlen(abs);
  if (n >= sizeof c->checkpoint) {
    free(abs);
    return pf_error(PF_ERR_ARG, "checkpoint %s: its path is longer than %d characters", path, PF_CKPT_PATH_LEN - 1);
  }
  memcpy(c->checkpoint, abs, n + 1);
  free(abs);
  return PF_OK;
}

pf_status pf_case_validate(const pf_case *c) {
  const pf_op *op = pf_case_op(c);
  if (!op) return pf_error(PF_ERR_UNKNOWN, "unknown kernel '%s' (see 'precfuzz list')", c->kernel);
  const pf_kernel *k = pf_kernel_find(c->kernel, c->variant);
  if (!k) return pf_error(PF_ERR_UNKNOWN, "unknown variant '%s' of kernel %s", c->variant, c->kernel);
  if ((unsigned)c->dtype >= PF_NDTYPES || (unsigned)c->accum >= PF_NDTYPES)
    return pf_error(PF_ERR_ARG, "bad dtype");
  if (!pf_kernel_accepts(k, c->dtype, c->accum))
    return pf_error(PF_ERR_UNSUPPORTED, "%s/%s does not support dtype %s with accumulation %s", c->kernel,
                    c->variant, pf_dtype_name(c->dtype), pf_dtype_name(c->accum));
  if (c->ndims != op->ndims)
    return pf_error(PF_ERR_ARG, "shape: kernel %s needs %d dimensions, got %d", c->kernel, op->ndims, c->ndims);
  for (int i = 0; i < op->ndims; i++) {
    if (c->shape[i] < 1 || c->shape[i] > op->dim_max[i])
      return pf_error(PF_ERR_ARG, "shape: %s = %zu is outside [1, %zu]", op->dim_names[i], c->shape[i],
                      op->dim_max[i]);
  }
  for (int i = 0; i < op->nparams; i++) {
    pf_status st = pf_check_param(&op->params[i], c->params[i]);
    if (st) return st;
  }
  pf_status pst = pf_kernel_check_params(k, c);
  if (pst) return pst;
  if (k->check) {
    pf_status st = k->check(c);
    if (st) return st;
  }
  if (c->fault[0] && !pf_kernel_has_fault(k, c->fault))
    return pf_error(PF_ERR_UNKNOWN, "fault '%s' does not exist for %s/%s", c->fault, c->kernel, c->variant);
  if (c->checkpoint[0] && !op->takes_checkpoint) {
    char takers[256] = "";
    for (size_t i = 0; i < pf_op_count(); i++)
      if (pf_op_at(i)->takes_checkpoint)
        snprintf(takers + strlen(takers), sizeof takers - strlen(takers), "%s%s", takers[0] ? ", " : "", pf_op_at(i)->name);
    return pf_error(PF_ERR_UNSUPPORTED, "checkpoint: kernel %s loads none (%s %s)", c->kernel, takers[0] ? takers : "no kernel",
                    strchr(takers, ',') ? "do" : "does");
  }
  if (c->ninputs != op->ninputs)
    return pf_error(PF_ERR_ARG, "kernel %s takes %d inputs, got %d", c->kernel, op->ninputs, c->ninputs);
  pf_status st = pf_case_sizes(op, c);
  if (st) return st;
  for (int i = 0; i < op->ninputs; i++) {
    st = pf_check_gen(&c->inputs[i], op->input_names[i], op->input_count(c, i),
                      op->input_dtype ? op->input_dtype(c, i) : c->dtype);
    if (st) return st;
  }
  pf_verdict v;
  if (c->expect[0] && pf_verdict_parse(c->expect, &v))
    return pf_error(PF_ERR_UNKNOWN, "expect: '%s' is not a verdict", c->expect);
  return PF_OK;
}

static double pf_half_memory;
static pthread_once_t pf_half_memory_once = PTHREAD_ONCE_INIT;
static void pf_half_memory_read(void) {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  pf_half_memory = pages > 0 && size > 0 ? (double)pages * (double)size / 2 : 0x1p32;
}

pf_status pf_memory_budget(double *bytes) {
  const char *s = getenv("PRECFUZZ_MEMORY_BYTES");
  if (s && *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    const double unit = *end == 'K' ? 0x1p10 : *end == 'M' ? 0x1p20 : *end == 'G' ? 0x1p30 : *end == 'T' ? 0x1p40 : 1;
    if (unit > 1) end++;
    if (errno || end == s || *end || !(v * unit >= 1) || !isfinite(v * unit))
      return pf_error(PF_ERR_ARG, "PRECFUZZ_MEMORY_BYTES: '%s' is not a size (bytes, or a number with K, M, G or T)", s);
    *bytes = v * unit;
    return PF_OK;
  }
  pthread_once(&pf_half_memory_once, pf_half_memory_read); /* once: every case is checked */
  *bytes = pf_half_memory;
  return PF_OK;
}

/* ---- JSON out ------------------------------------------------------------------------- */

static void pf_add_hex(cJSON *o, const char *key, double x) {
  char b[40];
  pf_hexfloat(b, x);
  cJSON_AddStringToObject(o, key, b);
}

cJSON *pf_case_to_cjson(const pf_case *c) {
  const pf_op *op = pf_case_op(c);
  if (!op) return NULL;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "format", PF_CASE_FORMAT);
  cJSON_AddStringToObject(j, "kernel", c->kernel);
  cJSON_AddStringToObject(j, "variant", c->variant);
  cJSON_AddStringToObject(j, "dtype", pf_dtype_name(c->dtype));
  cJSON_AddStringToObject(j, "accum", pf_dtype_name(c->accum));
  cJSON *shape = cJSON_AddArrayToObject(j, "shape");
  for (int i = 0; i < c->ndims; i++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)c->shape[i]));
  cJSON *params = cJSON_AddObjectToObject(j, "params");
  for (int i = 0; i < op->nparams; i++) {
    const pf_param_desc *d = &op->params[i];
    if (d->type == PF_PARAM_REAL) pf_add_hex(params, d->name, c->params[i]);
    else if (d->type == PF_PARAM_INT) cJSON_AddNumberToObject(params, d->name, c->params[i]);
    else cJSON_AddStringToObject(params, d->name, d->choices[(int)c->params[i]]);
  }
  if (c->fault[0]) cJSON_AddStringToObject(j, "fault", c->fault);
  if (c->checkpoint[0]) cJSON_AddStringToObject(j, "checkpoint", c->checkpoint);
  cJSON *inputs = cJSON_AddObjectToObject(j, "inputs");
  for (int i = 0; i < c->ninputs; i++) {
    const pf_gen *g = &c->inputs[i];
    cJSON *o = cJSON_AddObjectToObject(inputs, op->input_names[i]);
    if (pf_gen_from_file(g)) {
      cJSON_AddStringToObject(o, "file", g->file);
      if (g->tensor) cJSON_AddStringToObject(o, "tensor", g->tensor);
      cJSON_AddStringToObject(o, "sha256", g->sha256);
      continue;
    }
    if (g->dist == PF_DIST_VALUES) {
      cJSON *vals = cJSON_AddArrayToObject(o, "values");
      for (size_t v = 0; v < g->nvalues; v++) {
        char b[40];
        pf_hexfloat(b, g->values[v]);
        cJSON_AddItemToArray(vals, cJSON_CreateString(b));
      }
      continue;
    }
    cJSON_AddStringToObject(o, "dist", pf_dist_name(g->dist));
    if ((double)g->seed <= PF_MAX_SEED_EXACT) cJSON_AddNumberToObject(o, "seed", (double)g->seed);
    else {
      char b[24];
      snprintf(b, sizeof b, "%llu", (unsigned long long)g->seed);
      cJSON_AddStringToObject(o, "seed", b);
    }
    pf_add_hex(o, "scale", g->scale);
    if (g->offset != 0) pf_add_hex(o, "offset", g->offset);
    if (g->dist == PF_DIST_LOGUNIFORM) {
      cJSON_AddNumberToObject(o, "exp_min", g->exp_min);
      cJSON_AddNumberToObject(o, "exp_max", g->exp_max);
    }
    if (g->outliers) {
      cJSON_AddNumberToObject(o, "outliers", (double)g->outliers);
      pf_add_hex(o, "outlier_magnitude", g->outlier_mag);
    }
    if (g->special_rate > 0) pf_add_hex(o, "special_rate", g->special_rate);
  }
  if (c->expect[0]) cJSON_AddStringToObject(j, "expect", c->expect);
  return j;
}

char *pf_case_to_json(const pf_case *c) {
  cJSON *j = pf_case_to_cjson(c);
  if (!j) return NULL;
  char *s = cJSON_Print(j);
  cJSON_Delete(j);
  return s;
}

/* ---- JSON in -------------------------------------------------------------------------- */

/* Every reader names the file (what) and the field in its one-line message. */

static pf_status pf_json_string(const cJSON *o, const char *key, const char *what, const char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) return pf_error(PF_ERR_PARSE, "%s: missing field '%s'", what, key);
  if (!cJSON_IsString(v)) return pf_error(PF_ERR_PARSE, "%s: field '%s' must be a string", what, key);
  *out = v->valuestring;
  return PF_OK;
}

static pf_status pf_json_real(const cJSON *v, const char *key, const char *what, double *out) {
  if (cJSON_IsNumber(v)) { *out = v->valuedouble; return PF_OK; }
  if (cJSON_IsString(v) && pf_parse_double(v->valuestring, out) == PF_OK) return PF_OK;
  return pf_error(PF_ERR_PARSE, "%s: field '%s' must be a number or a hex-float string", what, key);
}

static pf_status pf_json_uint(const cJSON *v, const char *key, const char *what, double maxv, uint64_t *out) {
  if (cJSON_IsNumber(v)) {
    /* a JSON number is a binary64: exact up to 2^53; beyond, the integer is a decimal string */
    double d = v->valuedouble;
    if (!(d >= 0 && d <= maxv && d == floor(d)))
      return pf_error(PF_ERR_PARSE, "%s: field '%s' must be an integer in [0, %.0f]", what, key, maxv);
    if (d > 0x1p53)
      return pf_error(PF_ERR_PARSE, "%s: field '%s' = %.17g is beyond 2^53, where a JSON number may not be the integer "
                      "written: give it as a decimal string", what, key, d);
    *out = (uint64_t)d;
    return PF_OK;
  }
  if (cJSON_IsString(v) && v->valuestring[0] >= '0' && v->valuestring[0] <= '9') {
    char *end;
    errno = 0;
    unsigned long long u = strtoull(v->valuestring, &end, 10);
    if (*end == 0 && errno == 0 && (double)u <= maxv) { *out = u; return PF_OK; }
  }
  return pf_error(PF_ERR_PARSE, "%s: field '%s' must be an integer in [0, %.0f]", what, key, maxv);
}

static pf_status pf_json_int(const cJSON *v, const char *key, const char *what, int lo, int hi, int *out) {
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > hi)
    return pf_error(PF_ERR_PARSE, "%s: field '%s' must be an integer in [%d, %d]", what, key, lo, hi);
  *out = (int)v->valuedouble;
  return PF_OK;
}

static pf_status pf_unknown_keys(const cJSON *o, const char *const *known, const char *what, const char *where) {
  for (const cJSON *it = o->child; it; it = it->next) {
    int ok = 0;
    for (size_t i = 0; known[i]; i++) ok |= strcmp(it->string, known[i]) == 0;
    if (!ok) return pf_error(PF_ERR_PARSE, "%s: unknown field '%s'%s", what, it->string, where);
  }
  return PF_OK;
}

/* The directory relative file paths in the case being parsed are taken from (pf_case_load). */
static _Thread_local const char *pf_case_base_dir;

/* {"file": PATH, "tensor": NAME, "sha256": HEX}: the values of a tensor file; the hash, when
 * given, must still be the file's. */
static pf_status pf_gen_file_from_cjson(pf_gen *g, const cJSON *o, const char *what, const char *name) {
  char where[96];
  snprintf(where, sizeof where, " in input '%s'", name);
  static const char *const known[] = {"file", "tensor", "sha256", NULL};
  pf_status st = pf_unknown_keys(o, known, what, where);
  if (st) return st;
  const char *file, *tensor = NULL, *sha = NULL;
  if ((st = pf_json_string(o, "file", what, &file))) return st;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tensor");
  if (v && (!cJSON_IsString(v) || !*v->valuestring))
    return pf_error(PF_ERR_PARSE, "%s: 'tensor' of input '%s' must be a tensor's name", what, name);
  if (v) tensor = v->valuestring;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "sha256"))) {
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 64 || strspn(v->valuestring, "0123456789abcdef") != 64)
      return pf_error(PF_ERR_PARSE, "%s: 'sha256' of input '%s' must be 64 lower-case hex digits", what, name);
    sha = v->valuestring;
  }
  if (!*file) return pf_error(PF_ERR_PARSE, "%s: 'file' of input '%s' is empty", what, name);
  char path[4096];
  const char *base = pf_case_base_dir && file[0] != '/' ? pf_case_base_dir : NULL;
  if (snprintf(path, sizeof path, "%s%s%s", base ? base : "", base ? "/" : "", file) >= (int)sizeof path)
    return pf_error(PF_ERR_PARSE, "%s: input '%s': path too long", what, name);
  pf_tensorfile t;
  if ((st = pf_tensorfile_read(path, tensor, &t))) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pf_error_message());
    return pf_error(st, "%s: input '%s': %s", what, name, msg);
  }
  if (sha && strcmp(sha, t.sha256) != 0) {
    pf_tensorfile_free(&t);
    return pf_error(PF_ERR_ARG, "%s: input '%s': %s changed since the case was written (sha256 %.12s..., recorded %.12s...)",
                    what, name, path, t.sha256, sha);
  }
  char *abs = realpath(path, NULL);
  st = pf_gen_set_file(g, &t, abs ? abs : path, tensor);
  /* the file's shape and dtype are checked against the case once it is complete */
  free(abs);
  pf_tensorfile_free(&t);
  return st;
}

static pf_status pf_gen_from_cjson(pf_gen *g, const cJSON *o, const char *what, const char *name) {
  char where[96];
  snprintf(where, sizeof where, " in input '%s'", name);
  pf_gen_default(g);
  if (!cJSON_IsObject(o)) return pf_error(PF_ERR_PARSE, "%s: input '%s' must be an object", what, name);
  if (cJSON_GetObjectItemCaseSensitive(o, "file")) return pf_gen_file_from_cjson(g, o, what, name);
  const cJSON *vals = cJSON_GetObjectItemCaseSensitive(o, "values");
  if (vals) {
    static const char *const known[] = {"values", NULL};
    pf_status st = pf_unknown_keys(o, known, what, where);
    if (st) return st;
    if (!cJSON_IsArray(vals)) return pf_error(PF_ERR_PARSE, "%s: 'values' of input '%s' must be an array", what, name);
    size_t n = (size_t)cJSON_GetArraySize(vals);
    g->dist = PF_DIST_VALUES;
    g->values = malloc((n ? n : 1) * sizeof(double));
    if (!g->values) return PF_ERR_NOMEM;
    g->nvalues = n;
    size_t i = 0;
    for (const cJSON *v = vals->child; v; v = v->next, i++) {
      if (!cJSON_IsString(v) || pf_parse_double(v->valuestring, &g->values[i]))
        return pf_error(PF_ERR_PARSE, "%s: value %zu of input '%s' is not a hex float (or inf, -inf, nan)%s", what,
                        i, name, cJSON_IsString(v) && pf_parse_double_underflows(v->valuestring) ? ": it underflows to 0" : "");
    }
    return PF_OK;
  }
  static const char *const known[] = {"dist", "seed", "scale", "offset", "exp_min", "exp_max", "outliers",
                                      "outlier_magnitude", "special_rate", NULL};
  pf_status st = pf_unknown_keys(o, known, what, where);
  if (st) return st;
  const char *dist;
  if ((st = pf_json_string(o, "dist", what, &dist))) return st;
  if (pf_dist_parse(dist, &g->dist) || g->dist == PF_DIST_VALUES)
    return pf_error(PF_ERR_PARSE, "%s: input '%s': unknown dist '%s' (normal, uniform, loguniform, heavy)", what,
                    name, dist);
  const cJSON *v;
  if (!(v = cJSON_GetObjectItemCaseSensitive(o, "seed")))
    return pf_error(PF_ERR_PARSE, "%s: input '%s' needs a 'seed'", what, name);
  if ((st = pf_json_uint(v, "seed", what, 18446744073709551615.0, &g->seed))) return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "scale")) && (st = pf_json_real(v, "scale", what, &g->scale)))
    return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "offset")) && (st = pf_json_real(v, "offset", what, &g->offset)))
    return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "exp_min")) &&
      (st = pf_json_int(v, "exp_min", what, -1100, 1100, &g->exp_min)))
    return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "exp_max")) &&
      (st = pf_json_int(v, "exp_max", what, -1100, 1100, &g->exp_max)))
    return st;
  uint64_t outliers = 0;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "outliers")) &&
      (st = pf_json_uint(v, "outliers", what, 1e12, &outliers)))
    return st;
  g->outliers = (size_t)outliers;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "outlier_magnitude")) &&
      (st = pf_json_real(v, "outlier_magnitude", what, &g->outlier_mag)))
    return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "special_rate")) &&
      (st = pf_json_real(v, "special_rate", what, &g->special_rate)))
    return st;
  return PF_OK;
}

pf_status pf_case_from_cjson(pf_case *c, const cJSON *j, const char *what) {
  memset(c, 0, sizeof *c);
  if (!cJSON_IsObject(j)) return pf_error(PF_ERR_PARSE, "%s: a case must be a JSON object", what);
  static const char *const known[] = {"format", "kernel", "variant", "dtype", "accum", "shape", "params",
                                      "fault", "checkpoint", "inputs", "expect", "note", NULL};
  pf_status st = pf_unknown_keys(j, known, what, "");
  if (st) return st;
  const char *s;
  if ((st = pf_json_string(j, "format", what, &s))) return st;
  if (strcmp(s, PF_CASE_FORMAT) != 0)
    return pf_error(PF_ERR_PARSE, "%s: format '%s' is not %s", what, s, PF_CASE_FORMAT);
  const char *kernel, *variant;
  if ((st = pf_json_string(j, "kernel", what, &kernel)) || (st = pf_json_string(j, "variant", what, &variant)))
    return st;
  if (strlen(kernel) >= PF_NAME_LEN || strlen(variant) >= PF_NAME_LEN)
    return pf_error(PF_ERR_PARSE, "%s: kernel or variant name too long", what);
  const pf_op *op = pf_op_find(kernel);
  if (!op) return pf_error(PF_ERR_UNKNOWN, "%s: unknown kernel '%s'", what, kernel);
  if (!pf_kernel_find(kernel, variant))
    return pf_error(PF_ERR_UNKNOWN, "%s: unknown variant '%s' of kernel %s (precfuzz list; a user's kernel loads with --kernels)", what, variant, kernel);
  if ((st = pf_case_init(c, kernel, variant, 0))) return st;
  for (int i = 0; i < c->ninputs; i++) pf_gen_free(&c->inputs[i]);
  c->ninputs = 0;

  if ((st = pf_json_string(j, "dtype", what, &s))) return st;
  if (pf_dtype_parse(s, &c->dtype)) return pf_error(PF_ERR_UNKNOWN, "%s: dtype '%s' is not fp32, fp16 or bf16", what, s);
  if ((st = pf_json_string(j, "accum", what, &s))) return st;
  if (pf_dtype_parse(s, &c->accum)) return pf_error(PF_ERR_UNKNOWN, "%s: accum '%s' is not fp32, fp16 or bf16", what, s);

  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
  if (!cJSON_IsArray(shape)) return pf_error(PF_ERR_PARSE, "%s: 'shape' must be an array of integers", what);
  if (cJSON_GetArraySize(shape) != op->ndims)
    return pf_error(PF_ERR_PARSE, "%s: 'shape' of kernel %s has %d dimensions, got %d", what, kernel, op->ndims,
                    cJSON_GetArraySize(shape));
  c->ndims = op->ndims;
  int d = 0;
  for (const cJSON *v = shape->child; v; v = v->next, d++) {
    uint64_t u;
    if ((st = pf_json_uint(v, "shape", what, 1e15, &u))) return st;
    c->shape[d] = (size_t)u;
  }

  const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "params");
  if (params) {
    if (!cJSON_IsObject(params)) return pf_error(PF_ERR_PARSE, "%s: 'params' must be an object", what);
    for (const cJSON *v = params->child; v; v = v->next) {
      int i = pf_op_param_index(op, v->string);
      if (i < 0) return pf_error(PF_ERR_PARSE, "%s: kernel %s has no parameter '%s'", what, kernel, v->string);
      const pf_param_desc *pd = &op->params[i];
      if (pd->type == PF_PARAM_CHOICE) {
        int found = -1;
        for (int k = 0; cJSON_IsString(v) && pd->choices[k]; k++)
          if (strcmp(pd->choices[k], v->valuestring) == 0) found = k;
        if (found < 0) return pf_error(PF_ERR_PARSE, "%s: parameter '%s' must be one of its choices (see 'precfuzz list')", what, pd->name);
        c->params[i] = found;
      } else if ((st = pf_json_real(v, pd->name, what, &c->params[i]))) {
        return st;
      }
    }
  }
  const cJSON *fault = cJSON_GetObjectItemCaseSensitive(j, "fault");
  if (fault && !cJSON_IsNull(fault)) {
    if (!cJSON_IsString(fault) || strlen(fault->valuestring) >= PF_NAME_LEN)
      return pf_error(PF_ERR_PARSE, "%s: 'fault' must be a fault name", what);
    snprintf(c->fault, sizeof c->fault, "%s", fault->valuestring);
  }
  const cJSON *ckpt = cJSON_GetObjectItemCaseSensitive(j, "checkpoint");
  if (ckpt) { /* a directory named relative to the case file, kept absolute */
    if (!cJSON_IsString(ckpt) || !*ckpt->valuestring)
      return pf_error(PF_ERR_PARSE, "%s: 'checkpoint' must be a directory's path", what);
    const char *p = ckpt->valuestring;
    const char *base = pf_case_base_dir && p[0] != '/' ? pf_case_base_dir : NULL;
    char joined[4096];
    if (snprintf(joined, sizeof joined, "%s%s%s", base ? base : "", base ? "/" : "", p) >= (int)sizeof joined)
      return pf_error(PF_ERR_PARSE, "%s: 'checkpoint': path too long", what);
    if ((st = pf_case_set_checkpoint(c, joined))) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", pf_error_message());
      return pf_error(st, "%s: %s", what, msg);
    }
  }
  const cJSON *expect = cJSON_GetObjectItemCaseSensitive(j, "expect");
  if (expect) {
    if (!cJSON_IsString(expect) || strlen(expect->valuestring) >= PF_NAME_LEN)
      return pf_error(PF_ERR_PARSE, "%s: 'expect' must be a verdict name", what);
    snprintf(c->expect, sizeof c->expect, "%s", expect->valuestring);
  }
  const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(j, "inputs");
  if (!cJSON_IsObject(inputs)) return pf_error(PF_ERR_PARSE, "%s: 'inputs' must be an object", what);
  for (const cJSON *v = inputs->child; v; v = v->next) {
    int known_input = 0;
    for (int i = 0; i < op->ninputs; i++) known_input |= strcmp(v->string, op->input_names[i]) == 0;
    if (!known_input) return pf_error(PF_ERR_PARSE, "%s: kernel %s has no input '%s'", what, kernel, v->string);
  }
  for (int i = 0; i < op->ninputs; i++) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(inputs, op->input_names[i]);
    if (!o) return pf_error(PF_ERR_PARSE, "%s: missing input '%s'", what, op->input_names[i]);
    c->ninputs = i + 1;
    if ((st = pf_gen_from_cjson(&c->inputs[i], o, what, op->input_names[i]))) return st;
  }
  for (int i = 0; i < op->ninputs; i++)
    if (c->inputs[i].file && (st = pf_case_check_file_input(c, i, what))) return st;
  st = pf_case_validate(c);
  if (st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pf_error_message());
    return pf_error(st, "%s: %s", what, msg);
  }
  return PF_OK;
}


pf_status pf_case_from_json(pf_case *c, const char *text, const char *what) {
  cJSON *j;
  pf_status st0 = pf_json_parse_strict(text, what, &j);
  if (st0) {
    memset(c, 0, sizeof *c);
    return st0;
  }
  pf_status st = pf_case_from_cjson(c, j, what);
  cJSON_Delete(j);
  return st;
}


pf_status pf_case_load(pf_case *c, const char *path) {
  char *text = NULL;
  size_t len = 0;
  memset(c, 0, sizeof *c);
  pf_status st = pf_read_file(path, &text, &len);
  if (st) return st;
  if (strlen(text) != len) { free(text); return pf_error(PF_ERR_PARSE, "%s: not a JSON case (binary data)", path); }
  /* tensor files named relative to the case file */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  pf_case_base_dir = dir;
  st = pf_case_from_json(c, text, path);
  pf_case_base_dir = NULL;
  free(text);
  return st;
}

pf_status pf_case_check_file_input(const pf_case *c, int i, const char *what) {
  const pf_op *op = pf_case_op(c);
  const pf_gen *g = &c->inputs[i];
  const pf_dtype want = op->input_dtype ? op->input_dtype(c, i) : c->dtype;
  const char *name = op->input_names[i];
  if (g->file_dtype != want)
    return pf_error(PF_ERR_ARG, "%s: input '%s': %s holds %s values, the case needs %s", what, name, g->file,
                    pf_dtype_name(g->file_dtype), pf_dtype_name(want));
  /* the input's dimensions; leading dimensions of the file may be flattened into the first */
  int dims[PF_MAX_DIMS];
  const int nd = op->input_dims ? op->input_dims(c, i, dims) : 0;
  const size_t n = op->input_count(c, i);
  char got[160] = "", need[160] = "";
  for (int d = 0; d < g->file_ndims; d++)
    snprintf(got + strlen(got), sizeof got - strlen(got), d ? "x%zu" : "%zu", g->file_shape[d]);
  for (int d = 0; d < nd; d++)
    snprintf(need + strlen(need), sizeof need - strlen(need), d ? "x%zu" : "%zu", c->shape[dims[d]]);
  if (!got[0]) snprintf(got, sizeof got, "a scalar");
  int ok = g->nvalues == n;
  if (ok && nd > 0) {
    ok = g->file_ndims >= nd;
    for (int d = 1; ok && d < nd; d++) ok = g->file_shape[g->file_ndims - nd + d] == c->shape[dims[d]];
  }
  if (!ok)
    return pf_error(PF_ERR_ARG, "%s: input '%s': %s has shape %s, the case needs %s%s", what, name, g->file, got,
                    nd ? need : "", nd ? "" : "its element count");
  return PF_OK;
}

pf_status pf_case_save(const pf_case *c, const char *path) {
  char *s = pf_case_to_json(c);
  if (!s) return PF_ERR_NOMEM;
  /* written whole under a temporary name, then renamed: never half a case file */
  const size_t n = strlen(s);
  s[n - (n && s[n - 1] == '\n')] = 0;
  char *t = malloc(strlen(s) + 2);
  if (!t) { free(s); return PF_ERR_NOMEM; }
  sprintf(t, "%s\n", s);
  free(s);
  const pf_status st = pf_write_file_atomic(path, t, strlen(t));
  free(t);
  return st;
}
