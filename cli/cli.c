#define _XOPEN_SOURCE 700 /* realpath */
/* What precfuzz's commands share (cli.h). */
#include "cli/cli.h"
#include "core/parallel.h"
#include "core/backend.h"
#include "core/boundary.h"
#include "core/plugin.h"
#include "core/tensorfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options run and boundary share (a case's kernel, settings and inputs). */

/* Returns 0 when handled, an exit status on a bad value, -1 when ch is not a shared option. */
int pf_case_option(int ch, char *arg, run_opts *o, const char **shape_arg, const char **backend) {
  int rc;
  uint64_t u;
  switch (ch) {
    case 'k': o->kernel = arg; break;
    case 'v': o->variant = arg; break;
    case 't':
      if (pf_dtype_parse(arg, &o->dtype)) return pf_usage_error("-t: unknown dtype '%s' (fp32, fp16, bf16)", arg);
      o->have_dtype = 1;
      break;
    case 'a':
      if (pf_dtype_parse(arg, &o->accum)) return pf_usage_error("-a: unknown accumulation dtype '%s' (fp32, fp16, bf16)", arg);
      break;
    case O_SHAPE: *shape_arg = arg; break;
    case O_SCALE:
      if ((rc = pf_parse_real("--scale", arg, 0, 0x1p1000, &o->gen.scale))) return rc;
      break;
    case O_DIST:
      if (pf_dist_parse(arg, &o->gen.dist) || o->gen.dist == PF_DIST_VALUES)
        return pf_usage_error("--dist: unknown distribution '%s' (normal, uniform, loguniform, heavy)", arg);
      break;
    case O_SEED:
      if (pf_parse_u64(arg, &o->seed)) return pf_usage_error("--seed: '%s' is not an unsigned 64-bit integer", arg);
      break;
    case O_CASES:
      if (pf_parse_u64(arg, &o->cases) || o->cases < 1 || o->cases > 1000000000)
        return pf_usage_error("--cases: '%s' is not an integer in [1, 1000000000]", arg);
      o->cases_given = 1;
      break;
    case O_FAULT: o->fault = arg; break;
    case O_CHECKPOINT: o->checkpoint = arg; break;
    case O_BACKEND: *backend = arg; break;
    case O_JSON: o->json = 1; break;
    case O_PARAM: {
      char *eq = strchr(arg, '=');
      if (!eq || eq == arg || !eq[1]) return pf_usage_error("--param: '%s' is not NAME=VALUE", arg);
      if (o->nparams == PF_MAX_PARAMS) return pf_usage_error("--param: more than %d parameters", PF_MAX_PARAMS);
      *eq = 0;
      for (int i = 0; i < o->nparams; i++)
        if (strcmp(o->param_name[i], arg) == 0) return pf_usage_error("--param %s given twice: give each parameter once", arg);
      o->param_name[o->nparams] = arg;
      o->param_value[o->nparams++] = eq + 1;
      break;
    }
    case O_OUTLIERS:
      if (pf_parse_u64(arg, &u) || u > 1000000000) return pf_usage_error("--outliers: '%s' is not a count", arg);
      o->gen.outliers = (size_t)u;
      break;
    case O_OUTMAG:
      if ((rc = pf_parse_real("--outlier-magnitude", arg, 0, 0x1p1000, &o->gen.outlier_mag))) return rc;
      o->outmag_given = 1;
      break;
    case O_SPECIAL:
      if ((rc = pf_parse_real("--special-rate", arg, 0, 1, &o->gen.special_rate))) return rc;
      break;
    case O_EXPRANGE: {
      int lo, hi, n = 0;
      if (sscanf(arg, "%d:%d%n", &lo, &hi, &n) != 2 || arg[n] || lo > hi || lo < -1100 || hi > 1100)
        return pf_usage_error("--exp-range: '%s' is not LO:HI with -1100 <= LO <= HI <= 1100", arg);
      o->gen.exp_min = lo;
      o->gen.exp_max = hi;
      o->exp_given = 1;
      break;
    }
    case O_PREC:
      if (pf_parse_u64(arg, &u) || u < 64 || u > 16384) return pf_usage_error("--oracle-prec: '%s' is not in [64, 16384]", arg);
      o->oracle_prec = (long)u;
      break;
    case O_IMPRECISE: { /* the thresholds of every case this process judges */
      pf_hazard_limits l;
      pf_hazard_limits_default(&l);
      if (pf_hazard_limits_parse(arg, &l)) return pf_usage_error("%s", pf_error_message());
      pf_hazard_limits_set_default(&l);
      o->imprecise = arg;
      break;
    }
    case O_ORACLE: /* the oracle of every case this process judges */
      if (strcmp(arg, "fast") && strcmp(arg, "mpfr")) return pf_usage_error("--oracle: '%s' is not fast or mpfr", arg);
      o->mpfr_only = strcmp(arg, "mpfr") == 0;
      pf_oracle_set_mpfr_only(o->mpfr_only);
      break;
    case O_THREADS: /* how, not what: no part of the reproduce line */
      return pf_parse_threads(arg);
    case O_MAXSECS: { /* a guard, not part of the case */
      double v;
      if (pf_parse_double(arg, &v) || !(v > 0) || !isfinite(v))
        return pf_usage_error("--max-case-seconds: '%s' is not a number of seconds > 0", arg);
      pf_case_set_time_limit(v);
      break;
    }
    case O_INPUT:
      if (o->ninput_specs == 16) return pf_usage_error("--input: more than 16 given");
      for (int i = 0; i < o->ninput_specs; i++) { /* NAME:... : each input once */
        const size_t a = strcspn(arg, ":"), b = strcspn(o->input_spec[i], ":");
        if (a == b && strncmp(arg, o->input_spec[i], a) == 0)
          return pf_usage_error("--input %.*s given twice: give each input once", (int)(a < 64 ? a : 64), arg);
      }
      o->input_spec[o->ninput_specs++] = arg;
      break;
  default: return -1;
  }
  return 0;
}
int pf_option_once(const struct option *longopts, int ch, unsigned char *seen) {
  if (ch < 0 || ch >= PF_OPT_CODES || ch == 'h' || ch == ':' || ch == '?' || ch == O_PARAM || ch == O_INPUT) return 0;
  if (!seen[ch]++) return 0;
  const char *name = NULL;
  for (const struct option *lo = longopts; lo->name; lo++)
    if (lo->val == ch) name = lo->name;
  if (ch < 256 && name) return pf_usage_error("-%c (--%s) given twice: give each option once", ch, name);
  if (name) return pf_usage_error("--%s given twice: give each option once", name);
  return pf_usage_error("-%c given twice: give each option once", ch);
}

int pf_parse_threads(const char *arg) {
  uint64_t u;
  if (pf_parse_u64(arg, &u) || u > PF_MAX_THREADS)
    return pf_usage_error("--threads: '%s' is not an integer in [0, %d] (0: one per processor)", arg, PF_MAX_THREADS);
  pf_parallel_set_threads((int)u);
  return 0;
}
int pf_backend_setup(const char *backend, const char *kernel, const char *variant, int *out, char *device, size_t len) {
  if (device && len) device[0] = 0;
  if (pf_backend_parse(backend, out)) return pf_usage_error("%s", pf_error_message());
  pf_case_time_counts_emulation(*out != PF_BACKEND_CUDA); /* a GPU's run costs next to nothing */
  if (*out != PF_BACKEND_CUDA) {
    if (device) snprintf(device, len, "none: the CPU emulation");
    return 0;
  }
  /* what the kernel can do first (no device needed), then the device */
  int any = 0;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, kernel) != 0 || (variant && strcmp(k->variant, variant) != 0)) continue;
    if (k->run_cuda) any = 1;
    else if (variant)
      return pf_usage_error("--backend cuda: %s/%s has no CUDA implementation%s", kernel, variant, pf_cuda_missing_hint());
  }
  if (!any) return pf_usage_error("--backend cuda: no variant of %s has a CUDA implementation%s", kernel, pf_cuda_missing_hint());
  char d[256];
  if (pf_cuda_describe(d, sizeof d)) return pf_usage_error("%s", pf_error_message());
  if (device) snprintf(device, len, "%s", d);
  return 0;
}
