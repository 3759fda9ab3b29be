/* The case options: what a case is built from (kernel, variant, dtypes, shape, generator,
 * parameters, --input specs and tensor files), the case of a seed built from them, and the
 * command line that replays it. precfuzz's commands fill them from the command line
 * (cli/), the sweep (cli/sweep.c) from what each operation says to search. A bad
 * option is one line on stderr ("precfuzz: ...") and the exit status 2 (pf_usage_error). */
#ifndef PF_CASEOPTS_H
#define PF_CASEOPTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/boundary.h"
#include "core/case.h"
#include "core/kernel.h"

#define EXIT_FINDINGS 1
#define EXIT_USAGE 2

extern const char *pf_prog;
/* Prints "precfuzz: MESSAGE" on stderr and returns EXIT_USAGE. */
int pf_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For commands that read their flags by hand: 0 when no flag of valued (each takes a value,
 * skipped) or bare (takes none) appears twice in argv[1..argc-1], else pf_usage_error's 2 naming
 * it (a flag given twice would silently keep its last value). */
int pf_flags_once(int argc, char **argv, const char *const *valued, const char *const *bare);
int pf_parse_u64(const char *s, uint64_t *out); /* 0 on success */
int pf_parse_real(const char *flag, const char *s, double lo, double hi, double *out);
int pf_parse_shape(const char *s, const pf_op *op, size_t *shape);

typedef struct {
  const char *kernel, *variant, *fault, *save_dir;
  const char *checkpoint;      /* --checkpoint DIR: a checkpoint the user's code wrote, loaded by the case */
  const char *save_checkpoint; /* run --save-checkpoint DIR: the case's round trip keeps its checkpoints there */
  const char *save_case;       /* run --save-case FILE: the (one) case written as a case file */
  struct cJSON *sarif_results; /* run --sarif: the results gathered (NULL: not asked for) */
  struct pf_junit *junit;      /* run --junit: the test cases gathered (NULL: not asked for) */
  int progress;                /* run: PRECFUZZ_PROGRESS 1 or 0; -1 (unset): on a terminal */
  const char *tensors; /* --tensors npy|safetensors: findings also as tensor files */
  pf_dtype dtype, accum;
  int have_shape;
  size_t shape[PF_MAX_DIMS];
  pf_gen gen;
  uint64_t seed, cases;
  int nparams;
  const char *param_name[PF_MAX_PARAMS];
  const char *param_value[PF_MAX_PARAMS];
  int json;
  long oracle_prec;
  uint64_t max_print;
  int ninput_specs;
  const char *input_spec[16]; /* --input NAME:FIELD=VALUE,... */
  int backend;                /* PF_BACKEND_* (pf_backend_setup) */
  char device[256];           /* the device's description */
  int have_dtype, cases_given; /* -t and --cases were given */
  struct pf_tensorfile *files[16]; /* --input NAME:file=...: read once (pf_load_input_files) */
  char *file_paths[16];       /* their absolute paths */
  const char *imprecise;      /* --imprecise DTYPE=X,...: the hazard thresholds (already in effect) */
  int mpfr_only;              /* --oracle mpfr (already in effect) */
  int exp_given;              /* --exp-range was given (it applies to --dist loguniform only) */
  int outmag_given;           /* --outlier-magnitude was given (it applies with --outliers only) */
  int draw;                   /* run: each case draws the parameters the command line leaves unset
                                 from their training values (pf_param_desc.train); 0: --at-defaults,
                                 tensor files, and every other command */
  unsigned long long drawn;   /* the parameters some case drew (bit per parameter index) */
  uint64_t steps;             /* run --steps N: each case a trajectory of N steps (1: one step) */
} run_opts;

/* After the options: case k of N takes seed + k, which may not pass 2^64 - 1; generator
 * options that would be ignored (--exp-range without loguniform, --outliers without a
 * magnitude) are refused. 0, or pf_usage_error's 2. */
int pf_check_run_opts(const run_opts *o);

/* The defaults: fp16 with fp32 accumulation, seed 1, `cases` cases, oracle from 256 bits, the
 * default generator. */
void pf_run_opts_init(run_opts *o, uint64_t cases);
int pf_apply_params(pf_case *c, const run_opts *o);
/* Reads the tensor files that --input names (once), and where -t or --shape was not given
 * takes the dtype and the shape from the first file (through the input's dimensions); with
 * every input from a file and no --cases, runs one case. An exit status on a bad file. */
int pf_load_input_files(run_opts *o, const pf_op *op);
void pf_free_input_files(run_opts *o);
int pf_apply_input_specs(pf_case *c, const run_opts *o);
/* The case of seed `seed` as the options say; an exit status on a bad option (c freed). With
 * o->draw, each parameter the options leave unset that has training values takes its draw for
 * this seed, unless the draw is one the variant refuses (then its default); *drawn (NULL: not
 * wanted) gets a bit per parameter drawn. */
int pf_build_case(const pf_kernel *k, const run_opts *o, uint64_t seed, pf_case *c);
int pf_build_case_drawn(const pf_kernel *k, const run_opts *o, uint64_t seed, pf_case *c, unsigned long long *drawn);
/* Whether op has a parameter `run` draws (pf_param_desc.train). */
int pf_op_draws_params(const pf_op *op);
/* The command line that reproduces one case. */
void pf_reproduce_line(const pf_case *c, const run_opts *o, uint64_t seed, char *buf, size_t len);
/* The command line that runs the case tmpl with the axis set to x (tmpl built from o). */
void pf_axis_reproduce_line(const pf_case *tmpl, const run_opts *o, const pf_axis *a, double x, uint64_t seed, char *buf,
                         size_t len);

#endif
