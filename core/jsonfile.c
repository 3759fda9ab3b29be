/* Files and JSON, what the core's readers share (jsonfile.h). */
#include "jsonfile.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void pf_hexfloat(char buf[40], double x) {
  if (isnan(x)) snprintf(buf, 40, "nan");
  else if (isinf(x)) snprintf(buf, 40, x < 0 ? "-inf" : "inf");
  else snprintf(buf, 40, "%a", x);
}

/* A number that strtod takes but that binary64 holds as 0 (pf_parse_double refuses it). */
int pf_parse_double_underflows(const char *s) {
  char *end;
  errno = 0;
  const double v = strtod(s, &end);
  return *s && !isspace((unsigned char)*s) && !*end && v == 0 && errno == ERANGE;
}

pf_status pf_parse_double(const char *s, double *out) {
  if (!s || !*s) return PF_ERR_PARSE;
  if (strcmp(s, "nan") == 0 || strcmp(s, "NaN") == 0) { *out = NAN; return PF_OK; }
  if (strcmp(s, "inf") == 0 || strcmp(s, "+inf") == 0) { *out = INFINITY; return PF_OK; }
  if (strcmp(s, "-inf") == 0) { *out = -INFINITY; return PF_OK; }
  if (isspace((unsigned char)s[0])) return PF_ERR_PARSE; /* strtod would skip it */
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != 0) return PF_ERR_PARSE;
  if (isnan(v) || isinf(v)) return PF_ERR_PARSE; /* only the spellings above */
  /* a nonzero literal that binary64 holds as 0 denotes no value of it: 1e-400, 0x1p-1075 */
  if (v == 0 && errno == ERANGE) return PF_ERR_PARSE;
  *out = v;
  return PF_OK;
}

static int pf_cmp_key(const void *a, const void *b) {
  return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The first key an object (or one inside it) holds twice, or NULL. */
static const char *pf_json_duplicate(const cJSON *o) {
  for (const cJSON *it = o->child; it; it = it->next) {
    const char *d = (cJSON_IsObject(it) || cJSON_IsArray(it)) ? pf_json_duplicate(it) : NULL;
    if (d) return d;
  }
  if (!cJSON_IsObject(o)) return NULL;
  size_t n = 0;
  for (const cJSON *it = o->child; it; it = it->next) n++;
  if (n < 2) return NULL;
  const cJSON **keys = malloc(n * sizeof *keys);
  if (!keys) return "(out of memory)";
  n = 0;
  for (const cJSON *it = o->child; it; it = it->next) keys[n++] = it;
  qsort(keys, n, sizeof *keys, pf_cmp_key);
  const char *d = NULL;
  for (size_t i = 1; i < n && !d; i++)
    if (strcmp(keys[i - 1]->string, keys[i]->string) == 0) d = keys[i]->string;
  free(keys);
  return d;
}

pf_status pf_json_parse_strict(const char *text, const char *what, cJSON **out) {
  *out = NULL;
  /* JSON's whitespace is space, tab, LF and CR; cJSON would skip any control character as
   * whitespace, and one inside a string must be escaped */
  for (const char *p = text; *p; p++)
    if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
      return pf_error(PF_ERR_PARSE, "%s: a control character (0x%02x) at byte %ld", what, (unsigned)*p,
                      (long)(p - text));
  /* JSON text is UTF-8: a byte sequence that is not (a stray 0xff, an overlong or surrogate
   * form) would reach a report or a terminal as garbage */
  for (const unsigned char *u = (const unsigned char *)text; *u;) {
    int n = *u < 0x80 ? 0 : (*u & 0xe0) == 0xc0 ? 1 : (*u & 0xf0) == 0xe0 ? 2 : (*u & 0xf8) == 0xf0 ? 3 : -1;
    unsigned cp = n == 0 ? *u : n == 1 ? *u & 0x1fu : n == 2 ? *u & 0x0fu : *u & 0x07u;
    int ok = n >= 0;
    for (int i = 1; ok && i <= n; i++) {
      ok = (u[i] & 0xc0) == 0x80;
      cp = cp << 6 | (u[i] & 0x3fu);
    }
    if (ok && n > 0) ok = cp >= (n == 1 ? 0x80u : n == 2 ? 0x800u : 0x10000u) && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok) return pf_error(PF_ERR_PARSE, "%s: not UTF-8 at byte %ld", what, (long)((const char *)u - text));
    u += n + 1;
  }
  /* a NUL inside a string would cut it short where C reads it ("safe\u0000evil" is "safe") */
  for (const char *p = text; *p; p++) {
    if (*p != '"') continue;
    for (p++; *p && *p != '"'; p++)
      if (*p == '\\' && *++p == 'u' && strncmp(p + 1, "0000", 4) == 0)
        return pf_error(PF_ERR_PARSE, "%s: a string holds a NUL character (\\u0000) at byte %ld", what,
                        (long)(p - 1 - text));
      else if (!*p) break;
    if (!*p) break;
  }
  /* a number literal beyond binary64 (1e999: cJSON makes it inf) or one that binary64 holds as
   * 0 (1e-400) names no value of it */
  for (const char *p = text; *p; p++) {
    if (*p == '"') { /* a string: skipped, escapes and all */
      for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
      if (!*p) break;
      continue;
    }
    if (*p != '-' && !(*p >= '0' && *p <= '9')) continue;
    char *e;
    errno = 0;
    const double v = strtod(p, &e);
    if (e == p) continue;
    if (isinf(v) || (v == 0 && errno == ERANGE))
      return pf_error(PF_ERR_PARSE, "%s: the number %.*s at byte %ld is %s binary64", what, (int)(e - p < 40 ? e - p : 40), p,
                      (long)(p - text), isinf(v) ? "beyond" : "below the least value of");
    p = e - 1;
  }
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithOpts(text, &end, 1); /* one value, then only whitespace */
  if (!j) {
    cJSON *k = cJSON_ParseWithOpts(text, &end, 0);
    if (k) {
      cJSON_Delete(k);
      return pf_error(PF_ERR_PARSE, "%s: data after the JSON value, at byte %ld", what, (long)(end - text));
    }
    const char *at = cJSON_GetErrorPtr();
    return pf_error(PF_ERR_PARSE, "%s: not valid JSON (near byte %ld)", what, at ? (long)(at - text) : 0L);
  }
  const char *dup = pf_json_duplicate(j);
  if (dup) {
    pf_status st = pf_error(PF_ERR_PARSE, "%s: field '%s' is given twice in one object", what, dup);
    cJSON_Delete(j);
    return st;
  }
  *out = j;
  return PF_OK;
}

/* Reads a whole file; NUL bytes inside make it not JSON. */
pf_status pf_read_file(const char *path, char **out, size_t *len) {
  /* opened without blocking (a FIFO's open would wait for a writer forever), then refused
   * unless a regular file: /dev/zero would fill memory, a FIFO would block */
  const int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return pf_error(PF_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return pf_error(PF_ERR_IO, "%s: not a regular file", path);
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return pf_error(PF_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  if (!buf) { fclose(f); return PF_ERR_NOMEM; }
  for (;;) {
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n < cap) break;
    if (cap >= ((size_t)1 << 30)) { free(buf); fclose(f); return pf_error(PF_ERR_IO, "%s: larger than 1 GiB", path); }
    cap *= 2;
    char *nb = realloc(buf, cap + 1);
    if (!nb) { free(buf); fclose(f); return PF_ERR_NOMEM; }
    buf = nb;
  }
  int err = ferror(f);
  fclose(f);
  if (err) { free(buf); return pf_error(PF_ERR_IO, "%s: read error", path); }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return PF_OK;
}
