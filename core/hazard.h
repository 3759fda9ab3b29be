/* Hazards: results a kernel's contract allows but that are useless for training. A verdict says
 * whether the kernel kept its contract (a broken one is a bug); a hazard says the result,
 * contract kept or not, is one a training run should not get:
 *   saturated  an accumulation stopped absorbing its terms (a running sum, a norm);
 *   stagnant   state that cannot move (an EMA whose decay rounds away, a lost update, a loss
 *              scale that can never grow back);
 *   biased     rounding errors with a systematic sign over many elements (a t-test);
 *   imprecise  an error beyond the usability threshold of the output's dtype, measured per
 *              element, per row or per tensor as the stage says (pf_stage.measure).
 * imprecise and biased are judged for every operation from its outputs and the oracle's exact
 * values; saturated and stagnant by the operation (pf_op.hazards), which knows what its outputs
 * mean. docs/verdicts.md, "Hazards", says how each is measured and where its thresholds come from. */
#ifndef PF_HAZARD_H
#define PF_HAZARD_H

#include <stddef.h>

#include "case.h"
#include "dtype.h"
#include "status.h"
#include "verdict.h" /* pf_hazard */

const char *pf_hazard_name(pf_hazard h);
pf_status pf_hazard_parse(const char *s, pf_hazard *out); /* PF_ERR_UNKNOWN if not a hazard */

typedef struct pf_hazard_limits {
  double imprecise[PF_NDTYPES]; /* relative error (as measured) beyond which a result is imprecise */
  double bias_z;                /* |t statistic| of the mean signed error at or beyond which... */
  double bias_ulps;             /* ...and |mean| (in ulps) at or beyond which errors are biased */
  size_t bias_min;              /* distinct (exact, output) pairs a stage needs for the test */
} pf_hazard_limits;

/* The defaults: imprecise beyond max(2^-10, 16 u) (fp32 2^-10, fp16 2^-7, bf16 2^-4); biased
 * at |t| >= 6 with |mean| >= 0.25 ulp over at least 32 distinct pairs. */
void pf_hazard_limits_default(pf_hazard_limits *l);
/* "fp16=0x1p-6,bf16=0.05": the imprecise thresholds of the dtypes named (each > 0 and < 1).
 * One-line error naming what is wrong. */
pf_status pf_hazard_limits_parse(const char *s, pf_hazard_limits *l);
/* The command line's --imprecise: the limits pf_oracle_opts_default puts in every run's
 * options from now on (pf_hazard_limits_current: those, or NULL for the defaults). */
void pf_hazard_limits_set_default(const pf_hazard_limits *l);
const pf_hazard_limits *pf_hazard_limits_current(void);
/* l, or (l NULL) the defaults, written to *def */
const pf_hazard_limits *pf_hazard_limits_or_default(const pf_hazard_limits *l, pf_hazard_limits *def);

struct pf_run;
/* (These three read the run: run_hazards.c implements them, above hazard.c, which the run holds.)
 * Judges r's hazards: imprecise and biased over every stage, then the operation's own
 * (pf_op.hazards), and torch.testing.assert_close's default tolerance (pf_run.tt_fails).
 * Needs the oracle and the comparison (pf_run_judge calls it last). */
void pf_run_hazards(const pf_case *c, struct pf_run *r, const pf_hazard_limits *l);
/* For pf_op.hazards: records hazard h at output index at with its measure and a one-line
 * note (the first one recorded for h stays). */
void pf_run_flag_hazard(struct pf_run *r, pf_hazard h, size_t at, double measure, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* For pf_op.hazards: the imprecise threshold of an output of dtype t in case c (the looser of
 * t's and the case dtype's: an fp32 output of a bf16 computation is held to bf16's), and
 * whether a measure is beyond it (a measure equal to it within binary64's rounding of the
 * exact value is not). */
double pf_hazard_threshold(const pf_case *c, const pf_hazard_limits *l, pf_dtype t);
int pf_hazard_beyond(double measure, double threshold);
/* stagnant, as the operations judge it: over the (element, step) pairs whose exact value moved,
 * the run's stayed where it was bit for bit on at least half of them. */
typedef struct {
  size_t moved, stuck, first; /* first: the output index of the first stuck pair */
} pf_stuck;
static inline void pf_stuck_add(pf_stuck *s, size_t x, double prev, double now, double exact_prev, double exact_now) {
  if (exact_now == exact_prev) return;
  s->moved++;
  if (now == prev && !s->stuck++) s->first = x;
}
static inline int pf_stuck_stagnant(const pf_stuck *s) { return s->moved && 2 * s->stuck >= s->moved; }

/* biased's units pooled over many cases, by stage: a bias too small for one case's rows to
 * show (a few hundredths of an ulp) shows over thousands of rows, and a training run takes
 * thousands of steps. A unit is what pf_run_hazards tests in one case (a row's mean signed
 * error in ulps, or one distinct (exact, output) pair of a vector), as it is (upward or
 * downward) and times sign(E) (away from zero or toward it). */
#define PF_BIAS_STAGES 8 /* PF_MAX_STAGES (kernel.h) */
typedef struct {
  int nstages;
  struct {
    const char *name; /* the stage's (static) name */
    size_t n;         /* units */
    double sum[2], sq[2];
  } st[PF_BIAS_STAGES];
} pf_bias_pool;
/* Adds u's units to p (a pool of the same operation's stages; an empty p takes u's). */
void pf_bias_pool_add(pf_bias_pool *p, const pf_bias_pool *u);
/* Stage k of p: the mean and t statistic of both senses (0: upward, 1: away from zero), and
 * the sense that is biased under l's thresholds (as one case's test: |t| >= bias_z and |mean|
 * >= bias_ulps over at least bias_min units), or -1. */
int pf_bias_pool_test(const pf_bias_pool *p, int k, const pf_hazard_limits *l, double mean[2], double t[2]);

/* Cases counted by hazard and by what torch.testing said of them (run's summary, the
 * boundary scan's points, the sweep's configurations). */
typedef struct {
  unsigned long hazard[PF_NHAZARDS]; /* cases with each hazard */
  unsigned long any;                 /* ... with any */
  /* torch.testing.assert_close: cases it rejects; cases it passes that have a finding, or a
   * hazard and no finding; cases it rejects that are ok with no hazard */
  unsigned long tt_rejects, tt_pass_finding, tt_pass_hazard, tt_reject_sound;
  double max_err;                    /* the largest pf_run.worst_err */
  /* the largest share of its contract's bound an element's error used: ulps / allowed ulps
   * (1: at the bound; above it a finding; inf: a NaN or an error beyond a bound of 0 ulps),
   * what the contract judges, where max_err is what the hazards measure */
  double max_use;
  pf_bias_pool bias;                 /* biased's units of every case, pooled by stage */
} pf_hazard_tally;
void pf_hazard_tally_add(pf_hazard_tally *t, const struct pf_run *r);
void pf_hazard_tally_merge(pf_hazard_tally *t, const pf_hazard_tally *u);

/* "saturated,imprecise" or "none" */
const char *pf_hazards_str(unsigned mask, char *buf, size_t len);

/* torch.testing.assert_close's default tolerances for a dtype (rtol, atol): fp32 1.3e-6 and
 * 1e-5, fp16 1e-3 and 1e-5, bf16 1.6e-2 and 1e-5 (torch/testing/_comparison.py). */
void pf_torch_testing_tolerance(pf_dtype t, double *rtol, double *atol);

#endif
