/* checkpoint_json_fuzzer: the checkpoint reader (core/checkpoint.h) on arbitrary bytes as a
 * checkpoint.json beside a valid rank file (rank-0.safetensors: master, fp32 x 3; param, bf16 x
 * 3). It must never crash; every text it accepts must be strict JSON (json_check.h), and every
 * checkpoint it accepts must hold what the rank file holds (the declared dtypes and lengths,
 * values of their dtypes); a mismatch aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checkpoint.h"
#include "fuzz/json_check.h"
#include "core/tensorfile.h"

static char dir[256], base_dir[256];

/* the fixture's files, at exit: a fuzzing run leaves nothing in /tmp */
static void pf_fixture_remove(void) {
  static const char *const names[] = {"checkpoint.json", "rank-0.safetensors"};
  char p[400];
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
  rmdir(dir);
  rmdir(base_dir);
}

/* the fixture: a checkpoint whose json each input then replaces */
static int pf_fixture(void) {
  if (dir[0]) return 1;
  char base[] = "/tmp/precfuzz-ckpt-fuzz-XXXXXX";
  if (!mkdtemp(base)) return 0;
  snprintf(dir, sizeof dir, "%s/c", base);
  snprintf(base_dir, sizeof base_dir, "%s", base);
  atexit(pf_fixture_remove);
  pf_checkpoint ck;
  memset(&ck, 0, sizeof ck);
  const double m[3] = {1.5, -0x1p-149, 0x1.fffffep127}, p[3] = {1.5, 0.0, -2.0};
  int ok = pf_ckpt_put_tensor(&ck, 0, "master", PF_FP32, m, 3) == PF_OK &&
           pf_ckpt_put_tensor(&ck, 0, "param", PF_BF16, p, 3) == PF_OK &&
           pf_ckpt_put_number(&ck, 0, "scale", 0x1p16) == PF_OK && pf_checkpoint_write(dir, &ck) == PF_OK;
  pf_checkpoint_free(&ck);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!pf_fixture()) abort();
  char path[300];
  snprintf(path, sizeof path, "%s/checkpoint.json", dir);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  pf_checkpoint ck;
  if (pf_checkpoint_read(dir, &ck) == PF_OK) {
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    pf_fuzz_json_check_accepted(text, "checkpoint_json_fuzzer");
    free(text);
    for (int r = 0; r < ck.nranks; r++)
      for (int i = 0; i < ck.rank[r].ntensors; i++) {
        const pf_ckpt_tensor *t = &ck.rank[r].tensors[i];
        const int master = strcmp(t->name, "master") == 0;
        if (r != 0 || (!master && strcmp(t->name, "param") != 0) || t->n != 3 || t->dtype != (master ? PF_FP32 : PF_BF16)) {
          fprintf(stderr, "checkpoint_json_fuzzer: accepted rank %d tensor %s (%zu values) that the rank file does not hold\n",
                  r, t->name, t->n);
          abort();
        }
      }
    pf_checkpoint_free(&ck);
  }
  return 0;
}
