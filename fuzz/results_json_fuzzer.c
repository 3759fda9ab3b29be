/* results_json_fuzzer: precision-report's reading of results.json on arbitrary bytes. The
 * check must never crash and must either reject the document with one line naming the field,
 * or accept it; an accepted document must then render as HTML, Markdown and JSON without a
 * crash (the renderers read only what the check guarantees). Every text the strict reader
 * accepts must be strict JSON by cJSON's own reading and survive being written and read back
 * (json_check.h). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/case.h"
#include "fuzz/json_check.h"
#include "reports/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  cJSON *root = NULL;
  const pf_status st = pf_json_parse_strict(text, "results", &root);
  if (!st) pf_fuzz_json_check_accepted(text, "results_json_fuzzer");
  free(text);
  if (st) return 0;
  char err[512] = "";
  if (pf_results_check(root, err, sizeof err) == 0) {
    FILE *sink = fopen("/dev/null", "w");
    if (sink) {
      pf_report_html(root, sink);
      pf_report_md(root, sink);
      pf_report_json(root, sink);
      fclose(sink);
    }
  } else if (!err[0] || strchr(err, '\n')) {
    fprintf(stderr, "results_json_fuzzer: a rejection without a one-line reason: '%s'\n", err);
    abort();
  }
  cJSON_Delete(root);
  return 0;
}
