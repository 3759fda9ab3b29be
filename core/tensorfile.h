/* Tensor files: numpy's .npy and safetensors, read strictly and written atomically.
 *
 * dtypes: fp32, fp16 and bf16. In .npy they are '<f4' and '<f2' ('>' big-endian is read too)
 * and raw 2-byte '|V2'/'<V2' for bf16, which is how numpy saves an ml_dtypes.bfloat16 array;
 * in safetensors F32, F16 and BF16. Any other dtype, a truncated file, trailing bytes, an
 * oversized or malformed header, or offsets outside the file is PF_ERR_PARSE with one line
 * naming the file and what is wrong. Values are carried as doubles (every value of the three
 * dtypes is one), NaN payloads as pf_decode keeps them. */
#ifndef PF_TENSORFILE_H
#define PF_TENSORFILE_H

#include <stddef.h>

#include "dtype.h"
#include "status.h"

#define PF_TF_MAX_DIMS 8
#define PF_TF_NAME_LEN 128

typedef struct pf_tensorfile {
  pf_dtype dtype;
  int ndims;
  size_t shape[PF_TF_MAX_DIMS]; /* row-major (a Fortran-order .npy is reordered on reading) */
  size_t n;                     /* product of the shape (1 for a 0-d array) */
  double *data;                 /* n values, owned */
  char name[PF_TF_NAME_LEN];    /* safetensors: the tensor's name; .npy: "" */
  char sha256[65];              /* of the whole file's bytes, lower-case hex */
} pf_tensorfile;

/* Reads one tensor: a .npy file (by its magic bytes), or the tensor `name` of a safetensors
 * file (name may be NULL when the file holds exactly one tensor). */
pf_status pf_tensorfile_read(const char *path, const char *name, pf_tensorfile *out);
/* The same from bytes already in memory; what names them in messages. */
pf_status pf_tensorfile_parse(const unsigned char *buf, size_t len, const char *name, const char *what,
                              pf_tensorfile *out);
void pf_tensorfile_free(pf_tensorfile *t);
/* The names of the tensors of a safetensors file (in memory, already read by
 * pf_tensorfile_parse), the first max of them into names; returns how many it holds (0 for
 * anything that is not one). */
size_t pf_safetensors_names(const unsigned char *buf, size_t len, char (*names)[PF_TF_NAME_LEN], size_t max);

/* SHA-256 of len bytes as lower-case hex. */
void pf_sha256_hex(const unsigned char *buf, size_t len, char hex[65]);

/* One tensor to write: n = product of shape values of dtype, each representable in it. */
typedef struct {
  const char *name; /* safetensors only */
  pf_dtype dtype;
  int ndims;
  const size_t *shape;
  const double *data;
} pf_tensor_view;

/* .npy (format 1.0, little-endian, header padded to 64 bytes; bf16 as '|V2') in memory:
 * *out is malloc'd. */
pf_status pf_npy_encode(const pf_tensor_view *t, unsigned char **out, size_t *len);
/* Writes to a temporary name in the same directory and renames it into place after a checked
 * close: the file is either the whole tensor or not there. */
pf_status pf_npy_write(const char *path, const pf_tensor_view *t);
pf_status pf_safetensors_write(const char *path, const pf_tensor_view *ts, size_t count);

/* Writes len bytes to path atomically (temporary name, checked close, rename). */
pf_status pf_write_file_atomic(const char *path, const void *buf, size_t len);
/* Whether pf_write_file_atomic could write path: a name, not a directory, its temporary file
 * makeable beside it (made and removed). */
pf_status pf_write_file_atomic_probe(const char *path);
/* Whether paths a and b name one file (the same inode when both exist; else the same absolute
 * path, its directory resolved): an output written over an input, or two outputs on one path,
 * would silently destroy one of them. */
int pf_same_file(const char *a, const char *b);

#endif
