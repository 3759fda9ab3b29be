/* A main for the fuzz drivers when built without libFuzzer: replays every file given, and
 * every file in every directory given (as ctest does with corpora/<driver>/). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) { free(buf); fclose(f); return -1; }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  size_t count = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
      if (replay_file(argv[i])) return 2;
      count++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
      if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
        if (replay_file(p)) return 2;
        count++;
      }
    }
    if (d) closedir(d);
  }
  printf("replayed %zu inputs, no finding\n", count);
  return 0;
}
