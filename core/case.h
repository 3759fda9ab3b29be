/* A case: everything needed to reproduce one run, read from and written to JSON.
 * Floats are written as C99 hex floats so a case round-trips bit for bit. */
#ifndef PF_CASE_H
#define PF_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "jsonfile.h" /* pf_hexfloat, pf_read_file, ...: the case module's users have them here */
#include "status.h"
#include "tensor.h"

#define PF_MAX_PARAMS 32
#define PF_MAX_INPUTS 4
#define PF_NAME_LEN 48
#define PF_CKPT_PATH_LEN 1024

typedef struct pf_kernel pf_kernel;

typedef struct pf_case {
  char kernel[PF_NAME_LEN];  /* the operation's name (precfuzz list) */
  char variant[PF_NAME_LEN]; /* e.g. "safe" */
  pf_dtype dtype;            /* storage (and output) dtype */
  pf_dtype accum;            /* accumulation dtype */
  int ndims;
  size_t shape[PF_MAX_DIMS];
  double params[PF_MAX_PARAMS]; /* in the order of the operation's parameter table */
  char fault[PF_NAME_LEN];      /* "" for none */
  int ninputs;
  pf_gen inputs[PF_MAX_INPUTS]; /* in the order of the operation's input table */
  char expect[PF_NAME_LEN];     /* verdict a regression case must give, "" for none */
  /* a checkpoint directory the kernel loads instead of its own save (an operation that takes
   * one: pf_op.takes_checkpoint; tp_diff's --checkpoint), absolute; "" for none */
  char checkpoint[PF_CKPT_PATH_LEN];
  /* its registered kernel, resolved once by pf_case_init (NULL in a case built otherwise:
   * pf_case_kernel looks it up by name) */
  const pf_kernel *k;
} pf_case;

/* What pf_case_check counts per element against the memory budget, and the budget: the
 * environment's PRECFUZZ_MEMORY_BYTES (bytes, or a number with K, M, G or T), else half of
 * the machine's physical memory. PF_ERR_ARG when the variable is not a size. */
#define PF_BYTES_PER_OUTPUT 112
#define PF_BYTES_PER_INPUT 16
pf_status pf_memory_budget(double *bytes);

/* A case with the kernel's defaults: shape, parameters, one normal input per tensor whose
 * seed derives from seed. Fails if kernel/variant is unknown. */
pf_status pf_case_init(pf_case *c, const char *kernel, const char *variant, uint64_t seed);
void pf_case_free(pf_case *c);
pf_status pf_case_copy(pf_case *dst, const pf_case *src);

/* Checks every field against the kernel's tables: dtypes, shape limits, parameter ranges,
 * fault names, input counts. On failure returns PF_ERR_ARG/UNKNOWN/UNSUPPORTED with a
 * one-line pf_error_message() naming the field. */
/* The shape alone: dimensions in range, input sizes, the memory judging would take; checked
 * before inputs are made (an explicit value fills an input of the shape's size). */
pf_status pf_case_check_size(const pf_case *c);
/* The time judging one case may take, estimated from its shape (the operation's cost: seconds
 * on one processor); pf_case_check_size and pf_case_validate refuse a case beyond it. Default
 * one hour; without the CPU emulation (the CUDA backend) only the oracle counts. */
#define PF_CASE_SECONDS_DEFAULT 3600.0
void pf_case_set_time_limit(double seconds);
void pf_case_time_counts_emulation(int on);
/* *seconds: the estimate for c; PF_ERR_ARG with the estimate and the limit when beyond it. */
pf_status pf_case_estimate(const pf_case *c, double *seconds);
/* A duration as people read it: "0.4 s", "40 s", "12 min", "67 h", "3.2 days". */
void pf_secs_str(char *buf, size_t len, double s);
pf_status pf_case_validate(const pf_case *c);
const pf_kernel *pf_case_kernel(const pf_case *c);

/* Named parameter access (the operation's table names the parameters). */
double pf_case_param(const pf_case *c, const char *name);
pf_status pf_case_set_param(pf_case *c, const char *name, double v);
/* c->checkpoint = path made absolute: an existing directory (PF_ERR_IO: not one), its absolute
 * path shorter than PF_CKPT_PATH_LEN (PF_ERR_ARG). What it holds is read when the case runs. */
pf_status pf_case_set_checkpoint(pf_case *c, const char *path);

/* JSON. pf_case_to_json returns a malloc'd string. pf_case_from_json fully validates. */
char *pf_case_to_json(const pf_case *c);
pf_status pf_case_from_json(pf_case *c, const char *text, const char *what);
pf_status pf_case_load(pf_case *c, const char *path);
pf_status pf_case_save(const pf_case *c, const char *path);
/* Input i read from a tensor file: its dtype and shape fit the case (the file's leading
 * dimensions may be flattened into the input's first). PF_ERR_ARG naming the file otherwise. */
pf_status pf_case_check_file_input(const pf_case *c, int i, const char *what);

/* cJSON helpers also used by the CLI's result output. */
struct cJSON;
struct cJSON *pf_case_to_cjson(const pf_case *c);
pf_status pf_case_from_cjson(pf_case *c, const struct cJSON *j, const char *what);

#endif
