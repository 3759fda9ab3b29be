/* Progress of long work on stderr, for a person at a terminal and for a CI log alike: on a
 * terminal one line rewritten at most twice a second; elsewhere (a log) a plain line at most
 * every PF_PROGRESS_LOG_SECONDS, so that a long job is heard from without flooding its log.
 * $PRECFUZZ_PROGRESS: 0 never, 1 always (a terminal's line, or a log's line every second),
 * unset: the terminal's line or the log's lines as stderr is. The first line comes when one is
 * due, not at the start: work refused up front says only why. */
#ifndef PF_PROGRESS_H
#define PF_PROGRESS_H

#include "core/status.h"

#define PF_PROGRESS_LOG_SECONDS 30.0

typedef struct {
  int mode;        /* 0 off, 1 a terminal's rewritten line, 2 a log's lines */
  double t0, last; /* when the work began, when a line was last shown */
  double every;    /* seconds between lines */
} pf_progress;

/* $PRECFUZZ_PROGRESS checked: PF_ERR_ARG with one line when it is neither 0 nor 1. */
pf_status pf_progress_env(void);
/* Starts p: off when $PRECFUZZ_PROGRESS is 0 (or not 0 or 1: pf_progress_env says so). */
void pf_progress_start(pf_progress *p);
/* Seconds since pf_progress_start. */
double pf_progress_elapsed(const pf_progress *p);
/* Shows a line (printf format, no newline) when one is due (or always when last is set): a
 * terminal's replaces the one before, a log's is a line of its own prefixed by the time elapsed. */
void pf_progress_show(pf_progress *p, int last, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Clears a terminal's line (the work is done or interrupted). */
void pf_progress_clear(pf_progress *p);

#endif
