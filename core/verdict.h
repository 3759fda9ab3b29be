/* Verdicts (docs/verdicts.md): what one element, and one case, came to. */
#ifndef PF_VERDICT_H
#define PF_VERDICT_H

#include "status.h"

/* In increasing severity; a case's verdict is the most severe of its elements'. */
typedef enum {
  PF_V_OK = 0,
  PF_V_RANGE,      /* the exact result is undefined or outside the dtype: the input's fault */
  PF_V_INACCURATE, /* finite, beyond the contract's bound */
  PF_V_UNDERFLOW,  /* 0 or subnormal where the exact result is a normal number (or lost) */
  PF_V_OVERFLOW,   /* +-inf where the exact result rounds to a finite number, or NaN caused by an overflow */
  PF_V_NAN,        /* NaN where the exact result is a number */
  PF_V_DIVERGENT,  /* trajectories and differential modes */
  PF_V_FAILED,     /* the kernel gave no outputs to judge: its process crashed, hung, broke the
                      protocol or answered with another dtype or shape (pf_run.note says which) */
  PF_NVERDICTS
} pf_verdict;

/* The hazards (hazard.h): results a contract allows that a training run should not get. */
typedef enum { PF_H_SATURATED = 0, PF_H_STAGNANT, PF_H_BIASED, PF_H_IMPRECISE, PF_NHAZARDS } pf_hazard;

const char *pf_verdict_name(pf_verdict v);
pf_status pf_verdict_parse(const char *s, pf_verdict *out);
/* A finding: a verdict that violates the contract (everything but ok and range). */
int pf_verdict_is_finding(pf_verdict v);

#endif
