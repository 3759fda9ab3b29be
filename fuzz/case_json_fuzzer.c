/* case_json_fuzzer: the case-file parser on arbitrary bytes. It must never crash; every text it
 * accepts must be strict JSON by cJSON's own reading (json_check.h: nothing after the value, no
 * key twice), and every case it accepts must write back to JSON that parses to the identical
 * text (bit-exact round trip); a mismatch aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/case.h"
#include "fuzz/json_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  pf_case c, d;
  if (pf_case_from_json(&c, text, "input") == PF_OK) {
    pf_fuzz_json_check_accepted(text, "case_json_fuzzer");
    char *j1 = pf_case_to_json(&c);
    if (!j1 || pf_case_from_json(&d, j1, "rewritten") != PF_OK) {
      fprintf(stderr, "case_json_fuzzer: an accepted case does not parse after rewriting: %s\n", pf_error_message());
      abort();
    }
    char *j2 = pf_case_to_json(&d);
    if (!j2 || strcmp(j1, j2) != 0) {
      fprintf(stderr, "case_json_fuzzer: the round trip changed the case:\n%s\n---\n%s\n", j1, j2 ? j2 : "");
      abort();
    }
    free(j1);
    free(j2);
    pf_case_free(&d);
  }
  pf_case_free(&c);
  free(text);
  return 0;
}
