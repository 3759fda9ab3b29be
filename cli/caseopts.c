#define _XOPEN_SOURCE 700 /* realpath */
/* The case options (caseopts.h): a case built from what the command line or a program says,
 * the line that replays it, and the one-line errors of a bad option. */
#include "cli/caseopts.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/boundary.h"
#include "core/plugin.h"
#include "core/tensorfile.h"

const char *pf_prog = "precfuzz";

int pf_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", pf_prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return EXIT_USAGE;
}

int pf_flags_once(int argc, char **argv, const char *const *valued, const char *const *bare) {
  const char *seen[64];
  int nseen = 0;
  for (int i = 1; i < argc; i++) {
    int takes = -1; /* 1: a flag with a value, 0: without, -1: not a flag of these */
    for (int k = 0; valued && valued[k] && takes < 0; k++)
      if (strcmp(argv[i], valued[k]) == 0) takes = 1;
    for (int k = 0; bare && bare[k] && takes < 0; k++)
      if (strcmp(argv[i], bare[k]) == 0) takes = 0;
    if (takes < 0) continue;
    for (int j = 0; j < nseen; j++)
      if (strcmp(seen[j], argv[i]) == 0) return pf_usage_error("%s given twice: give each option once", argv[i]);
    if (nseen < 64) seen[nseen++] = argv[i];
    i += takes;
  }
  return 0;
}

/* ---- strict number parsing ---------------------------------------------------------- */

/* Decimal, or hex with 0x: never octal (010 is ten), no sign, no whitespace anywhere. */
int pf_parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return -1;
  const int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char *digits = hex ? s + 2 : s;
  if (!*digits) return -1;
  for (const char *p = digits; *p; p++)
    if (!(hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))) return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
  if (*end || errno) return -1;
  *out = v;
  return 0;
}

int pf_parse_real(const char *flag, const char *s, double lo, double hi, double *out) {
  double v;
  if (pf_parse_double(s, &v) || !isfinite(v))
    return pf_usage_error("%s: '%s' is not a finite number", flag, s);
  if (v < lo || v > hi) return pf_usage_error("%s: %s is outside [%g, %g]", flag, s, lo, hi);
  *out = v;
  return 0;
}

/* "4x256" -> dims; the count must match the kernel's. */
int pf_parse_shape(const char *s, const pf_op *op, size_t *shape) {
  const char *p = s;
  for (int d = 0; d < op->ndims; d++) {
    if (*p < '0' || *p > '9') goto bad;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || v > (unsigned long long)op->dim_max[d] * 16 + 16) {
      return pf_usage_error("--shape: %s = %.*s is outside [1, %zu]", op->dim_names[d], (int)strspn(p, "0123456789"), p,
                         op->dim_max[d]);
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
  char dims[256] = "";
  for (int d = 0; d < op->ndims; d++) { /* bounded: a plugin's operation names its own dimensions */
    const size_t used = strlen(dims);
    snprintf(dims + used, sizeof dims - used, "%s%s", d ? "x" : "", op->dim_names[d]);
  }
  return pf_usage_error("--shape: '%s' is not %s (positive integers, e.g. 4x256)", s, dims);
}

/* Applies NAME=VALUE parameters to a case, validating names and values. */
int pf_apply_params(pf_case *c, const run_opts *o) {
  const pf_op *op = pf_case_op(c);
  for (int i = 0; i < o->nparams; i++) {
    const int p = pf_op_param_index(op, o->param_name[i]);
    if (p < 0) return pf_usage_error("--param: kernel %s has no parameter '%s' (see precfuzz list)", c->kernel, o->param_name[i]);
    const pf_param_desc *d = &op->params[p];
    if (d->type == PF_PARAM_CHOICE) {
      int found = -1;
      for (int k = 0; d->choices[k]; k++)
        if (strcmp(d->choices[k], o->param_value[i]) == 0) found = k;
      if (found < 0) return pf_usage_error("--param %s: '%s' is not one of its choices (see precfuzz list)", d->name, o->param_value[i]);
      c->params[p] = found;
    } else {
      double v;
      if (pf_parse_double(o->param_value[i], &v))
        return pf_usage_error("--param %s: '%s' is not a number", d->name, o->param_value[i]);
      if (d->held && isfinite(v) && !pf_dtype_holds((pf_dtype)(d->held - 1), v)) {
        /* a decimal the frameworks hold in fp32 (label_smoothing=0.1): rounded to nearest as
         * torch's float(x) -> fp32 does; said once, and the replay line carries the bits */
        const double r = pf_round((pf_dtype)(d->held - 1), v);
        char hx[40];
        pf_hexfloat(hx, r);
        static const char *said[PF_MAX_PARAMS]; /* pf_apply_params runs per case: say it once */
        if (said[i] != o->param_value[i] && (said[i] = o->param_value[i]))
          fprintf(stderr, "%s: --param %s=%s taken as the %s value %s (%.9g), as the frameworks hold it\n", pf_prog, d->name,
                o->param_value[i], pf_dtype_name((pf_dtype)(d->held - 1)), hx, r);
        v = r;
      }
      c->params[p] = v;
    }
  }
  return 0;
}

/* "NAME:file=PATH[,tensor=T]": the input's index, path and tensor (NULL), or -1 when the spec
 * names no file; an exit status (< -1 as -status) on a malformed one. */
static int file_spec(const char *spec, const pf_op *op, char *path, size_t plen, char *tensor, size_t tlen) {
  const char *colon = strchr(spec, ':');
  if (!colon || (strncmp(colon + 1, "file=", 5) != 0 && !strstr(colon + 1, ",file=") )) return -1;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)(colon - spec), spec);
  int t = -1;
  for (int i = 0; i < op->ninputs; i++)
    if (strcmp(op->input_names[i], name) == 0) t = i;
  if (t < 0) return -pf_usage_error("--input: kernel %s has no input '%s'", op->name, name);
  path[0] = tensor[0] = 0;
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", colon + 1) >= (int)sizeof buf) return -pf_usage_error("--input %s: too long", name);
  for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
    if (strncmp(f, "file=", 5) == 0 && f[5] && !path[0]) snprintf(path, plen, "%s", f + 5);
    else if (strncmp(f, "tensor=", 7) == 0 && f[7] && !tensor[0]) snprintf(tensor, tlen, "%s", f + 7);
    else return -pf_usage_error("--input %s: file= takes only tensor=NAME beside it, got '%s'", name, f);
  }
  if (!path[0]) return -pf_usage_error("--input %s: file= needs a path", name);
  return t;
}

int pf_load_input_files(run_opts *o, const pf_op *op) {
  int all = op->ninputs > 0, covered[PF_MAX_INPUTS] = {0};
  for (int k = 0; k < o->ninput_specs; k++) {
    char path[4096], tensor[256];
    const int t = file_spec(o->input_spec[k], op, path, sizeof path, tensor, sizeof tensor);
    if (t < -1) return -t;
    if (t < 0) continue;
    pf_tensorfile *f = calloc(1, sizeof *f);
    if (!f) return pf_usage_error("--input: out of memory");
    if (pf_tensorfile_read(path, tensor[0] ? tensor : NULL, f)) {
      free(f);
      return pf_usage_error("--input %s: %s", op->input_names[t], pf_error_message());
    }
    o->files[k] = f;
    o->file_paths[k] = realpath(path, NULL);
    covered[t] = 1;
    pf_case c;
    /* the case's dtype from the file only where the input is held in it (not an input the operation holds in another dtype: pf_op.input_dtype) */
    if (!o->have_dtype && !op->input_dtype) o->dtype = f->dtype, o->have_dtype = 1;
    if (!o->have_shape && op->input_dims) {
      /* the shape from the file: the input's dimensions, leading file dimensions flattened */
      const pf_kernel *kk = pf_op_first_kernel(op);
      int dims[PF_MAX_DIMS];
      if (kk && pf_case_init(&c, op->name, kk->variant, 0) == PF_OK) {
        const int nd = op->input_dims(&c, t, dims);
        for (int d = 0; d < op->ndims; d++) o->shape[d] = c.shape[d];
        pf_case_free(&c);
        if (nd > 0 && f->ndims >= nd) {
          size_t lead = 1;
          for (int d = 0; d <= f->ndims - nd; d++) lead *= f->shape[d];
          o->shape[dims[0]] = lead;
          for (int d = 1; d < nd; d++) o->shape[dims[d]] = f->shape[f->ndims - nd + d];
          o->have_shape = 1;
        }
      }
    }
  }
  for (int i = 0; i < op->ninputs; i++) all &= covered[i];
  if (all && !o->cases_given) o->cases = 1; /* nothing left to draw: every case would be the same */
  return 0;
}

void pf_free_input_files(run_opts *o) {
  for (int k = 0; k < 16; k++) {
    if (o->files[k]) pf_tensorfile_free(o->files[k]);
    free(o->files[k]);
    free(o->file_paths[k]);
    o->files[k] = NULL;
    o->file_paths[k] = NULL;
  }
}

/* Input t from the file of --input spec k (read once by pf_load_input_files, else now). */
static int apply_file_input(pf_case *c, const run_opts *o, int k, int t, const char *path, const char *tensor) {
  const pf_op *op = pf_case_op(c);
  pf_tensorfile f;
  if (o->files[k]) {
    f = *o->files[k];
    f.data = malloc((f.n ? f.n : 1) * sizeof(double));
    if (!f.data) return pf_usage_error("--input: out of memory");
    memcpy(f.data, o->files[k]->data, f.n * sizeof(double));
  } else if (pf_tensorfile_read(path, tensor[0] ? tensor : NULL, &f)) {
    return pf_usage_error("--input %s: %s", op->input_names[t], pf_error_message());
  }
  char *abs = o->file_paths[k] ? NULL : realpath(path, NULL);
  const char *p = o->file_paths[k] ? o->file_paths[k] : abs ? abs : path;
  pf_status st = pf_gen_set_file(&c->inputs[t], &f, p, tensor[0] ? tensor : NULL);
  free(abs);
  pf_tensorfile_free(&f);
  if (st) return pf_usage_error("--input: out of memory");
  if (pf_case_check_file_input(c, t, "--input")) return pf_usage_error("%s", pf_error_message());
  return 0;
}

/* Applies --input NAME:FIELD=VALUE[,FIELD=VALUE...] to the case's input generators. */
int pf_apply_input_specs(pf_case *c, const run_opts *o) {
  const pf_op *op = pf_case_op(c);
  for (int k = 0; k < o->ninput_specs; k++) {
    char path[4096], tensor[256];
    const int ft = file_spec(o->input_spec[k], op, path, sizeof path, tensor, sizeof tensor);
    if (ft < -1) return -ft;
    if (ft >= 0) {
      const int rc = apply_file_input(c, o, k, ft, path, tensor);
      if (rc) return rc;
      continue;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", o->input_spec[k]);
    char *colon = strchr(buf, ':');
    if (!colon || colon == buf || !colon[1])
      return pf_usage_error("--input: '%s' is not NAME:FIELD=VALUE[,FIELD=VALUE...]", o->input_spec[k]);
    *colon = 0;
    int t = -1;
    for (int i = 0; i < op->ninputs; i++)
      if (strcmp(op->input_names[i], buf) == 0) t = i;
    if (t < 0) return pf_usage_error("--input: kernel %s has no input '%s'", c->kernel, buf);
    pf_gen *g = &c->inputs[t];
    int nfields = 0, has_value = 0, has_exp = 0;
    for (char *save = NULL, *f = strtok_r(colon + 1, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
      nfields++;
      has_value |= strncmp(f, "value=", 6) == 0;
      has_exp |= strncmp(f, "exp=", 4) == 0;
      char *eq = strchr(f, '=');
      if (!eq || eq == f || !eq[1]) return pf_usage_error("--input %s: '%s' is not FIELD=VALUE", buf, f);
      *eq = 0;
      const char *v = eq + 1;
      double d;
      uint64_t u;
      int lo, hi, n = 0;
      if (strcmp(f, "dist") == 0) {
        if (pf_dist_parse(v, &g->dist) || g->dist == PF_DIST_VALUES)
          return pf_usage_error("--input %s: unknown dist '%s' (normal, uniform, loguniform, heavy)", buf, v);
      } else if (strcmp(f, "scale") == 0) {
        if (pf_parse_double(v, &d) || !isfinite(d) || d < 0) return pf_usage_error("--input %s: scale '%s' is not a finite number >= 0", buf, v);
        g->scale = d;
      } else if (strcmp(f, "offset") == 0) {
        if (pf_parse_double(v, &d) || !isfinite(d)) return pf_usage_error("--input %s: offset '%s' is not a finite number", buf, v);
        g->offset = d;
      } else if (strcmp(f, "exp") == 0) {
        if (sscanf(v, "%d:%d%n", &lo, &hi, &n) != 2 || v[n] || lo > hi || lo < -1100 || hi > 1100)
          return pf_usage_error("--input %s: exp '%s' is not LO:HI with -1100 <= LO <= HI <= 1100", buf, v);
        g->exp_min = lo;
        g->exp_max = hi;
      } else if (strcmp(f, "outliers") == 0) {
        if (pf_parse_u64(v, &u) || u > 1000000000) return pf_usage_error("--input %s: outliers '%s' is not a count", buf, v);
        g->outliers = (size_t)u;
      } else if (strcmp(f, "outlier_magnitude") == 0) {
        if (pf_parse_double(v, &d) || !isfinite(d) || d < 0) return pf_usage_error("--input %s: outlier_magnitude '%s' is not a finite number >= 0", buf, v);
        g->outlier_mag = d;
      } else if (strcmp(f, "special_rate") == 0) {
        if (pf_parse_double(v, &d) || !(d >= 0 && d <= 1)) return pf_usage_error("--input %s: special_rate '%s' is not in [0, 1]", buf, v);
        g->special_rate = d;
      } else if (strcmp(f, "value") == 0) {
        if (pf_parse_double(v, &d)) return pf_usage_error("--input %s: value '%s' is not a number", buf, v);
        const size_t cnt = op->input_count(c, t);
        pf_gen_free(g);
        g->dist = PF_DIST_VALUES;
        g->values = malloc((cnt ? cnt : 1) * sizeof(double));
        if (!g->values) return pf_usage_error("--input %s: out of memory", buf);
        for (size_t i = 0; i < cnt; i++) g->values[i] = d;
        g->nvalues = cnt;
      } else {
        return pf_usage_error("--input %s: unknown field '%s' (dist, scale, offset, exp, outliers, outlier_magnitude, special_rate, value, file)", buf, f);
      }
    }
    /* fields that would be ignored are refused */
    if (has_value && nfields > 1)
      return pf_usage_error("--input %s: value sets every element and takes no other field", buf);
    if (has_exp && g->dist != PF_DIST_LOGUNIFORM)
      return pf_usage_error("--input %s: exp applies to dist=loguniform only", buf);
    if (g->dist != PF_DIST_VALUES && g->outliers && !(g->outlier_mag > 0))
      return pf_usage_error("--input %s: outliers need outlier_magnitude > 0", buf);
  }
  return 0;
}

/* An --input spec as a replay line gives it: its file= path absolute (the line runs from any
 * directory). */
static void pf_input_spec_replayable(char *dst, size_t len, const char *spec) {
  const char *f = strstr(spec, "file=");
  if (!f || (f != spec && f[-1] != ':' && f[-1] != ',')) {
    snprintf(dst, len, "%s", spec);
    return;
  }
  const char *end = f + 5 + strcspn(f + 5, ",");
  char path[4096], abs[4200];
  snprintf(path, sizeof path, "%.*s", (int)(end - f - 5), f + 5);
  pf_path_absolute(abs, sizeof abs, path);
  snprintf(dst, len, "%.*s%s%s", (int)(f + 5 - spec), spec, abs, end);
}

/* The command line that reproduces one case: every path in it absolute. */
void pf_reproduce_line(const pf_case *c, const run_opts *o, uint64_t seed, char *buf, size_t len) {
  const pf_op *op = pf_case_op(c);
  char sc[40];
  pf_hexfloat(sc, o->gen.scale);
  size_t n = (size_t)snprintf(buf, len, "%s%s run -k %s -v %s -t %s -a %s --shape ", pf_self(), pf_plugins_flags(), c->kernel, c->variant,
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
    if (c->params[p] == pf_kernel_param_default(pf_case_kernel(c), p)) continue; /* what run gives it anyway */
    if (d->type == PF_PARAM_CHOICE) n += (size_t)snprintf(buf + n, len - n, " --param %s=%s", d->name, d->choices[(int)c->params[p]]);
    else if (d->type == PF_PARAM_INT) n += (size_t)snprintf(buf + n, len - n, " --param %s=%.0f", d->name, c->params[p]);
    else {
      pf_hexfloat(sc, c->params[p]);
      n += (size_t)snprintf(buf + n, len - n, " --param %s=%s", d->name, sc);
    }
  }
  if (c->fault[0] && n < len) n += (size_t)snprintf(buf + n, len - n, " --fault %s", c->fault);
  if (c->checkpoint[0] && n < len) {
    char q[2 * PF_CKPT_PATH_LEN + 8];
    pf_shell_quote(q, sizeof q, c->checkpoint);
    n += (size_t)snprintf(buf + n, len - n, " --checkpoint %s", q);
  }
  for (int k = 0; k < o->ninput_specs && n < len; k++) {
    char spec[4400], q[8900];
    pf_input_spec_replayable(spec, sizeof spec, o->input_spec[k]);
    pf_shell_quote(q, sizeof q, spec);
    n += (size_t)snprintf(buf + n, len - n, " --input %s", q);
  }
  if (o->backend == PF_BACKEND_CUDA && n < len) n += (size_t)snprintf(buf + n, len - n, " --backend cuda");
  if (o->imprecise && n < len) n += (size_t)snprintf(buf + n, len - n, " --imprecise %s", o->imprecise);
  if (o->mpfr_only && n < len) n += (size_t)snprintf(buf + n, len - n, " --oracle mpfr");
  /* the parameters it does not name at their defaults, not drawn again */
  if (pf_op_draws_params(op) && n < len) n += (size_t)snprintf(buf + n, len - n, " --at-defaults");
  if (o->steps > 1 && n < len) n += (size_t)snprintf(buf + n, len - n, " --steps %llu", (unsigned long long)o->steps);
  if (n < len) snprintf(buf + n, len - n, " --seed %llu --cases 1", (unsigned long long)seed);
}

int pf_op_draws_params(const pf_op *op) {
  for (int p = 0; p < op->nparams; p++)
    if (op->params[p].train) return 1;
  return 0;
}

/* The training draws of the parameters o leaves unset, each kept only where the variant takes it
 * (its ranges and checks, with the draws before it in place: the replay line names them all). */
static unsigned long long draw_params(const pf_kernel *k, const run_opts *o, uint64_t seed, pf_case *c) {
  const pf_op *op = k->op;
  unsigned long long drawn = 0;
  for (int p = 0; p < op->nparams && p < 64; p++) {
    if (!op->params[p].train) continue;
    int given = 0;
    for (int i = 0; i < o->nparams; i++) given |= strcmp(o->param_name[i], op->params[p].name) == 0;
    if (given) continue;
    const double keep = c->params[p];
    c->params[p] = pf_param_train_draw(&op->params[p], p, seed);
    if (c->params[p] == keep) continue;
    if (pf_case_validate(c)) c->params[p] = keep;
    else drawn |= 1ull << p;
  }
  return drawn;
}

/* The case of seed `seed` as the options say; an exit status on a bad option (c freed). */
int pf_build_case(const pf_kernel *k, const run_opts *o, uint64_t seed, pf_case *c) {
  return pf_build_case_drawn(k, o, seed, c, NULL);
}

int pf_build_case_drawn(const pf_kernel *k, const run_opts *o, uint64_t seed, pf_case *c, unsigned long long *drawn) {
  pf_status st = pf_case_init(c, k->op->name, k->variant, seed);
  if (st) return pf_usage_error("%s", pf_error_message());
  c->dtype = o->dtype;
  c->accum = o->accum;
  if (o->have_shape) memcpy(c->shape, o->shape, sizeof c->shape);
  if (o->fault) snprintf(c->fault, sizeof c->fault, "%s", o->fault);
  if (o->checkpoint && pf_case_set_checkpoint(c, o->checkpoint)) {
    const int rc = pf_usage_error("--checkpoint: %s", pf_error_message());
    pf_case_free(c);
    return rc;
  }
  for (int t = 0; t < c->ninputs; t++) {
    const uint64_t s = c->inputs[t].seed;
    c->inputs[t] = o->gen;
    c->inputs[t].seed = s;
  }
  int rc = pf_apply_params(c, o);
  if (!rc && o->draw) {
    const unsigned long long d = draw_params(k, o, seed, c);
    if (drawn) *drawn |= d;
  }
  if (!rc && o->ninput_specs && pf_case_check_size(c)) rc = pf_usage_error("%s", pf_error_message()); /* before --input fills it */
  if (!rc) rc = pf_apply_input_specs(c, o);
  if (rc) pf_case_free(c);
  return rc;
}

int pf_check_run_opts(const run_opts *o) {
  if (o->cases > 0 && o->cases - 1 > UINT64_MAX - o->seed)
    return pf_usage_error("--seed %llu with --cases %llu: the seeds would pass 2^64 - 1", (unsigned long long)o->seed,
                       (unsigned long long)o->cases);
  if (o->exp_given && o->gen.dist != PF_DIST_LOGUNIFORM)
    return pf_usage_error("--exp-range applies to --dist loguniform only (the distribution is %s)", pf_dist_name(o->gen.dist));
  if (o->outmag_given && !o->gen.outliers)
    return pf_usage_error("--outlier-magnitude applies with --outliers N only (none given)");
  if (o->gen.outliers && !(o->gen.outlier_mag > 0))
    return pf_usage_error("--outliers %zu: give their magnitude with --outlier-magnitude M > 0", o->gen.outliers);
  return 0;
}

/* The command that runs the case at x (the options, the axis set to x). */
void pf_axis_reproduce_line(const pf_case *c, const run_opts *o, const pf_axis *a, double x, uint64_t seed,
                                char *buf, size_t len) {
  run_opts r = *o;
  char specs[PF_MAX_INPUTS][256];
  char h[40];
  pf_hexfloat(h, x);
  const pf_op *op = pf_case_op(c);
  if (a->kind == PF_AXIS_SCALE && a->index < 0) r.gen.scale = x;
  if (a->kind == PF_AXIS_VALUE || a->kind == PF_AXIS_OFFSET || (a->kind == PF_AXIS_SCALE && a->index >= 0))
    for (int i = 0; i < op->ninputs && r.ninput_specs < 16; i++) {
      if (a->index >= 0 && i != a->index) continue;
      const char *field = a->kind == PF_AXIS_VALUE ? "value" : a->kind == PF_AXIS_SCALE ? "scale" : "offset";
      const size_t nl = strlen(op->input_names[i]);
      int at = -1; /* the input's own spec, which the axis's field joins (an input is given once) */
      for (int k = 0; k < r.ninput_specs; k++)
        if (strncmp(r.input_spec[k], op->input_names[i], nl) == 0 && r.input_spec[k][nl] == ':') at = k;
      if (at >= 0 && a->kind != PF_AXIS_VALUE) {
        /* its fields but the axis's, then the axis's */
        size_t w = (size_t)snprintf(specs[i], sizeof specs[i], "%s:", op->input_names[i]);
        char fields[256];
        snprintf(fields, sizeof fields, "%s", r.input_spec[at] + nl + 1);
        for (char *save = NULL, *f = strtok_r(fields, ",", &save); f && w < sizeof specs[i];
             f = strtok_r(NULL, ",", &save))
          if (strncmp(f, field, strlen(field)) != 0 || f[strlen(field)] != '=')
            w += (size_t)snprintf(specs[i] + w, sizeof specs[i] - w, "%s,", f);
        if (w < sizeof specs[i]) snprintf(specs[i] + w, sizeof specs[i] - w, "%s=%s", field, h);
      } else {
        snprintf(specs[i], sizeof specs[i], "%s:%s=%s", op->input_names[i], field, h);
      }
      if (at >= 0) r.input_spec[at] = specs[i];
      else r.input_spec[r.ninput_specs++] = specs[i];
    }
  pf_case k;
  if (pf_axis_apply(c, a, x, &k)) {
    snprintf(buf, len, "(cannot build the case: %s)", pf_error_message());
    return;
  }
  pf_reproduce_line(&k, &r, seed, buf, len);
  pf_case_free(&k);
}

void pf_run_opts_init(run_opts *o, uint64_t cases) {
  memset(o, 0, sizeof *o);
  o->dtype = PF_FP16;
  o->accum = PF_FP32;
  o->seed = 1;
  o->cases = cases;
  o->oracle_prec = 256;
  o->steps = 1;
  pf_gen_default(&o->gen);
}
