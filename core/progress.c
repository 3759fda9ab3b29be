/* Progress on stderr (progress.h). */
#include "core/progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double pf_progress_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

pf_status pf_progress_env(void) {
  const char *v = getenv("PRECFUZZ_PROGRESS");
  if (v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
    return pf_error(PF_ERR_ARG, "PRECFUZZ_PROGRESS: '%s' is not 0 or 1", v);
  return PF_OK;
}

void pf_progress_start(pf_progress *p) {
  const char *v = getenv("PRECFUZZ_PROGRESS");
  const int off = v && strcmp(v, "1") != 0, asked = v && !off;
  p->mode = off ? 0 : isatty(STDERR_FILENO) ? 1 : 2;
  p->every = p->mode == 1 ? 0.5 : asked ? 1.0 : PF_PROGRESS_LOG_SECONDS;
  p->t0 = p->last = pf_progress_now();
}

double pf_progress_elapsed(const pf_progress *p) { return pf_progress_now() - p->t0; }

void pf_progress_show(pf_progress *p, int last, const char *fmt, ...) {
  if (!p->mode) return;
  const double now = pf_progress_now();
  if (!last && now - p->last < p->every) return;
  p->last = now;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (p->mode == 1) fprintf(stderr, "\r\033[K%s", line);
  else fprintf(stderr, "[%.0f s] %s\n", now - p->t0, line);
  fflush(stderr);
}

void pf_progress_clear(pf_progress *p) {
  if (p->mode == 1) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
}
