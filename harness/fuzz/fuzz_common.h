/* What every fuzz driver shares: reading its input bytes, running a decoded case, and
 * reporting a finding (one line, the saved case, the replay command) before abort(). Part of
 * the core library: the operations' decoders (kernels/<op>/<op>_fuzzer.c) use it, and so do
 * replay and minimize of raw inputs. */
#ifndef PF_FUZZ_COMMON_H
#define PF_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "harness/case.h"
#include "kernels/kernel.h"

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

/* Runs c; on a finding prints "precfuzz finding: ..." with the replay command, writes the
 * case to $PF_FINDINGS_DIR (default: the current directory) and aborts so that libFuzzer
 * keeps the input. Invalid cases (the decoder's bug) abort too. */
void pf_fuzz_run_case(const char *driver, pf_case *c);

/* The fuzz drivers of the operations: one per registered operation with a decoder
 * (pf_op.fuzz_decode), named "<op>_fuzzer" (CMake builds one from each
 * kernels/<op>/<op>_fuzzer.c with harness/fuzz/op_driver.c); replay and minimize decode raw
 * inputs with them. */
typedef struct {
  char driver[PF_NAME_LEN + 8]; /* "<op>_fuzzer" */
  const pf_op *op;
} pf_fuzz_driver;
/* Every operation's driver, in registry order: fills at most max, returns how many there are. */
int pf_fuzz_drivers(pf_fuzz_driver *out, int max);
/* The driver named driver: 1 and *out, or 0. */
int pf_fuzz_driver_find(const char *driver, pf_fuzz_driver *out);
/* "a_fuzzer, b_fuzzer, ...": every driver's name, for a message. */
void pf_fuzz_driver_names(char *buf, size_t len);

#endif
