#include "fuzz/fuzz_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend.h"
#include "core/exec_kernel.h"
#include "core/plugin.h"
#include "core/runner.h"
#include "core/tensorfile.h"

/* The directory of the driver's -artifact_prefix ("" when none was given). */
static char pf_artifact_dir[4096];
void pf_fuzz_note_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "-artifact_prefix=", 17) != 0) continue;
    const char *p = argv[i] + 17, *slash = strrchr(p, '/');
    if (!slash) snprintf(pf_artifact_dir, sizeof pf_artifact_dir, ".");
    else if (slash == p) snprintf(pf_artifact_dir, sizeof pf_artifact_dir, "/");
    else snprintf(pf_artifact_dir, sizeof pf_artifact_dir, "%.*s", (int)(slash - p), p);
  }
}

/* ---- the operations' drivers ---------------------------------------------------------- */

int pf_fuzz_drivers(pf_fuzz_driver *out, int max) {
  int n = 0;
  for (size_t i = 0; i < pf_op_count(); i++) {
    const pf_op *op = pf_op_at(i);
    if (!op->fuzz_decode) continue;
    if (n < max) {
      snprintf(out[n].driver, sizeof out[n].driver, "%s_fuzzer", op->name);
      out[n].op = op;
    }
    n++;
  }
  return n;
}

int pf_fuzz_driver_find(const char *driver, pf_fuzz_driver *out) {
  pf_fuzz_driver d[64];
  const int n = pf_fuzz_drivers(d, 64);
  for (int i = 0; i < n && i < 64; i++)
    if (strcmp(d[i].driver, driver) == 0) {
      *out = d[i];
      return 1;
    }
  return 0;
}

void pf_fuzz_driver_names(char *buf, size_t len) {
  pf_fuzz_driver d[64];
  const int n = pf_fuzz_drivers(d, 64);
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < n && i < 64 && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", d[i].driver);
}


/* A user's kernel: the decoded case fitted into what it takes (its dtypes and accumulations,
 * its parameter ranges), so that inputs are not spent on cases it refuses. */
static void pf_fuzz_fit(const pf_kernel *k, pf_case *c) {
  for (int i = 0; i < k->op->nparams; i++) pf_fuzz_fit_param(k, c, k->op->params[i].name);
  for (int t = 0; t < PF_NDTYPES && !pf_kernel_accepts(k, c->dtype, c->accum); t++) {
    const pf_dtype d = (pf_dtype)((c->dtype + t) % PF_NDTYPES);
    if (pf_kernel_accepts(k, d, d)) c->dtype = c->accum = d;
    else if (pf_kernel_accepts(k, d, PF_FP32)) c->dtype = d, c->accum = PF_FP32;
  }
}


/* FNV-1a of the case text: names the saved file. */
static uint64_t pf_fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* PF_FUZZ_STATS=1: at exit, how many decoded cases fell inside the contract's domain (the
 * only ones judged) and how many outside, and where a judged case's time goes: the kernel
 * (on the GPU backend: copies, launch and synchronisation included), the oracle, and the
 * rest (generating the inputs, the bound, the comparison), and how many of the oracle's rows
 * its fast path settled. A driver is launch-bound only where the kernel's share is large. */
static unsigned long long pf_fuzz_in, pf_fuzz_out, pf_fuzz_refused, pf_fuzz_no_backend;
static double pf_fuzz_secs_kernel, pf_fuzz_secs_oracle, pf_fuzz_secs_all;
static unsigned long long pf_fuzz_units_fast, pf_fuzz_units_mpfr; /* the oracle's rows (units) */
static void pf_fuzz_stats(void) {
  fprintf(stderr,
          "precfuzz stats: %llu cases judged inside the domain, %llu outside, %llu refused by a user's variant, %llu the "
          "backend cannot run\n",
          pf_fuzz_in, pf_fuzz_out, pf_fuzz_refused, pf_fuzz_no_backend);
  if (!pf_fuzz_in) return;
  const double us = 1e6 / (double)pf_fuzz_in;
  fprintf(stderr,
          "precfuzz time per judged case: %.1f us: kernel %.1f us (%.0f%%), oracle %.1f us (%.0f%%), rest %.1f us\n",
          pf_fuzz_secs_all * us, pf_fuzz_secs_kernel * us, 100 * pf_fuzz_secs_kernel / pf_fuzz_secs_all,
          pf_fuzz_secs_oracle * us, 100 * pf_fuzz_secs_oracle / pf_fuzz_secs_all,
          (pf_fuzz_secs_all - pf_fuzz_secs_kernel - pf_fuzz_secs_oracle) * us);
  if (pf_fuzz_units_fast)
    fprintf(stderr, "precfuzz oracle: %llu rows by the fast path, %llu by MPFR (%.1f%% fall back)\n", pf_fuzz_units_fast,
            pf_fuzz_units_mpfr, 100.0 * (double)pf_fuzz_units_mpfr / (double)(pf_fuzz_units_fast + pf_fuzz_units_mpfr));
}

static double pf_fuzz_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pf_fuzz_run_case(const char *driver, pf_case *c) {
  static int stats = -1;
  if (stats < 0) {
    const char *e = getenv("PF_FUZZ_STATS");
    stats = e && strcmp(e, "1") == 0;
    if (stats) atexit(pf_fuzz_stats);
  }
  /* PF_FUZZ_BACKEND=cuda: the kernels run on the GPU (cases of variants without a CUDA
   * implementation are skipped; no device at all is an error, said once) */
  static int backend = -1;
  if (backend < 0) {
    const char *e = getenv("PF_FUZZ_BACKEND");
    if (pf_backend_parse(e && *e ? e : "cpu", &backend)) {
      fprintf(stderr, "%s: PF_FUZZ_BACKEND: %s\n", driver, pf_error_message());
      exit(2);
    }
    char d[256];
    if (backend == PF_BACKEND_CUDA && pf_cuda_describe(d, sizeof d)) {
      fprintf(stderr, "%s: %s\n", driver, pf_error_message());
      exit(2);
    }
  }
  if (backend == PF_BACKEND_CUDA && !pf_case_kernel(c)->run_cuda) {
    pf_fuzz_out++;
    return;
  }
  /* A user's kernel (--kernels) may take less than its operation's tables allow, which the
   * decoders cannot know: what it refuses is skipped. A built-in variant refusing a decoded
   * case is the decoder's bug (pf_run_case's error below). */
  const pf_kernel *k = pf_case_kernel(c);
  if (pf_plugin_of(k)) pf_fuzz_fit(k, c);
  if (pf_plugin_of(k) && (!pf_kernel_accepts(k, c->dtype, c->accum) || pf_kernel_check_params(k, c) ||
                          (k->check && k->check(c)))) {
    pf_fuzz_refused++;
    return;
  }
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  o.domain_only = 1; /* a variant used outside its contract's domain is not a bug */
  o.backend = backend;
  pf_run r;
  const double t0 = pf_fuzz_now();
  pf_status st = pf_run_case(c, &o, &r);
  const double secs = pf_fuzz_now() - t0;
  /* The GPU cannot run every case the CPU can (cuBLAS has no bf16-accumulating GEMM): such a
   * case is skipped on that backend, as the report's sweep skips it. */
  if (st == PF_ERR_UNSUPPORTED && backend != PF_BACKEND_CPU) {
    pf_fuzz_no_backend++;
    return;
  }
  if (st) {
    fprintf(stderr, "%s: the decoder built an invalid case: %s\n", driver, pf_error_message());
    abort();
  }
  if (r.skipped) {
    pf_fuzz_out++;
    pf_run_free(&r);
    return;
  }
  pf_fuzz_in++;
  pf_fuzz_secs_all += secs;
  pf_fuzz_secs_kernel += r.seconds_kernel;
  pf_fuzz_secs_oracle += r.seconds_oracle;
  pf_fuzz_units_fast += r.oracle.fast_units;
  pf_fuzz_units_mpfr += r.oracle.mpfr_units;
  if (pf_verdict_is_finding(r.cmp.verdict)) {
    snprintf(c->expect, sizeof c->expect, "%s", pf_verdict_name(r.cmp.verdict));
    char *json = pf_case_to_json(c);
    const char *dir = getenv("PF_FINDINGS_DIR");
    if (!dir || !*dir) dir = pf_artifact_dir[0] ? pf_artifact_dir : ".";
    char path[4400], pq[8900];
    snprintf(path, sizeof path, "%s/finding-%s-%016llx.json", dir, driver, (unsigned long long)pf_fnv(json ? json : ""));
    pf_replay_path(pq, sizeof pq, path);
    const int saved = json && pf_write_file_atomic(path, json, strlen(json)) == PF_OK; /* whole or not at all */
    char d[1024];
    pf_run_describe(c, &r, d, sizeof d);
    char shape[96] = "";
    for (int i = 0; i < c->ndims; i++)
      snprintf(shape + strlen(shape), sizeof shape - strlen(shape), i ? "x%zu" : "%zu", c->shape[i]);
    fprintf(stderr, "precfuzz finding: %s %s/%s %s/%s shape %s%s%s: %s\n", driver, c->kernel, c->variant,
            pf_dtype_name(c->dtype), pf_dtype_name(c->accum), shape, c->fault[0] ? " fault " : "", c->fault, d);
    fprintf(stderr, "reproduce with: %s%s replay %s\n", pf_self(), pf_plugins_flags(), saved ? pq : "(could not save the case)");
    free(json);
    if (stats) pf_fuzz_stats(); /* abort() runs no atexit handler: the statistics up to the finding */
    abort();
  }
  pf_run_free(&r);
}
