/* The fuzz drivers' decoders by name, for precfuzz replay and minimize of raw inputs. */
#include <string.h>

#include "harness/fuzz/fuzz_common.h"

int pf_decode_adam_fuzzer(const uint8_t *, size_t, pf_case *);
int pf_decode_attention_fuzzer(const uint8_t *, size_t, pf_case *);
int pf_decode_clip_fuzzer(const uint8_t *, size_t, pf_case *);
int pf_decode_loss_scale_fuzzer(const uint8_t *, size_t, pf_case *);
int pf_decode_schedule_fuzzer(const uint8_t *, size_t, pf_case *);
int pf_decode_softmax_fuzzer(const uint8_t *, size_t, pf_case *);
int pf_decode_tp_diff_fuzzer(const uint8_t *, size_t, pf_case *);

const pf_decoder pf_decoders[] = {
    {"adam_fuzzer", "adam", pf_decode_adam_fuzzer},
    {"attention_fuzzer", "attention", pf_decode_attention_fuzzer},
    {"clip_fuzzer", "clip", pf_decode_clip_fuzzer},
    {"loss_scale_fuzzer", "loss_scale", pf_decode_loss_scale_fuzzer},
    {"schedule_fuzzer", "schedule", pf_decode_schedule_fuzzer},
    {"softmax_fuzzer", "softmax", pf_decode_softmax_fuzzer},
    {"tp_diff_fuzzer", "tp_diff", pf_decode_tp_diff_fuzzer},
    {NULL, NULL, NULL},
};

const pf_decoder *pf_decoder_find(const char *driver) {
  for (const pf_decoder *d = pf_decoders; d->driver; d++)
    if (strcmp(d->driver, driver) == 0) return d;
  return NULL;
}
