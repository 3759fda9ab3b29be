/* Boundary search: where along one parameter a kernel variant starts to fail.
 *
 * An axis is one number of a case: every element of an input (or of all inputs), an input
 * generator's scale, a kernel parameter, or a shape dimension. Along it:
 *   - a threshold search (pf_boundary_threshold) for failures that depend on that one value:
 *     a grid brackets the first change of the failure predicate and bisection narrows it to
 *     two adjacent representable values of the axis's format (the last good, the first bad);
 *   - a probability search (pf_boundary_probability) for failures that depend on the drawn
 *     tensors: at each grid point, the fraction of N cases (seeds s..s+N-1, the same at every
 *     point) that fail, and the points where it first is non-zero and first reaches 1/2,
 *     each narrowed by bisection with the same N seeds.
 * The failure predicate is a set of verdicts (the case's, in the domain or not: a boundary is
 * where the domain ends) and of floating-point events of the kernel's arithmetic. */
#ifndef PF_BOUNDARY_H
#define PF_BOUNDARY_H

#include <stddef.h>
#include <stdint.h>

#include "case.h"
#include "progress.h"
#include "runner.h"

/* offset: the mean the generator adds (tensor.h); with scale it sets a mean-to-spread ratio */
typedef enum { PF_AXIS_VALUE, PF_AXIS_SCALE, PF_AXIS_PARAM, PF_AXIS_DIM, PF_AXIS_OFFSET } pf_axis_kind;

/* The format whose values the search steps over: a dtype, binary64, or the integers. */
enum { PF_BFMT_BINARY64 = PF_NDTYPES, PF_BFMT_INT, PF_BFMT_COUNT };

typedef struct {
  pf_axis_kind kind;
  int index;  /* VALUE and SCALE: input number, -1 for every input; PARAM: parameter; DIM: dimension */
  int format; /* a pf_dtype, PF_BFMT_BINARY64 or PF_BFMT_INT */
} pf_axis;

/* Parses "value", "value:INPUT", "scale", "scale:INPUT", "param:NAME", "dim:NAME" for the
 * kernel of c; format is the axis's natural one (the input's dtype for values, binary64 for
 * scales and real parameters, the integers for integer parameters and dimensions). One-line
 * error naming what is wrong. */
pf_status pf_axis_parse(const pf_case *c, const char *spec, pf_axis *a);
const char *pf_bfmt_name(int format);   /* "fp16", "binary64", "int" */
pf_status pf_bfmt_parse(const char *s, int *format);
/* The axis's name for reports: "value of x", "scale of every input", "param alpha", "dim d". */
void pf_axis_describe(const pf_case *c, const pf_axis *a, char *buf, size_t len);
/* The axis's bounds for c (a parameter's range, a dimension's limits, a dtype's finite range). */
void pf_axis_limits(const pf_case *c, const pf_axis *a, double *lo, double *hi);

/* Ordered integers of a format: a < b iff ord(a) < ord(b), and adjacent values differ by 1. */
int64_t pf_bfmt_ordinal(int format, double x);
double pf_bfmt_value(int format, int64_t ord);

/* The k-th of `points` evenly spaced ordinals from lo to hi (values of the format), as a value:
 * the grid every search here steps over. */
double pf_bfmt_grid(int format, double lo, double hi, int k, int points);

/* A copy of tmpl with the axis set to x (x must be a value of the axis's format). */
pf_status pf_axis_apply(const pf_case *tmpl, const pf_axis *a, double x, pf_case *out);

/* What counts as failing: a bit (1u << v) per pf_verdict, and the floating-point events of
 * the kernel's own arithmetic (PF_FE_* << PF_FAIL_EVENT_SHIFT: an overflow to inf, a nonzero
 * result rounded to zero, an invalid operation, wherever in the kernel they happen, whatever
 * the verdict: the contract's bound may well allow an underflowed partial sum). */
typedef unsigned pf_fail_set;
#define PF_FAIL_EVENT_SHIFT 16
/* A case's outcome beside its verdict, as pf_fails reads it: the floating-point events of the
 * kernel's arithmetic (PF_FE_*) and, from this bit on, its hazards (a bit per pf_hazard). A
 * fail set holds the same bits from PF_FAIL_EVENT_SHIFT on. */
#define PF_OUTCOME_HAZARD_SHIFT 8
#define pf_outcome(fe, hazards) ((fe) | ((unsigned)(hazards) << PF_OUTCOME_HAZARD_SHIFT))
/* "overflow,nan", "finding" (every verdict but ok and range), "event:underflow", a hazard
 * ("saturated", "stagnant", "biased", "imprecise") or "hazard" (any of them) */
pf_status pf_fail_set_parse(const char *s, pf_fail_set *out);
void pf_fail_set_name(pf_fail_set f, char *buf, size_t len);
/* outcome: pf_outcome(fe, hazards) */
int pf_fails(pf_fail_set f, pf_verdict v, unsigned outcome);

typedef struct {
  int found;              /* a change of the predicate lies in [lo, hi] */
  int bad_above;          /* the failing side is above (1) or below (0) the boundary */
  double below, above;    /* the adjacent values either side: the last of lo's side, the first of the other */
  pf_verdict v_below, v_above;
  unsigned fe_below, fe_above;  /* their outcomes (pf_outcome: events and hazards) */
  char detail[512];       /* pf_run_describe of the failing one */
  double lo, hi;          /* the range searched, rounded into the format */
  pf_verdict v_lo, v_hi;
  unsigned fe_lo, fe_hi;
  int changes;            /* predicate changes seen on the grid (more than 1: not monotone) */
  size_t runs;            /* cases run */
} pf_threshold;

/* Threshold search over [lo, hi] with a grid of `points` intervals (>= 1). */
pf_status pf_boundary_threshold(const pf_case *tmpl, const pf_axis *a, double lo, double hi, pf_fail_set fail,
                                int points, const pf_oracle_opts *oo, pf_threshold *out);

typedef struct {
  double x;
  unsigned fails, outside; /* failing cases, and cases outside the contract's domain */
  unsigned findings;       /* cases inside the domain with a finding (a broken contract) */
  int finding_case;        /* the first of them (an index into the templates), -1 if none */
  int64_t max_ulps;        /* the largest ulp error of the cases inside the domain */
  double max_rel;          /* and their largest relative error */
  pf_hazard_tally hz;       /* their hazards, torch.testing's word and largest measured error */
} pf_prob_point;

typedef struct {
  size_t npoints;
  pf_prob_point *points;   /* the grid, ascending */
  unsigned cases;
  int first_found, half_found;
  double first_x, half_x;  /* the least x found with a failure / with at least half failing */
  double first_prev, half_prev; /* the largest x checked below it with none / with less than half */
  unsigned first_fails, half_fails;
  size_t runs;
} pf_probability;

/* Probability search over [lo, hi]: `points` intervals, `ncases` cases from tmpls[0..ncases-1]
 * at every point, then `refine` bisection steps for each of the two figures. */
pf_status pf_boundary_probability(const pf_case *tmpls, unsigned ncases, const pf_axis *a, double lo, double hi,
                                  pf_fail_set fail, int points, int refine, const pf_oracle_opts *oo,
                                  pf_probability *out);
void pf_probability_free(pf_probability *p);

/* Every value of the format from lo to hi (at most PF_EVERY_MAX of them), one case each: the
 * failing ones as maximal runs of adjacent values, for failures at scattered values (a kernel
 * wrong at 240 widths between 513 and 1023) that a threshold search, which assumes one change,
 * misses. */
#define PF_EVERY_MAX 100000
typedef struct {
  double lo, hi;     /* a run of failing values, both ends included */
  pf_verdict v;      /* the first one's verdict */
  unsigned outcome;  /* and its outcome (pf_outcome) */
} pf_every_run;
typedef struct {
  size_t values, failing, nruns, cap;
  pf_every_run *runs;
} pf_every;
pf_status pf_boundary_every(const pf_case *tmpl, const pf_axis *a, double lo, double hi, pf_fail_set fail,
                            const pf_oracle_opts *oo, pf_every *out);
void pf_every_free(pf_every *e);

/* Progress lines for the searches that follow (core/progress.h: a terminal's line, a log's every
 * 30 s), labelled `label`, until pf_boundary_progress_end (which clears a terminal's line). */
void pf_boundary_progress_begin(pf_progress *p, const char *label);
void pf_boundary_progress_end(void);

#endif
