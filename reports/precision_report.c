/* precision-report [-i results.json] [-o OUT] [--format html|md|json] [sweep options]
 * Without -i it runs the sweep first (precfuzz sweep's code). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/interrupt.h"
#include "core/case.h"
#include "cli/cli.h"
#include "cli/sweep_cmd.h"
#include "core/progress.h"
#include "core/tensorfile.h"
#include "core/plugin.h"
#include "reports/report.h"

static void help(void) {
  printf("usage: precision-report [-i results.json] [-o OUT] [--format html|md|json] [--save-results FILE]\n"
         "                        [--cases N] [--points G] [--seed N] [--jobs N] [--quick] [--backend cpu|cuda]\n"
         "                        [--kernels LIB.so|exec:CMD]...\n\n"
         "Writes the precision report of a sweep: one self-contained HTML page (inline CSS and SVG plots, no\n"
         "script, no external asset: it opens offline), a Markdown summary for CI logs, or a JSON summary.\n"
         "  -i FILE            the results of precfuzz sweep; without it the sweep runs first (with the\n"
         "                     --cases, --points, --seed, --jobs, --quick options, as precfuzz sweep)\n"
         "  -o OUT             where to write (default precision-report.html for html, standard output\n"
         "                     for md and json; - for standard output)\n"
         "  --save-results F   also write the sweep's results (when it ran)\n"
         "  --kernels LIB.so   a user's kernel variants, or exec:CMD a kernel process (also\n"
         "                     $PRECFUZZ_KERNELS; precfuzz --help): the\n"
         "                     sweep includes those of the operations it covers\n"
         "Exit status: 0 written, 2 bad usage, unreadable or malformed results, or a failure to write.\n");
}

static int report_main(int argc, char **argv) {
  pf_prog = "precision-report";
  const char *in = NULL, *out = NULL, *format = "html", *save = NULL, *backend = NULL;
  pf_sweep_opts so;
  pf_sweep_opts_default(&so);
  static const char *const once[] = {"-i", "-o", "--format", "--save-results", "--cases", "--points", "--seed", "--jobs",
                                     "--backend", NULL},
                           *const once_bare[] = {"--quick", NULL};
  if (pf_flags_once(argc, argv, once, once_bare)) return 2; /* --kernels may repeat: each loads a plugin */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      help();
      return 0;
    }
    if (strcmp(a, "--quick") == 0) {
      so.quick = 1, so.cases = 2, so.points = 8;
      continue;
    }
    static const char *const valued[] = {"-i", "-o", "--format", "--save-results", "--cases", "--points", "--seed", "--jobs",
                                         "--backend", "--kernels", NULL};
    int known = 0;
    for (int k = 0; valued[k]; k++) known |= strcmp(a, valued[k]) == 0;
    if (!known) return pf_usage_error("unknown option '%s' (see precision-report --help)", a);
    if (i + 1 >= argc) return pf_usage_error("%s needs a value", a);
    const char *v = argv[++i];
    uint64_t u = 0;
    if (strcmp(a, "-i") == 0) in = v;
    else if (strcmp(a, "--kernels") == 0) {
      if (pf_plugin_load(v)) return pf_usage_error("--kernels: %s", pf_error_message());
    } else if (strcmp(a, "--backend") == 0) backend = v;
    else if (strcmp(a, "-o") == 0) out = v;
    else if (strcmp(a, "--save-results") == 0) save = v;
    else if (strcmp(a, "--format") == 0) {
      if (strcmp(v, "html") && strcmp(v, "md") && strcmp(v, "json"))
        return pf_usage_error("--format: '%s' is not html, md or json", v);
      format = v;
    } else if (pf_parse_u64(v, &u)) return pf_usage_error("%s: '%s' is not a count", a, v);
    else if (strcmp(a, "--cases") == 0) {
      if (u < 1 || u > 100000) return pf_usage_error("--cases: '%s' is not in [1, 100000]", v);
      so.cases = (unsigned)u;
    } else if (strcmp(a, "--points") == 0) {
      if (u < 1 || u > 10000) return pf_usage_error("--points: '%s' is not in [1, 10000]", v);
      so.points = (int)u;
    } else if (strcmp(a, "--seed") == 0) so.seed = u;
    else {
      if (u < 1 || u > 64) return pf_usage_error("--jobs: '%s' is not in [1, 64]", v);
      so.jobs = (int)u;
    }
  }
  if (pf_plugins_load_env()) return pf_usage_error("PRECFUZZ_KERNELS: %s", pf_error_message());
  if (in && save) return pf_usage_error("--save-results: the sweep does not run when -i is given");
  for (int i = 1; in && i < argc; i++) /* the sweep's settings have no effect on a report read from -i */
    if (strcmp(argv[i], "--cases") == 0 || strcmp(argv[i], "--points") == 0 || strcmp(argv[i], "--seed") == 0 ||
        strcmp(argv[i], "--jobs") == 0 || strcmp(argv[i], "--quick") == 0)
      return pf_usage_error("%s: the sweep does not run when -i is given", argv[i]);
  if (in && backend) return pf_usage_error("--backend: the sweep does not run when -i is given");
  if (!in) {
    const int rc = pf_sweep_backend(&so, backend ? backend : "cpu");
    if (rc) return rc;
  }
  if (!out) out = strcmp(format, "html") == 0 ? "precision-report.html" : "-";
  /* no output over an input or over the other output: one of them would be lost */
  if (in && pf_same_file(in, out)) return pf_usage_error("-o %s is the input (-i): write the report elsewhere", out);
  if (save && pf_same_file(save, out)) return pf_usage_error("--save-results and -o name one file (%s): give each its own", out);
  /* where the page and the results go can be written: said now, not after the sweep */
  if (strcmp(out, "-") != 0 && pf_write_file_atomic_probe(out)) return pf_usage_error("-o: %s", pf_error_message());
  if (save && pf_write_file_atomic_probe(save)) return pf_usage_error("--save-results: %s", pf_error_message());
  cJSON *root = NULL;
  if (in) {
    char *text = NULL;
    size_t len = 0;
    if (pf_read_file(in, &text, &len)) return pf_usage_error("-i: %s", pf_error_message());
    if (strlen(text) != len) {
      free(text);
      return pf_usage_error("%s: not JSON text (a NUL byte at offset %zu)", in, strlen(text));
    }
    const pf_status st = pf_json_parse_strict(text, in, &root);
    free(text);
    if (st) return pf_usage_error("%s", pf_error_message());
  } else {
    if (pf_progress_env()) return pf_usage_error("%s", pf_error_message());
    so.progress = 1;
    const time_t t0 = time(NULL);
    root = pf_sweep_run(&so);
    if (!root) return pf_usage_error("%s", pf_error_message());
    fprintf(stderr, "precision-report: swept in %.0f s\n", difftime(time(NULL), t0)); /* said, not stored */
    if (save) { /* whole, under a temporary name, renamed */
      char *s = cJSON_Print(root);
      const pf_status st = s ? pf_write_file_atomic(save, s, strlen(s)) : PF_ERR_NOMEM;
      free(s);
      if (st) {
        cJSON_Delete(root);
        return pf_usage_error("--save-results: cannot write '%s' (%s)", save, pf_error_message());
      }
    }
  }
  char err[512];
  if (pf_results_check(root, err, sizeof err)) {
    cJSON_Delete(root);
    return pf_usage_error("%s: %s", in ? in : "the sweep's results", err);
  }
  /* the page is made in memory and written whole under a temporary name, then renamed: a
   * full disk or an interrupt never leaves half a page, nor loses the old one */
  const int to_stdout = strcmp(out, "-") == 0;
  char *page = NULL;
  size_t plen = 0;
  FILE *f = to_stdout ? stdout : open_memstream(&page, &plen);
  if (!f) {
    cJSON_Delete(root);
    return pf_usage_error("-o: out of memory");
  }
  int rc = strcmp(format, "html") == 0 ? pf_report_html(root, f) : strcmp(format, "md") == 0 ? pf_report_md(root, f)
                                                                                            : pf_report_json(root, f);
  cJSON_Delete(root);
  if (!to_stdout) {
    if (fclose(f) != 0) rc = -1;
    if (!rc && pf_write_file_atomic(out, page, plen)) rc = -1;
    free(page);
  }
  if (rc) return pf_usage_error("-o: cannot write '%s'%s%s", out, to_stdout ? "" : ": ", to_stdout ? "" : pf_error_message());
  if (!to_stdout) printf("%s\n", out);
  return 0;
}

/* The path it prints (or the page, with -o -) must reach its reader: exit 2 otherwise. */
int main(int argc, char **argv) {
  pf_interrupt_install(); /* Ctrl-C: no half-written file, an existing -o file kept */
  const int rc = report_main(argc, argv);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "precision-report: cannot write to standard output (%s)\n", strerror(errno));
    return 2;
  }
  return rc;
}
