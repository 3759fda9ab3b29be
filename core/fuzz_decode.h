/* Decoding a fuzz driver's bytes into a case: what each family's decoder
 * (kernels/<op>/<op>_fuzzer.c, its pf_op.fuzz_decode) is written with. The drivers that run the
 * decoded cases are a floor up (fuzz/fuzz_common.h). */
#ifndef PF_FUZZ_DECODE_H
#define PF_FUZZ_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/case.h"
#include "core/kernel.h"

/* Consumes bytes front to back; past the end it yields zeros. */
typedef struct {
  const uint8_t *p;
  size_t n, pos;
} pf_bytes;

uint8_t pf_bytes_u8(pf_bytes *b);
uint64_t pf_bytes_u64(pf_bytes *b);

/* A dimension of a decoded case: 1 to small for most inputs; for one byte value in 64,
 * small + 1 to large, spread log-uniformly by the next byte, so that the sizes where blocked
 * loops, sums that change dtype after some count, or fp16 sums that stop absorbing their terms
 * go wrong are reached. $PF_FUZZ_MAX_DIM (a positive integer) replaces large: a longer search
 * at bigger sizes. */
size_t pf_fuzz_dim(pf_bytes *b, size_t small, size_t large);

/* The fault under test: $PF_FUZZ_FAULT, or NULL. */
const char *pf_fuzz_fault(void);

/* Starts a case of operation op: the next byte picks a variant among those honouring
 * $PF_FUZZ_FAULT (all when unset) and named $PF_FUZZ_VARIANT (any when unset; exit 2 when it
 * names none), whose fault switch is then set. Aborts when the fault
 * names none of op's variants (a misconfigured run, not a finding). */
const pf_kernel *pf_fuzz_begin(const char *op, pf_bytes *b, pf_case *c);

/* Parameter name of c (a case of k) fitted into the values k takes (pf_kernel.params), if it
 * narrows it: a decoder calls it so that a user's fixed layout (tied=0, ...) gets every input
 * rather than refusing most (pf_fuzz_run_case fits every parameter of a user's kernel too). */
void pf_fuzz_fit_param(const pf_kernel *k, pf_case *c, const char *name);

/* An explicit-values generator of n raw bit patterns of dtype t (missing bytes: 0). */
void pf_fuzz_raw_values(pf_bytes *b, pf_gen *g, pf_dtype t, size_t n);

#endif
