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
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/boundary.h"
#include "core/case.h"
#include "core/checkpoint.h"
#include "core/interrupt.h"
#include "cli/cli.h"
#include "cli/minimize_cmd.h"
#include "cli/minimize.h"
#include "cli/sweep_cmd.h"
#include "core/plugin.h"
#include "core/progress.h"
#include "core/runner.h"
#include "core/tensorfile.h"
#include "core/trajectory.h"
#include "core/xml.h"
#include "core/kernel.h"

int pf_cmd_boundary(int argc, char **argv);
int pf_cmd_diff_backend(int argc, char **argv);
int pf_cmd_diff_variant(int argc, char **argv);

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
  if (pf_plugin_of(k)) cJSON_AddStringToObject(o, "library", pf_plugin_of(k));
  if (k->like) cJSON_AddStringToObject(o, "like", k->like);
  cJSON_AddBoolToObject(o, "cuda", k->run_cuda != NULL);
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
  cJSON *in = cJSON_AddArrayToObject(o, "inputs"); /* the input tensors' names, as a case and a kernel process name them */
  for (int i = 0; i < k->op->ninputs; i++) cJSON_AddItemToArray(in, cJSON_CreateString(k->op->input_names[i]));
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
    if (d->train) cJSON_AddStringToObject(x, "drawn_from", d->train); /* run draws it per case (--at-defaults: not) */
    cJSON_AddItemToArray(ps, x);
  }
  cJSON *fs = cJSON_AddArrayToObject(o, "faults");
  for (int i = 0; k->faults && k->faults[i]; i++) cJSON_AddItemToArray(fs, cJSON_CreateString(k->faults[i]));
  /* what a fault's runs need to show it (the sweep's fault table uses the same) */
  const pf_fault_setting *set = k->op->sweep ? k->op->sweep->fault_settings : NULL;
  cJSON *fset = NULL;
  for (int i = 0; k->faults && k->faults[i]; i++)
    for (const pf_fault_setting *x = set; x && x->fault; x++) {
      if (strcmp(x->fault, k->faults[i]) != 0) continue;
      if (!fset) fset = cJSON_AddObjectToObject(o, "fault_settings");
      cJSON *e = cJSON_AddObjectToObject(fset, x->fault);
      if (x->dtype) cJSON_AddStringToObject(e, "dtype", x->dtype);
      cJSON *pa = cJSON_AddArrayToObject(e, "params");
      for (int j = 0; j < 4 && x->params[j]; j++) cJSON_AddItemToArray(pa, cJSON_CreateString(x->params[j]));
    }
  cJSON_AddStringToObject(o, "contract", k->contract);
  return o;
}

/* The NULL-terminated names joined by sep, in a buffer of their size (malloc; "" for none or
 * NULL): a variant may honour any number of faults, a parameter have any number of choices. */
static char *pf_list_join(const char *const *names, const char *sep) {
  size_t len = 1;
  for (int i = 0; names && names[i]; i++) len += strlen(names[i]) + strlen(sep);
  char *out = malloc(len);
  if (!out) return NULL;
  out[0] = 0;
  for (int i = 0; names && names[i]; i++) {
    if (i) strcat(out, sep);
    strcat(out, names[i]);
  }
  return out;
}

static int cmd_list(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { print_help_list(); return 0; }
    else return pf_usage_error("list: unknown argument '%s' (see precfuzz list --help)", argv[i]);
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
  printf("%-10s %-13s %-15s %-13s %-5s %-32s %s\n", "kernel", "variant", "dtypes", "accum", "cuda", "faults", "what");
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    char dts[64] = "", acs[64] = "";
    for (int t = 0; t < PF_NDTYPES; t++)
      if (k->dtypes & PF_DT(t)) { strcat(dts, dts[0] ? "," : ""); strcat(dts, pf_dtype_name((pf_dtype)t)); }
    for (int t = 0; t < PF_NDTYPES; t++)
      if (k->accums & PF_DT(t)) { strcat(acs, acs[0] ? "," : ""); strcat(acs, pf_dtype_name((pf_dtype)t)); }
    if (k->accums & PF_ACCUM_STORAGE) strcat(acs, acs[0] ? ",storage" : "storage");
    char *fs = pf_list_join(k->faults, ",");
    if (!fs) return pf_usage_error("list: out of memory");
    const char *lib = pf_plugin_of(k);
    char like[96] = "";
    if (k->like) snprintf(like, sizeof like, " (contract of %s)", k->like);
    printf("%-10s %-13s %-15s %-13s %-5s %-32s %s%s%s%s%s\n", k->op->name, k->variant, dts, acs, k->run_cuda ? "yes" : "-",
           fs[0] ? fs : "-", k->summary, like, lib ? " [from " : "", lib ? lib : "", lib ? "]" : "");
    free(fs);
  }
  printf("\nparameters (--param NAME=VALUE; run draws those with training values per case unless given, or with\n"
         "--at-defaults):\n");
  for (size_t i = 0; i < pf_op_count(); i++) {
    const pf_op *op = pf_op_at(i);
    for (int p = 0; p < op->nparams; p++) {
      const pf_param_desc *d = &op->params[p];
      if (d->type == PF_PARAM_CHOICE) {
        char *ch = pf_list_join(d->choices, "|");
        if (!ch) return pf_usage_error("list: out of memory");
        printf("  %s %-10s %s (default %s): %s", op->name, d->name, ch, d->choices[(int)d->def], d->help);
        free(ch);
      } else {
        printf("  %s %-10s [%g, %g] (default %g): %s", op->name, d->name, d->min, d->max, d->def, d->help);
      }
      printf(d->train ? "; run draws it from %s\n" : "\n", d->train);
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
      "                    [--input NAME:FIELD=VALUE,...]... [--json] [--save-findings DIR] [--max-print N]\n"
      "                    [--sarif FILE] [--junit FILE] [--at-defaults]\n"
      "                    [--checkpoint DIR | --save-checkpoint DIR]\n\n"
      "Runs N cases (seeds N, N+1, ...) of one kernel variant (every variant when -v is not given)\n"
      "against the MPFR oracle and prints each finding with the command that replays it.\n\n"
      "  -k, --kernel KERNEL      operation (precfuzz list)\n"
      "  -v, --variant VARIANT    variant; default: all variants of KERNEL\n"
      "  -t, --dtype DTYPE        storage dtype: fp32, fp16, bf16 (default fp16)\n"
      "  -a, --accum ACCUM        accumulation dtype: fp32 or the storage dtype (default fp32)\n"
      "      --shape RxC          shape (default: the kernel's: precfuzz list)\n"
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
      "      --steps N            each case a trajectory of N steps, the kernel's state carried from step\n"
      "                           to step beside the exact trajectory (adam): a step that breaks its\n"
      "                           contract is a finding, what the steps lose (stagnant, biased) a hazard\n"
      "      --at-defaults        every parameter not given at its default; without it each case draws\n"
      "                           the ones with training values (precfuzz list: \"run draws it from\")\n"
      "                           from them where the variant takes the value; its lines name them\n"
      "      --backend cpu|cuda   where the kernel runs (default cpu)\n"
      "      --oracle-prec BITS   starting MPFR precision (default 256; raised when needed)\n"
      "      --json               results as JSON, with per-element outputs and exact values\n"
      "      --save-findings DIR  write every finding as a case file (replay with precfuzz replay)\n"
      "      --junit FILE         every case as a JUnit test case, a suite per variant (a finding is a\n"
      "                           failure of its verdict, with its replay line; hazards in system-err)\n"
      "      --sarif FILE         findings and hazards as SARIF 2.1.0 for a code-scanning CI (rule: the\n"
      "                           verdict or hazard; location: the kernel variant; the replay line;\n"
      "                           $PRECFUZZ_DOCS_URL, the address of docs/, gives the rules a helpUri)\n"
      "      --tensors npy|safetensors  with --save-findings: also the finding's inputs, output and\n"
      "                           correctly rounded result as tensor files the case names\n"
      "      --input NAME:F=V,... one input's generator differently: F is dist, scale, offset (added\n"
      "                           after scaling), exp (LO:HI), outliers, outlier_magnitude, special_rate,\n"
      "                           or value (every element = V), e.g. --input g:scale=0x1p-20 --input\n"
      "                           m:value=0, x:offset=1000,scale=0.5; or a tensor\n"
      "                           file: x:file=logits.npy, x:file=ckpt.safetensors,tensor=NAME (fp32,\n"
      "                           fp16, bf16); -t and --shape then default to the file's, --cases to 1\n"
      "      --checkpoint DIR     tp_diff with resume_at=K or reshard_at=K: load DIR, a checkpoint the\n"
      "                           user's code wrote after step K, instead of the run's own save, and judge\n"
      "                           it against the case run straight (docs/checkpoint.md)\n"
      "      --save-case FILE     with --cases 1 and -v: the case written as a case file (replay, judge)\n"
      "      --save-checkpoint DIR  with --cases 1 and -v: keep what the case's round trip saves in DIR\n"
      "                           (which must not exist), a subdirectory per saving layout (tp2-dp1)\n"
      "      --max-print N        finding and hazard lines printed per variant (default 10)\n"
      "      --oracle fast|mpfr   fast (default): a certified fast path where the operation has one\n"
      "                           (all but the trajectories), MPFR where it cannot decide; mpfr: MPFR\n"
      "                           alone, the reference\n"
      "      --threads N          threads judging one large case (default 0: one per processor; cases\n"
      "                           of a few milliseconds run on one); the results do not depend on it\n"
      "      --max-case-seconds S refuse a case whose judging is estimated (from its shape, on one\n"
      "                           processor) at more than S seconds (default 3600)\n"
      "      --imprecise DTYPE=X,... the imprecise hazard's thresholds (relative error, as each stage\n"
      "                           measures it), e.g. fp16=0x1p-6; defaults fp32 2^-10, fp16 2^-7, bf16 2^-4\n\n"
      "On a terminal a long run shows its progress and an estimate of the time left on stderr\n"
      "(PRECFUZZ_PROGRESS=1: anywhere, 0: never); Ctrl-C stops it after the case at hand with the\n"
      "summary of the cases judged (exit 130).\n\n"
      "Besides each case's verdict (did the kernel keep its contract?) run reports its hazards\n"
      "(HAZARD lines: saturated, stagnant, biased, imprecise: a result useless for training,\n"
      "contract kept or not) and where torch.testing.assert_close's default tolerance disagrees.\n"
      "With more than one case it also prints the rounding-bias test over all the cases' units\n"
      "at once, stage by stage (mean signed error in ulps and its t statistic, upward and away\n"
      "from zero): a bias too small for one case, summed over many steps.\n"
      "Exit status: 0 no finding (hazards do not change it), 1 findings, 2 bad usage or input.\n");
}

/* A finding's tensors beside its case file (base, without extension): every input, the
 * kernel's outputs and the correctly rounded exact result, per stage in its dtype and shape
 * ("output" and "expected" for an operation of one stage, else "<stage>" and
 * "expected.<stage>"; stages of several dtypes are left out), as .npy files or one
 * safetensors file; the case then names its inputs' files. */
static pf_status save_finding_tensors(pf_case *k, const pf_run *r, const char *base, const char *format) {
  const pf_op *op = r->kernel->op;
  size_t shapes[PF_MAX_INPUTS + 2 * PF_MAX_STAGES][PF_MAX_DIMS];
  pf_tensor_view v[PF_MAX_INPUTS + 2 * PF_MAX_STAGES];
  char names[PF_MAX_STAGES][80];
  int nv = 0;
  for (int t = 0; t < r->ninputs; t++, nv++)
    v[nv] = (pf_tensor_view){op->input_names[t], r->in[t].dtype, pf_input_shape(k, t, r->in[t].n, shapes[nv]), shapes[nv],
                             r->in[t].data};
  pf_stage stg[PF_MAX_STAGES];
  const int ns = pf_case_stages(k, stg);
  for (int s = 0; s < ns; s++) {
    const pf_dtype dt = pf_stage_dtype(k, &stg[s]);
    if (dt == PF_NDTYPES) continue;
    const int nd = pf_stage_shape(k, &stg[s], shapes[nv]);
    memcpy(shapes[nv + 1], shapes[nv], sizeof shapes[nv]);
    snprintf(names[s], sizeof names[s], "expected.%s", stg[s].name);
    v[nv] = (pf_tensor_view){op->stages ? stg[s].name : "output", dt, nd, shapes[nv], r->out + stg[s].offset};
    v[nv + 1] = (pf_tensor_view){op->stages ? names[s] : "expected", dt, nd, shapes[nv + 1], r->oracle.rounded + stg[s].offset};
    nv += 2;
  }
  const char *slash = strrchr(base, '/');
  const char *file = slash ? slash + 1 : base;
  char path[1200], rel[1200];
  pf_status st = PF_OK;
  if (strcmp(format, "safetensors") == 0) {
    snprintf(path, sizeof path, "%s.safetensors", base);
    snprintf(rel, sizeof rel, "%s.safetensors", file);
    st = pf_safetensors_write(path, v, (size_t)nv);
  }
  for (int t = 0; t < nv && !st; t++) {
    if (strcmp(format, "npy") == 0) {
      snprintf(path, sizeof path, "%s.%s.npy", base, v[t].name);
      snprintf(rel, sizeof rel, "%s.%s.npy", file, v[t].name);
      st = pf_npy_write(path, &v[t]);
    }
    if (st || t >= r->ninputs) continue;
    /* the case names the file it was written to, relative to itself */
    pf_gen *g = &k->inputs[t];
    pf_gen_free(g);
    pf_gen_default(g);
    pf_tensorfile f;
    if ((st = pf_tensorfile_read(path, strcmp(format, "npy") ? v[t].name : NULL, &f))) break;
    st = pf_gen_set_file(g, &f, rel, strcmp(format, "npy") ? v[t].name : NULL);
    pf_tensorfile_free(&f);
  }
  return st;
}

static int pf_save_failed; /* a finding could not be saved: the run ends with exit 2 */

static int save_finding(const pf_case *c, const pf_run *r, const run_opts *o, uint64_t seed, char *path, size_t len) {
  if (pf_save_failed) return -1; /* said once: the run stops after the case at hand */
  pf_case k;
  if (pf_case_copy(&k, c)) return -1;
  snprintf(k.expect, sizeof k.expect, "%s", pf_verdict_name(r->cmp.verdict));
  snprintf(path, len, "%s/%s-%s-%s-%s-seed%llu-%s", o->save_dir, c->kernel, c->variant, pf_dtype_name(c->dtype),
           pf_dtype_name(c->accum), (unsigned long long)seed, pf_verdict_name(r->cmp.verdict));
  pf_status st = o->tensors ? save_finding_tensors(&k, r, path, o->tensors) : PF_OK;
  const size_t used = strlen(path);
  snprintf(path + used, len - used, ".json");
  if (!st) st = pf_case_save(&k, path);
  pf_case_free(&k);
  if (st) fprintf(stderr, "%s: --save-findings: %s\n", pf_prog, pf_error_message()), pf_save_failed = 1;
  return st ? -1 : 0;
}

/* One line per hazard of the run: "  saturated: row 0: ..." */
static void print_hazards(const pf_run *r) {
  for (int h = 0; h < PF_NHAZARDS; h++)
    if (r->hazards & (1u << h)) printf("  %s: %s\n", pf_hazard_name((pf_hazard)h), r->hazard_note[h]);
}

/* run --json: the results stream out case by case (memory does not grow with --cases): the
 * object's head before the first case, each case as it is judged, the tail at the end. */
typedef struct {
  const run_opts *o;
  size_t n; /* cases written */
} run_json;

static void run_json_head(const run_json *js) {
  cJSON *h = cJSON_CreateObject();
  cJSON_AddStringToObject(h, "precfuzz", PF_VERSION);
  cJSON_AddStringToObject(h, "backend", pf_backend_name(js->o->backend));
  cJSON_AddStringToObject(h, "device", js->o->device);
  char *s = cJSON_PrintUnformatted(h);
  const size_t len = strlen(s);
  printf("%.*s,\"cases\":[\n", (int)(len - 1), s); /* the head's fields, then the cases' array */
  free(s);
  cJSON_Delete(h);
}

static void run_json_case(run_json *js, cJSON *jr) {
  if (js->n == 0) run_json_head(js);
  char *s = cJSON_Print(jr);
  printf("%s%s", js->n ? ",\n" : "", s);
  free(s);
  cJSON_Delete(jr);
  js->n++;
}

static void run_json_tail(run_json *js, int any_finding) {
  if (js->n == 0) run_json_head(js);
  printf("\n],\"findings\":%s%s}\n", any_finding ? "true" : "false", pf_interrupted() ? ",\"interrupted\":true" : "");
}

/* run --sarif FILE: findings and hazards as SARIF 2.1.0 (what code-scanning CIs show): a rule
 * per verdict and hazard (its helpUri the page that explains it), a result per case that has
 * one, at the kernel variant (a logical location) and at a file (a physical location, which
 * GitHub's code scanning requires: sarif_file), its message the finding and the command that
 * replays it. */
static const char *const pf_sarif_text[PF_NVERDICTS] = {
    [PF_V_INACCURATE] = "a result beyond the contract's error bound",
    [PF_V_UNDERFLOW] = "a result lost to zero or the subnormals",
    [PF_V_OVERFLOW] = "a result that overflowed (inf, or NaN caused by an overflow)",
    [PF_V_NAN] = "NaN where the exact result is a number",
    [PF_V_DIVERGENT] = "a trajectory or differential run that diverged from the legitimate set",
    [PF_V_FAILED] = "the kernel gave no outputs to judge (crashed, hung, broke the protocol)"};

/* The file a result is at: a built-in kernel's source (kernels/<op>/<op>_cpu.c), a plugin's
 * library, a kernel process's script (the last word of its command that names a file), else the
 * saved case file ("" when none): relative to the working directory when under it (a CI runs
 * from the repository's root), else absolute. */
static void sarif_file(const pf_case *c, const char *saved, char *out, size_t len) {
  const pf_kernel *k = pf_case_kernel(c);
  const char *spec = k ? pf_plugin_of(k) : NULL;
  char path[4096] = "", abs[4200], cwd[4096];
  if (!spec) {
    snprintf(path, sizeof path, "kernels/%s/%s_cpu.c", c->kernel, c->kernel);
  } else if (strncmp(spec, "exec:", 5) != 0 && strncmp(spec, "ranks:", 6) != 0) {
    snprintf(path, sizeof path, "%s", spec);
  } else {
    const char *cmd = strchr(spec, ':') + 1;
    if (spec[0] == 'r' && strchr(cmd, ':')) cmd = strchr(cmd, ':') + 1;
    char words[4096];
    snprintf(words, sizeof words, "%s", cmd);
    struct stat st;
    for (char *save = NULL, *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
      if (stat(w, &st) == 0 && S_ISREG(st.st_mode)) snprintf(path, sizeof path, "%s", w);
  }
  if (!path[0] && saved && saved[0]) snprintf(path, sizeof path, "%s", saved);
  if (!path[0]) {
    out[0] = 0;
    return;
  }
  pf_path_absolute(abs, sizeof abs, path);
  const size_t n = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
  if (n && strncmp(abs, cwd, n) == 0 && abs[n] == '/') snprintf(out, len, "%s", abs + n + 1);
  else snprintf(out, len, "file://%s", abs);
}

static void sarif_add(cJSON *results, const char *rule, const char *level, const pf_case *c, uint64_t seed,
                      const char *text, const char *replay, const char *saved) {
  cJSON *r = cJSON_CreateObject(), *msg = cJSON_CreateObject(), *locs = cJSON_CreateArray(),
        *loc = cJSON_CreateObject(), *ll = cJSON_CreateArray(), *l = cJSON_CreateObject(),
        *fp = cJSON_CreateObject();
  char file[4300];
  sarif_file(c, saved, file, sizeof file);
  if (file[0]) {
    cJSON *phys = cJSON_CreateObject(), *art = cJSON_CreateObject();
    cJSON_AddStringToObject(art, "uri", file);
    cJSON_AddItemToObject(phys, "artifactLocation", art);
    cJSON_AddItemToObject(loc, "physicalLocation", phys);
  }
  char name[2 * PF_NAME_LEN + 2], buf[3072], key[512];
  snprintf(name, sizeof name, "%s/%s", c->kernel, c->variant);
  snprintf(buf, sizeof buf, "%s %s/%s seed %llu: %s. Reproduce with: %s", name, pf_dtype_name(c->dtype),
           pf_dtype_name(c->accum), (unsigned long long)seed, text, replay);
  snprintf(key, sizeof key, "%s %s/%s %s", name, pf_dtype_name(c->dtype), pf_dtype_name(c->accum), rule);
  cJSON_AddStringToObject(r, "ruleId", rule);
  cJSON_AddStringToObject(r, "level", level);
  cJSON_AddStringToObject(msg, "text", buf);
  cJSON_AddItemToObject(r, "message", msg);
  cJSON_AddStringToObject(l, "fullyQualifiedName", name);
  cJSON_AddStringToObject(l, "kind", "function");
  cJSON_AddItemToArray(ll, l);
  cJSON_AddItemToObject(loc, "logicalLocations", ll);
  cJSON_AddItemToArray(locs, loc);
  cJSON_AddItemToObject(r, "locations", locs);
  cJSON_AddStringToObject(fp, "precfuzz/v1", key); /* one alert per variant, dtypes and rule */
  cJSON_AddItemToObject(r, "partialFingerprints", fp);
  cJSON_AddItemToArray(results, r);
}

/* $PRECFUZZ_DOCS_URL, where a CI publishes precfuzz's docs/ (e.g. the repository's blob URL of
 * docs/ at the commit): the rules' helpUri then links the page that explains them. NULL when
 * unset, "" when it is no http(s) URL (refused before the run). precfuzz has no address of its
 * own to default to, so without it the rules carry their help text only. */
static const char *sarif_docs_url(void) {
  const char *u = getenv("PRECFUZZ_DOCS_URL");
  if (!u || !u[0]) return NULL;
  if ((strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0) || strpbrk(u, " \t\n\"<>"))
    return "";
  return u;
}

/* A rule's help, the text code-scanning UIs show beside an alert, and its page (anchor: a
 * heading of docs/verdicts.md) where the docs' address is known. */
static void sarif_help(cJSON *rule, const char *text, const char *anchor) {
  cJSON *h = cJSON_CreateObject();
  cJSON_AddStringToObject(h, "text", text);
  cJSON_AddItemToObject(rule, "help", h);
  const char *base = sarif_docs_url();
  if (base && base[0]) {
    char uri[2048];
    const size_t n = strlen(base);
    snprintf(uri, sizeof uri, "%s%sverdicts.md#%s", base, n && base[n - 1] == '/' ? "" : "/", anchor);
    cJSON_AddStringToObject(rule, "helpUri", uri);
  }
}

/* The SARIF file around the results gathered: written whole, or exit 2 */
static int sarif_write(const char *path, cJSON *results) {
  cJSON *root = cJSON_CreateObject(), *runs = cJSON_CreateArray(), *run = cJSON_CreateObject(),
        *tool = cJSON_CreateObject(), *drv = cJSON_CreateObject(), *rules = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "$schema", "https://json.schemastore.org/sarif-2.1.0.json");
  cJSON_AddStringToObject(root, "version", "2.1.0");
  cJSON_AddStringToObject(drv, "name", "precfuzz");
  cJSON_AddStringToObject(drv, "version", PF_VERSION);
  for (int v = 0; v < PF_NVERDICTS; v++) {
    if (!pf_verdict_is_finding((pf_verdict)v)) continue;
    cJSON *ru = cJSON_CreateObject(), *sd = cJSON_CreateObject();
    cJSON_AddStringToObject(ru, "id", pf_verdict_name((pf_verdict)v));
    cJSON_AddStringToObject(sd, "text", pf_sarif_text[v] ? pf_sarif_text[v] : pf_verdict_name((pf_verdict)v));
    cJSON_AddItemToObject(ru, "shortDescription", sd);
    sarif_help(ru, "A finding: the kernel broke its contract (a bug). The result's message says where, by how many "
                   "ulps against the bound, and the command that replays the case; precfuzz's docs/verdicts.md "
                   "defines each verdict.", "what-the-verdicts-mean");
    cJSON_AddItemToArray(rules, ru);
  }
  for (int h = 0; h < PF_NHAZARDS; h++) {
    cJSON *ru = cJSON_CreateObject(), *sd = cJSON_CreateObject();
    cJSON_AddStringToObject(ru, "id", pf_hazard_name((pf_hazard)h));
    cJSON_AddStringToObject(sd, "text", "a hazard: a result the contract allows that training cannot use");
    cJSON_AddItemToObject(ru, "shortDescription", sd);
    sarif_help(ru, "A hazard: the kernel kept its contract, but the result is one a training run should not get "
                   "(an accumulation that stopped absorbing its terms, state that cannot move, a biased rounding, an "
                   "error beyond the dtype's usability threshold); precfuzz's docs/verdicts.md, Hazards, says how "
                   "each is measured.", "hazards-correct-but-useless");
    cJSON_AddItemToArray(rules, ru);
  }
  cJSON_AddItemToObject(drv, "rules", rules);
  cJSON_AddItemToObject(tool, "driver", drv);
  cJSON_AddItemToObject(run, "tool", tool);
  cJSON_AddItemToObject(run, "results", results);
  cJSON_AddItemToArray(runs, run);
  cJSON_AddItemToObject(root, "runs", runs);
  char *t = cJSON_Print(root);
  const int bad = !t || pf_write_file_atomic(path, t, strlen(t)) != PF_OK;
  free(t);
  cJSON_Delete(root);
  return bad ? pf_usage_error("--sarif: %s", pf_error_message()) : 0;
}

/* run --junit FILE: every case judged as a JUnit test case, one test suite per variant and
 * dtypes (what CI test reports show): a finding is a failure of its verdict's type, its message
 * the finding, its text the command that replays it; hazards, which are not bugs, are said in
 * the case's system-err. */
typedef struct pf_junit {
  FILE *all, *suite; /* the suites written so far; the cases of the suite at hand (memory streams) */
  char *all_buf, *suite_buf;
  size_t all_len, suite_len;
  uint64_t tests, failures, suite_tests, suite_failures;
  double seconds, suite_seconds; /* the kernel's and the oracle's time (JUnit's time) */
} pf_junit;

static pf_junit *junit_new(void) {
  pf_junit *j = calloc(1, sizeof *j);
  if (j && (!(j->all = open_memstream(&j->all_buf, &j->all_len)) ||
            !(j->suite = open_memstream(&j->suite_buf, &j->suite_len)))) {
    if (j->all) fclose(j->all);
    free(j->all_buf);
    free(j);
    return NULL;
  }
  return j;
}

static void junit_case(pf_junit *j, const pf_case *c, uint64_t seed, const pf_run *r, const char *finding,
                       const char *replay) {
  FILE *f = j->suite;
  /* names are [A-Za-z0-9._-] (registration), dtypes fixed words */
  const double secs = r->seconds_kernel + r->seconds_oracle;
  fprintf(f, "    <testcase classname=\"%s.%s.%s.%s\" name=\"seed %llu\" time=\"%.6f\">\n", c->kernel, c->variant,
          pf_dtype_name(c->dtype), pf_dtype_name(c->accum), (unsigned long long)seed, secs);
  j->suite_seconds += secs;
  if (finding) {
    fprintf(f, "      <failure type=\"%s\" message=\"", pf_verdict_name(r->cmp.verdict));
    pf_xml_escape(f, finding);
    fputs("\">reproduce with: ", f);
    pf_xml_escape(f, replay);
    fputs("</failure>\n", f);
    j->suite_failures++;
  }
  if (r->hazards) {
    fputs("      <system-err>", f);
    for (int h = 0; h < PF_NHAZARDS; h++)
      if (r->hazards & (1u << h)) {
        fprintf(f, "hazard %s: ", pf_hazard_name((pf_hazard)h));
        pf_xml_escape(f, r->hazard_note[h]);
        fputc('\n', f);
      }
    fputs("reproduce with: ", f);
    pf_xml_escape(f, replay);
    fputs("</system-err>\n", f);
  }
  fputs("    </testcase>\n", f);
  j->suite_tests++;
}

/* The suite of the variant just run, around its cases; the next suite starts empty. */
static void junit_suite_end(pf_junit *j, const pf_kernel *k, const run_opts *o) {
  fflush(j->suite);
  fprintf(j->all, "  <testsuite name=\"%s/%s %s/%s\" tests=\"%llu\" failures=\"%llu\" errors=\"0\" skipped=\"0\" time=\"%.6f\">\n",
          k->op->name, k->variant, pf_dtype_name(o->dtype), pf_dtype_name(o->accum),
          (unsigned long long)j->suite_tests, (unsigned long long)j->suite_failures, j->suite_seconds);
  fwrite(j->suite_buf, 1, j->suite_len, j->all);
  fputs("  </testsuite>\n", j->all);
  j->tests += j->suite_tests, j->failures += j->suite_failures, j->seconds += j->suite_seconds;
  j->suite_tests = j->suite_failures = 0;
  j->suite_seconds = 0;
  rewind(j->suite);
}

/* The file, written whole, or exit 2. */
static int junit_write(const char *path, pf_junit *j) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f) {
    fflush(j->all);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"precfuzz run\" tests=\"%llu\" failures=\"%llu\" time=\"%.6f\">\n",
            (unsigned long long)j->tests, (unsigned long long)j->failures, j->seconds);
    fwrite(j->all_buf, 1, j->all_len, f);
    fputs("</testsuites>\n", f);
  }
  const int bad = !f || fclose(f) != 0 || pf_write_file_atomic(path, text, len) != PF_OK;
  if (!f) pf_error(PF_ERR_NOMEM, "out of memory");
  free(text);
  return bad ? pf_usage_error("--junit: %s", pf_error_message()) : 0;
}

static void junit_free(pf_junit *j) {
  if (!j) return;
  fclose(j->all);
  fclose(j->suite);
  free(j->all_buf);
  free(j->suite_buf);
  free(j);
}

/* Progress of a long run (core/progress.h: a terminal's line, a log's line every 30 s;
 * PRECFUZZ_PROGRESS=0 none), shown when the run is estimated at more than 2 s (or
 * PRECFUZZ_PROGRESS=1). */
typedef struct {
  int on;
  pf_progress p;
  double per_case; /* the shape's estimate (pf_case_estimate) */
} run_progress;

static void run_progress_show(run_progress *p, const pf_kernel *k, uint64_t done, uint64_t total) {
  if (!p->on) return;
  if (done == total) {
    pf_progress_clear(&p->p);
    return;
  }
  const double el = pf_progress_elapsed(&p->p);
  /* what is left, from the cases judged so far once there are some, else from the estimate */
  const double left = done ? el / (double)done * (double)(total - done) : p->per_case * (double)total;
  char e[32], l[32];
  pf_secs_str(e, sizeof e, el);
  pf_secs_str(l, sizeof l, left);
  pf_progress_show(&p->p, 0, "%s/%s: %llu of %llu cases, %s, about %s left", k->op->name, k->variant,
                   (unsigned long long)done, (unsigned long long)total, e, l);
}

/* biased's test over every case's units at once, by stage: a bias too small for one case */
static void print_bias_pool(const pf_bias_pool *p, uint64_t cases) {
  pf_hazard_limits def;
  const pf_hazard_limits *l = pf_hazard_limits_or_default(pf_hazard_limits_current(), &def);
  int any = 0;
  for (int k = 0; k < p->nstages; k++) {
    if (!p->st[k].n) continue;
    if (!any++)
      printf("  rounding bias pooled over the %llu cases (mean signed error in ulps against the correctly rounded "
             "result, t statistic; flagged at |t| >= %g and |mean| >= %g):\n",
             (unsigned long long)cases, l->bias_z, l->bias_ulps);
    double mean[2], t[2];
    const int b = pf_bias_pool_test(p, k, l, mean, t);
    printf("    %s: %+.4f upward (t %.1f), %+.4f away from zero (t %.1f), over %zu units%s\n", p->st[k].name, mean[0], t[0],
           mean[1], t[1], p->st[k].n, b < 0 ? "" : b == 0 ? ": BIASED (upward or downward)" : ": BIASED (away from or toward zero)");
  }
}

/* A hazard's boundary along the axis its operation names for it (pf_op.hazard_axis): a threshold
 * search from the case that showed it down to the axis's low end, printed with the line that runs
 * the case at the boundary. */
static void print_hazard_boundary(const pf_case *tmpl, const run_opts *o, uint64_t seed, pf_hazard h) {
  const pf_op *op = pf_op_find(tmpl->kernel);
  const char *name = pf_hazard_name(h);
  pf_axis a;
  pf_fail_set fs;
  double lo, hi;
  if (pf_axis_parse(tmpl, op->hazard_axis[h], &a) || pf_fail_set_parse(name, &fs)) return;
  pf_axis_limits(tmpl, &a, &lo, &hi);
  if (a.kind == PF_AXIS_PARAM) hi = tmpl->params[a.index];
  else if (a.kind == PF_AXIS_DIM) hi = (double)tmpl->shape[a.index];
  char ax[128], rep[1536];
  pf_axis_describe(tmpl, &a, ax, sizeof ax);
  double secs = 0; /* a search runs some 40 cases, none larger than this one: not beyond half a minute */
  if (pf_case_estimate(tmpl, &secs) == PF_OK && 40 * secs > 30) {
    printf("  %s along %s: not searched here (about %.0f s); precfuzz boundary --fail %s --along %s does\n", name, ax,
           40 * secs, name, op->hazard_axis[h]);
    return;
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.prec = o->oracle_prec;
  oo.backend = o->backend;
  pf_threshold th;
  if (pf_boundary_threshold(tmpl, &a, lo, hi, fs, 16, &oo, &th)) {
    printf("  %s's boundary along %s: not searched (%s)\n", name, ax, pf_error_message());
    return;
  }
  if (!th.found) {
    printf("  %s along %s from seed %llu's case: %s from %.9g up to the case's %.9g (%zu cases)\n", name, ax,
           (unsigned long long)seed, pf_fails(fs, th.v_lo, th.fe_lo) ? "throughout" : "not at either end", th.lo, th.hi,
           th.runs);
    return;
  }
  const double bad = th.bad_above ? th.above : th.below, good = th.bad_above ? th.below : th.above;
  pf_axis_reproduce_line(tmpl, o, &a, bad, seed, rep, sizeof rep);
  printf("  %s along %s from seed %llu's case: from %.17g %s (%.17g: none)%s; %zu cases\n    at the boundary: %s\n", name,
         ax, (unsigned long long)seed, bad, th.bad_above ? "up" : "down", good,
         th.changes > 1 ? ", not monotone on the grid" : "", th.runs, rep);
}

/* The summary's line naming the parameters some case drew (none: no line). */
static void print_drawn(const pf_op *op, unsigned long long drawn) {
  if (!drawn) return;
  printf("  drawn per case from the values users train with (each line names its case's; --at-defaults: none):");
  for (int p = 0, first = 1; p < op->nparams && p < 64; p++)
    if (drawn >> p & 1) printf("%s %s", first ? "" : ",", op->params[p].name), first = 0;
  printf("\n");
}

static void hazard_cases_free(pf_case *cs, unsigned kept) {
  for (int h = 0; h < PF_NHAZARDS; h++)
    if (kept >> h & 1) pf_case_free(&cs[h]);
}

static int run_variant(const pf_kernel *k, const run_opts *o, run_json *jcases, int *any_finding) {
  size_t counts[PF_NVERDICTS] = {0};
  int64_t max_ulps = 0;
  double max_rel = 0, secs_k = 0, secs_o = 0;
  uint64_t printed = 0, findings = 0, outside = 0, cases_outside = 0, worst_seed = 0;
  /* hazards, and torch.testing.assert_close beside the contract */
  pf_hazard_tally hz = {0};
  uint64_t hazard_printed = 0;
  unsigned hazard_shown = 0; /* the hazard kinds a HAZARD line has shown: each once per run (one
                                configuration), at its first case; --json has every case's */
  pf_case hz_case[PF_NHAZARDS]; /* that first case, where the operation names the hazard's axis */
  uint64_t hz_seed[PF_NHAZARDS] = {0};
  unsigned hz_kept = 0;
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.prec = o->oracle_prec;
  oo.keep_hex = o->json;
  oo.backend = o->backend;
  /* on the GPU, up to 64 cases run as one launch sequence where the kernel allows it */
  const uint64_t chunk = o->backend == PF_BACKEND_CUDA ? 64 : 1;
  pf_case cs[64];
  pf_run rs[64];
  uint64_t done = 0; /* cases judged: all of them, or those before a Ctrl-C */
  unsigned long long drawn = 0; /* the parameters some case drew */
  run_progress progress = {0};
  pf_progress_start(&progress.p);
  progress.on = progress.p.mode != 0;
  for (uint64_t c0 = 0; c0 < o->cases && !pf_interrupted() && !pf_save_failed; c0 += chunk) {
    const uint64_t nc = o->cases - c0 < chunk ? o->cases - c0 : chunk;
    for (uint64_t j = 0; j < nc; j++) {
      int rc = pf_build_case_drawn(k, o, o->seed + c0 + j, &cs[j], &drawn);
      if (!rc && o->save_case && pf_case_save(&cs[j], o->save_case)) { /* the case, before it is judged */
        rc = pf_usage_error("--save-case: %s", pf_error_message());
        pf_case_free(&cs[j]);
      }
      if (rc) {
        for (uint64_t x = 0; x < j; x++) pf_case_free(&cs[x]);
        hazard_cases_free(hz_case, hz_kept);
        return rc;
      }
    }
    if (c0 == 0 && progress.on) { /* the shape's estimate; shown when the run may take a while */
      pf_case_estimate(&cs[0], &progress.per_case);
      progress.on = progress.per_case * (double)o->cases > 2 || o->progress == 1;
      if (progress.p.mode == 2 && progress.per_case * (double)o->cases <= 2 * PF_PROGRESS_LOG_SECONDS)
        progress.on = o->progress == 1; /* a log hears of a run that takes a minute or more */
      run_progress_show(&progress, k, 0, o->cases);
    }
    const pf_status st = pf_run_cases(cs, nc, &oo, rs);
    if (st) {
      for (uint64_t j = 0; j < nc; j++) pf_run_free(&rs[j]), pf_case_free(&cs[j]);
      hazard_cases_free(hz_case, hz_kept);
      return pf_usage_error("%s", pf_error_message());
    }
    /* a Ctrl-C ends the kernel processes at once (interrupt.h): the cases their end left
     * unjudged are not counted, nor any after them */
    uint64_t keep = nc;
    for (uint64_t j = 0; pf_interrupted() && j < nc && keep == nc; j++)
      if (rs[j].cmp.verdict == PF_V_FAILED) keep = j;
    for (uint64_t j = 0; j < nc; j++) {
      const uint64_t seed = o->seed + c0 + j;
      pf_case c = cs[j];
      pf_run r = rs[j];
      if (j >= keep) {
        pf_run_free(&r);
        pf_case_free(&c);
        continue;
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
        if (o->save_dir && save_finding(&c, &r, o, seed, saved, sizeof saved)) saved[0] = 0;
      }
      pf_hazard_tally_add(&hz, &r);
      if (o->sarif_results && (finding || r.hazards)) {
        char rep[1536], d[1024];
        pf_reproduce_line(&c, o, seed, rep, sizeof rep);
        if (finding) {
          pf_run_describe(&c, &r, d, sizeof d);
          sarif_add(o->sarif_results, pf_verdict_name(r.cmp.verdict), r.in_domain ? "error" : "warning", &c, seed, d,
                    rep, saved);
        }
        for (int h = 0; h < PF_NHAZARDS; h++)
          if (r.hazards & (1u << h)) sarif_add(o->sarif_results, pf_hazard_name((pf_hazard)h), "warning", &c, seed,
                                               r.hazard_note[h], rep, saved);
      }
      if (o->junit) {
        char rep[1536], d[1024];
        pf_reproduce_line(&c, o, seed, rep, sizeof rep);
        if (finding) pf_run_describe(&c, &r, d, sizeof d);
        junit_case(o->junit, &c, seed, &r, finding ? d : NULL, rep);
      }
      if (!jcases && (r.hazards & ~hazard_shown) && hazard_printed < o->max_print) {
        for (int h = 0; h < PF_NHAZARDS; h++)
          if ((r.hazards & ~hazard_shown) >> h & 1 && k->op->hazard_axis[h] && !pf_case_copy(&hz_case[h], &c))
            hz_kept |= 1u << h, hz_seed[h] = seed;
        hazard_shown |= r.hazards;
        char rep[1536], hs[64];
        pf_reproduce_line(&c, o, seed, rep, sizeof rep);
        printf("HAZARD %s/%s %s/%s seed %llu (verdict %s): %s\n", c.kernel, c.variant, pf_dtype_name(c.dtype),
               pf_dtype_name(c.accum), (unsigned long long)seed, pf_verdict_name(r.cmp.verdict),
               pf_hazards_str(r.hazards, hs, sizeof hs));
        print_hazards(&r);
        printf("  reproduce with: %s\n", rep);
        hazard_printed++;
      }
      if (jcases) {
        cJSON *jr = pf_run_to_cjson(&c, &r, 1);
        cJSON_AddNumberToObject(jr, "seed", (double)seed);
        if (saved[0]) cJSON_AddStringToObject(jr, "saved", saved);
        run_json_case(jcases, jr);
      } else if (finding && printed < o->max_print) {
        char d[1024], rep[1536];
        pf_run_describe(&c, &r, d, sizeof d);
        pf_reproduce_line(&c, o, seed, rep, sizeof rep);
        printf("FINDING %s/%s %s/%s seed %llu: %s\n", c.kernel, c.variant, pf_dtype_name(c.dtype),
               pf_dtype_name(c.accum), (unsigned long long)seed, d);
        if (!r.in_domain) printf("  outside the contract's domain: %s\n", r.why);
        char sq[8400];
        if (saved[0]) pf_replay_path(sq, sizeof sq, saved);
        if (saved[0]) printf("  reproduce with: %s%s replay %s\n  or: %s\n", pf_self(), pf_plugins_flags(), sq, rep);
        else printf("  reproduce with: %s\n", rep);
        printed++;
      }
      pf_run_free(&r);
      pf_case_free(&c);
    }
    done += keep;
    run_progress_show(&progress, k, done, o->cases);
  }
  if (progress.on && done < o->cases) pf_progress_clear(&progress.p); /* interrupted: the line cleared */
  if (o->junit && done) junit_suite_end(o->junit, k, o);
  if (!jcases && !done) { /* interrupted before this variant began */
    hazard_cases_free(hz_case, hz_kept);
    return 0;
  }
  const char *why = pf_save_failed ? "a finding could not be saved" : pf_interrupted() == SIGTERM ? "SIGTERM" : "Ctrl-C";
  if (jcases && done < o->cases) /* the JSON says "interrupted"; the line goes where a person reads */
    fprintf(stderr, "%s: %s (%s) after %llu of %llu cases of %s/%s\n", pf_prog, pf_save_failed ? "stopped" : "interrupted",
            why, (unsigned long long)done, (unsigned long long)o->cases, k->op->name, k->variant);
  if (!jcases) {
    if (done < o->cases)
      printf("%s (%s) after %llu of %llu cases\n", pf_save_failed ? "stopped" : "interrupted", why,
             (unsigned long long)done, (unsigned long long)o->cases);
    printf("%s/%s %s/%s: %llu cases (seeds %llu..%llu): ", k->op->name, k->variant, pf_dtype_name(o->dtype),
           pf_dtype_name(o->accum), (unsigned long long)done, (unsigned long long)o->seed,
           (unsigned long long)(o->seed + done - 1));
    for (int v = 0; v < PF_NVERDICTS; v++)
      if (counts[v]) printf("%s %zu  ", pf_verdict_name((pf_verdict)v), counts[v]);
    printf("\n  findings %llu (%llu outside the contract's domain); max ulps %lld (seed %llu); max rel error %.3g;"
           " kernel %.3fs, oracle %.3fs\n",
           (unsigned long long)findings, (unsigned long long)outside, (long long)max_ulps,
           (unsigned long long)worst_seed, max_rel, secs_k, secs_o);
    if (cases_outside)
      printf("  %llu of %llu cases outside the contract's domain (its bound does not apply there)\n",
             (unsigned long long)cases_outside, (unsigned long long)done);
    if (findings > printed) printf("  (%llu more findings not shown; --max-print, --save-findings)\n", (unsigned long long)(findings - printed));
    printf("  hazards in %lu cases", hz.any);
    for (int h = 0, first = 1; h < PF_NHAZARDS; h++)
      if (hz.hazard[h]) printf("%s %s %lu", first ? ":" : ",", pf_hazard_name((pf_hazard)h), hz.hazard[h]), first = 0;
    printf("%s\n", hz.any > hazard_printed ? " (each kind shown at its first case; every case's in --json)" : "");
    for (int h = 0; h < PF_NHAZARDS && done > 1; h++)
      if (hz.hazard[h] == done)
        printf("  %s in all %llu cases: it comes with this configuration (variant, dtypes, shape, parameters) rather "
               "than with the drawn values%s%s%s\n",
               pf_hazard_name((pf_hazard)h), (unsigned long long)done,
               hz_kept >> h & 1 ? "; where it starts: below" : "; precfuzz boundary --fail ",
               hz_kept >> h & 1 ? "" : pf_hazard_name((pf_hazard)h), hz_kept >> h & 1 ? "" : " along a parameter finds where it starts");
    for (int h = 0; h < PF_NHAZARDS; h++)
      if (hz_kept >> h & 1) print_hazard_boundary(&hz_case[h], o, hz_seed[h], (pf_hazard)h);
    if (done > 1) print_bias_pool(&hz.bias, done);
    print_drawn(k->op, drawn);
    printf("  torch.testing.assert_close (default tolerance, against the correctly rounded result) rejects %lu cases;"
           " passes %lu with a finding and %lu with a hazard; rejects %lu that are ok without one\n",
           hz.tt_rejects, hz.tt_pass_finding, hz.tt_pass_hazard, hz.tt_reject_sound);
  }
  hazard_cases_free(hz_case, hz_kept);
  return 0;
}

/* run --steps N: each case a trajectory of N steps of the variant (core/trajectory.h): a step
 * whose contract breaks is a finding; what the N steps lose against the exact trajectory, a
 * hazard; then a summary over the cases. */
static int run_trajectories(const pf_kernel *k, const run_opts *o, int *any_finding) {
  if (!k->op->carry)
    return pf_usage_error("--steps: %s carries no state from one step to the next (adam does)", k->op->name);
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.prec = o->oracle_prec;
  oo.backend = o->backend;
  uint64_t done = 0, with_finding = 0, stagnant = 0, biased = 0, printed = 0, worst_seed = 0;
  unsigned long long drawn = 0;
  double worst = 0, secs = 0;
  const char *name = k->op->name, *var = k->variant, *dt = pf_dtype_name(o->dtype), *ac = pf_dtype_name(o->accum);
  const char *watch = k->op->input_names[k->op->carry_watch];
  for (uint64_t j = 0; j < o->cases && !pf_interrupted(); j++) {
    const uint64_t seed = o->seed + j;
    pf_case c;
    const int rc = pf_build_case_drawn(k, o, seed, &c, &drawn);
    if (rc) return rc;
    pf_trajectory t;
    if (pf_trajectory_run(&c, o->steps, &oo, &t)) {
      pf_case_free(&c);
      return pf_usage_error("%s", pf_error_message());
    }
    done++;
    secs += t.seconds;
    char rep[4096];
    pf_reproduce_line(&c, o, seed, rep, sizeof rep);
    if (t.findings) {
      with_finding++;
      *any_finding = 1;
      if (printed++ < o->max_print)
        printf("FINDING %s/%s %s/%s seed %llu step %llu of %llu (%llu steps with a finding): %s\n  reproduce with: %s\n",
               name, var, dt, ac, (unsigned long long)seed, (unsigned long long)t.first_step,
               (unsigned long long)o->steps, (unsigned long long)t.findings, t.first, rep);
    }
    if (t.hazards >> PF_H_STAGNANT & 1) {
      stagnant++;
      if (printed++ < o->max_print)
        printf("HAZARD %s/%s %s/%s seed %llu, %llu steps: stagnant: %zu of the %zu elements the exact trajectory moved "
               "an ulp or more never moved (%s[%zu] stayed %.9g, exact %.9g)\n  reproduce with: %s\n",
               name, var, dt, ac, (unsigned long long)seed, (unsigned long long)t.steps, t.stuck, t.moved, watch,
               t.stuck_at, t.stuck_from, t.stuck_exact, rep);
    }
    if (t.hazards >> PF_H_BIASED & 1) {
      biased++;
      if (printed++ < o->max_print)
        printf("HAZARD %s/%s %s/%s seed %llu, %llu steps: biased: after the last step the error's mean is %+.2f ulps "
               "(t %.1f) over %zu elements\n  reproduce with: %s\n",
               name, var, dt, ac, (unsigned long long)seed, (unsigned long long)t.steps, t.bias_mean, t.bias_t, t.n, rep);
    }
    if (t.median_ulps > worst || done == 1) worst = t.median_ulps, worst_seed = seed;
    printf("  seed %llu: %s after %llu steps against the exact trajectory: median %.3g ulps, max %.3g (%s[%zu]); the "
           "exact moved a median %.3g ulps from the start; mean signed error %+.3g ulps (t %.3g)\n",
           (unsigned long long)seed, watch, (unsigned long long)t.steps, t.median_ulps, t.max_ulps, watch, t.max_at,
           t.exact_moved_ulps, t.bias_mean, t.bias_t);
    pf_case_free(&c);
  }
  printf("%s/%s %s/%s: %llu trajectories of %llu steps (seeds %llu..%llu): %llu with a step that breaks the contract; "
         "stagnant %llu, biased %llu; worst median distance from the exact trajectory %.3g ulps (seed %llu); %.2f s\n",
         name, var, dt, ac, (unsigned long long)done, (unsigned long long)o->steps, (unsigned long long)o->seed,
         (unsigned long long)(o->seed + done - 1), (unsigned long long)with_finding, (unsigned long long)stagnant,
         (unsigned long long)biased, worst, (unsigned long long)worst_seed, secs);
  print_drawn(k->op, drawn);
  return 0;
}

static int run_command(run_opts *o);

static int cmd_run(int argc, char **argv) {
  run_opts o;
  pf_run_opts_init(&o, 100);
  o.max_print = 10;
  const char *shape_arg = NULL, *backend = "cpu", *sarif = NULL, *junit = NULL;
  static const struct option longopts[] = {PF_CASE_LONGOPTS,
                                           {"save-findings", required_argument, 0, O_SAVE},
                                           {"sarif", required_argument, 0, O_SARIF},
                                           {"junit", required_argument, 0, O_JUNIT},
                                           {"tensors", required_argument, 0, O_TENSORS},
                                           {"max-print", required_argument, 0, O_MAXPRINT},
                                           {"at-defaults", no_argument, 0, O_ATDEFAULTS},
                                           {"steps", required_argument, 0, O_STEPS},
                                           {"save-checkpoint", required_argument, 0, O_SAVECKPT},
                                           {"save-case", required_argument, 0, O_SAVECASE},
                                           {0, 0, 0, 0}};
  opterr = 0;
  int at_defaults = 0;
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
    case O_SAVE: o.save_dir = optarg; break;
    case O_SARIF: sarif = optarg; break;
    case O_JUNIT: junit = optarg; break;
    case O_TENSORS:
      if (strcmp(optarg, "npy") && strcmp(optarg, "safetensors"))
        return pf_usage_error("--tensors: '%s' is not npy or safetensors", optarg);
      o.tensors = optarg;
      break;
    case O_MAXPRINT:
      if (pf_parse_u64(optarg, &o.max_print)) return pf_usage_error("--max-print: '%s' is not a count", optarg);
      break;
    case O_ATDEFAULTS: at_defaults = 1; break;
    case O_SAVECKPT: o.save_checkpoint = optarg; break;
    case O_SAVECASE: o.save_case = optarg; break;
    case O_STEPS:
      if (pf_parse_u64(optarg, &o.steps) || o.steps < 1 || o.steps > 10000000)
        return pf_usage_error("--steps: '%s' is not a number of steps in [1, 10^7]", optarg);
      break;
    case 'h': print_help_run(); return 0;
    case ':': return pf_usage_error("run: %s needs a value", argv[optind - 1]);
    default: return pf_usage_error("run: unknown option '%s' (see precfuzz run --help)", argv[optind - 1]);
    }
  }
  if (optind < argc) return pf_usage_error("run: unexpected argument '%s'", argv[optind]);
  if (pf_check_run_opts(&o)) return 2;
  if (o.tensors && !o.save_dir) return pf_usage_error("--tensors needs --save-findings DIR");
  if (o.steps > 1 && (o.json || o.save_dir || sarif || junit))
    return pf_usage_error("--steps: a trajectory prints its findings and hazards as lines; --json, --save-findings, "
                       "--sarif and --junit take one-step runs only");
  if (!o.kernel) return pf_usage_error("run: -k KERNEL is required (see precfuzz list)");
  const pf_op *op = pf_op_find(o.kernel);
  if (!op) return pf_usage_error("-k: unknown kernel '%s' (see precfuzz list)", o.kernel);
  if (o.variant && !pf_kernel_find(o.kernel, o.variant))
    return pf_usage_error("-v: unknown variant '%s' of kernel %s (see precfuzz list)", o.variant, o.kernel);
  if (o.checkpoint && !op->takes_checkpoint) return pf_usage_error("--checkpoint: kernel %s loads none (tp_diff does)", o.kernel);
  if (o.save_case && !o.save_case[0]) return pf_usage_error("--save-case: no file name given");
  if (o.save_case && (o.cases != 1 || !o.variant))
    return pf_usage_error("--save-case writes one case: give -v and --cases 1");
  if (o.save_checkpoint) { /* one case's checkpoints, never written over */
    struct stat sb;
    if (!op->takes_checkpoint) return pf_usage_error("--save-checkpoint: kernel %s saves no checkpoint (tp_diff does)", o.kernel);
    if (o.cases != 1 || !o.variant) return pf_usage_error("--save-checkpoint keeps one case's checkpoints: give -v and --cases 1");
    if (o.checkpoint) return pf_usage_error("--save-checkpoint with --checkpoint: the run loads DIR and saves nothing");
    if (o.steps > 1) return pf_usage_error("--save-checkpoint: --steps runs no round trip");
    if (stat(o.save_checkpoint, &sb) == 0)
      return pf_usage_error("--save-checkpoint: %s already exists (a checkpoint is never written over)", o.save_checkpoint);
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", o.save_checkpoint);
    char *slash = strrchr(parent, '/');
    if (slash == parent) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(parent, sizeof parent, ".");
    if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(parent, W_OK) != 0)
      return pf_usage_error("--save-checkpoint: %s is not a directory precfuzz can write in", parent);
    pf_checkpoint_keep(o.save_checkpoint);
  }
  if (shape_arg) {
    if ((rc = pf_parse_shape(shape_arg, op, o.shape))) return rc;
    o.have_shape = 1;
  }
  if ((rc = pf_backend_setup(backend, o.kernel, o.variant, &o.backend, o.device, sizeof o.device))) return rc;
  if ((rc = pf_load_input_files(&o, op))) {
    pf_free_input_files(&o);
    return rc;
  }
  /* tensors from files are a user's case: its parameters are what the command line says */
  int from_file = 0;
  for (int k = 0; k < o.ninput_specs; k++) from_file |= o.files[k] != NULL;
  o.draw = !at_defaults && pf_op_draws_params(op) && !from_file;
  const char *pv = getenv("PRECFUZZ_PROGRESS");
  if (pv && strcmp(pv, "0") != 0 && strcmp(pv, "1") != 0) {
    pf_free_input_files(&o);
    return pf_usage_error("PRECFUZZ_PROGRESS: '%s' is not 0 or 1", pv);
  }
  o.progress = pv ? *pv == '1' : -1;
  if (sarif && junit && pf_same_file(sarif, junit)) { /* the second would overwrite the first */
    pf_free_input_files(&o);
    return pf_usage_error("--sarif and --junit name one file (%s): give each its own", junit);
  }
  if (sarif) {
    if (sarif_docs_url() && !sarif_docs_url()[0]) {
      pf_free_input_files(&o);
      return pf_usage_error("PRECFUZZ_DOCS_URL: '%s' is not an http:// or https:// URL", getenv("PRECFUZZ_DOCS_URL"));
    }
    if (pf_write_file_atomic_probe(sarif)) {
      pf_free_input_files(&o);
      return pf_usage_error("--sarif: %s", pf_error_message());
    }
    o.sarif_results = cJSON_CreateArray();
  }
  if (junit) {
    if (pf_write_file_atomic_probe(junit)) {
      cJSON_Delete(o.sarif_results);
      pf_free_input_files(&o);
      return pf_usage_error("--junit: %s", pf_error_message());
    }
    if (!(o.junit = junit_new())) {
      cJSON_Delete(o.sarif_results);
      pf_free_input_files(&o);
      return pf_usage_error("--junit: out of memory");
    }
  }
  pf_interrupt_polled(1); /* Ctrl-C: stop after the case at hand and say what was judged */
  rc = run_command(&o);
  if (o.save_checkpoint && !pf_checkpoint_kept()) {
    rmdir(o.save_checkpoint); /* made for a save that failed: nothing in it (never anything else) */
    if (rc != EXIT_USAGE)
      rc = pf_usage_error("--save-checkpoint: the case saved no checkpoint (a built-in tp_diff variant with --param "
                          "resume_at=K or reshard_at=K saves one; a kernel process saves its own)");
  } else if (o.save_checkpoint && rc != EXIT_USAGE) {
    fprintf(stderr, "precfuzz: the case's checkpoints kept in %s\n", o.save_checkpoint);
  }
  if (junit) { /* every case judged: a suite per variant (none: an empty report) */
    if (rc != EXIT_USAGE) {
      const int wrc = junit_write(junit, o.junit);
      if (wrc) rc = wrc;
    }
    junit_free(o.junit);
  }
  if (sarif) { /* what was judged, findings or not (an empty list says there were none) */
    cJSON *results = o.sarif_results;
    if (rc != EXIT_USAGE) {
      const int wrc = sarif_write(sarif, results);
      if (wrc) rc = wrc;
    } else {
      cJSON_Delete(results);
    }
  }
  pf_free_input_files(&o);
  return rc;
}

/* run, after its options: every variant asked for, over o->cases cases. */
static int run_command(run_opts *op_) {
  run_opts o = *op_;
  int rc;
  if (o.save_dir) {
    struct stat sb;
    if (stat(o.save_dir, &sb) != 0 && mkdir(o.save_dir, 0777) != 0)
      return pf_usage_error("--save-findings: cannot create directory '%s' (%s)", o.save_dir, strerror(errno));
    if (stat(o.save_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return pf_usage_error("--save-findings: '%s' is not a directory", o.save_dir);
  }
  if (o.fault && o.variant && !pf_kernel_has_fault(pf_kernel_find(o.kernel, o.variant), o.fault))
    return pf_usage_error("--fault: '%s' does not exist for %s/%s (see precfuzz list)", o.fault, o.kernel, o.variant);

  run_json js = {&o, 0}, *jcases = o.json ? &js : NULL;
  int any_finding = 0, ran = 0;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, o.kernel) != 0 || (o.variant && strcmp(k->variant, o.variant) != 0)) continue;
    if (!o.variant && (!pf_kernel_accepts(k, o.dtype, o.accum) || (o.fault && !pf_kernel_has_fault(k, o.fault)) ||
                       (o.backend == PF_BACKEND_CUDA && !k->run_cuda)))
      continue; /* running all variants: skip those that cannot take these settings */
    if (!o.variant) { /* ... or these parameters (a layout a variant has not): said, then skipped */
      pf_case c0;
      if ((rc = pf_build_case(k, &o, o.seed, &c0))) return rc; /* said: the same for every variant */
      const pf_status st = pf_case_validate(&c0);
      pf_case_free(&c0);
      if (st == PF_ERR_UNSUPPORTED) {
        fprintf(stderr, "precfuzz: skipped, %s\n", pf_error_message());
        continue;
      }
    }
    ran++;
    if ((rc = o.steps > 1 ? run_trajectories(k, &o, &any_finding) : run_variant(k, &o, jcases, &any_finding))) return rc;
    if (pf_save_failed || pf_interrupted()) break; /* no next variant */
  }
  if (!ran)
    return pf_usage_error("run: no variant of %s supports dtype %s with accumulation %s%s%s", o.kernel,
                       pf_dtype_name(o.dtype), pf_dtype_name(o.accum), o.fault ? " and fault " : "", o.fault ? o.fault : "");
  if (jcases) run_json_tail(jcases, any_finding);
  if (pf_save_failed) return EXIT_USAGE; /* said on stderr when it happened */
  if (pf_interrupted()) return 128 + pf_interrupted(); /* as the shell says a signal ended it */
  return any_finding ? EXIT_FINDINGS : 0;
}

/* ---- replay ---------------------------------------------------------------------------- */

static void print_help_replay(void) {
  printf("usage: precfuzz replay FILE... [--json] [--driver NAME] [--fault NAME] [--backend cpu|cuda]\n\n"
         "Runs each case file, or raw fuzz-driver input, again and prints its verdict. A case file is\n"
         "named *.json or is JSON text; anything else is a raw input of the driver named by --driver\n"
         "or by a directory in its path (build/fuzz/findings/<driver>[-<fault>]/, corpora/<driver>/),\n"
         "with the fault of --fault, that directory or $PF_FUZZ_FAULT. A case with \"expect\" (a regression)\n"
         "passes when its verdict equals the expected one; otherwise a finding fails. --json writes\n"
         "what run --json writes (each case with its \"file\" and \"as_expected\").\n"
         "Exit status: 0 every case as its file expects: a saved finding (its file expects its verdict)\n"
         "that still reproduces is 0, a case without \"expect\" must find nothing; 1 a verdict other than\n"
         "expected (a saved finding that no longer reproduces included); 2 bad usage or input.\n");
}

static int cmd_replay(int argc, char **argv) {
  int json = 0, nfiles = 0, backend = PF_BACKEND_CPU;
  const char *driver = NULL, *fault = NULL, *backend_arg = "cpu";
  static const char *const valued[] = {"--driver", "--fault", "--backend", NULL}, *const bare[] = {"--json", NULL};
  if (pf_flags_once(argc, argv, valued, bare)) return 2;
  const char **files = calloc((size_t)argc, sizeof(char *));
  if (!files) return pf_usage_error("replay: out of memory");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { free(files); print_help_replay(); return 0; }
    else if (strcmp(argv[i], "--driver") == 0 || strcmp(argv[i], "--fault") == 0 || strcmp(argv[i], "--backend") == 0) {
      if (i + 1 >= argc) { free(files); return pf_usage_error("replay: %s needs a value", argv[i]); }
      if (argv[i][2] == 'd') driver = argv[i + 1];
      else if (argv[i][2] == 'f') fault = argv[i + 1];
      else backend_arg = argv[i + 1];
      i++;
    } else if (argv[i][0] == '-' && argv[i][1]) { free(files); return pf_usage_error("replay: unknown option '%s'", argv[i]); }
    else files[nfiles++] = argv[i];
  }
  if (!nfiles) {
    free(files);
    return pf_usage_error("replay: no FILE given (see precfuzz replay --help)");
  }
  if (pf_backend_parse(backend_arg, &backend)) {
    free(files);
    return pf_usage_error("%s", pf_error_message());
  }
  char device[256] = "";
  if (backend == PF_BACKEND_CUDA && pf_cuda_describe(device, sizeof device)) {
    free(files);
    return pf_usage_error("%s", pf_error_message());
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.keep_hex = json;
  oo.backend = backend;
  int failed = 0, any_finding = 0;
  /* --json: the shape run --json has, streamed as run streams it */
  run_opts jo;
  pf_run_opts_init(&jo, 0);
  jo.backend = backend;
  snprintf(jo.device, sizeof jo.device, "%s", backend == PF_BACKEND_CUDA ? device : "none: the CPU emulation");
  run_json js = {&jo, 0};
  for (int f = 0; f < nfiles; f++) {
    const char *file = files[f];
    pf_case c;
    char what[128];
    pf_status st = pf_load_input(file, driver, fault, &c, what, sizeof what);
    if (st) {
      pf_case_free(&c);
      free(files);
      return pf_usage_error("%s", pf_error_message());
    }
    pf_run r;
    st = pf_run_case(&c, &oo, &r);
    if (st) {
      pf_run_free(&r);
      pf_case_free(&c);
      free(files);
      return pf_usage_error("%s: %s", file, pf_error_message());
    }
    const char *got = pf_verdict_name(r.cmp.verdict);
    const int ok = c.expect[0] ? strcmp(c.expect, got) == 0 : !pf_verdict_is_finding(r.cmp.verdict);
    failed |= !ok;
    any_finding |= pf_verdict_is_finding(r.cmp.verdict);
    if (json) {
      cJSON *j = pf_run_to_cjson(&c, &r, 1);
      cJSON_AddStringToObject(j, "file", file);
      cJSON_AddBoolToObject(j, "as_expected", ok);
      run_json_case(&js, j);
    } else {
      char d[1024] = "";
      if (r.cmp.verdict != PF_V_OK) pf_run_describe(&c, &r, d, sizeof d);
      printf("%s: %s/%s %s/%s: %s%s%s%s%s\n", file, c.kernel, c.variant, pf_dtype_name(c.dtype),
             pf_dtype_name(c.accum), got, d[0] ? " (" : "", d, d[0] ? ")" : "",
             c.expect[0] ? (ok ? (pf_verdict_is_finding(r.cmp.verdict) ? " [as expected]: it reproduces" : " [as expected]")
                               : " [EXPECTED DIFFERENT VERDICT]")
                         : "");
      if (c.expect[0] && !ok) printf("  expected %s\n", c.expect);
      if (!r.in_domain && pf_verdict_is_finding(r.cmp.verdict))
        printf("  outside the contract's domain (the fuzz drivers do not report it): %s\n", r.why);
      print_hazards(&r);
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  if (json) run_json_tail(&js, any_finding);
  free(files);
  return failed ? EXIT_FINDINGS : 0;
}

/* ---- judge ------------------------------------------------------------------------------ */

static void print_help_judge(void) {
  printf("usage: precfuzz judge CASE --outputs FILE [--tensor NAME] [--like VARIANT | --ulps N] [--threads N]\n"
         "                     [--json]\n"
         "       precfuzz judge -k KERNEL [-v VARIANT] -t DTYPE [run's case options: --shape, --param,\n"
         "                     --input NAME:file=PATH, ...] --outputs FILE [--save-case FILE] [...as above]\n\n"
         "Judges outputs computed elsewhere (PyTorch, JAX, Triton, your own kernel) on the inputs of\n"
         "the case file CASE: the oracle computes the exact result and every given output element\n"
         "gets a verdict, ulps and relative error, as a built-in kernel's would.\n\n"
         "  --outputs FILE   a .npy file, or a safetensors file with one tensor per output stage\n"
         "                   (named as the stages: 'output' for single-output kernels; precfuzz list)\n"
         "  --tensor NAME    judge only this tensor of a safetensors file\n"
         "  --like VARIANT   the contract (bound and domain) of this variant of the case's kernel\n"
         "  --ulps N         without --like: within N units in the last place of the correctly\n"
         "                   rounded result (default 1)\n"
         "  --threads N      threads judging the case (default 0: one per processor)\n"
         "  --save-case FILE with -k: the case of the options written as a case file\n"
         "  --json           the result as JSON, with per-element values\n\n"
         "Exit status: 0 within the contract, 1 findings, 2 bad usage or input.\n");
}

/* Judges the outputs in file `outputs` on case c (taken: freed here) and says so; case_path: the
 * case file (NULL: the case of judge's options); replay_head: the replay line up to its
 * --outputs. */
static int judge_report(pf_case c, const char *case_path, const char *replay_head, const char *outputs,
                        const char *tensor, const char *like_name, long ulps, int json) {
  const pf_kernel *like = NULL;
  if (like_name && !(like = pf_kernel_find(c.kernel, like_name))) {
    pf_case_free(&c);
    return pf_usage_error("--like: %s has no variant '%s' (see precfuzz list)", c.kernel, like_name);
  }
  /* one tensor (a .npy file, the one named, or a safetensors file's only one), or else a
   * safetensors file's tensors named as the output stages */
  pf_tensorfile ts[PF_MAX_STAGES];
  size_t nt = 0;
  char *buf = NULL;
  size_t len = 0;
  pf_status st = pf_read_file(outputs, &buf, &len);
  if (!st) st = pf_tensorfile_parse((const unsigned char *)buf, len, tensor, outputs, &ts[0]);
  if (!st) {
    nt = 1;
    /* the file's one tensor, whatever its name, unless it is named as one stage of several */
    pf_stage stg[PF_MAX_STAGES];
    const int ns = pf_case_stages(&c, stg);
    int is_stage = 0;
    for (int s = 0; s < ns && ns > 1; s++) is_stage |= strcmp(stg[s].name, ts[0].name) == 0;
    if (!tensor && !is_stage) ts[0].name[0] = 0;
  } else if (st == PF_ERR_ARG && !tensor) { /* several tensors (a malformed file is PF_ERR_PARSE) */
    pf_stage stg[PF_MAX_STAGES];
    const int ns = pf_case_stages(&c, stg);
    st = PF_OK;
    for (int s = 0; s < ns && !st; s++) {
      st = pf_tensorfile_parse((const unsigned char *)buf, len, stg[s].name, outputs, &ts[nt]);
      if (!st) nt++;
      else if (st == PF_ERR_ARG) st = PF_OK; /* no tensor of that name */
    }
    if (!st && !nt) st = pf_error(PF_ERR_ARG, "%s: no tensor is named as an output of %s (--tensor NAME)", outputs, c.kernel);
    /* a tensor named as nothing judge knows would go unjudged without a word: the file may
     * hold the outputs' stages, the case's inputs and the expected values (run --tensors) */
    char held[64][PF_TF_NAME_LEN];
    size_t nheld = st ? 0 : pf_safetensors_names((const unsigned char *)buf, len, held, 64);
    if (nheld > 64) { /* every name is checked, or the file is refused */
      st = pf_error(PF_ERR_ARG, "%s: %zu tensors; an outputs file holds at most 64", outputs, nheld);
      nheld = 0;
    }
    const pf_op *cop = pf_case_op(&c);
    int all_inputs = 1; /* an export holds every input; then a tensor named as one is one */
    for (int i = 0; i < cop->ninputs && all_inputs; i++) {
      int found = 0;
      for (size_t h = 0; h < nheld && !found; h++) found = strcmp(held[h], cop->input_names[i]) == 0;
      all_inputs = found;
    }
    for (size_t h = 0; h < nheld && !st; h++) {
      int known = strncmp(held[h], "expected", 8) == 0 && (!held[h][8] || held[h][8] == '.');
      for (int s = 0; s < ns && !known; s++) known = strcmp(held[h], stg[s].name) == 0;
      for (int i = 0; i < cop->ninputs && !known && all_inputs; i++) known = strcmp(held[h], cop->input_names[i]) == 0;
      if (!known) {
        char names[256] = "";
        for (int s = 0; s < ns; s++)
          snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", s ? ", " : "", stg[s].name);
        st = pf_error(PF_ERR_ARG, "%s: tensor '%s' is no output of %s (%s), no input and not 'expected'", outputs, held[h],
                      c.kernel, names);
      }
    }
  }
  free(buf);
  if (st) {
    pf_case_free(&c);
    for (size_t k = 0; k < nt; k++) pf_tensorfile_free(&ts[k]);
    return pf_usage_error("--outputs: %s", pf_error_message());
  }
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.keep_hex = json;
  pf_run r;
  size_t judged = 0;
  st = pf_judge_outputs(&c, like, ulps, ts, nt, &oo, &r, &judged);
  for (size_t k = 0; k < nt; k++) pf_tensorfile_free(&ts[k]);
  if (st) {
    pf_run_free(&r);
    pf_case_free(&c);
    return pf_usage_error("%s: %s", outputs, pf_error_message());
  }
  char contract[96];
  if (like) snprintf(contract, sizeof contract, "the contract of %s/%s", c.kernel, like->variant);
  else snprintf(contract, sizeof contract, "the correctly rounded result within %ld ulp%s", ulps, ulps == 1 ? "" : "s");
  const int finding = pf_verdict_is_finding(r.cmp.verdict);
  if (json) {
    cJSON *j = pf_run_to_cjson(&c, &r, 1);
    cJSON_AddStringToObject(j, "outputs", outputs);
    cJSON_AddStringToObject(j, "judged_against", contract);
    cJSON_AddNumberToObject(j, "judged_elements", (double)judged);
    /* the stages not given hold the correctly rounded result, which counts as ok: not judged */
    cJSON *cnt = cJSON_GetObjectItemCaseSensitive(j, "counts");
    cJSON *ok = cnt ? cJSON_GetObjectItemCaseSensitive(cnt, "ok") : NULL;
    if (ok && cJSON_IsNumber(ok) && r.nout >= judged) cJSON_SetNumberValue(ok, ok->valuedouble - (double)(r.nout - judged));
    char *s = cJSON_Print(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
  } else {
    char d[1024] = "";
    if (r.cmp.verdict != PF_V_OK) pf_run_describe(&c, &r, d, sizeof d);
    printf("%s: %s %s/%s %s/%s, %zu of %zu outputs judged against %s: %s%s%s%s\n", outputs,
           case_path ? case_path : "(the case of the options)", c.kernel,
           c.variant, pf_dtype_name(c.dtype), pf_dtype_name(c.accum), judged, r.nout, contract,
           pf_verdict_name(r.cmp.verdict), d[0] ? " (" : "", d, d[0] ? ")" : "");
    printf("  max ulps %lld, max rel error %.3g\n", (long long)r.cmp.max_ulps, r.cmp.max_rel);
    if (like && !r.in_domain) printf("  outside the contract's domain (its bound does not apply): %s\n", r.why);
    print_hazards(&r);
    char tol[32] = "";
    if (!like && ulps != 1) snprintf(tol, sizeof tol, " --ulps %ld", ulps);
    if (finding) {
      char oq[8400];
      pf_replay_path(oq, sizeof oq, outputs);
      printf("  reproduce with: %s --outputs %s%s%s%s%s%s\n", replay_head, oq, tensor ? " --tensor " : "",
             tensor ? tensor : "", like ? " --like " : "", like ? like->variant : "", tol);
    }
  }
  pf_run_free(&r);
  pf_case_free(&c);
  return finding ? EXIT_FINDINGS : 0;
}

/* judge -k KERNEL [-v VARIANT] -t DTYPE --input NAME:file=PATH... --outputs FILE: the case run
 * would build from these options (every parameter at its default unless given), its outputs
 * judged; --save-case FILE writes that case for replay. */
static int cmd_judge_options(int argc, char **argv) {
  run_opts o;
  pf_run_opts_init(&o, 1);
  const char *shape_arg = NULL, *backend = "cpu", *outputs = NULL, *tensor = NULL, *like_name = NULL, *save_case = NULL;
  long ulps = -1;
  enum { O_J_OUTPUTS = 1000, O_J_TENSOR, O_J_LIKE, O_J_ULPS, O_J_SAVE };
  static const struct option longopts[] = {PF_CASE_LONGOPTS,
                                           {"outputs", required_argument, 0, O_J_OUTPUTS},
                                           {"tensor", required_argument, 0, O_J_TENSOR},
                                           {"like", required_argument, 0, O_J_LIKE},
                                           {"ulps", required_argument, 0, O_J_ULPS},
                                           {"save-case", required_argument, 0, O_J_SAVE},
                                           {"at-defaults", no_argument, 0, O_ATDEFAULTS},
                                           {0, 0, 0, 0}};
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
    case O_J_OUTPUTS: outputs = optarg; break;
    case O_J_TENSOR: tensor = optarg; break;
    case O_J_LIKE: like_name = optarg; break;
    case O_J_SAVE: save_case = optarg; break;
    case O_ATDEFAULTS: break; /* judge draws no parameter: every one is at its default unless given */
    case O_J_ULPS: {
      uint64_t u;
      if (pf_parse_u64(optarg, &u) || u > 1000000) return pf_usage_error("--ulps: '%s' is not an integer in [0, 1000000]", optarg);
      ulps = (long)u;
      break;
    }
    case 'h': print_help_judge(); return 0;
    case ':': return pf_usage_error("judge: %s needs a value", argv[optind - 1]);
    default: return pf_usage_error("judge: unknown option '%s' (see precfuzz judge --help)", argv[optind - 1]);
    }
  }
  if (optind < argc) return pf_usage_error("judge: with -k the case is the options': no CASE file ('%s')", argv[optind]);
  if (save_case && !save_case[0]) return pf_usage_error("--save-case: no file name given");
  if (pf_check_run_opts(&o)) return 2;
  if (o.cases != 1) return pf_usage_error("judge: one case (--cases 1)");
  if (!outputs) return pf_usage_error("judge: --outputs FILE is required");
  if (like_name && ulps >= 0) return pf_usage_error("judge: --like and --ulps are two different contracts: give one");
  const pf_op *op = pf_op_find(o.kernel);
  if (!op) return pf_usage_error("-k: unknown kernel '%s' (see precfuzz list)", o.kernel);
  const pf_kernel *k = o.variant ? pf_kernel_find(o.kernel, o.variant)
                                 : pf_kernel_find(o.kernel, like_name ? like_name : pf_op_first_kernel(op)->variant);
  if (!k) return pf_usage_error("-v: unknown variant '%s' of kernel %s (see precfuzz list)", o.variant ? o.variant : like_name, o.kernel);
  if (shape_arg && pf_parse_shape(shape_arg, op, o.shape)) return 2;
  o.have_shape = shape_arg != NULL;
  if (pf_load_input_files(&o, op)) return 2;
  o.draw = 0;
  pf_case c;
  if ((rc = pf_build_case(k, &o, o.seed, &c))) {
    pf_free_input_files(&o);
    return rc;
  }
  if (save_case && pf_case_save(&c, save_case)) {
    pf_case_free(&c);
    pf_free_input_files(&o);
    return pf_usage_error("--save-case: %s", pf_error_message());
  }
  char line[2048], head[2200];
  pf_reproduce_line(&c, &o, o.seed, line, sizeof line);
  char *run = strstr(line, " run -k ");
  if (run) snprintf(head, sizeof head, "%.*s judge -k %s", (int)(run - line), line, run + 8);
  else snprintf(head, sizeof head, "%s", line);
  pf_free_input_files(&o);
  if (ulps < 0) ulps = 1;
  return judge_report(c, NULL, head, outputs, tensor, like_name, ulps, o.json);
}

static int cmd_judge(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* judge -k KERNEL ...: the case from the options, as run builds it */
    if (strcmp(argv[i], "-k") == 0 || strncmp(argv[i], "--kernel", 8) == 0) return cmd_judge_options(argc, argv);
  const char *case_path = NULL, *outputs = NULL, *tensor = NULL, *like_name = NULL;
  long ulps = -1;
  int json = 0;
  static const char *const valued[] = {"--outputs", "--tensor", "--like", "--ulps", "--threads", NULL},
                           *const bare[] = {"--json", NULL};
  if (pf_flags_once(argc, argv, valued, bare)) return 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { print_help_judge(); return 0; }
    if (strcmp(a, "--json") == 0) { json = 1; continue; }
    if (strcmp(a, "--outputs") == 0 || strcmp(a, "--tensor") == 0 || strcmp(a, "--like") == 0 || strcmp(a, "--ulps") == 0 ||
        strcmp(a, "--threads") == 0) {
      if (i + 1 >= argc) return pf_usage_error("judge: %s needs a value", a);
      const char *v = argv[++i];
      if (a[3] == 'h') {
        if (pf_parse_threads(v)) return 2;
      } else if (a[2] == 'o') outputs = v;
      else if (a[2] == 't') tensor = v;
      else if (a[2] == 'l') like_name = v;
      else {
        uint64_t u;
        if (pf_parse_u64(v, &u) || u > 1000000) return pf_usage_error("--ulps: '%s' is not an integer in [0, 1000000]", v);
        ulps = (long)u;
      }
      continue;
    }
    if (a[0] == '-' && a[1]) return pf_usage_error("judge: unknown option '%s' (see precfuzz judge --help)", a);
    if (case_path) return pf_usage_error("judge: one CASE at a time ('%s' and '%s')", case_path, a);
    case_path = a;
  }
  if (!case_path) return pf_usage_error("judge: no CASE given (see precfuzz judge --help)");
  if (!outputs) return pf_usage_error("judge: --outputs FILE is required");
  if (like_name && ulps >= 0) return pf_usage_error("judge: --like and --ulps are two different contracts: give one");
  if (ulps < 0) ulps = 1;
  pf_case c;
  if (pf_case_load(&c, case_path)) {
    pf_case_free(&c);
    return pf_usage_error("%s", pf_error_message());
  }
  char cq[8400], head[9000];
  pf_replay_path(cq, sizeof cq, case_path);
  snprintf(head, sizeof head, "%s%s judge %s", pf_self(), pf_plugins_flags(), cq);
  return judge_report(c, case_path, head, outputs, tensor, like_name, ulps, json);
}

/* ---- an operation's own command: run -k OP with its defaults (pf_op.command) ---------------- */

/* The operation whose command cmd is, or NULL. */
static const pf_op *op_of_command(const char *cmd) {
  for (size_t i = 0; i < pf_op_count(); i++) {
    const pf_op *op = pf_op_at(i);
    if (op->command && strcmp(op->command, cmd) == 0) return op;
  }
  return NULL;
}

static int cmd_op_command(const pf_op *op, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(op->command_help ? op->command_help : "", stdout);
      return 0;
    }
    if (strcmp(argv[i], "-k") == 0 || strncmp(argv[i], "--kernel", 8) == 0 || strncmp(argv[i], "-k", 2) == 0)
      return pf_usage_error("%s: -k is not an option here (%s is run -k %s)", op->command, op->command, op->name);
  }
  char **args = calloc((size_t)argc + 6, sizeof(char *));
  if (!args) return pf_usage_error("%s: out of memory", op->command);
  int n = 0;
  args[n++] = argv[0];
  args[n++] = "-k";
  args[n++] = (char *)op->name;
  int dtype_given = 0; /* the command's dtype unless the user gives one (-t twice is refused) */
  for (int i = 1; i < argc; i++)
    dtype_given |= strncmp(argv[i], "-t", 2) == 0 || strncmp(argv[i], "--dtype", 7) == 0;
  if (op->command_dtype && !dtype_given) {
    args[n++] = "-t";
    args[n++] = (char *)op->command_dtype;
  }
  for (int i = 1; i < argc; i++) args[n++] = argv[i];
  const int rc = cmd_run(n, args);
  free(args);
  return rc;
}

/* ---- main ---------------------------------------------------------------------------- */

static void print_help(void) {
  printf("usage: precfuzz [--kernels LIB.so|exec:CMD|ranks:N:CMD]... COMMAND [options]   (precfuzz COMMAND --help for each)\n\n"
         "  list      the kernels, variants, dtypes, parameters, faults and contracts\n"
         "  run       run generated cases of a kernel against the MPFR oracle\n"
         "  replay    run case files again (findings, regressions)\n"
         "  judge     judge outputs computed elsewhere (.npy, safetensors) on a case's inputs\n");
  for (size_t i = 0; i < pf_op_count(); i++) { /* the operations' own commands (the first of a name) */
    const pf_op *op = pf_op_at(i);
    if (op->command && op_of_command(op->command) == op)
      printf("  %-9s %s\n", op->command, op->command_summary ? op->command_summary : "");
  }
  printf("  diff-backend  the same cases on the CPU emulation and the GPU, compared bit for bit\n"
         "  diff-variant  the same cases on two variants (a framework's kernel and its emulation), bit for bit\n"
         "  boundary  where along one value, scale, parameter or dimension a variant starts to fail\n"
         "  sweep     every variant's boundaries and accuracy, for precision-report (results.json)\n"
         "  minimize  shrink a finding (case file or raw driver input) to a small readable case\n"
         "  version   versions of precfuzz, MPFR, GMP and cJSON\n\n"
         "--kernels LIB.so (repeatable; also $PRECFUZZ_KERNELS, ':'-separated) loads a user's kernel\n"
         "variants from a shared library defining pf_plugin_init (core/plugin.h); --kernels\n"
         "exec:CMD starts CMD (with /bin/sh) as a kernel process that answers case after case over\n"
         "its standard input and output (docs/kernel-protocol.md; python/precfuzz_kernel.py writes\n"
         "one in a few lines; $PRECFUZZ_KERNEL_TIMEOUT seconds per case, default 60); --kernels\n"
         "ranks:N:CMD starts N copies of CMD as one torch.distributed rank group on 127.0.0.1 (rank 0\n"
         "speaks the protocol; python/precfuzz_ranks.py). Either way they are then listed, run,\n"
         "fuzzed and swept like the built-in ones.\n\n"
         "Exit status: 0 nothing found, 1 findings, 2 bad usage or input.\n");
}

static int precfuzz_main(int argc, char **argv) {
  /* --kernels LIB (before the command, repeatable) and $PRECFUZZ_KERNELS: a user's kernels */
  while (argc >= 2 && strcmp(argv[1], "--kernels") == 0) {
    if (argc < 3) return pf_usage_error("--kernels needs a shared library (see precfuzz --help)");
    if (pf_plugin_load(argv[2])) return pf_usage_error("--kernels: %s", pf_error_message());
    argv[2] = argv[0];
    argc -= 2, argv += 2;
  }
  if (pf_plugins_load_env()) return pf_usage_error("PRECFUZZ_KERNELS: %s", pf_error_message());
  if (argc < 2) { /* bad usage: one line on stderr, as every other (the help is --help's) */
    return pf_usage_error("no command given (list, run, replay, judge, diff-backend, diff-variant, boundary, sweep, minimize, "
                       "version; see precfuzz --help)");
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    print_help();
    return 0;
  }
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    if (argc > 2) return pf_usage_error("version: unexpected argument '%s' (it takes none)", argv[2]);
    printf("precfuzz %s (MPFR %s, GMP %s, cJSON %s)\n", PF_VERSION, mpfr_get_version(), gmp_version, cJSON_Version());
    return 0;
  }
  if (strcmp(cmd, "list") == 0) return cmd_list(argc - 1, argv + 1);
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(cmd, "replay") == 0) return cmd_replay(argc - 1, argv + 1);
  if (strcmp(cmd, "judge") == 0) return cmd_judge(argc - 1, argv + 1);
  if (strcmp(cmd, "boundary") == 0) return pf_cmd_boundary(argc - 1, argv + 1);
  if (strcmp(cmd, "sweep") == 0) return pf_cmd_sweep(argc - 1, argv + 1);
  if (strcmp(cmd, "diff-backend") == 0) return pf_cmd_diff_backend(argc - 1, argv + 1);
  if (strcmp(cmd, "diff-variant") == 0) return pf_cmd_diff_variant(argc - 1, argv + 1);
  if (strcmp(cmd, "minimize") == 0) return pf_cmd_minimize(argc - 1, argv + 1);
  /* an operation's own command (after the built-in ones, which it cannot shadow) */
  const pf_op *cop = op_of_command(cmd);
  if (cop) return cmd_op_command(cop, argc - 1, argv + 1);
  char own[256] = "";
  for (size_t i = 0; i < pf_op_count(); i++) {
    const pf_op *op = pf_op_at(i);
    if (op->command && op_of_command(op->command) == op)
      snprintf(own + strlen(own), sizeof own - strlen(own), ", %s", op->command);
  }
  return pf_usage_error("unknown command '%s' (list, run, replay, judge%s, diff-backend, diff-variant, boundary, sweep, minimize, version; see precfuzz --help)", cmd, own);
}

/* What a command printed must have reached its reader: a full disk or a closed pipe on stdout
 * is exit 2, not a silent success. */
int main(int argc, char **argv) {
  pf_interrupt_install();
  const int rc = precfuzz_main(argc, argv);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: cannot write to standard output (%s)\n", pf_prog, strerror(errno));
    return EXIT_USAGE;
  }
  return rc;
}
