/* The sweep: every built-in kernel variant, dtype and accumulation through its boundary
 * searches and accuracy scan (what each operation says to search: pf_op.sweep), the trajectories,
 * the differential summaries and the
 * fault-detection table, as one results document (format precfuzz-results/2) that
 * precision-report turns into a page. */
#ifndef PF_SWEEP_H
#define PF_SWEEP_H

#include <stdint.h>

struct cJSON;

typedef struct {
  uint64_t seed;      /* first case seed of every search (default 1) */
  unsigned cases;     /* cases per point of the accuracy scans (default 8) */
  int points;         /* grid intervals of the scans and threshold searches (default 24) */
  int jobs;           /* worker threads (default: the number of processors) */
  int quick;          /* fewer configurations and cases (tests) */
  const char *only;   /* NULL, or one kernel */
  int progress;       /* 1: progress on stderr as core/progress.h says ($PRECFUZZ_PROGRESS); 0: none */
  int backend;        /* PF_BACKEND_*: cuda sweeps the variants that have a CUDA implementation */
  char device[256];   /* the device's description (pf_backend_setup) */
} pf_sweep_opts;

void pf_sweep_opts_default(pf_sweep_opts *o);
/* Runs the sweep; NULL with a one-line pf_error_message() on failure. */
struct cJSON *pf_sweep_run(const pf_sweep_opts *o);
/* The environment block (versions, backend, device, oracle precision, seeds). */
struct cJSON *pf_sweep_environment(const pf_sweep_opts *o);
#endif
