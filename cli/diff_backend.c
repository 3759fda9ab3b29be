/* precfuzz diff-backend: the same cases on the CPU emulation and on the GPU; precfuzz
 * diff-variant: the same cases on a variant and on the one whose contract it has (a framework's
 * kernel against precfuzz's emulation of it). Each run is judged by the oracle, and the two
 * outputs are compared element by element. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "cli/cli.h"
#include "core/runner.h"

static void help(int by_variant) {
  if (by_variant) {
    printf("usage: precfuzz diff-variant -k KERNEL -v VARIANT [--against VARIANT] [-t DTYPE] [-a ACCUM]\n"
           "                             [--cases N] [--seed N] [--shape ...] [--json] [run's case options]\n\n"
           "Runs the same cases (seeds N, N+1, ...) on VARIANT and on the variant it is compared with\n"
           "(default: the built-in one whose contract it has, precfuzz list), for every dtype and\n"
           "accumulation both take (or the ones named), judges both against the oracle, and prints the\n"
           "fraction of bitwise-equal outputs, the largest difference between them in ulps, each one's\n"
           "findings, and VARIANT's largest distance from the correctly rounded result. Given a\n"
           "framework's kernel (--kernels exec:...), it measures how faithful the emulation of it is.\n"
           "Default: 20 cases.\n"
           "Exit status: 0 no finding on either, 1 findings, 2 bad usage.\n");
    return;
  }
  printf("usage: precfuzz diff-backend [-k KERNEL] [-v VARIANT] [-t DTYPE] [-a ACCUM] [--cases N] [--seed N]\n"
         "                             [--shape ...] [--json] [run's case options]\n\n"
         "Runs the same cases (seeds N, N+1, ...) on the CPU emulation and on the GPU for every variant\n"
         "with a CUDA implementation (or the one named), every dtype and accumulation it takes (or the\n"
         "ones named), judges both against the oracle, and prints per variant the fraction of\n"
         "bitwise-equal outputs, the largest CPU-GPU difference in ulps, and each backend's findings.\n"
         "A dtype and accumulation the GPU cannot run (cuBLAS has no bf16-accumulating GEMM) is a row\n"
         "that says so. Default: 20 cases. Needs a CUDA build and a device (exit 2 otherwise).\n"
         "Exit status: 0 no finding on either backend, 1 findings, 2 bad usage, no device.\n");
}

static void print_header(int by_variant, const char *device) {
  if (by_variant)
    printf("%-13s %-16s %-13s %-13s %6s %10s %9s %9s %9s %9s %9s\n", "kernel", "variant", "against", "dtype/accum", "cases",
           "elements", "bitwise=", "ulps-apart", "findings", "find-vs", "max-ulps");
  else
    printf("device: %s\n%-13s %-13s %-13s %6s %10s %9s %9s %9s %9s\n", device, "kernel", "variant", "dtype/accum", "cases",
           "elements", "bitwise=", "max-ulps", "find-cpu", "find-gpu");
}

typedef struct {
  size_t elems, equal, cases, findings[2];
  int64_t max_ulps, max_ulps_exact; /* between the two; of the first from the correctly rounded */
} pf_diff_row;

/* Runs case c on one backend; 0, an exit status, or -1 where the GPU cannot run this dtype
 * and accumulation (cuBLAS has no bf16-accumulating GEMM): the row is then skipped, named. */
static int run_on(const pf_case *c, int backend, pf_run *r) {
  pf_oracle_opts oo;
  pf_oracle_opts_default(&oo);
  oo.backend = backend;
  const pf_status st = pf_run_case(c, &oo, r);
  if (st == PF_ERR_UNSUPPORTED && backend == PF_BACKEND_CUDA) return -1;
  if (st) return pf_usage_error("%s/%s seed-based case: %s", c->kernel, c->variant, pf_error_message());
  return 0;
}

/* against: NULL compares backends (diff-backend), else the variant named (diff-variant) */
static int diff(int argc, char **argv, int by_variant) {
  const char *cmd = by_variant ? "diff-variant" : "diff-backend";
  run_opts o;
  pf_run_opts_init(&o, 20);
  const char *shape_arg = NULL, *backend = by_variant ? "cpu" : "cuda", *against = NULL;
  int have_t = 0, have_a = 0;
  enum { O_AGAINST = 1000 };
  static const struct option longopts[] = {PF_CASE_LONGOPTS, {"against", required_argument, 0, O_AGAINST}, {0, 0, 0, 0}};
  opterr = 0;
  optind = 1;
  int ch, rc;
  unsigned char seen[PF_OPT_CODES] = {0};
  while ((ch = getopt_long(argc, argv, ":k:v:t:a:h", longopts, NULL)) != -1) {
    if (pf_option_once(longopts, ch, seen)) return 2;
    have_t |= ch == 't', have_a |= ch == 'a';
    if (ch == 'h') {
      help(by_variant);
      return 0;
    }
    if (ch == O_AGAINST && by_variant) {
      against = optarg;
      continue;
    }
    if ((rc = pf_case_option(ch, optarg, &o, &shape_arg, &backend)) >= 0) {
      if (rc) return rc;
      continue;
    }
    if (ch == ':') return pf_usage_error("%s: %s needs a value", cmd, argv[optind - 1]);
    return pf_usage_error("%s: unknown option '%s' (see precfuzz %s --help)", cmd, argv[optind - 1], cmd);
  }
  if (optind < argc) return pf_usage_error("%s: unexpected argument '%s'", cmd, argv[optind]);
  if (pf_check_run_opts(&o)) return 2;
  if (strcmp(backend, by_variant ? "cpu" : "cuda") != 0)
    return pf_usage_error("%s: --backend is not an option here%s", cmd, by_variant ? "" : " (it runs both)");
  if (o.kernel && !pf_op_find(o.kernel)) return pf_usage_error("-k: unknown kernel '%s' (see precfuzz list)", o.kernel);
  if (o.variant && !o.kernel) return pf_usage_error("%s: -v needs -k", cmd);
  if (o.variant && !pf_kernel_find(o.kernel, o.variant))
    return pf_usage_error("-v: unknown variant '%s' of kernel %s (see precfuzz list)", o.variant, o.kernel);
  if (o.fault) return pf_usage_error("%s: --fault is not an option here (it compares correct variants)", cmd);
  if (o.checkpoint) return pf_usage_error("%s: --checkpoint is not an option here (it compares backends on generated cases)", cmd);
  if (shape_arg) {
    if (!o.kernel) return pf_usage_error("%s: --shape needs -k", cmd);
    if ((rc = pf_parse_shape(shape_arg, pf_op_find(o.kernel), o.shape))) return rc;
    o.have_shape = 1;
  }
  const pf_kernel *other = NULL; /* diff-variant: what the variant is compared with */
  if (by_variant) {
    if (!o.variant) return pf_usage_error("diff-variant: -k KERNEL -v VARIANT are required");
    const pf_kernel *k = pf_kernel_find(o.kernel, o.variant);
    if (!against && !k->like)
      return pf_usage_error("diff-variant: %s/%s is a built-in variant: name the one to compare it with (--against)", o.kernel, o.variant);
    if (!against) against = k->like;
    if (!(other = pf_kernel_find(o.kernel, against)))
      return pf_usage_error("--against: unknown variant '%s' of kernel %s (see precfuzz list)", against, o.kernel);
  }
  /* which kernels: those named, with a CUDA implementation */
  int any = by_variant;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if ((o.kernel && strcmp(k->op->name, o.kernel)) || (o.variant && strcmp(k->variant, o.variant))) continue;
    any |= k->run_cuda != NULL;
  }
  if (!any)
    return pf_usage_error("diff-backend: %s%s%s has no CUDA implementation%s", o.kernel ? o.kernel : "no kernel",
                       o.variant ? "/" : "", o.variant ? o.variant : "", pf_cuda_missing_hint());
  char device[256] = "cpu";
  if (!by_variant && pf_cuda_describe(device, sizeof device)) return pf_usage_error("%s", pf_error_message());
  cJSON *root = o.json ? cJSON_CreateObject() : NULL, *rows = NULL;
  if (root) {
    cJSON_AddStringToObject(root, "precfuzz", PF_VERSION);
    if (by_variant) cJSON_AddStringToObject(root, "against", against);
    else cJSON_AddStringToObject(root, "device", device);
    rows = cJSON_AddArrayToObject(root, "variants");
  }
  int findings = 0, nrows = 0;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if ((!by_variant && !k->run_cuda) || (o.kernel && strcmp(k->op->name, o.kernel)) || (o.variant && strcmp(k->variant, o.variant)))
      continue;
    for (int t = 0; t < PF_NDTYPES; t++)
      for (int s = 0; s < 2; s++) {
        const pf_dtype dt = (pf_dtype)t, acc = s ? dt : PF_FP32;
        if ((s && t == PF_FP32) || !pf_kernel_accepts(k, dt, acc) || (other && !pf_kernel_accepts(other, dt, acc))) continue;
        if ((have_t && dt != o.dtype) || (have_a && acc != o.accum)) continue;
        run_opts ro = o;
        ro.dtype = dt, ro.accum = acc;
        pf_diff_row row = {0};
        char skipped[512] = "";
        for (uint64_t c = 0; c < o.cases; c++) {
          pf_case cs, co;
          if ((rc = pf_build_case(k, &ro, o.seed + c, &cs))) return rc;
          if (other && (rc = pf_build_case(other, &ro, o.seed + c, &co))) {
            pf_case_free(&cs);
            return rc;
          }
          pf_run a, b;
          if ((rc = run_on(&cs, PF_BACKEND_CPU, &a)) || (rc = other ? run_on(&co, PF_BACKEND_CPU, &b) : run_on(&cs, PF_BACKEND_CUDA, &b))) {
            pf_case_free(&cs);
            if (other) pf_case_free(&co);
            if (rc != -1) {
              cJSON_Delete(root);
              return rc;
            }
            pf_run_free(&a), pf_run_free(&b); /* b: what its setup allocated */
            snprintf(skipped, sizeof skipped, "%s", pf_error_message());
            break;
          }
          if (other) pf_case_free(&co);
          size_t eq;
          int64_t mu;
          pf_backend_diff(cs.dtype, a.oracle.dtype, a.out, b.out, a.nout, &eq, &mu);
          row.elems += a.nout, row.equal += eq, row.cases++;
          if (mu > row.max_ulps) row.max_ulps = mu;
          if (a.cmp.max_ulps > row.max_ulps_exact) row.max_ulps_exact = a.cmp.max_ulps;
          row.findings[0] += a.in_domain && pf_verdict_is_finding(a.cmp.verdict);
          row.findings[1] += b.in_domain && pf_verdict_is_finding(b.cmp.verdict);
          pf_run_free(&a);
          pf_run_free(&b);
          pf_case_free(&cs);
        }
        findings |= row.findings[0] || row.findings[1];
        if (!nrows++ && !root) print_header(by_variant, device); /* once there is a row under it */
        const double frac = row.elems ? (double)row.equal / (double)row.elems : 1;
        char ta[32];
        snprintf(ta, sizeof ta, "%s/%s", pf_dtype_name(dt), s ? "storage" : "fp32");
        if (*skipped) {
          if (rows) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "kernel", k->op->name);
            cJSON_AddStringToObject(r, "variant", k->variant);
            cJSON_AddStringToObject(r, "dtype", pf_dtype_name(dt));
            cJSON_AddStringToObject(r, "accum", s ? "storage" : "fp32");
            cJSON_AddStringToObject(r, "skipped", skipped);
            cJSON_AddItemToArray(rows, r);
          } else {
            printf("%-13s %-13s %-13s not run on the GPU: %s\n", k->op->name, k->variant, ta, skipped);
          }
          continue;
        }
        if (rows) {
          cJSON *r = cJSON_CreateObject();
          cJSON_AddStringToObject(r, "kernel", k->op->name);
          cJSON_AddStringToObject(r, "variant", k->variant);
          if (other) cJSON_AddStringToObject(r, "against", other->variant);
          cJSON_AddStringToObject(r, "dtype", pf_dtype_name(dt));
          cJSON_AddStringToObject(r, "accum", s ? "storage" : "fp32");
          cJSON_AddNumberToObject(r, "cases", (double)row.cases);
          cJSON_AddNumberToObject(r, "elements", (double)row.elems);
          cJSON_AddNumberToObject(r, "bitwise_equal", frac);
          cJSON_AddNumberToObject(r, "max_ulps", (double)row.max_ulps);
          cJSON_AddNumberToObject(r, other ? "findings" : "findings_cpu", (double)row.findings[0]);
          cJSON_AddNumberToObject(r, other ? "findings_against" : "findings_gpu", (double)row.findings[1]);
          if (other) cJSON_AddNumberToObject(r, "max_ulps_from_exact", (double)row.max_ulps_exact);
          cJSON_AddItemToArray(rows, r);
        } else if (other) {
          printf("%-13s %-16s %-13s %-13s %6zu %10zu %8.2f%% %10lld %9zu %9zu %9lld\n", k->op->name, k->variant, other->variant, ta,
                 row.cases, row.elems, 100 * frac, (long long)row.max_ulps, row.findings[0], row.findings[1],
                 (long long)row.max_ulps_exact);
        } else {
          printf("%-13s %-13s %-13s %6zu %10zu %8.2f%% %9lld %9zu %9zu\n", k->op->name, k->variant, ta, row.cases, row.elems,
                 100 * frac, (long long)row.max_ulps, row.findings[0], row.findings[1]);
        }
      }
  }
  if (!nrows) { /* nothing compared is no result: say so */
    cJSON_Delete(root);
    return pf_usage_error("%s: no dtype and accumulation%s to compare (precfuzz list)", cmd,
                       have_t || have_a ? " of those given" : "");
  }
  if (root) {
    char *txt = cJSON_Print(root);
    puts(txt);
    free(txt);
    cJSON_Delete(root);
  }
  return findings ? EXIT_FINDINGS : 0;
}

int pf_cmd_diff_backend(int argc, char **argv) { return diff(argc, argv, 0); }
int pf_cmd_diff_variant(int argc, char **argv) { return diff(argc, argv, 1); }
