/* One case's run as the runner fills it and the judges read it: its inputs, outputs, the oracle's
 * result, the comparison, verdicts, hazards. The type alone: what makes and judges a run is in
 * runner.h (and the hazards' side in run_hazards.c), above it. */
#ifndef PF_RUN_H
#define PF_RUN_H

#include "case.h"
#include "compare.h"
#include "hazard.h"
#include "core/kernel.h"

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

#endif
