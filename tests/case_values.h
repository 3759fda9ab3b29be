/* Shared by the tests that build cases from values derived by hand: an input given as explicit
 * values (the case owns a copy). */
#ifndef PF_TEST_CASE_VALUES_H
#define PF_TEST_CASE_VALUES_H

#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "core/kernel.h"

static inline void set_values(pf_gen *g, const double *v, size_t n) {
  pf_gen_free(g);
  g->dist = PF_DIST_VALUES;
  g->values = malloc(n * sizeof(double));
  if (!g->values) abort();
  memcpy(g->values, v, n * sizeof(double));
  g->nvalues = n;
}

/* every one of the n elements v */
static inline void set_constant(pf_gen *g, double v, size_t n) {
  double *a = malloc((n ? n : 1) * sizeof(double));
  if (!a) abort();
  for (size_t i = 0; i < n; i++) a[i] = v;
  set_values(g, a, n);
  free(a);
}

/* The case's variant's bounds (its contract) on its outputs, for a case whose inputs are all
 * explicit values (set_values). */
static inline void variant_bounds(const pf_case *c, pf_bound *b) {
  pf_tensor in[PF_MAX_INPUTS];
  for (int t = 0; t < c->ninputs; t++) {
    if (pf_tensor_alloc(&in[t], PF_FP32, c->inputs[t].nvalues) != PF_OK) abort();
    memcpy(in[t].data, c->inputs[t].values, c->inputs[t].nvalues * sizeof(double));
  }
  pf_case_kernel(c)->bound(c, in, b);
  for (int t = 0; t < c->ninputs; t++) pf_tensor_free(&in[t]);
}

#endif
