/* precfuzz sweep: the command around the sweep (cli/sweep.h). */
#include "cli/sweep_cmd.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/backend.h"
#include "cli/cli.h"
#include "cli/sweep.h"
#include "core/progress.h"
#include "core/tensorfile.h"

static void pf_sweep_help(void) {
  printf("usage: precfuzz sweep [-o results.json] [--cases N] [--points G] [--seed N] [--jobs N] [--kernel K] [--quick]\n"
         "                      [--backend cpu|cuda]\n\n"
         "Runs every kernel variant (the built-in ones and a user's, precfuzz --kernels, of the same\n"
         "kernels), dtype and accumulation through its accuracy scan (N cases at each of G+1 points\n"
         "of its scan axis: error, failures, findings) and its boundary searches\n"
         "(overflow, underflow, divergence: precfuzz boundary), the trajectories, the differential\n"
         "summaries and the fault-detection table, and writes the results (format\n"
         "precfuzz-results/2) for precision-report. Default: results.json, 16 cases, 32 intervals, seed 1,\n"
         "as many threads as processors (the results do not depend on them).\n"
         "  --kernel K   one kernel only      --quick   fp16 only, few cases (for tests)\n"
         "  --backend cuda   on the GPU: the variants that have a CUDA implementation (precfuzz list)\n"
         "Exit status: 0 written, 2 bad usage or a failure to write.\n");
}

int pf_sweep_backend(pf_sweep_opts *o, const char *backend) {
  if (pf_backend_parse(backend, &o->backend)) return pf_usage_error("%s", pf_error_message());
  if (o->backend != PF_BACKEND_CUDA) return 0;
  /* the device is checked with the named kernel, else the first that has a CUDA implementation */
  const char *only = o->only;
  for (size_t i = 0; !only && i < pf_kernel_count(); i++)
    if (pf_kernel_at(i)->run_cuda) only = pf_kernel_at(i)->op->name;
  if (!only) only = pf_kernel_at(0)->op->name;
  return pf_backend_setup(backend, only, NULL, &o->backend, o->device, sizeof o->device);
}

int pf_cmd_sweep(int argc, char **argv) {
  pf_sweep_opts o;
  pf_sweep_opts_default(&o);
  const char *out = "results.json", *backend = "cpu";
  static const char *const valued[] = {"-o", "--cases", "--points", "--seed", "--jobs", "--kernel", "--backend", NULL},
                           *const bare[] = {"--quick", NULL};
  if (pf_flags_once(argc, argv, valued, bare)) return 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      pf_sweep_help();
      return 0;
    }
    if (strcmp(a, "--quick") == 0) {
      o.quick = 1;
      o.cases = 2;
      o.points = 8;
      continue;
    }
    if (strcmp(a, "-o") && strcmp(a, "--cases") && strcmp(a, "--points") && strcmp(a, "--seed") && strcmp(a, "--jobs") &&
        strcmp(a, "--kernel") && strcmp(a, "--backend"))
      return pf_usage_error("sweep: unknown option '%s' (see precfuzz sweep --help)", a);
    if (i + 1 >= argc) return pf_usage_error("sweep: %s needs a value", a);
    const char *v = argv[++i];
    uint64_t u;
    if (strcmp(a, "-o") == 0) out = v;
    else if (strcmp(a, "--backend") == 0) backend = v;
    else if (strcmp(a, "--kernel") == 0) {
      const pf_op *op = pf_op_find(v);
      const int ok = op && op->sweep;
      if (!ok) return pf_usage_error("--kernel: '%s' is not a kernel the sweep knows (see precfuzz list)", v);
      o.only = v;
    } else if (pf_parse_u64(v, &u)) return pf_usage_error("%s: '%s' is not a count", a, v);
    else if (strcmp(a, "--seed") == 0) o.seed = u;
    else if (strcmp(a, "--cases") == 0) {
      if (u < 1 || u > 100000) return pf_usage_error("--cases: '%s' is not in [1, 100000]", v);
      o.cases = (unsigned)u;
    } else if (strcmp(a, "--points") == 0) {
      if (u < 1 || u > 10000) return pf_usage_error("--points: '%s' is not in [1, 10000]", v);
      o.points = (int)u;
    } else {
      if (u < 1 || u > 64) return pf_usage_error("--jobs: '%s' is not in [1, 64]", v);
      o.jobs = (int)u;
    }
  }
  if (o.cases - 1 > UINT64_MAX - o.seed) /* case k of a point takes seed + k */
    return pf_usage_error("--seed %llu with --cases %u: the seeds would pass 2^64 - 1", (unsigned long long)o.seed, o.cases);
  int rc = pf_sweep_backend(&o, backend);
  if (rc) return rc;
  const int to_stdout = strcmp(out, "-") == 0;
  /* fail fast where the file cannot be written; the file itself is written only at the end,
   * whole, under a temporary name and renamed: an interrupted sweep leaves the old one */
  if (!to_stdout && pf_write_file_atomic_probe(out)) return pf_usage_error("-o: %s", pf_error_message());
  if (pf_progress_env()) return pf_usage_error("%s", pf_error_message());
  o.progress = 1;
  const time_t t0 = time(NULL);
  cJSON *r = pf_sweep_run(&o);
  if (!r) return pf_usage_error("%s", pf_error_message());
  /* the time is said, not stored: results are the same bytes whatever the machine's speed */
  const double secs = difftime(time(NULL), t0);
  char *s = cJSON_Print(r);
  cJSON_Delete(r);
  if (!s) return pf_usage_error("-o: out of memory");
  const size_t n = strlen(s);
  char *t = realloc(s, n + 2);
  if (!t) {
    free(s);
    return pf_usage_error("-o: out of memory");
  }
  t[n] = '\n', t[n + 1] = 0;
  const int bad = to_stdout ? fputs(t, stdout) < 0 : pf_write_file_atomic(out, t, n + 1) != PF_OK;
  free(t);
  if (bad) return pf_usage_error("-o: cannot write '%s'%s%s", out, to_stdout ? "" : ": ", to_stdout ? "" : pf_error_message());
  fprintf(stderr, "sweep: %.0f s\n", secs); /* after the write: a failed one is its one line */
  if (!to_stdout) printf("%s\n", out);
  return 0;
}
