/* cross_entropy_fuzzer: bytes -> a cross-entropy case -> kernel vs oracle; aborts on a finding
 * inside the contract's domain.
 * Layout: [variant][dtype][accum][rows: bits 0-1 rows - 1, bits 2-7 the micro-batches (fused, chunked)]
 *         [cols*][reduction][smoothing][z-loss][chunk][mode] then
 *   targets: one byte per row (255: the ignore index; else the byte modulo cols);
 *   mode even: raw bit patterns of the logits (2 bytes per fp16/bf16 element, 4 per fp32;
 *              missing ones are 0), so subnormals, infinities and NaNs occur;
 *   mode odd:  [seed: 8 bytes][dist][scale exponent] of the logits.
 * *: a size (pf_fuzz_dim): one byte, or two for the one value in 64 that reaches the large sizes.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/fuzz_decode.h"
#include "kernels/cross_entropy/cross_entropy_math.h"
#include "core/kernel.h"

int pf_decode_cross_entropy_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  if (size < 10) return 0;
  pf_bytes b = {data, size, 0};
  pf_case c;
  const pf_kernel *k = pf_fuzz_begin("cross_entropy", &b, &c);
  c.dtype = (pf_dtype)(pf_bytes_u8(&b) % PF_NDTYPES);
  c.accum = (pf_bytes_u8(&b) & 1) && pf_kernel_accepts(k, c.dtype, c.dtype) ? c.dtype : PF_FP32;
  const uint8_t rb = pf_bytes_u8(&b);
  c.shape[0] = 1 + rb % 4;
  c.shape[1] = pf_fuzz_dim(&b, 96, 4096);
  if (c.shape[1] > 96) c.shape[0] = 1; /* a long row: one of them (the oracle's cost) */
  const size_t rows = c.shape[0], cols = c.shape[1], n = rows * cols;
  if (k->algo == PF_CE_FUSED || k->algo == PF_CE_CHUNKED) /* gradient accumulation over the rows */
    pf_case_set_param(&c, "microbatches", 1 + (double)((size_t)(rb >> 2) % rows));
  pf_case_set_param(&c, "reduction", pf_bytes_u8(&b) % 3);
  const uint8_t ls = pf_bytes_u8(&b), zl = pf_bytes_u8(&b);
  pf_case_set_param(&c, "label_smoothing", ls < 128 ? 0 : (ls - 128) / 128.0);
  if (k->algo == PF_CE_FUSED || k->algo == PF_CE_CHUNKED) /* PyTorch has no z-loss */
    pf_case_set_param(&c, "z_loss", zl < 128 ? 0 : ldexp(1.0, -(zl % 24)));
  const uint8_t chunk = pf_bytes_u8(&b);
  if (k->algo == PF_CE_CHUNKED) pf_case_set_param(&c, "chunk", 1 + chunk % 40);
  const int raw = pf_bytes_u8(&b) % 2 == 0;
  pf_gen *t = &c.inputs[1];
  pf_gen_free(t);
  pf_gen_default(t);
  t->dist = PF_DIST_VALUES;
  t->values = calloc(rows, sizeof(double));
  if (!t->values) return 0;
  t->nvalues = rows;
  for (size_t i = 0; i < rows; i++) {
    const uint8_t v = pf_bytes_u8(&b);
    t->values[i] = v == 255 ? pf_case_param(&c, "ignore_index") : (double)(v % cols);
  }
  if (raw) {
    pf_fuzz_raw_values(&b, &c.inputs[0], c.dtype, n);
  } else {
    c.inputs[0].seed = pf_bytes_u64(&b);
    c.inputs[0].dist = (pf_dist)(pf_bytes_u8(&b) % 4);
    c.inputs[0].scale = ldexp(1.0, (int)(pf_bytes_u8(&b) % 40) - 16);
  }
  *out = c;
  return 1;
}
