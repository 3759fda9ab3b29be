#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double pf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pf_oracle_opts_default(pf_oracle_opts *o) {
  o->prec = 256;
  o->prec_max = 16384;
  o->keep_hex = 0;
}

const char *pf_fe_str(unsigned fe, char buf[48]) {
  buf[0] = 0;
  if (fe & PF_FE_OVERFLOW) strcat(buf, "overflow,");
  if (fe & PF_FE_UNDERFLOW) strcat(buf, "underflow,");
  if (fe & PF_FE_INVALID) strcat(buf, "invalid,");
  size_t n = strlen(buf);
  if (n) buf[n - 1] = 0;
  else strcpy(buf, "none");
  return buf;
}

pf_status pf_run_case(const pf_case *c, const pf_oracle_opts *opts, pf_run *r) {
  memset(r, 0, sizeof *r);
  pf_status st = pf_case_validate(c);
  if (st) return st;
  const pf_kernel *k = pf_case_kernel(c);
  const pf_op *op = k->op;
  r->kernel = k;
  for (int i = 0; i < op->ninputs; i++) {
    if ((st = pf_tensor_alloc(&r->in[i], c->dtype, op->input_count(c, i)))) return st;
    r->ninputs = i + 1;
    if ((st = pf_tensor_generate(&r->in[i], &c->inputs[i]))) return st;
  }
  r->nout = op->output_count(c);
  r->out = calloc(r->nout ? r->nout : 1, sizeof(double));
  r->bound = calloc(r->nout ? r->nout : 1, sizeof(pf_bound));
  if (!r->out || !r->bound) return pf_error(PF_ERR_NOMEM, "cannot allocate %zu outputs", r->nout);

  double t0 = pf_now();
  if ((st = k->run_cpu(c, r->in, r->out, &r->fe))) return st;
  double t1 = pf_now();
  if ((st = pf_oracle_result_alloc(&r->oracle, r->nout, opts->keep_hex))) return st;
  if ((st = op->oracle(c, r->in, opts, &r->oracle))) return st;
  double t2 = pf_now();
  r->seconds_kernel = t1 - t0;
  r->seconds_oracle = t2 - t1;
  k->bound(c, r->in, r->bound);
  return pf_compare(c->dtype, r->out, r->nout, &r->oracle, r->bound, r->fe, &r->cmp);
}

void pf_run_free(pf_run *r) {
  for (int i = 0; i < r->ninputs; i++) pf_tensor_free(&r->in[i]);
  free(r->out);
  free(r->bound);
  pf_oracle_result_free(&r->oracle);
  pf_comparison_free(&r->cmp);
  memset(r, 0, sizeof *r);
}
