/* Shared by the tests that build cases from values derived by hand: an input given as explicit
 * values (the case owns a copy). */
#ifndef PF_TEST_CASE_VALUES_H
#define PF_TEST_CASE_VALUES_H

#include <stdlib.h>
#include <string.h>

#include "harness/tensor.h"

static void set_values(pf_gen *g, const double *v, size_t n) {
  pf_gen_free(g);
  g->dist = PF_DIST_VALUES;
  g->values = malloc(n * sizeof(double));
  if (!g->values) abort();
  memcpy(g->values, v, n * sizeof(double));
  g->nvalues = n;
}

#endif
