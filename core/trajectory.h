/* A one-step kernel over N steps (precfuzz run --steps N): the kernel's own state carried from
 * step to step, beside the exact trajectory from the same start with the same fresh inputs.
 *
 * Each step the kernel is judged as `run` judges one case, from the state it made itself, against
 * the oracle on that state: a finding there breaks the step's contract (a bug). Beside it the
 * exact trajectory: the oracle's exact step from the exact state, its values carried in binary64
 * (within N 2^-53 relative of the true trajectory after N steps, far below an ulp of fp32 for
 * any N this runs). After the last step the watched input (Adam: the parameter) of the kernel's
 * trajectory is measured against the exact one: what a run of N steps loses although every
 * step keeps its contract (a hazard): elements that never moved while the exact one moved an
 * ulp or more (stagnant, when half of them did: weight decay or updates below half an ulp, step
 * after step), an error that leans one way (biased: |t| >= 6, a mean of an ulp or more and a
 * sixteenth or more of the exact trajectory's median movement), and the distance in ulps.
 * The operation says what is carried (pf_op.carry). */
#ifndef PF_TRAJECTORY_H
#define PF_TRAJECTORY_H

#include <stddef.h>
#include <stdint.h>

#include "core/case.h"
#include "core/oracle.h"

typedef struct {
  uint64_t steps;          /* steps run (fewer than asked only when a step could not run) */
  uint64_t findings;       /* steps with a finding (the step's contract broken) */
  uint64_t first_step;     /* the first of them, from 1 */
  char first[400];         /* what it was: verdict and where, as run prints it */
  size_t n;                /* elements of the watched input */
  size_t stuck, moved;     /* never moved / the exact moved at least an ulp of its dtype */
  size_t stuck_at;         /* the first stuck element */
  double stuck_from, stuck_exact; /* its value, and the exact value after the last step */
  double median_ulps, max_ulps;   /* |kernel - exact| after the last step, in ulps of the dtype */
  size_t max_at;
  double exact_moved_ulps; /* the median distance the exact trajectory moved, in ulps */
  double bias_mean, bias_t;       /* the signed error's mean in ulps and its t statistic */
  unsigned hazards;        /* bits of PF_H_STAGNANT and PF_H_BIASED */
  double seconds;
} pf_trajectory;

/* Runs c over `steps` steps (c's own parameters at the first; the operation advances them).
 * An error (a kernel that fails, an operation with nothing to carry) is a status with one line. */
pf_status pf_trajectory_run(const pf_case *c, uint64_t steps, const pf_oracle_opts *opts, pf_trajectory *t);

#endif
