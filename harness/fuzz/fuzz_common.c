#include "harness/fuzz/fuzz_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/backend.h"
#include "harness/exec_kernel.h"
#include "harness/plugin.h"
#include "harness/runner.h"
#include "harness/tensorfile.h"

uint8_t pf_bytes_u8(pf_bytes *b) { return b->pos < b->n ? b->p[b->pos++] : 0; }

uint64_t pf_bytes_u64(pf_bytes *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | pf_bytes_u8(b);
  return v;
}

/* $PF_FUZZ_MAX_DIM, read once: 0 when unset; a bad value ends the run (exit 2, one line) */
static size_t pf_fuzz_max_dim(void) {
  static size_t v;
  static int read;
  if (read++) return v;
  const char *s = getenv("PF_FUZZ_MAX_DIM");
  if (!s || !*s) return v = 0;
  char *end;
  errno = 0;
  const unsigned long long x = strtoull(s, &end, 10);
  if (*s == '-' || *end || errno || x < 1 || x > ((size_t)1 << 24)) {
    fprintf(stderr, "fuzz driver: PF_FUZZ_MAX_DIM=%s is not an integer in [1, 16777216]\n", s);
    exit(2);
  }
  return v = (size_t)x;
}

size_t pf_fuzz_dim(pf_bytes *b, size_t small, size_t large) {
  const uint8_t v = pf_bytes_u8(b);
  const size_t cap = pf_fuzz_max_dim();
  if (cap) large = cap;
  if (v < 252 || large <= small) return 1 + v % small;
  /* small * (large / small)^(w / 255), at least small + 1 */
  const double e = pf_bytes_u8(b) / 255.0;
  size_t n = (size_t)((double)small * pow((double)large / (double)small, e) + 0.5);
  return n <= small ? small + 1 : n > large ? large : n;
}

const char *pf_fuzz_fault(void) {
  const char *f = getenv("PF_FUZZ_FAULT");
  return f && *f ? f : NULL;
}

/* name is one of the comma-separated names in list */
static int pf_fuzz_listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
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


const pf_kernel *pf_fuzz_begin(const char *op, pf_bytes *b, pf_case *c) {
  /* $PRECFUZZ_KERNELS: a user's variants join the built-in ones the first byte picks from */
  if (pf_plugins_load_env()) {
    fprintf(stderr, "fuzz driver: PRECFUZZ_KERNELS: %s\n", pf_error_message());
    exit(2);
  }
  const char *fault = pf_fuzz_fault();
  /* $PF_FUZZ_VARIANT aims the driver at one variant, or a comma-separated few (a user's
   * kernels get every input) */
  const char *only = getenv("PF_FUZZ_VARIANT");
  if (only && !*only) only = NULL;
  const pf_kernel *cands[64];
  size_t nc = 0;
  for (size_t i = 0; i < pf_kernel_count() && nc < 64; i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, op) == 0 && (!fault || pf_kernel_has_fault(k, fault)) &&
        (!only || pf_fuzz_listed(only, k->variant)))
      cands[nc++] = k;
  }
  if (!nc && only) {
    fprintf(stderr, "fuzz driver: PF_FUZZ_VARIANT=%s names no variant of %s%s%s (precfuzz list)\n", only, op,
            fault ? " with fault " : "", fault ? fault : "");
    exit(2);
  }
  /* every name listed is a variant of op (a misspelt one would quietly get no input); once */
  static int listed_checked;
  for (const char *p = listed_checked++ ? NULL : only; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    const size_t len = strcspn(p, ",");
    int known = 0;
    for (size_t i = 0; i < pf_kernel_count() && !known; i++) {
      const pf_kernel *k = pf_kernel_at(i);
      known = strcmp(k->op->name, op) == 0 && strlen(k->variant) == len && strncmp(k->variant, p, len) == 0;
    }
    if (!known) {
      fprintf(stderr, "fuzz driver: PF_FUZZ_VARIANT: '%.*s' is no variant of %s (precfuzz list)\n", (int)len, p, op);
      exit(2);
    }
  }
  if (!nc) {
    fprintf(stderr, "fuzz driver: PF_FUZZ_FAULT=%s names no fault of %s\n", fault ? fault : "", op);
    abort();
  }
  const pf_kernel *k = cands[pf_bytes_u8(b) % nc];
  if (pf_case_init(c, op, k->variant, 0)) abort();
  if (fault) snprintf(c->fault, sizeof c->fault, "%s", fault);
  return k;
}

void pf_fuzz_fit_param(const pf_kernel *k, pf_case *c, const char *name) {
  const int i = pf_op_param_index(k->op, name);
  const pf_param_range *r = i >= 0 ? pf_kernel_param(k, i) : NULL;
  if (!r) return;
  const pf_param_desc *d = &k->op->params[i];
  double *v = &c->params[i];
  if (d->type == PF_PARAM_CHOICE) {
    if (r->choices >> (int)*v & 1) return;
    int n = 0; /* the (v mod n)-th of the n choices it takes */
    for (int j = 0; j < 32; j++) n += r->choices >> j & 1;
    for (int j = 0, want = (int)*v % n; j < 32; j++)
      if ((r->choices >> j & 1) && want-- == 0) {
        *v = j;
        break;
      }
    return;
  }
  if (*v < r->lo) *v = r->lo;
  if (*v > r->hi) *v = r->hi;
  if ((d->type == PF_PARAM_INT && *v != floor(*v)) || (d->held && !pf_dtype_holds((pf_dtype)(d->held - 1), *v)))
    *v = r->def;
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

void pf_fuzz_raw_values(pf_bytes *b, pf_gen *g, pf_dtype t, size_t n) {
  const size_t w = t == PF_FP32 ? 4 : 2;
  pf_gen_free(g);
  g->dist = PF_DIST_VALUES;
  g->values = malloc((n ? n : 1) * sizeof(double));
  if (!g->values) abort();
  g->nvalues = n;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits = 0;
    for (size_t k = 0; k < w; k++) bits = bits << 8 | pf_bytes_u8(b);
    g->values[i] = pf_decode(t, bits);
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
    char path[1024];
    snprintf(path, sizeof path, "%s/finding-%s-%016llx.json", dir && *dir ? dir : ".", driver,
             (unsigned long long)pf_fnv(json ? json : ""));
    const int saved = json && pf_write_file_atomic(path, json, strlen(json)) == PF_OK; /* whole or not at all */
    char d[1024];
    pf_run_describe(c, &r, d, sizeof d);
    char shape[96] = "";
    for (int i = 0; i < c->ndims; i++)
      snprintf(shape + strlen(shape), sizeof shape - strlen(shape), i ? "x%zu" : "%zu", c->shape[i]);
    fprintf(stderr, "precfuzz finding: %s %s/%s %s/%s shape %s%s%s: %s\n", driver, c->kernel, c->variant,
            pf_dtype_name(c->dtype), pf_dtype_name(c->accum), shape, c->fault[0] ? " fault " : "", c->fault, d);
    fprintf(stderr, "reproduce with: %s%s replay %s\n", pf_self(), pf_plugins_flags(), saved ? path : "(could not save the case)");
    free(json);
    if (stats) pf_fuzz_stats(); /* abort() runs no atexit handler: the statistics up to the finding */
    abort();
  }
  pf_run_free(&r);
}
