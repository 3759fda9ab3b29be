/* One case end to end: generate the inputs, run the kernel, run the oracle, bound, compare. */
#ifndef PF_RUNNER_H
#define PF_RUNNER_H

#include "case.h"
#include "compare.h"
#include "hazard.h"
#include "outputs.h" /* pf_outputs_from_tensors: judge's users have it here */
#include "run.h"
#include "core/kernel.h"


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
