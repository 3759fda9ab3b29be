/* Every one of the 2^32 binary32 bit patterns converts to fp16 exactly as the F16C
 * instruction VCVTPS2PH does (round to nearest even), or, without F16C, as gcc's _Float16.
 * Both are independent of precfuzz's own integer rounding; pf_round's add-and-subtract path
 * must give the same. Label: exhaustive. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/dtype.h"

typedef struct {
  uint64_t begin, end, mismatches;
  uint32_t first_bad;
  int use_f16c;
} pf_slice;

static uint16_t reference_fp16(float f, int use_f16c) {
  if (use_f16c) return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#if defined(__GNUC__) && !defined(__clang__)
  _Float16 h = (_Float16)f;
  uint16_t b;
  memcpy(&b, &h, 2);
  return b;
#else
  fail_msg("neither F16C nor _Float16 is available");
  return 0;
#endif
}

static void *run_slice(void *arg) {
  pf_slice *s = arg;
  for (uint64_t w = s->begin; w < s->end; w++) {
    const uint32_t bits = (uint32_t)w;
    float f;
    memcpy(&f, &bits, 4);
    const uint16_t want = reference_fp16(f, s->use_f16c);
    const uint16_t got = (uint16_t)pf_encode(PF_FP16, (double)f, PF_RN, 0);
    /* and pf_round, which takes another path to the same value */
    const double r = pf_round(PF_FP16, (double)f), rw = pf_decode(PF_FP16, want);
    const int ok = isnan(f) ? ((got & 0x7c00) == 0x7c00 && (got & 0x3ff) && (want & 0x3ff) && isnan(r))
                            : got == want && memcmp(&r, &rw, sizeof r) == 0;
    if (!ok && s->mismatches++ == 0) s->first_bad = bits;
  }
  return NULL;
}

static void test_dtype_fp32_to_fp16_every_pattern(void **state) {
  const int use_f16c = __builtin_cpu_supports("f16c");
  printf("reference: %s\n", use_f16c ? "F16C VCVTPS2PH" : "gcc _Float16");
  enum { NT = 4 };
  pthread_t th[NT];
  pf_slice sl[NT];
  const uint64_t total = 1ull << 32;
  for (int i = 0; i < NT; i++) {
    sl[i] = (pf_slice){total / NT * i, total / NT * (i + 1), 0, 0, use_f16c};
    pthread_create(&th[i], NULL, run_slice, &sl[i]);
  }
  uint64_t bad = 0;
  for (int i = 0; i < NT; i++) {
    pthread_join(th[i], NULL);
    bad += sl[i].mismatches;
    if (sl[i].mismatches) printf("first mismatch in slice %d: 0x%08x\n", i, sl[i].first_bad);
  }
  printf("%llu of %llu patterns disagree\n", (unsigned long long)bad, (unsigned long long)total);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_dtype_fp32_to_fp16_every_pattern)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
