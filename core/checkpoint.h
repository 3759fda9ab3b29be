/* Checkpoints as precfuzz writes and reads them (issue 30's round trip): a directory holding
 * checkpoint.json (format "precfuzz-checkpoint/1", what wrote it, the step it was saved after,
 * and per rank its numbers by name, as hex strings, and the tensors it declares with dtype and
 * shape) and rank-R.safetensors per rank holding those tensors.
 *
 * Written whole or not at all: into DIR.partial (removed first) and renamed to DIR, which must not
 * exist. Read strictly: a missing or malformed checkpoint.json, an unknown format, a rank file
 * missing or truncated, a declared tensor missing, of another dtype or shape, or a number that is
 * not one is PF_ERR_PARSE (PF_ERR_IO for an unreadable file) with one line naming the file, rank
 * and tensor. */
#ifndef PF_CHECKPOINT_H
#define PF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define PF_CKPT_NAME 48
#define PF_CKPT_MAX_RANKS 8
#define PF_CKPT_MAX_TENSORS 16
#define PF_CKPT_MAX_NUMBERS 16

typedef struct {
  char name[PF_CKPT_NAME];
  pf_dtype dtype;
  size_t n;     /* a vector of n values */
  double *data; /* owned */
} pf_ckpt_tensor;

typedef struct {
  char name[PF_CKPT_NAME];
  double value;
} pf_ckpt_number;

typedef struct {
  int ntensors, nnumbers;
  pf_ckpt_tensor tensors[PF_CKPT_MAX_TENSORS];
  pf_ckpt_number numbers[PF_CKPT_MAX_NUMBERS];
} pf_ckpt_rank;

typedef struct {
  char writer[96]; /* what wrote it, e.g. "tp_diff/megatron" */
  uint64_t step;   /* the steps taken before the save */
  int nranks;
  pf_ckpt_rank rank[PF_CKPT_MAX_RANKS];
} pf_checkpoint;

/* Adds to rank r a copy of n values of dtype t (each a value of t) / a number. */
pf_status pf_ckpt_put_tensor(pf_checkpoint *ck, int r, const char *name, pf_dtype t, const double *v, size_t n);
pf_status pf_ckpt_put_number(pf_checkpoint *ck, int r, const char *name, double v);
/* Rank r's tensor / number of that name (NULL: none). */
const pf_ckpt_tensor *pf_ckpt_tensor_of(const pf_checkpoint *ck, int r, const char *name);
const pf_ckpt_number *pf_ckpt_number_of(const pf_checkpoint *ck, int r, const char *name);

pf_status pf_checkpoint_write(const char *dir, const pf_checkpoint *ck);
pf_status pf_checkpoint_read(const char *dir, pf_checkpoint *out);
void pf_checkpoint_free(pf_checkpoint *ck);
/* Removes a checkpoint directory: its files, then it (a partial one too). */
void pf_checkpoint_remove(const char *dir);

/* Where a kernel keeps the checkpoints its round trips write (run --save-checkpoint DIR, one
 * case): set once by the command before the case runs, NULL (the default) to remove them
 * after the load. A kernel writes each into a subdirectory of it named for the layout that saved
 * (pf_checkpoint_keep_path); pf_checkpoint_kept says whether one was written there, whole. */
void pf_checkpoint_keep(const char *dir);
/* The directory to write the checkpoint of `layout` (e.g. "tp2-dp1") into: keep/layout, with
 * keep made if need be, when keeping (1); else 0 and nothing written. */
int pf_checkpoint_keep_path(const char *layout, char *out, size_t len);
int pf_checkpoint_kept(void);
int pf_checkpoint_keeping(void); /* 1 when a command asked for them (a case that saves none is refused) */

#endif
