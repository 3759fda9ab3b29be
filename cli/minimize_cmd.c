/* precfuzz minimize: the command around the minimizer (cli/minimize.h). */
#include "cli/minimize_cmd.h"
#include "cli/caseopts.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/minimize.h"
#include "core/plugin.h"
#include "core/runner.h"
#include "core/tensorfile.h"

#define EXIT_USAGE 2

static int pf_min_usage(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "precfuzz: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  return EXIT_USAGE;
}

/* --- inputs -------------------------------------------------------------------------- */

static void pf_min_help(void) {
  printf("usage: precfuzz minimize FILE [-o OUT] [--driver NAME] [--fault NAME]\n\n"
         "Shrinks a finding (a case file or a raw fuzz-driver input) while its kernel, variant and\n"
         "verdict stay the same: smaller dimensions, drawn values made explicit, values replaced by\n"
         "0, +-1, powers of two or shorter hex floats. Deterministic; writes a case file (default\n"
         "FILE.min.json) and prints the command that replays it.\n"
         "Exit status: 0 written, 2 bad usage or input (or no finding to minimize).\n");
}

int pf_cmd_minimize(int argc, char **argv) {
  const char *in = NULL, *outp = NULL, *driver = NULL, *fault = NULL;
  static const char *const valued[] = {"-o", "--driver", "--fault", NULL};
  if (pf_flags_once(argc, argv, valued, NULL)) return 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      pf_min_help();
      return 0;
    }
    const char *const *slot = NULL;
    if (strcmp(argv[i], "-o") == 0) slot = (const char *const *)&outp;
    else if (strcmp(argv[i], "--driver") == 0) slot = (const char *const *)&driver;
    else if (strcmp(argv[i], "--fault") == 0) slot = (const char *const *)&fault;
    if (slot) {
      if (i + 1 >= argc) return pf_min_usage("minimize: %s needs a value%s", argv[i], "");
      *(const char **)slot = argv[++i];
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) return pf_min_usage("minimize: unknown option '%s'%s", argv[i], "");
    if (in) return pf_min_usage("minimize: one FILE only (got '%s' and '%s')", in, argv[i]);
    in = argv[i];
  }
  if (!in) return pf_min_usage("minimize: no FILE given (see precfuzz minimize --help)%s%s", "", "");
  if (outp && pf_same_file(in, outp)) /* the finding itself would be lost */
    return pf_min_usage("minimize: -o %s is the input itself: write the minimized case elsewhere%s", outp, "");
  pf_case c;
  char what[128];
  if (pf_load_input(in, driver, fault, &c, what, sizeof what)) {
    pf_case_free(&c);
    return pf_min_usage("%s%s", pf_error_message(), "");
  }
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  if (pf_run_case(&c, &o, &r)) {
    pf_run_free(&r);
    pf_case_free(&c);
    return pf_min_usage("%s: %s", in, pf_error_message());
  }
  const pf_verdict verdict = r.cmp.verdict;
  pf_run_free(&r);
  if (!pf_verdict_is_finding(verdict)) {
    pf_case_free(&c);
    return pf_min_usage("%s: no finding to minimize (verdict %s)", in, pf_verdict_name(verdict));
  }
  const size_t before = pf_minimize_elements(&c);
  size_t tries = 0;
  const size_t after = pf_minimize_case(&c, verdict, &tries);
  char def[4096];
  if (!outp) {
    snprintf(def, sizeof def, "%s.min.json", in);
    outp = def;
  }
  if (pf_case_save(&c, outp)) {
    pf_case_free(&c);
    return pf_min_usage("%s%s", pf_error_message(), "");
  }
  printf("%s/%s %s, verdict %s: %zu input elements -> %zu (%zu runs); %s\n", c.kernel, c.variant, what,
         pf_verdict_name(verdict), before, after, tries, outp);
  if (after > 8)
    printf("  not below 8 elements: %s\n",
           pf_minimize_explicit(&c) ? (pf_case_kernel(&c)->op->input_dims
                                      ? "no dimension can shrink further without losing the verdict"
                                      : "this kernel's inputs have no per-dimension layout to shrink explicit values by, "
                                        "and no dimension could shrink further before they were made explicit")
                               : "more than 4096 drawn values to make explicit, and no dimension could shrink further "
                                 "without losing the verdict");
  char oq[8400];
  pf_replay_path(oq, sizeof oq, outp);
  printf("%s%s replay %s\n", pf_self(), pf_plugins_flags(), oq);
  pf_case_free(&c);
  return 0;
}
