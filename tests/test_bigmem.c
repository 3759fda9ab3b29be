/* bigmem: arrays above the threshold (mapped, huge pages where allowed) and below it (calloc)
 * are zeroed, writable end to end and freed by one function; a size that overflows is NULL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/bigmem.h"

static void test_bigmem(void **state) {
  (void)state;
  const size_t sizes[] = {1, 1000, (size_t)1 << 20, (size_t)3 << 20}; /* the last two: 8 and 24 MiB */
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    double *a = pf_big_zalloc(sizes[k], sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < sizes[k]; i += 4099) assert_true(a[i] == 0);
    assert_true(a[sizes[k] - 1] == 0);
    for (size_t i = 0; i < sizes[k]; i++) a[i] = (double)i;
    assert_true(a[sizes[k] - 1] == (double)(sizes[k] - 1));
    pf_big_free(a);
  }
  assert_null(pf_big_zalloc(SIZE_MAX / 4, 8));
  pf_big_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bigmem)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
