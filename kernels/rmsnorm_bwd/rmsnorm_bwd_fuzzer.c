/* rmsnorm_bwd_fuzzer: bytes -> an RMSNorm backward case -> kernel vs oracle; aborts on a finding
 * inside the contract's domain. The inputs (x, dy, gamma) and parameters (eps, weights,
 * zero_centered_gamma, blocks) are LayerNorm's backward's, and so is the layout of the bytes
 * (kernels/layernorm_bwd/layernorm_bwd_fuzzer.c): rows of up to 16384 tokens, rows of up to 16384
 * columns, 2^17 elements at most, raw bit patterns or drawn values. */
#include <stdint.h>

#include "kernels/layernorm_bwd/layernorm_bwd.h"

int pf_decode_rmsnorm_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out) {
  return pf_decode_norm_bwd("rmsnorm_bwd", data, size, out);
}
