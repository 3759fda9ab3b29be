/* The libFuzzer driver of one operation, PF_FUZZ_OP: CMake builds <op>_fuzzer from it for
 * every kernels/<op>/<op>_fuzzer.c (the operation's decoder, pf_op.fuzz_decode). The bytes
 * become a case of the operation, run against the oracle; a finding inside the contract's
 * domain aborts, so that libFuzzer keeps the input (fuzz_common.h). */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/fuzz_common.h"
#include "core/plugin.h"

#ifndef PF_FUZZ_OP
#error "PF_FUZZ_OP names the operation this driver fuzzes"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer calls this before the first input: a user's kernels from $PRECFUZZ_KERNELS are
 * loaded before fuzzing starts, so that a library built with -fsanitize=fuzzer-no-link has
 * its coverage counters registered with the engine from the start (docs/own-kernels.md). */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  pf_fuzz_note_args(*argc, *argv); /* a finding's case file beside -artifact_prefix */
  if (pf_plugins_load_env()) {
    fprintf(stderr, "fuzz driver: PRECFUZZ_KERNELS: %s\n", pf_error_message());
    exit(2);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const pf_op *op;
  if (!op && (!(op = pf_op_find(PF_FUZZ_OP)) || !op->fuzz_decode)) {
    fprintf(stderr, "fuzz driver: operation %s has no decoder\n", PF_FUZZ_OP);
    abort();
  }
  pf_case c;
  if (op->fuzz_decode(data, size, &c)) {
    pf_fuzz_run_case(PF_FUZZ_OP "_fuzzer", &c);
    pf_case_free(&c);
  }
  return 0;
}
