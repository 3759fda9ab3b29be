/* tensorfile_fuzzer: the .npy and safetensors reader on arbitrary bytes. It must never crash;
 * a file it refuses gets one line naming the problem; a tensor it accepts must hold values of
 * its dtype, and writing it as .npy and reading that back must give the same dtype, shape and
 * bits. A broken promise aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensorfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pf_tensorfile t;
  if (pf_tensorfile_parse(data, size, NULL, "input", &t) != PF_OK) {
    const char *m = pf_error_message();
    if (!m[0] || strchr(m, '\n')) {
      fprintf(stderr, "tensorfile_fuzzer: a refusal without a one-line reason: '%s'\n", m);
      abort();
    }
    return 0;
  }
  for (size_t i = 0; i < t.n; i++) {
    const double v = t.data[i];
    if (v == v && pf_round(t.dtype, v) != v) {
      fprintf(stderr, "tensorfile_fuzzer: value %zu, %a, is not a %s value\n", i, v, pf_dtype_name(t.dtype));
      abort();
    }
  }
  const pf_tensor_view view = {NULL, t.dtype, t.ndims, t.shape, t.data};
  unsigned char *buf;
  size_t len;
  pf_tensorfile u;
  if (pf_npy_encode(&view, &buf, &len) != PF_OK || pf_tensorfile_parse(buf, len, NULL, "rewritten", &u) != PF_OK) {
    fprintf(stderr, "tensorfile_fuzzer: an accepted tensor does not write and read back: %s\n", pf_error_message());
    abort();
  }
  if (u.dtype != t.dtype || u.ndims != t.ndims || u.n != t.n || memcmp(u.shape, t.shape, sizeof t.shape) != 0) {
    fprintf(stderr, "tensorfile_fuzzer: the round trip changed the dtype or shape\n");
    abort();
  }
  for (size_t i = 0; i < t.n; i++)
    if (pf_encode(t.dtype, t.data[i], PF_RN, 0) != pf_encode(u.dtype, u.data[i], PF_RN, 0)) {
      fprintf(stderr, "tensorfile_fuzzer: the round trip changed value %zu: %a to %a\n", i, t.data[i], u.data[i]);
      abort();
    }
  free(buf);
  pf_tensorfile_free(&u);
  pf_tensorfile_free(&t);
  return 0;
}
