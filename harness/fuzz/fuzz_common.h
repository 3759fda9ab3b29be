/* What every fuzz driver shares: reading its input bytes, running a decoded case, and
 * reporting a finding (one line, the saved case, the replay command) before abort(). */
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
size_t pf_bytes_left(const pf_bytes *b);

/* The fault under test: $PF_FUZZ_FAULT, or NULL. */
const char *pf_fuzz_fault(void);

/* Starts a case of operation op: the next byte picks a variant among those honouring
 * $PF_FUZZ_FAULT (all when unset) and named $PF_FUZZ_VARIANT (any when unset; exit 2 when it
 * names none), whose fault switch is then set. Aborts when the fault
 * names none of op's variants (a misconfigured run, not a finding). */
const pf_kernel *pf_fuzz_begin(const char *op, pf_bytes *b, pf_case *c);

/* An explicit-values generator of n raw bit patterns of dtype t (missing bytes: 0). */
void pf_fuzz_raw_values(pf_bytes *b, pf_gen *g, pf_dtype t, size_t n);

/* Runs c; on a finding prints "precfuzz finding: ..." with the replay command, writes the
 * case to $PF_FINDINGS_DIR (default: the current directory) and aborts so that libFuzzer
 * keeps the input. Invalid cases (the decoder's bug) abort too. */
void pf_fuzz_run_case(const char *driver, pf_case *c);

/* Each driver is a decoder, pf_decode_<driver>(bytes, size, out): 1 and a case in out (the
 * caller frees it), or 0 when the bytes are too short to decode. PF_FUZZ_ENTRY makes it a
 * libFuzzer target; the decoders are also linked into precfuzz (replay and minimize of raw
 * inputs), built with PF_DECODER_ONLY. */
#ifdef PF_DECODER_ONLY
#define PF_FUZZ_ENTRY(driver)
#else
#define PF_FUZZ_ENTRY(driver)                                    \
  int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { \
    pf_case c;                                                   \
    if (pf_decode_##driver(data, size, &c)) {                    \
      pf_fuzz_run_case(#driver, &c);                             \
      pf_case_free(&c);                                          \
    }                                                            \
    return 0;                                                    \
  }
#endif

/* The decoders by driver name (harness/fuzz/decoders.c). */
typedef int (*pf_decode_fn)(const uint8_t *data, size_t size, pf_case *out);
typedef struct {
  const char *driver; /* "softmax_fuzzer" */
  const char *op;     /* "softmax" */
  pf_decode_fn decode;
} pf_decoder;
extern const pf_decoder pf_decoders[];
const pf_decoder *pf_decoder_find(const char *driver);

#endif
