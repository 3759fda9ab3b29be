#include "tensor.h"
#include "tensorfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const char *const pf_dist_names[PF_NDISTS] = {"normal", "uniform", "loguniform", "heavy",
                                                     "values"};

const char *pf_dist_name(pf_dist d) { return (unsigned)d < PF_NDISTS ? pf_dist_names[d] : "?"; }

pf_status pf_dist_parse(const char *s, pf_dist *out) {
  for (int i = 0; i < PF_NDISTS; i++)
    if (s && strcmp(s, pf_dist_names[i]) == 0) { *out = (pf_dist)i; return PF_OK; }
  return PF_ERR_UNKNOWN;
}

void pf_gen_default(pf_gen *g) {
  memset(g, 0, sizeof *g);
  g->dist = PF_DIST_NORMAL;
  g->scale = 1.0;
  g->exp_min = -8;
  g->exp_max = 8;
}

void pf_gen_free(pf_gen *g) {
  free(g->values);
  free(g->file);
  free(g->tensor);
  g->values = NULL;
  g->nvalues = 0;
  g->file = g->tensor = NULL;
  g->sha256[0] = 0;
}

pf_status pf_gen_copy(pf_gen *dst, const pf_gen *src) {
  *dst = *src;
  dst->values = NULL;
  dst->file = dst->tensor = NULL;
  if (src->nvalues) {
    dst->values = malloc(src->nvalues * sizeof(double));
    if (!dst->values) return PF_ERR_NOMEM;
    memcpy(dst->values, src->values, src->nvalues * sizeof(double));
  }
  if ((src->file && !(dst->file = strdup(src->file))) || (src->tensor && !(dst->tensor = strdup(src->tensor)))) {
    pf_gen_free(dst);
    return PF_ERR_NOMEM;
  }
  return PF_OK;
}

uint64_t pf_values_sum(const double *v, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    uint64_t b;
    memcpy(&b, &v[i], 8);
    for (int k = 0; k < 8; k++) h = (h ^ ((b >> (8 * k)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

pf_status pf_gen_set_file(pf_gen *g, pf_tensorfile *t, const char *file, const char *tensor) {
  pf_gen_free(g);
  pf_gen_default(g);
  g->dist = PF_DIST_VALUES;
  g->file = strdup(file);
  g->tensor = tensor ? strdup(tensor) : NULL;
  if (!g->file || (tensor && !g->tensor)) {
    pf_gen_free(g);
    return PF_ERR_NOMEM;
  }
  g->values = t->data;
  g->nvalues = t->n;
  t->data = NULL;
  snprintf(g->sha256, sizeof g->sha256, "%s", t->sha256);
  g->file_dtype = t->dtype;
  g->file_ndims = t->ndims;
  memcpy(g->file_shape, t->shape, sizeof g->file_shape);
  g->values_sum = pf_values_sum(g->values, g->nvalues);
  return PF_OK;
}

int pf_gen_from_file(const pf_gen *g) {
  return g->dist == PF_DIST_VALUES && g->file && pf_values_sum(g->values, g->nvalues) == g->values_sum;
}

pf_status pf_tensor_alloc(pf_tensor *t, pf_dtype dtype, size_t n) {
  t->dtype = dtype;
  t->n = n;
  t->data = calloc(n ? n : 1, sizeof(double));
  return t->data ? PF_OK : pf_error(PF_ERR_NOMEM, "cannot allocate a tensor of %zu elements", n);
}

void pf_tensor_free(pf_tensor *t) {
  free(t->data);
  t->data = NULL;
  t->n = 0;
}

static double pf_draw(pf_rng *r, const pf_gen *g) {
  switch (g->dist) {
  case PF_DIST_UNIFORM: return 2 * pf_rng_uniform(r) - 1;
  case PF_DIST_LOGUNIFORM: {
    const uint64_t span = (uint64_t)((int64_t)g->exp_max - g->exp_min) + 1;
    const int k = g->exp_min + (int)pf_rng_below(r, span);
    const double m = 1 + pf_rng_uniform(r);
    return ldexp((pf_rng_u32(r) & 1) ? -m : m, k);
  }
  case PF_DIST_HEAVY: {
    const double z = pf_rng_normal(r), a = pf_rng_normal(r), b = pf_rng_normal(r),
                 c = pf_rng_normal(r);
    return z * sqrt(3.0 / (a * a + b * b + c * c));
  }
  default: return pf_rng_normal(r);
  }
}

static double pf_special(pf_rng *r, pf_dtype t) {
  const double s = (pf_rng_u32(r) & 1) ? -1.0 : 1.0;
  switch (pf_rng_below(r, 7)) {
  case 0: return s * 0.0;
  case 1: return s * pf_min_subnormal(t);
  case 2: /* a random subnormal */
    return s * pf_min_subnormal(t) * (double)(1 + pf_rng_below(r, (uint64_t)(pf_min_normal(t) / pf_min_subnormal(t)) - 1));
  case 3: return s * pf_min_normal(t);
  case 4: return s * pf_max_finite(t);
  case 5: return s * INFINITY;
  default: return NAN;
  }
}

pf_status pf_tensor_generate(pf_tensor *t, const pf_gen *g) {
  if (g->dist == PF_DIST_VALUES) {
    if (g->nvalues != t->n)
      return pf_error(PF_ERR_ARG, "explicit values: %zu given, the shape needs %zu", g->nvalues, t->n);
    for (size_t i = 0; i < t->n; i++) {
      if (!pf_dtype_holds(t->dtype, g->values[i]))
        return pf_error(PF_ERR_ARG, "explicit value %zu (%a) is not representable in %s", i,
                        g->values[i], pf_dtype_name(t->dtype));
      t->data[i] = g->values[i];
    }
    return PF_OK;
  }
  /* The built-in Philox: the same words as cuRAND's host generator (tests/test_rng.c), at a
   * fraction of the cost of creating a cuRAND generator per tensor. */
  pf_rng r;
  pf_status st = pf_rng_init(&r, g->seed);
  if (st) return st;
  /* offset 0 adds nothing (not even to a -0: the same bits as before there was an offset) */
  for (size_t i = 0; i < t->n; i++) {
    const double v = pf_draw(&r, g) * g->scale;
    t->data[i] = pf_round(t->dtype, g->offset != 0 ? v + g->offset : v);
  }
  /* Outliers and specials come from their own stream so that the bulk stays the same. */
  pf_rng_free(&r);
  if (g->outliers || g->special_rate > 0) {
    st = pf_rng_init(&r, pf_seed_mix(g->seed, 0x6f75746c));
    if (st) return st;
    for (size_t k = 0; k < g->outliers && t->n; k++) {
      const size_t i = (size_t)pf_rng_below(&r, t->n);
      const double mag = pf_round(t->dtype, g->outlier_mag);
      t->data[i] = (pf_rng_u32(&r) & 1) ? -mag : mag;
    }
    if (g->special_rate > 0) {
      const uint64_t thresh = (uint64_t)(g->special_rate * 4294967296.0);
      for (size_t i = 0; i < t->n; i++)
        if ((uint64_t)pf_rng_u32(&r) < thresh) t->data[i] = pf_special(&r, t->dtype);
    }
    pf_rng_free(&r);
  }
  return PF_OK;
}
