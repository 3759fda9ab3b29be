/* precfuzz boundary (core/boundary.h does the searching). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/boundary.h"
#include "cli/cli.h"
#include "core/runner.h"

/* ---- boundary: where along one parameter a variant starts to fail ------------------------ */

static void print_help_boundary(void) {
  printf(
      "usage: precfuzz boundary -k KERNEL -v VARIANT [-t DTYPE] [-a ACCUM] --along AXIS [--from X] [--to X]\n"
      "                         [--fail VERDICTS] [--cases N] [--seed N] [--points G] [--refine K]\n"
      "                         [--every] [--format FORMAT] [--backend cpu|cuda] [--json]\n"
      "                         [run's case options: --shape, --param, --input, ...]\n\n"
      "Finds where along one number of the case the variant starts to fail.\n"
      "  --along AXIS        value (every input element), value:INPUT, scale (every input's generator\n"
      "                      scale), scale:INPUT, offset (what the generator adds: the inputs' mean),\n"
      "                      offset:INPUT, param:NAME, dim:NAME\n"
      "  --from X, --to X    the range (default: value: the format's least positive value to its largest;\n"
      "                      scale and offset: 2^-30 to 2^30; param: its limits, precfuzz list; dim: 1 to the\n"
      "                      largest power of two whose case is estimated at most 0.1 s, said on stderr;\n"
      "                      with --every: the limits)\n"
      "  --fail VERDICTS     the verdicts that count as failing, comma-separated: inaccurate, underflow,\n"
      "                      overflow, nan, divergent, range, or finding (every verdict but ok and range;\n"
      "                      the default); event:overflow, event:underflow (a nonzero result rounded to\n"
      "                      zero), event:invalid: the kernel's own arithmetic raised it anywhere, whatever\n"
      "                      the verdict; saturated, stagnant, biased, imprecise, or hazard (any of\n"
      "                      them): the case has that hazard, whatever the verdict. Verdicts count in\n"
      "                      the contract's domain or not.\n"
      "  --cases N           1 (default): a threshold of one case (seed --seed): a grid of --points\n"
      "                      intervals (default 64, evenly spaced in the format's values, so logarithmic\n"
      "                      for a positive range) finds the first change, bisection narrows it to two\n"
      "                      adjacent values of the format, printed as the last good and the first bad.\n"
      "                      N > 1: the failure depends on the drawn tensors: the fraction of N cases\n"
      "                      (seeds --seed.., the same at every point) failing at each grid point, and\n"
      "                      where it first is non-zero and first reaches 50%%, each narrowed by --refine\n"
      "                      bisection steps (default 8) with the same N cases.\n"
      "  --every             every value of the range (at most 100000, one case each) instead of a\n"
      "                      search: the failing ones as runs of adjacent values, for failures at\n"
      "                      scattered values (widths, steps) that a threshold search, which finds one\n"
      "                      change, misses\n"
      "  --format FORMAT     the values stepped over: fp32, fp16, bf16, binary64, int (default: the\n"
      "                      input's dtype for values, binary64 for scales and real parameters, int\n"
      "                      for integer parameters and dimensions)\n"
      "Exit status: 0 the search ran (whether or not it found a boundary), 2 bad usage or input.\n");
}

/* "overflow", or "ok (events underflow)" when the kernel's arithmetic raised events */
/* "ok", "ok (events underflow)", "ok (hazards saturated,imprecise)": a verdict and an outcome */
static const char *verdict_events(pf_verdict v, unsigned outcome, char *buf, size_t len) {
  char e[48], h[64];
  const unsigned fe = outcome & ((1u << PF_OUTCOME_HAZARD_SHIFT) - 1), hz = outcome >> PF_OUTCOME_HAZARD_SHIFT;
  size_t n = (size_t)snprintf(buf, len, "%s", pf_verdict_name(v));
  if (fe && n < len) n += (size_t)snprintf(buf + n, len - n, " (events %s)", pf_fe_str(fe, e));
  if (hz && n < len) snprintf(buf + n, len - n, " (hazards %s)", pf_hazards_str(hz, h, sizeof h));
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


static cJSON *json_value(double x, int format) {
  if (format == PF_BFMT_INT) return cJSON_CreateNumber(x);
  char h[40];
  pf_hexfloat(h, x);
  return cJSON_CreateString(h);
}

/* dim:NAME without --to: up to the largest power of two whose case is estimated at most 0.1 s
 * (pf_case_estimate; a dimension's limit can be millions, a search there hours of silence), said
 * on stderr with how to go further. */
#define PF_DIM_DEFAULT_SECONDS 0.1
static void dim_default_top(const pf_case *t, const pf_axis *a, const char *from_arg, double lim_hi, double *hi,
                            const char *along) {
  double start = 1, secs = 0, s;
  if (from_arg && (pf_parse_double(from_arg, &start) || !(start >= 1))) start = 1;
  pf_case c = *t; /* the shape alone is read (no input is made or freed) */
  double v = 1;
  while (v < start) v *= 2;
  c.shape[a->index] = (size_t)v;
  if (pf_case_estimate(&c, &secs)) secs = 0;
  while (v * 2 <= lim_hi) {
    c.shape[a->index] = (size_t)(v * 2);
    if (pf_case_check_size(&c) || pf_case_estimate(&c, &s) || s > PF_DIM_DEFAULT_SECONDS) break;
    v *= 2, secs = s;
  }
  if (v <= start) v = fmin(lim_hi, start * 2);
  if (v >= lim_hi) return; /* the whole range is cheap: the limit stays */
  *hi = v;
  fprintf(stderr, "%s: boundary: --to not given: %s searched up to %.0f, where a case is estimated at %.2g s "
          "(its limit is %.0f: --to for more)\n", pf_prog, along, v, secs, lim_hi);
}

int pf_cmd_boundary(int argc, char **argv) {
  run_opts o;
  pf_run_opts_init(&o, 1);
  const char *shape_arg = NULL, *backend = "cpu", *along = NULL, *fail_arg = "finding", *format_arg = NULL;
  const char *from_arg = NULL, *to_arg = NULL;
  uint64_t points = 64, refine = 8;
  int every = 0;
  static const struct option longopts[] = {PF_CASE_LONGOPTS,
                                           {"along", required_argument, 0, O_ALONG},
                                           {"from", required_argument, 0, O_FROM},
                                           {"to", required_argument, 0, O_TO},
                                           {"fail", required_argument, 0, O_FAIL},
                                           {"points", required_argument, 0, O_POINTS},
                                           {"refine", required_argument, 0, O_REFINE},
                                           {"format", required_argument, 0, O_FORMAT},
                                           {"every", no_argument, 0, O_EVERY},
                                           {0, 0, 0, 0}};
  if (pf_progress_env()) return pf_usage_error("%s", pf_error_message());
  opterr = 0;
  optind = 1;
  int ch, rc;
  unsigned char seen[PF_OPT_CODES] = {0};
  while ((ch = getopt_long(argc, argv, ":k:v:t:a:h", longopts, NULL)) != -1) {
    if (pf_option_once(longopts, ch, seen)) return 2;
    if ((rc = pf_case_option(ch, optarg, &o, &shape_arg, &backend)) >= 0) {
      if (rc) return rc;
      continue;
    }
    switch (ch) {
    case O_ALONG: along = optarg; break;
    case O_FROM: from_arg = optarg; break;
    case O_TO: to_arg = optarg; break;
    case O_FAIL: fail_arg = optarg; break;
    case O_FORMAT: format_arg = optarg; break;
    case O_EVERY: every = 1; break;
    case O_POINTS:
      if (pf_parse_u64(optarg, &points) || points < 1 || points > 100000)
        return pf_usage_error("--points: '%s' is not an integer in [1, 100000]", optarg);
      break;
    case O_REFINE:
      if (pf_parse_u64(optarg, &refine) || refine > 64) return pf_usage_error("--refine: '%s' is not an integer in [0, 64]", optarg);
      break;
    case 'h': print_help_boundary(); return 0;
    case ':': return pf_usage_error("boundary: %s needs a value", argv[optind - 1]);
    default: return pf_usage_error("boundary: unknown option '%s' (see precfuzz boundary --help)", argv[optind - 1]);
    }
  }
  if (optind < argc) return pf_usage_error("boundary: unexpected argument '%s'", argv[optind]);
  if (pf_check_run_opts(&o)) return 2;
  if (!o.kernel) return pf_usage_error("boundary: -k KERNEL is required (see precfuzz list)");
  if (!o.variant) return pf_usage_error("boundary: -v VARIANT is required (see precfuzz list)");
  if (!along) return pf_usage_error("boundary: --along AXIS is required (value, value:INPUT, scale, scale:INPUT, offset, offset:INPUT, param:NAME, dim:NAME)");
  if (every && o.cases != 1) return pf_usage_error("boundary: --every runs one case per value: --cases must be 1");
  if (every && (seen[O_POINTS] || seen[O_REFINE])) return pf_usage_error("boundary: --every steps over every value: no --points or --refine");
  const pf_op *op = pf_op_find(o.kernel);
  if (!op) return pf_usage_error("-k: unknown kernel '%s' (see precfuzz list)", o.kernel);
  const pf_kernel *k = pf_kernel_find(o.kernel, o.variant);
  if (!k) return pf_usage_error("-v: unknown variant '%s' of kernel %s (see precfuzz list)", o.variant, o.kernel);
  if (shape_arg) {
    if ((rc = pf_parse_shape(shape_arg, op, o.shape))) return rc;
    o.have_shape = 1;
  }
  if ((rc = pf_backend_setup(backend, o.kernel, o.variant, &o.backend, o.device, sizeof o.device))) return rc;
  if (o.checkpoint) return pf_usage_error("boundary: --checkpoint is not an option here (a checkpoint holds one case's state, the search changes the case)");
  if (o.fault && !pf_kernel_has_fault(k, o.fault))
    return pf_usage_error("--fault: '%s' does not exist for %s/%s (see precfuzz list)", o.fault, o.kernel, o.variant);
  if (!pf_kernel_accepts(k, o.dtype, o.accum))
    return pf_usage_error("boundary: %s/%s does not take dtype %s with accumulation %s (see precfuzz list)", o.kernel,
                       o.variant, pf_dtype_name(o.dtype), pf_dtype_name(o.accum));
  pf_fail_set fail;
  if (pf_fail_set_parse(fail_arg, &fail)) return pf_usage_error("%s", pf_error_message());
  pf_case *tmpls = calloc((size_t)o.cases, sizeof *tmpls);
  if (!tmpls) return pf_usage_error("boundary: cannot hold %llu cases", (unsigned long long)o.cases);
  unsigned built = 0;
  rc = 0;
  for (; built < o.cases; built++)
    if ((rc = pf_build_case(k, &o, o.seed + built, &tmpls[built]))) break;
  pf_axis a;
  double lo = 0, hi = 0;
  if (!rc && pf_axis_parse(&tmpls[0], along, &a)) rc = pf_usage_error("%s", pf_error_message());
  if (!rc && format_arg && pf_bfmt_parse(format_arg, &a.format)) rc = pf_usage_error("--format: %s", pf_error_message());
  if (!rc && a.format != PF_BFMT_INT && (a.kind == PF_AXIS_DIM || (a.kind == PF_AXIS_PARAM && op->params[a.index].type == PF_PARAM_INT)))
    rc = pf_usage_error("--format: %s takes integers only (int)", along);
  if (!rc && a.format == PF_BFMT_INT && (a.kind == PF_AXIS_VALUE || a.kind == PF_AXIS_SCALE || a.kind == PF_AXIS_OFFSET))
    rc = pf_usage_error("--format int: %s takes floating-point values", along);
  if (!rc) {
    double lim_lo, lim_hi;
    pf_axis_limits(&tmpls[0], &a, &lim_lo, &lim_hi);
    if (a.kind == PF_AXIS_VALUE) {
      lo = a.format < PF_NDTYPES ? pf_min_subnormal((pf_dtype)a.format) : 0x1p-1074;
      hi = a.format < PF_NDTYPES ? pf_max_finite((pf_dtype)a.format) : 0x1p1023;
    } else if (a.kind == PF_AXIS_SCALE || a.kind == PF_AXIS_OFFSET) {
      lo = 0x1p-30, hi = 0x1p30;
    } else {
      lo = lim_lo, hi = lim_hi;
    }
    /* (--every steps over every value: its range is the user's, as its own limit says) */
    if (a.kind == PF_AXIS_DIM && !to_arg && !every) dim_default_top(&tmpls[0], &a, from_arg, lim_hi, &hi, along);
    if (from_arg && (pf_parse_double(from_arg, &lo) || !isfinite(lo)))
      rc = pf_usage_error("--from: '%s' is not a finite number", from_arg);
    else if (to_arg && (pf_parse_double(to_arg, &hi) || !isfinite(hi)))
      rc = pf_usage_error("--to: '%s' is not a finite number", to_arg);
    else if (a.format == PF_BFMT_INT && (lo != floor(lo) || hi != floor(hi)))
      rc = pf_usage_error("boundary: %s takes integers: --from %g --to %g", along, lo, hi);
    else if (!(lo < hi))
      rc = pf_usage_error("boundary: the range [%g, %g] is empty (--from must be below --to)", lo, hi);
    else if (lo < lim_lo || hi > lim_hi)
      rc = pf_usage_error("boundary: the range [%g, %g] leaves %s's limits [%g, %g]", lo, hi, along, lim_lo, lim_hi);
    else if (every && (__int128)pf_bfmt_ordinal(a.format, hi) - pf_bfmt_ordinal(a.format, lo) >= PF_EVERY_MAX)
      /* (a binary64 range's ordinals may differ by more than int64 holds) */
      rc = pf_usage_error("boundary: --every: the range holds more than %d values of %s (--from, --to)", PF_EVERY_MAX,
                       pf_bfmt_name(a.format));
  }
  if (rc) {
    for (unsigned i = 0; i < built; i++) pf_case_free(&tmpls[i]);
    free(tmpls);
    return rc;
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.prec = o.oracle_prec;
  oo.backend = o.backend;
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
    cJSON_AddStringToObject(j, "backend", pf_backend_name(o.backend));
    cJSON_AddStringToObject(j, "device", o.device);
  } else {
    printf("boundary %s/%s %s/%s shape %s%s%s along %s (%s), failing: %s\n", o.kernel, o.variant, pf_dtype_name(o.dtype),
           pf_dtype_name(o.accum), shape, o.fault ? " fault " : "", o.fault ? o.fault : "", axis_name,
           pf_bfmt_name(a.format), fails);
  }
  pf_status st;
  char line[1536];
  pf_progress prog; /* a line per point searched: a search may take minutes (a log hears every 30 s) */
  char label[256];
  snprintf(label, sizeof label, "boundary %s/%s %s along %s", o.kernel, o.variant, pf_dtype_name(o.dtype), axis_name);
  pf_boundary_progress_begin(&prog, label);
  if (every) {
    pf_every e;
    st = pf_boundary_every(&tmpls[0], &a, lo, hi, fail, &oo, &e);
    pf_boundary_progress_end();
    if (!st && j) {
      cJSON *je = cJSON_AddObjectToObject(j, "every");
      cJSON_AddNumberToObject(je, "values", (double)e.values);
      cJSON_AddNumberToObject(je, "failing", (double)e.failing);
      cJSON *arr = cJSON_AddArrayToObject(je, "runs");
      for (size_t i = 0; i < e.nruns; i++) {
        cJSON *q = cJSON_CreateObject();
        char ev[48];
        cJSON_AddItemToObject(q, "lo", json_value(e.runs[i].lo, a.format));
        cJSON_AddItemToObject(q, "hi", json_value(e.runs[i].hi, a.format));
        cJSON_AddStringToObject(q, "verdict", pf_verdict_name(e.runs[i].v));
        cJSON_AddStringToObject(q, "events", pf_fe_str(e.runs[i].outcome, ev));
        pf_axis_reproduce_line(&tmpls[0], &o, &a, e.runs[i].lo, o.seed, line, sizeof line);
        cJSON_AddStringToObject(q, "replay", line);
        cJSON_AddItemToArray(arr, q);
      }
    } else if (!st) {
      fmt_value(lo_s, sizeof lo_s, a.format, lo);
      fmt_value(hi_s, sizeof hi_s, a.format, hi);
      printf("  every value %s .. %s: %zu of %zu fail, in %zu run%s\n", lo_s, hi_s, e.failing, e.values, e.nruns,
             e.nruns == 1 ? "" : "s");
      for (size_t i = 0; i < e.nruns; i++) {
        char r_lo[80], r_hi[80], ve[96];
        fmt_value(r_lo, sizeof r_lo, a.format, e.runs[i].lo);
        fmt_value(r_hi, sizeof r_hi, a.format, e.runs[i].hi);
        if (e.runs[i].lo == e.runs[i].hi) printf("  %s: %s\n", r_lo, verdict_events(e.runs[i].v, e.runs[i].outcome, ve, sizeof ve));
        else printf("  %s .. %s: %s at %s\n", r_lo, r_hi, verdict_events(e.runs[i].v, e.runs[i].outcome, ve, sizeof ve), r_lo);
      }
      if (e.nruns) {
        pf_axis_reproduce_line(&tmpls[0], &o, &a, e.runs[0].lo, o.seed, line, sizeof line);
        printf("  replay the first failing one: %s\n", line);
      }
    }
    pf_every_free(&e);
  } else if (o.cases == 1) {
    pf_threshold t;
    st = pf_boundary_threshold(&tmpls[0], &a, lo, hi, fail, (int)points, &oo, &t);
    pf_boundary_progress_end();
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
          pf_axis_reproduce_line(&tmpls[0], &o, &a, bad, o.seed, line, sizeof line);
          cJSON_AddStringToObject(jt, "replay_first_bad", line);
          pf_axis_reproduce_line(&tmpls[0], &o, &a, good, o.seed, line, sizeof line);
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
          pf_axis_reproduce_line(&tmpls[0], &o, &a, bad, o.seed, line, sizeof line);
          printf("  replay the failing one: %s\n", line);
          pf_axis_reproduce_line(&tmpls[0], &o, &a, good, o.seed, line, sizeof line);
          printf("  replay the passing one: %s\n", line);
          if (t.changes > 1)
            printf("  note: the verdict changes %d times on the grid (not monotone): the first change is reported\n", t.changes);
        }
      }
    }
  } else {
    pf_probability p;
    st = pf_boundary_probability(tmpls, (unsigned)o.cases, &a, lo, hi, fail, (int)points, (int)refine, &oo, &p);
    pf_boundary_progress_end();
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
    return pf_usage_error("boundary: %s", pf_error_message());
  }
  if (j) {
    char *s = cJSON_Print(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
  }
  return 0;
}
