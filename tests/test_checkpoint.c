/* checkpoint: precfuzz's own format (core/checkpoint.h) round trip bit for bit, never written
 * over or half-written, and every broken checkpoint refused with one line naming the file, rank
 * and tensor. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/case.h"
#include "core/checkpoint.h"

static char base[256];

static void make(pf_checkpoint *ck) {
  memset(ck, 0, sizeof *ck);
  snprintf(ck->writer, sizeof ck->writer, "test");
  ck->step = 7;
  const double m[3] = {1.5, -0x1p-149, 0x1.fffffep127}, p[3] = {1.5, 0.0, -2.0}; /* fp32 values; bf16 values */
  for (int r = 0; r < 2; r++) {
    assert_int_equal(pf_ckpt_put_tensor(ck, r, "master", PF_FP32, m, 3), PF_OK);
    assert_int_equal(pf_ckpt_put_tensor(ck, r, "param", PF_BF16, p, 3), PF_OK);
    assert_int_equal(pf_ckpt_put_number(ck, r, "scale", 0x1p16), PF_OK);
    assert_int_equal(pf_ckpt_put_number(ck, r, "step", 7 + r), PF_OK);
  }
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_checkpoint_round_trip(void **state) {
  (void)state;
  pf_checkpoint ck, back;
  make(&ck);
  char dir[300];
  snprintf(dir, sizeof dir, "%s/a", base);
  assert_int_equal(pf_checkpoint_write(dir, &ck), PF_OK);
  assert_int_equal(pf_checkpoint_read(dir, &back), PF_OK);
  assert_string_equal(back.writer, "test");
  assert_true(back.step == 7 && back.nranks == 2);
  for (int r = 0; r < 2; r++) {
    const pf_ckpt_tensor *a = pf_ckpt_tensor_of(&ck, r, "master"), *b = pf_ckpt_tensor_of(&back, r, "master");
    assert_non_null(b);
    assert_memory_equal(a->data, b->data, 3 * sizeof(double)); /* the subnormal too */
    assert_int_equal(pf_ckpt_tensor_of(&back, r, "param")->dtype, PF_BF16);
    assert_true(pf_ckpt_number_of(&back, r, "scale")->value == 0x1p16 && pf_ckpt_number_of(&back, r, "step")->value == 7 + r);
  }
  /* never written over; no partial directory left */
  assert_int_equal(pf_checkpoint_write(dir, &ck), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "already exists"));
  char partial[320];
  snprintf(partial, sizeof partial, "%s.partial", dir);
  struct stat sb;
  assert_true(stat(partial, &sb) != 0);
  /* a value its dtype does not hold is refused, not rounded */
  assert_int_equal(pf_ckpt_put_tensor(&ck, 0, "bad", PF_FP32, (const double[1]){0.1}, 1), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "bad[0] = 0.10000000000000001 is not a fp32 value"));
  pf_checkpoint_free(&ck);
  pf_checkpoint_free(&back);
}

/* Each broken checkpoint: PF_ERR_PARSE (or IO) with a line naming what is wrong. */
static void expect_bad(const char *dir, const char *says) {
  pf_checkpoint ck;
  const pf_status st = pf_checkpoint_read(dir, &ck);
  if (st == PF_OK || !strstr(pf_error_message(), says)) fail_msg("%s: '%s', wanted '%s'", dir, pf_error_message(), says);
  assert_true(strchr(pf_error_message(), '\n') == NULL);
}

static void test_checkpoint_refuses_broken_ones(void **state) {
  (void)state;
  pf_checkpoint ck;
  make(&ck);
  char dir[300], path[400], cmd[900];
  /* a rank file cut short */
  snprintf(dir, sizeof dir, "%s/trunc", base);
  assert_int_equal(pf_checkpoint_write(dir, &ck), PF_OK);
  snprintf(path, sizeof path, "%s/rank-1.safetensors", dir);
  assert_int_equal(truncate(path, 40), 0);
  expect_bad(dir, "rank-1.safetensors");
  /* a rank file missing */
  unlink(path);
  expect_bad(dir, "rank-1.safetensors");
  /* the JSON: another format, a declared tensor missing, another dtype or length, a number that is none, a key too many */
  static const char *const edits[][2] = {
      {"s/precfuzz-checkpoint\\/1/precfuzz-checkpoint\\/2/", "is not precfuzz-checkpoint/1"},
      {"s/\"master\":/\"masters\":/", "masters"},
      {"0,/\"fp32\"/s//\"fp16\"/", "declared fp16"},
      {"0,/\"n\":\\t3/s//\"n\":\\t4/", "declared fp32 of 4"},
      {"0,/\"0x1p+16\"/s//\"lots\"/", "'scale' is not a number"},
      {"s/\"writer\":/\"extra\": 1, \"writer\":/", "exactly format, writer, step and ranks"},
      {"s/\"scale\":/\"a_number_name_of_more_than_forty_seven_characters_x\":/", "longer than 47 characters"},
  };
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
    snprintf(dir, sizeof dir, "%s/edit%zu", base, i);
    assert_int_equal(pf_checkpoint_write(dir, &ck), PF_OK);
    snprintf(cmd, sizeof cmd, "sed -i '%s' %s/checkpoint.json", edits[i][0], dir);
    assert_int_equal(system(cmd), 0);
    expect_bad(dir, edits[i][1]);
  }
  snprintf(dir, sizeof dir, "%s/none", base);
  expect_bad(dir, "checkpoint.json");
  snprintf(dir, sizeof dir, "%s/notjson", base);
  mkdir(dir, 0777);
  snprintf(path, sizeof path, "%s/checkpoint.json", dir);
  write_text(path, "{\"format\": ");
  expect_bad(dir, "checkpoint.json");
  pf_checkpoint_free(&ck);
}

int main(void) {
  snprintf(base, sizeof base, "/tmp/precfuzz-test-ckpt-XXXXXX");
  if (!mkdtemp(base)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checkpoint_round_trip),
      cmocka_unit_test(test_checkpoint_refuses_broken_ones),
  };
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", base);
  if (system(cmd)) return 1;
  return rc;
}
