/* What every fuzz driver shares: running a decoded case and reporting a finding (one line, the
 * saved case, the replay command) before abort(); the table of the operations' drivers, which
 * replay and minimize of raw inputs read too. Decoding bytes into a case is the families'
 * (pf_op.fuzz_decode, with core/fuzz_decode.h). */
#ifndef PF_FUZZ_COMMON_H
#define PF_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "core/case.h"
#include "core/fuzz_decode.h"
#include "core/kernel.h"

/* Runs c; on a finding prints "precfuzz finding: ..." with the replay command (its path
 * absolute), writes the case to $PF_FINDINGS_DIR (default: the directory of the driver's
 * -artifact_prefix, pf_fuzz_note_args, where libFuzzer keeps the input; else the current
 * directory) and aborts so that libFuzzer keeps the input. Invalid cases (the decoder's bug)
 * abort too. */
void pf_fuzz_note_args(int argc, char **argv);
void pf_fuzz_run_case(const char *driver, pf_case *c);

/* The fuzz drivers of the operations: one per registered operation with a decoder
 * (pf_op.fuzz_decode), named "<op>_fuzzer" (CMake builds one from each
 * kernels/<op>/<op>_fuzzer.c with fuzz/op_driver.c); replay and minimize decode raw
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
