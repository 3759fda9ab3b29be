/* What a case of the schedule (trajectory) family means, for its emulation (schedule_cpu.c)
 * and its oracle alike: its parameters, the output layout, the learning rate its schedule gives
 * at each step, the dtype Adam updates, the tensors and the loss scaler (schedule_spec.c). */
#ifndef PF_SCHEDULE_SPEC_H
#define PF_SCHEDULE_SPEC_H

#include "core/case.h"
#include "core/status.h"
#include "kernels/loss_scale/loss_scale_spec.h"

/* The learning rate over training steps: linear warm-up then cosine or linear decay to a final
 * value, as Megatron's OptimizerParamScheduler computes it (steps count from 1; after warm-up +
 * decay the final value holds). */
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

/* Parameter indices, in the order of the table in schedule_cpu.c. */
enum {
  PF_SP_LR = 0, PF_SP_LR_FINAL, PF_SP_WARMUP, PF_SP_DECAY, PF_SP_BETA1, PF_SP_BETA2, PF_SP_EPS, PF_SP_WD,
  PF_SP_MAXNORM, PF_SP_TOL, PF_SP_TENSORS, PF_SP_NOISE_DECAY, PF_SP_SPIKE_STEP, PF_SP_SPIKE_MAG,
  PF_SP_SPIKE_TENSOR, PF_SP_TINY_FRACTION, PF_SP_TINY_MAG, PF_SP_NONFINITE, PF_SP_SCALER, PF_SP_SCALE0,
  PF_SP_MINSCALE, PF_SP_WINDOW, PF_SP_HYST, PF_SCHED_NPARAMS
};

/* Output layout for T steps of n parameters: status[T], scale[T], step[T][n], master[T][n],
 * params[T][n], v[T][n]. step: the step Adam was asked to take, computed in binary64 from the
 * run's own state and gradient (what exact arithmetic would move the value by from there).
 * v: Adam's second moment after each step, in the state's dtype (the stagnant hazard's). */
/* The variants' algorithms (pf_kernel.algo). */
enum { PF_SCHED_FP32_STATE = 0, PF_SCHED_LOWP_STATE = 1 };

#define PF_SCHED_STATUS(T) ((size_t)0)
#define PF_SCHED_SCALE(T) ((size_t)(T))
#define PF_SCHED_STEP(T) (2 * (size_t)(T))
#define PF_SCHED_MASTER(T, n) (2 * (size_t)(T) + (size_t)(T) * (size_t)(n))
#define PF_SCHED_PARAMS(T, n) (2 * (size_t)(T) + 2 * (size_t)(T) * (size_t)(n))
#define PF_SCHED_V(T, n) (2 * (size_t)(T) + 3 * (size_t)(T) * (size_t)(n))

/* The dtype Adam updates: fp32 (the master) or, for lowp-state, the case's dtype. */
pf_dtype pf_schedule_master_dtype(const pf_case *c);
/* The tensor (from 0) parameter i belongs to. */
size_t pf_schedule_tensor_of(const pf_case *c, size_t i);
/* The loss scaler (PF_LS_*), -1 for none, and its starting state. */
int pf_schedule_scaler(const pf_case *c);
pf_ls_state pf_schedule_scaler_start(const pf_case *c);
pf_lr_schedule pf_schedule_lr(const pf_case *c);

#endif
