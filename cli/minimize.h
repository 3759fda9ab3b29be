/* precfuzz's inputs beyond case files, and the minimizer (issue 6). */
#ifndef PF_MINIMIZE_H
#define PF_MINIMIZE_H

#include <stddef.h>

#include "core/case.h"
#include "core/verdict.h"

/* Loads path as a case: a case file (named *.json, or JSON text), or else a raw fuzz-driver
 * input, decoded by driver (NULL: the path's "<name>_fuzzer" or
 * "<name>_fuzzer-<fault>" directory) with fault (NULL: that directory's, else
 * $PF_FUZZ_FAULT). what gets "case file" or "raw input of DRIVER". PF_ERR_* with a one-line
 * message on anything malformed. */
pf_status pf_load_input(const char *path, const char *driver, const char *fault, pf_case *c, char *what, size_t len);

/* Shrinks c (deterministically) while its verdict stays v; sets c->expect to v. Returns the
 * input elements left; runs gets the cases run. */
size_t pf_minimize_case(pf_case *c, pf_verdict v, size_t *runs);
/* The input elements of c (what the minimizer counts), and whether every input is explicit. */
size_t pf_minimize_elements(const pf_case *c);
int pf_minimize_explicit(const pf_case *c);

#endif
