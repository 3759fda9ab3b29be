/* One case end to end: generate the inputs, run the kernel, run the oracle, bound, compare. */
#ifndef PF_RUNNER_H
#define PF_RUNNER_H

#include "case.h"
#include "compare.h"
#include "hazard.h"
#include "kernels/kernel.h"

typedef struct pf_run {
  const pf_kernel *kernel;
  pf_tensor in[PF_MAX_INPUTS];
  int ninputs;
  double *out;
  size_t nout;
  unsigned fe; /* floating-point events of the kernel run */
  int in_domain;        /* the inputs lie in the contract's domain */
  char why[160];        /* if not, why */
  int skipped;          /* opts.domain_only and outside the domain: nothing was run */
  int backend;          /* where the kernel ran (PF_BACKEND_*) */
  const char *born;     /* multi-stage outputs: the first stage with a finding (or NULL) */
  size_t born_at;       /* its first finding element (index into out) */
  pf_oracle_result oracle;
  pf_bound *bound;
  pf_comparison cmp;
  double seconds_kernel, seconds_oracle;
  char note[320];       /* the operation's review: why the reported finding is one ("" if none);
                           a failed kernel: what went wrong */
  int failed;           /* the kernel gave no outputs (PF_ERR_KERNEL): every verdict is "failed" */
  int note_whole;       /* the review's note says the finding whole: element born_at is a code (which
                           state differs), not a value, so its got, exact and ulps are not printed */
  /* hazards (hazard.h): a bit per pf_hazard, and for each an output that shows it, its
   * measure (imprecise: the relative error; biased: the t statistic; the operation's: its
   * own) and one line saying what it is */
  unsigned hazards;
  size_t hazard_at[PF_NHAZARDS];
  double hazard_measure[PF_NHAZARDS];
  char hazard_note[PF_NHAZARDS][200];
  /* torch.testing.assert_close with its default tolerance for the dtype, against the correctly
   * rounded result: the elements it rejects (0: it passes the case), the first of them */
  size_t tt_fails, tt_at;
  /* the largest error as the stages measure it (per element, row or tensor: hazard.h), over
   * every stage of values: what imprecise compares with its threshold */
  double worst_err;
  pf_bias_pool bias; /* biased's units of this case, by stage (pooled over cases by the tally) */
} pf_run;

/* Sets element i's verdict, keeping the counts and the case's verdict in step. */
void pf_run_set_verdict(pf_run *r, size_t i, pf_verdict v);
/* After verdicts were lowered: the case's verdict is again the most severe element's. */
void pf_run_settle_verdict(pf_run *r);

/* Validates c, then runs it. On error r holds nothing to free beyond pf_run_free. */
pf_status pf_run_case(const pf_case *c, const pf_oracle_opts *opts, pf_run *r);
void pf_run_free(pf_run *r);
/* n cases into rs[0..n-1], the same as pf_run_case on each; when the operation allows it
 * (pf_op.batch_dim0) and the cases differ only in their inputs and dimension 0, their kernel
 * runs once over all of them (one GPU launch sequence for many cases). Every rs[i] must be
 * freed (pf_run_free), also on error. */
pf_status pf_run_cases(const pf_case *cs, size_t n, const pf_oracle_opts *opts, pf_run *rs);
void pf_oracle_opts_default(pf_oracle_opts *o);
/* What pf_oracle_opts_default's mpfr_only is from now on (the command line's --oracle). */
void pf_oracle_set_mpfr_only(int on);

/* Outputs made elsewhere (a framework's, a kernel process's) as named tensors -> the case's
 * output layout. Either one unnamed tensor (.npy) or a tensor per output stage, named by the
 * stage ("output" for an operation of one stage): one tensor of all the outputs, or of the
 * stage "output" only; stages not given are marked 0 in given (NULL: all must be given).
 * A stage's tensor must be of the stage's dtype (pf_stage_dtype), and with exact_shape 1 of its
 * shape (pf_stage_shape); with 0 either of its shape or flat (one dimension, or none, of as many
 * values: a 2x1 tensor for a 1x2 stage is a mistake, not a layout). PF_ERR_ARG with one line
 * naming the tensor otherwise. */
struct pf_tensorfile;
pf_status pf_outputs_from_tensors(const pf_case *c, const struct pf_tensorfile *ts, size_t nt, double *out, size_t nout,
                                  unsigned char *given, int exact_shape);

/* Judges outputs made elsewhere: the case's inputs, the oracle, and the contract (bound and
 * domain) of `like` (a variant of the case's operation), or, with like NULL, the correctly
 * rounded result within `ulps` units in the last place. Elements whose stage was not given are
 * set to the correctly rounded value before the bound, the comparison and the operation's
 * review see them; *judged says how many were given. A given value that is not a value of its
 * element's dtype is PF_ERR_ARG. */
pf_status pf_judge_outputs(const pf_case *c, const pf_kernel *like, long ulps, const struct pf_tensorfile *ts,
                           size_t nt, const pf_oracle_opts *opts, pf_run *r, size_t *judged);

/* The floating-point events as text ("overflow,underflow" or "none"). */
const char *pf_fe_str(unsigned fe, char buf[48]);

/* The result of a run as JSON: the case, verdict, counts, worst element, and with
 * per_element the outputs, exact values (hex, >= 160 bits when the oracle kept them),
 * correctly rounded values, ulps and allowed ulps of every element. */
struct cJSON;
struct cJSON *pf_run_to_cjson(const pf_case *c, const pf_run *r, int per_element);

/* One line describing the case's worst element: "overflow at [2,31]: got nan, exact ..." */
void pf_run_describe(const pf_case *c, const pf_run *r, char *buf, size_t len);

#endif
