/* What the strict JSON reader (pf_json_parse_strict) promises about a text it accepted, checked
 * independently with cJSON's own reader by the parsers' fuzz drivers: the text is one JSON
 * value with nothing but whitespace after it, holds no control character but JSON's whitespace
 * (cJSON would skip any as whitespace), no object in it names a key twice, and printing it and
 * reading the print back gives the same print (nothing is lost on the way). A broken promise
 * aborts. */
#ifndef PF_FUZZ_JSON_CHECK_H
#define PF_FUZZ_JSON_CHECK_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void pf_fuzz_json_no_duplicates(const cJSON *x, const char *who) {
  for (const cJSON *a = x ? x->child : NULL; a; a = a->next) {
    if (cJSON_IsObject(x))
      for (const cJSON *b = a->next; b; b = b->next)
        if (a->string && b->string && strcmp(a->string, b->string) == 0) {
          fprintf(stderr, "%s: an accepted text names key '%s' twice in one object\n", who, a->string);
          abort();
        }
    pf_fuzz_json_no_duplicates(a, who);
  }
}

static void pf_fuzz_json_check_accepted(const char *text, const char *who) {
  for (const char *p = text; *p; p++)
    if ((unsigned char)*p < 0x20 && !strchr("\t\n\r", *p)) {
      fprintf(stderr, "%s: an accepted text holds control character 0x%02x (not JSON whitespace, unescaped)\n", who,
              (unsigned)*p);
      abort();
    }
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithOpts(text, &end, 0);
  if (!v) {
    fprintf(stderr, "%s: an accepted text is not JSON to cJSON\n", who);
    abort();
  }
  for (const char *p = end; *p; p++)
    if (!strchr(" \t\r\n", *p)) {
      fprintf(stderr, "%s: an accepted text has data after its JSON value: '%.20s'\n", who, p);
      abort();
    }
  pf_fuzz_json_no_duplicates(v, who);
  char *p1 = cJSON_PrintUnformatted(v);
  cJSON *w = p1 ? cJSON_Parse(p1) : NULL;
  char *p2 = w ? cJSON_PrintUnformatted(w) : NULL;
  if (!p1 || !p2 || strcmp(p1, p2) != 0) {
    fprintf(stderr, "%s: an accepted text does not survive being written and read back\n", who);
    abort();
  }
  free(p1);
  free(p2);
  cJSON_Delete(w);
  cJSON_Delete(v);
}

#endif
