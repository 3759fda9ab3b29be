/* Files and JSON as every reader of the core takes them: a whole file read safely, one JSON value
 * parsed strictly, numbers as hex floats. Below the case, tensor and checkpoint modules, which
 * read with it. */
#ifndef PF_JSONFILE_H
#define PF_JSONFILE_H

#include <stddef.h>

#include "status.h"

/* A whole file, NUL-terminated (binary files too: len is the byte count). */
pf_status pf_read_file(const char *path, char **out, size_t *len);
/* text as exactly one JSON value, refusing what cJSON alone lets through: data after the
 * value, a string holding a NUL (\u0000), an object holding a key twice (PF_ERR_PARSE, one line
 * naming it). *out: the tree to cJSON_Delete. */
struct cJSON;
pf_status pf_json_parse_strict(const char *text, const char *what, struct cJSON **out);
/* Hex float text of x ("0x1.8p+3", "inf", "-inf", "nan") and its strict parse. */
void pf_hexfloat(char buf[40], double x);
pf_status pf_parse_double(const char *s, double *out);
/* 1 when s is a number strtod takes but binary64 holds as 0 (why pf_parse_double refused it). */
int pf_parse_double_underflows(const char *s);

#endif
