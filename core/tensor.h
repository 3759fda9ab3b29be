/* Tensors: values of one dtype carried as doubles (every fp32/fp16/bf16 value is a double),
 * and their generation from a seed. */
#ifndef PF_TENSOR_H
#define PF_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "status.h"
#include "tensorfile.h"

#define PF_MAX_DIMS 5 /* of a case's shape and a stage's dimensions */

typedef enum {
  PF_DIST_NORMAL,     /* N(0, 1) * scale */
  PF_DIST_UNIFORM,    /* U(-1, 1) * scale */
  PF_DIST_LOGUNIFORM, /* +-2^k (1 + f) * scale, k uniform integer in [exp_min, exp_max], f in [0, 1) */
  PF_DIST_HEAVY,      /* Student t with 3 degrees of freedom * scale */
  PF_DIST_VALUES,     /* explicit values */
  PF_NDISTS
} pf_dist;

/* How one input tensor is made. */
typedef struct {
  pf_dist dist;
  uint64_t seed;
  double scale;          /* multiplies every drawn value (not outliers or specials) */
  double offset;         /* then added to it: a mean far from 0 (normalization's statistics) */
  int exp_min, exp_max;  /* PF_DIST_LOGUNIFORM */
  size_t outliers;       /* this many elements set to +-outlier_mag */
  double outlier_mag;
  double special_rate;   /* probability that an element becomes a special value */
  double *values;        /* PF_DIST_VALUES: nvalues values, owned */
  size_t nvalues;
  /* PF_DIST_VALUES read from a tensor file (pf_gen_set_file): a case file then names the file
   * and its hash instead of listing the values, as long as the values are still the ones read
   * (values_sum; the minimizer and boundary searches change them) */
  char *file;            /* the path as a case file names it (absolute, or relative to it) */
  char *tensor;          /* safetensors: the tensor's name; NULL for .npy */
  char sha256[65];       /* the file's hash when it was read */
  uint64_t values_sum;   /* pf_values_sum of the values read */
  pf_dtype file_dtype;   /* as read, for pf_case_check_file_input */
  int file_ndims;
  size_t file_shape[PF_TF_MAX_DIMS];
} pf_gen;

typedef struct {
  pf_dtype dtype;
  size_t n;
  double *data; /* n values, each exactly representable in dtype */
} pf_tensor;

const char *pf_dist_name(pf_dist d);
pf_status pf_dist_parse(const char *s, pf_dist *out);
void pf_gen_default(pf_gen *g);
void pf_gen_free(pf_gen *g);
pf_status pf_gen_copy(pf_gen *dst, const pf_gen *src);
/* A checksum of n values' bits (FNV-1a). */
uint64_t pf_values_sum(const double *v, size_t n);
/* Takes over t's values as explicit values read from file (tensor: its name or NULL). */
pf_status pf_gen_set_file(pf_gen *g, pf_tensorfile *t, const char *file, const char *tensor);
/* 1 when g's values are still those read from its file. */
int pf_gen_from_file(const pf_gen *g);

pf_status pf_tensor_alloc(pf_tensor *t, pf_dtype dtype, size_t n);
void pf_tensor_free(pf_tensor *t);

/* Fill t (already allocated) as g says. Same g, same bits, on every machine. Values are
 * drawn in binary64, scaled, and rounded to t's dtype (to nearest even). Explicit values
 * must be representable in the dtype and number exactly t->n (PF_ERR_ARG otherwise). */
pf_status pf_tensor_generate(pf_tensor *t, const pf_gen *g);

#endif
