/* Hyperparameter schedules over training steps (issue 4): the learning rate with linear
 * warm-up then cosine or linear decay to a final value, as Megatron's OptimizerParamScheduler
 * computes it (steps count from 1; after warm-up + decay the final value holds). */
#ifndef PF_LR_SCHEDULE_H
#define PF_LR_SCHEDULE_H

#include "harness/status.h"

typedef enum { PF_DECAY_CONSTANT = 0, PF_DECAY_LINEAR = 1, PF_DECAY_COSINE = 2 } pf_decay_kind;

typedef struct {
  double peak;        /* the learning rate at the end of warm-up */
  double final_value; /* after decay_steps */
  long warmup_steps;  /* linear from peak/warmup_steps at step 1 to peak at step warmup_steps */
  long decay_steps;   /* steps after warm-up to reach final_value */
  pf_decay_kind kind;
} pf_lr_schedule;

/* Checks the fields (PF_ERR_ARG with a one-line message naming the field). */
pf_status pf_lr_schedule_check(const pf_lr_schedule *s);
/* The learning rate at step t (t >= 1), in binary64. */
double pf_lr_at(const pf_lr_schedule *s, long t);

#endif
