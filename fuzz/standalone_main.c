/* A main for the fuzz drivers when built without libFuzzer (gcc; the CUDA build, which the
 * fuzzing build is not). It replays every file given and every file in every directory given
 * (as ctest does with corpora/<driver>/), and with -runs=N or -max_total_time=S it then fuzzes
 * by blind mutation: no coverage feedback, so it is weaker than libFuzzer, but it runs where
 * clang is missing, such as a lent GPU machine with PF_FUZZ_BACKEND=cuda.
 *
 *   DRIVER [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N] [-artifact_prefix=P] FILE|DIR...
 *
 * The flags are libFuzzer's names with libFuzzer's meaning. Each mutated input is one to
 * four mutations of a corpus input (bit flip, byte set to a random or boundary value, a
 * 16- or 32-bit boundary pattern, insertion, deletion, a piece of another input); the same
 * seed and corpus give the same inputs in the same order. A finding aborts as under libFuzzer,
 * after the input is written to P crash-<hash> and the replay command printed. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void pf_fuzz_note_args(int argc, char **argv); /* fuzz/fuzz_common.h */

typedef struct {
  uint8_t *data;
  size_t n;
  char *path;
} pf_input;

static int pf_read_file(const char *path, pf_input *in) {
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
      if (!nb) {
        free(buf);
        fclose(f);
        fprintf(stderr, "out of memory reading %s\n", path);
        return -1;
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  fclose(f);
  in->data = buf;
  in->n = n;
  in->path = strdup(path);
  return 0;
}

static int pf_by_path(const void *a, const void *b) {
  return strcmp(((const pf_input *)a)->path, ((const pf_input *)b)->path);
}

/* ---- a finding under mutation: the input is written out before abort() ends the run ---- */
static const uint8_t *pf_cur_data;
static size_t pf_cur_n;
static char pf_crash_path[4200];

static const char *pf_cur_file; /* replaying: the file the input came from */
static char pf_replay_flags[512];  /* " --driver D [--fault F] [--backend cuda]" for the replay line */
static char pf_kernels_flags[4096]; /* " --kernels LIB" per $PRECFUZZ_KERNELS library */
static char pf_self_cmd[4200];        /* pf_self(): the precfuzz that replays it */

static void pf_on_abort(int sig) {
  if (pf_cur_file) {
    const char m0[] = "precfuzz standalone: the input is the file ";
    (void)!write(2, m0, sizeof m0 - 1);
    (void)!write(2, pf_cur_file, strlen(pf_cur_file));
    (void)!write(2, "\n", 1);
    signal(sig, SIG_DFL);
    return;
  }
  int fd = open(pf_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t off = 0;
  while (fd >= 0 && off < pf_cur_n) {
    ssize_t w = write(fd, pf_cur_data + off, pf_cur_n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (fd >= 0) close(fd);
  if (fd < 0 || off < pf_cur_n) {
    const char m2[] = "precfuzz standalone: cannot save the input as ";
    (void)!write(2, m2, sizeof m2 - 1);
    (void)!write(2, pf_crash_path, strlen(pf_crash_path));
    (void)!write(2, " (see -artifact_prefix)\n", 24);
  } else {
    const char m1[] = "precfuzz standalone: the input is saved; replay with: ";
    (void)!write(2, m1, sizeof m1 - 1);
    (void)!write(2, pf_self_cmd, strlen(pf_self_cmd));
    (void)!write(2, pf_kernels_flags, strlen(pf_kernels_flags));
    (void)!write(2, " replay", 7);
    (void)!write(2, pf_replay_flags, strlen(pf_replay_flags));
    (void)!write(2, " ", 1);
    (void)!write(2, pf_crash_path, strlen(pf_crash_path));
    (void)!write(2, "\n", 1);
  }
  signal(sig, SIG_DFL); /* abort() raises again and ends the process */
}

/* splitmix64: the mutation stream of -seed */
static uint64_t pf_rng_state;
static uint64_t pf_next(void) {
  uint64_t z = (pf_rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static size_t pf_below(size_t n) { return n ? (size_t)(pf_next() % n) : 0; }

/* Boundary patterns of the formats the drivers decode: zeros, ones, the largest finite,
 * infinities, NaNs, the smallest subnormals and normals of fp16 / bf16 (16 bits) and fp32. */
static const uint16_t pf_b16[] = {0x0000, 0x8000, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x0400, 0x3f80,
                                  0x7f7f, 0x7f80, 0x7fc0, 0x0080, 0xffff};
static const uint32_t pf_b32[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                  0x7fc00000u, 0x00000001u, 0x00800000u, 0x477fe000u, 0xffffffffu};

static size_t pf_mutate(uint8_t *b, size_t n, size_t max_len, const pf_input *corpus, size_t ncorpus) {
  const int k = 1 + (int)pf_below(4);
  for (int i = 0; i < k; i++) {
    switch (pf_below(7)) {
    case 0: /* flip a bit */
      if (n) b[pf_below(n)] ^= (uint8_t)(1u << pf_below(8));
      break;
    case 1: { /* a byte to a random or boundary value */
      static const uint8_t v[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
      if (n) b[pf_below(n)] = pf_below(2) ? (uint8_t)pf_next() : v[pf_below(sizeof v)];
      break;
    }
    case 2: /* a 16-bit boundary pattern, little-endian */
      if (n >= 2) {
        const uint16_t v = pf_b16[pf_below(sizeof pf_b16 / sizeof pf_b16[0])];
        const size_t at = pf_below(n - 1);
        b[at] = (uint8_t)v;
        b[at + 1] = (uint8_t)(v >> 8);
      }
      break;
    case 3: /* a 32-bit boundary pattern */
      if (n >= 4) {
        const uint32_t v = pf_b32[pf_below(sizeof pf_b32 / sizeof pf_b32[0])];
        const size_t at = pf_below(n - 3);
        for (int j = 0; j < 4; j++) b[at + j] = (uint8_t)(v >> (8 * j));
      }
      break;
    case 4: /* insert a random byte */
      if (n < max_len) {
        const size_t at = pf_below(n + 1);
        memmove(b + at + 1, b + at, n - at);
        b[at] = (uint8_t)pf_next();
        n++;
      }
      break;
    case 5: /* delete a byte */
      if (n > 1) {
        const size_t at = pf_below(n);
        memmove(b + at, b + at + 1, n - at - 1);
        n--;
      }
      break;
    default: { /* overwrite with a piece of another input */
      const pf_input *o = &corpus[pf_below(ncorpus)];
      if (!o->n || !n) break;
      const size_t from = pf_below(o->n), at = pf_below(n);
      size_t len = 1 + pf_below(o->n - from);
      if (len > n - at) len = n - at;
      memmove(b + at, o->data + from, len);
      break;
    }
    }
  }
  return n;
}

static uint64_t pf_fnv(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static double pf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* -NAME=VALUE with VALUE an integer in [lo, hi]: 1 and *v; 0 when arg is not -NAME=; exits 2
 * on a bad value. */
static int pf_flag(const char *arg, const char *name, long long lo, long long hi, long long *v) {
  const size_t k = strlen(name);
  if (strncmp(arg, name, k) || arg[k] != '=') return 0;
  char *end;
  const char *s = arg + k + 1;
  const long long x = strtoll(s, &end, 10);
  if (end == s || *end || x < lo || x > hi) {
    fprintf(stderr, "%s: '%s' is not an integer in [%lld, %lld]\n", name, s, lo, hi);
    exit(2);
  }
  *v = x;
  return 1;
}

static void pf_free_corpus(pf_input *corpus, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(corpus[i].data);
    free(corpus[i].path);
  }
  free(corpus);
}

/* Every file named, and every file in every directory named, each directory's in name
 * order; 0, or 2 after one line on stderr. */
static int pf_load_corpus(int argc, char **argv, pf_input **out, size_t *nout) {
  pf_input *corpus = NULL;
  size_t ncorpus = 0, cap = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] == '-') continue; /* a flag */
    struct stat sb;
    if (stat(a, &sb) != 0) {
      fprintf(stderr, "%s: no such file or directory\n", a);
      goto fail;
    }
    size_t first = ncorpus;
    DIR *d = S_ISDIR(sb.st_mode) ? opendir(a) : NULL;
    if (S_ISDIR(sb.st_mode) && !d) {
      fprintf(stderr, "%s: cannot open the directory\n", a);
      goto fail;
    }
    struct dirent *e = NULL;
    do {
      char p[4096];
      if (d) {
        if (!(e = readdir(d))) break;
        snprintf(p, sizeof p, "%s/%s", a, e->d_name);
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
      } else {
        snprintf(p, sizeof p, "%s", a);
      }
      if (ncorpus == cap) {
        cap = cap ? 2 * cap : 64;
        pf_input *nc = realloc(corpus, cap * sizeof *corpus);
        if (!nc) {
          fprintf(stderr, "out of memory reading the corpus\n");
          if (d) closedir(d);
          goto fail;
        }
        corpus = nc;
      }
      if (pf_read_file(p, &corpus[ncorpus])) {
        if (d) closedir(d);
        goto fail;
      }
      ncorpus++;
    } while (d);
    if (d) closedir(d);
    qsort(corpus + first, ncorpus - first, sizeof *corpus, pf_by_path); /* readdir's order is the file system's */
  }
  *out = corpus;
  *nout = ncorpus;
  return 0;
fail:
  pf_free_corpus(corpus, ncorpus);
  return 2;
}

int main(int argc, char **argv) {
  long long runs = -1, max_time = -1, seed = 0, max_len = 4096;
  const char *prefix = "";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') continue;
    if (pf_flag(a, "-runs", 0, (long long)1 << 40, &runs) || pf_flag(a, "-max_total_time", 0, 1 << 30, &max_time) ||
        pf_flag(a, "-seed", 0, (long long)UINT32_MAX, &seed) || pf_flag(a, "-max_len", 1, 1 << 24, &max_len))
      continue;
    if (strncmp(a, "-artifact_prefix=", 17) == 0) {
      prefix = a + 17;
      continue;
    }
    fprintf(stderr, "%s: unknown flag (this build replays and mutates: -runs, -max_total_time, -seed, -max_len, "
                    "-artifact_prefix)\n", a);
    return 2;
  }
  pf_fuzz_note_args(argc, argv); /* a finding's case file beside -artifact_prefix */
  if (pf_plugins_load_env()) {
    fprintf(stderr, "PRECFUZZ_KERNELS: %s\n", pf_error_message());
    return 2;
  }
  snprintf(pf_kernels_flags, sizeof pf_kernels_flags, "%s", pf_plugins_flags());
  snprintf(pf_self_cmd, sizeof pf_self_cmd, "%s", pf_self()); /* the handler only writes */
  const char *slash = strrchr(argv[0], '/'), *fault = getenv("PF_FUZZ_FAULT"), *be = getenv("PF_FUZZ_BACKEND");
  snprintf(pf_replay_flags, sizeof pf_replay_flags, " --driver %s%s%s%s%s", slash ? slash + 1 : argv[0],
           fault && *fault ? " --fault " : "", fault && *fault ? fault : "", be && *be ? " --backend " : "",
           be && *be ? be : "");
  pf_input *corpus = NULL;
  size_t ncorpus = 0;
  if (pf_load_corpus(argc, argv, &corpus, &ncorpus)) return 2;
  signal(SIGABRT, pf_on_abort);
  for (size_t i = 0; i < ncorpus; i++) {
    pf_cur_file = corpus[i].path;
    LLVMFuzzerTestOneInput(corpus[i].data, corpus[i].n);
  }
  pf_cur_file = NULL;
  if (runs < 0 && max_time < 0) {
    printf("replayed %zu inputs, no finding\n", ncorpus);
    pf_free_corpus(corpus, ncorpus);
    return 0;
  }
  uint8_t *buf = ncorpus ? malloc((size_t)max_len) : NULL;
  if (!buf) {
    fprintf(stderr, ncorpus ? "out of memory\n"
                            : "mutation needs at least one input to start from (a corpus file or directory)\n");
    pf_free_corpus(corpus, ncorpus);
    return 2;
  }
  pf_rng_state = (uint64_t)seed;
  const double t0 = pf_now();
  long long done = 0;
  for (; runs < 0 || done < runs; done++) {
    if (max_time >= 0 && (done & 15) == 0 && pf_now() - t0 >= (double)max_time) break;
    const pf_input *from = &corpus[pf_below(ncorpus)];
    size_t n = from->n < (size_t)max_len ? from->n : (size_t)max_len;
    memcpy(buf, from->data, n);
    n = pf_mutate(buf, n, (size_t)max_len, corpus, ncorpus);
    pf_cur_data = buf;
    pf_cur_n = n;
    snprintf(pf_crash_path, sizeof pf_crash_path, "%scrash-%016llx", prefix, (unsigned long long)pf_fnv(buf, n));
    LLVMFuzzerTestOneInput(buf, n);
  }
  const double secs = pf_now() - t0;
  printf("replayed %zu inputs, then %lld mutated inputs in %.1f s (%.0f/s, seed %lld), no finding\n", ncorpus, done,
         secs, secs > 0 ? (double)done / secs : 0.0, seed);
  free(buf);
  pf_free_corpus(corpus, ncorpus);
  return 0;
}
