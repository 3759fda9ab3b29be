/* The kernel interface. Every kernel variant registers through it: the built-in ones from
 * their folders (kernels/<op>/), a user's from a shared library (core/plugin.h; same
 * structs, PF_KERNEL_ABI guards the layout).
 *
 * An operation (pf_op) says what is computed: its shape, parameters, inputs, faults and
 * the MPFR oracle. A kernel (pf_kernel) is one variant of one operation: how it is
 * computed on the CPU (and on CUDA), for which dtypes, under which contract. */
#ifndef PF_KERNEL_H
#define PF_KERNEL_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/verdict.h"
#include "core/oracle.h"

/* A case (core/case.h) is a case of a registered kernel: case.c reads this registry, so this
 * interface names the case's type without including its header. */
typedef struct pf_case pf_case;
typedef struct pf_kernel pf_kernel;
struct pf_hazard_limits;

#define PF_KERNEL_ABI 9

/* How a stage's error is measured for imprecise (pf_stage.measure). */
enum {
  PF_MEASURE_ELEMENT = 0, /* |y - E| / max(|E|, smallest normal): outputs that cannot cancel */
  PF_MEASURE_ROW,         /* ||y - E|| / ||E|| over each slice along the stage's last dimension */
  PF_MEASURE_TENSOR,      /* ||y - E|| / ||E|| over the whole stage */
  PF_MEASURE_NONE,        /* not a value to judge (bounds, counters) */
  PF_MEASURE_TRAJECTORY,  /* steps x values: imprecise per step as ROW; biased over the values
                             (a unit is one value's mean over the steps, which are not
                             independent of each other) */
};

typedef enum { PF_PARAM_REAL, PF_PARAM_INT, PF_PARAM_CHOICE } pf_param_type;

typedef struct {
  const char *name;
  pf_param_type type;
  double def, min, max;        /* range, inclusive (choices: index range) */
  const char *const *choices;  /* PF_PARAM_CHOICE: NULL-terminated names */
  const char *help;
  int held;                    /* 0: any binary64; PF_HELD(t): the frameworks hold it in dtype t, so a
                                  case's value must be one of t (and boundary searches step over t) */
  const char *train;           /* the values users train with, which `run` draws per case where the
                                  command line leaves the parameter unset (NULL: always the default):
                                  "V1,V2,..." (numbers as --param takes them, or choice names; a value
                                  listed twice is drawn twice as often), or "LO..HI" for an integer
                                  drawn log-uniformly (a power-of-two octave, then uniformly in it) */
} pf_param_desc;
#define PF_HELD(t) ((int)(t) + 1)

/* A kernel's narrowing of one of its operation's parameters (pf_kernel.params): the values it
 * takes and its default. A case outside them is refused (exit 2 on the command line, skipped by
 * the fuzz drivers, which fit their inputs into them); a case that does not set the parameter
 * gets def. */
typedef struct {
  const char *name; /* the operation's parameter; NULL ends the list */
  double lo, hi;    /* a number: the values it takes, inclusive, within the operation's range */
  unsigned choices; /* a choice: a bit (1u << index) per choice it takes */
  double def;       /* its default: one it takes (a choice: the index) */
} pf_param_range;

/* The rigorous error bound of a kernel on one output element: the value the kernel holds
 * just before its final rounding to the output dtype lies within
 * [E - rel |E| - abs, E + rel |E| + abs] of the exact result E, provided no intermediate
 * overflowed or was lost to zero (those are verdicts of their own). rel = inf: no bound. */
typedef struct {
  double rel, abs;
} pf_bound;

/* A named part of an operation's outputs (attention: output, scores, probabilities). */
#define PF_MAX_STAGES 8
typedef struct {
  const char *name;
  size_t offset, count;
  int internal; /* an intermediate the kernel chose to store (attention's scores), not a
                   result: an exact value beyond its dtype is then an overflow, not range */
  int held;     /* PF_HELD(t): its values are of dtype t; 0: of the case's dtype;
                   PF_STAGE_MIXED: of several (each element's is the oracle's word) */
  int ndims;    /* the case dimensions that index it, outermost first (0: a vector) */
  int dims[PF_MAX_DIMS];
  int measure;  /* how hazard.h judges its error: PF_MEASURE_ELEMENT (0), _ROW, _TENSOR, _NONE */
} pf_stage;
#define PF_STAGE_MIXED (-1)

struct pf_run;

/* What the sweep (precfuzz sweep, precision-report) does with an operation. Axes, fail sets,
 * shapes and input specs are written as precfuzz boundary and run take them. */
typedef struct {
  const char *name;   /* what the boundary is */
  const char *shape, *along, *fail;
  double lo, hi;      /* 0: the axis's default end (values: the least positive value, the largest);
                         -1: the negative side (lo: the axis's lowest, hi: minus the least positive value) */
  const char *inputs[3];
} pf_sweep_search;
enum {
  PF_SWEEP_SCAN = 0,         /* per variant, dtype and accumulation: the scan and the searches;
                                each fault along the scan */
  PF_SWEEP_TRAJECTORIES = 1, /* the same, and one trajectory per variant and dtype */
  PF_SWEEP_DIFFERENTIAL = 2, /* clean runs of the first variant in each dtype, and each fault's
                                cases to its first finding */
};
/* What one fault's detection runs need beyond the sweep's own settings: a fault shows only where
 * its code path runs (Adam's step count past 256, a dynamic loss scaler, two data-parallel
 * replicas, a checkpoint's round trip). */
typedef struct {
  const char *fault;     /* NULL ends a table */
  const char *dtype;     /* "fp16", ...: the dtype its runs take (NULL: the sweep's) */
  const char *params[4]; /* "NAME=VALUE" each (NULL-ended): parameters its runs set */
} pf_fault_setting;

typedef struct {
  int kind;
  const char *shape, *along; /* the accuracy scan: its cases' shape and axis */
  double lo, hi;
  const char *fail;
  const char *inputs[3];       /* --input specs of the scan */
  const char *params[3];       /* --param NAME=VALUE of the scan */
  const char *fault_params[3]; /* and of the fault-detection runs (a fault needs its setting) */
  const pf_fault_setting *fault_settings; /* per fault, what only its runs need (NULL: none) */
  unsigned cases_div;          /* the scan runs cases / cases_div cases per point (expensive kernels) */
  /* the rounding-bias probe (optional): bias_cases (quick: bias_cases_quick) cases of
   * bias_shape at bias_scale, biased's test pooled over all of them, stage by stage */
  const char *bias_shape;
  double bias_scale;
  unsigned bias_cases, bias_cases_quick;
  pf_sweep_search searches[3];
  const char *explanation;     /* the boundaries in words, for the report */
  /* PF_SWEEP_TRAJECTORIES: the trajectory's shape (quick: a shorter one) and inputs, and its
   * deviation from the exact trajectory at each of the n steps (deviation[n]; returns n) */
  const char *trajectory_shape, *trajectory_shape_quick;
  const char *trajectory_inputs[3];
  const char *trajectory_param; /* the parameter shown beside each trajectory */
  size_t (*trajectory)(const pf_case *c, const struct pf_run *r, double *deviation, size_t max);
  /* PF_SWEEP_DIFFERENTIAL: clean cases per dtype (quick: fewer), and the most cases run to find a fault */
  unsigned clean_cases, clean_cases_quick, fault_cases;
} pf_op_sweep;

typedef struct pf_op {
  const char *name;
  const char *summary;
  int ndims;
  const char *const *dim_names;
  size_t dim_max[PF_MAX_DIMS];
  size_t dim_default[PF_MAX_DIMS];
  size_t elems_max; /* per input tensor */
  int nparams;
  const pf_param_desc *params;
  int ninputs;
  const char *const *input_names;
  size_t (*input_count)(const pf_case *c, int input); /* elements of input tensor i */
  /* The dtype input i is stored in (NULL: every input in the case's dtype). */
  pf_dtype (*input_dtype)(const pf_case *c, int input);
  size_t (*output_count)(const pf_case *c);
  pf_status (*oracle)(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts,
                      pf_oracle_result *out);
  /* The outputs' stages in data-flow order (at most PF_MAX_STAGES); NULL: one output. A
   * finding is said to be born in the first stage that has one. */
  int (*stages)(const pf_case *c, pf_stage *out);
  /* Optional: adjusts generated inputs to what the operation's inputs mean (e.g. a second
   * moment is nonnegative), before the kernel and the oracle see them. */
  void (*prepare)(const pf_case *c, pf_tensor *in);
  /* Optional: refines an element's verdict with what only the operation knows (e.g. an
   * optimizer update lost entirely is an underflow). */
  pf_verdict (*refine)(const pf_case *c, const pf_tensor *in, size_t i, double y, pf_verdict v, double rounded,
                       pf_bound b);
  /* Optional: the last word on a run, with all of it in view (a trajectory's lost update
   * needs two steps of both runs): may change verdicts with pf_run_set_verdict, point
   * born_at at the finding to report and say why in one line (pf_run.note). */
  void (*review)(const pf_case *c, struct pf_run *r);
  /* Optional: the case dimensions that index input i, outermost first, its elements stored
   * row-major over them (returns how many; 0: no such layout). The minimizer shrinks explicit
   * values with it. */
  int (*input_dims)(const pf_case *c, int input, int *dims);
  /* Dimension 0 indexes independent slices (softmax rows, Adam elements, attention batches),
   * and every input and every output stage is laid out slice after slice: cases that differ
   * only in their inputs can run as one (pf_run_cases). */
  int batch_dim0;
  /* Optional: hazards only the operation can name (saturated, stagnant: hazard.h), recorded
   * with pf_run_flag_hazard; imprecise and biased are judged for every operation. */
  void (*hazards)(const pf_case *c, struct pf_run *r, const struct pf_hazard_limits *l);
  /* Optional: what judging one case costs, estimated from its shape: seconds on one processor
   * for the kernel's CPU emulation and for the oracle (its fast path), from rates measured with
   * precfuzz run --threads 1 on a 2-core x86-64 machine. A case beyond the time limit
   * (pf_case_set_time_limit, --max-case-seconds) is refused before anything is made. */
  void (*cost)(const pf_case *c, double *emulation_s, double *oracle_s);
  /* Optional: the fuzz driver's decoder: bytes to a case of this operation (1; the caller frees
   * it), or 0 when they are too few. The built-in ones are kernels/<op>/<op>_fuzzer.c, from
   * which CMake builds the driver <op>_fuzzer; replay and minimize decode raw inputs with it. */
  int (*fuzz_decode)(const uint8_t *data, size_t size, pf_case *out);
  /* Optional: what the sweep does with it (NULL: the sweep leaves it out). */
  const pf_op_sweep *sweep;
  /* Optional: a command of its own, `precfuzz COMMAND [run's options]` = `precfuzz run -k
   * <op> -t <command_dtype> [...]`: its name, one line for precfuzz --help, its --help text. */
  const char *command, *command_summary, *command_help, *command_dtype;
  /* Optional: the state one step hands the next (run --steps N runs a one-step kernel as a
   * trajectory: core/trajectory.h). From a step's outputs (the kernel's, or the exact values)
   * it writes the next step's state inputs into state[k].data (each state[k].n values), advances
   * c's step parameters (and changes nothing else of c), and returns a bit per input it set; the other inputs are drawn afresh
   * each step. carry_watch: the input whose trajectory is judged (Adam: the parameter). */
  unsigned (*carry)(pf_case *c, const double *out, pf_tensor *state);
  int carry_watch;
  /* Optional: per hazard, the axis (as boundary's --along takes it) along which it comes with
   * the configuration: run searches it once per variant and kind, from the first case that shows
   * the hazard down to the axis's low end (Adam's stagnant v: "param:beta2"). */
  const char *hazard_axis[PF_NHAZARDS];
  /* Optional: 1 when a case may name a checkpoint directory (pf_case.checkpoint) that the
   * kernel loads in place of its own save: a checkpoint the user's code wrote, judged against
   * the same case run straight (tp_diff: docs/checkpoint.md). */
  int takes_checkpoint;
} pf_op;

struct pf_kernel {
  int abi;             /* PF_KERNEL_ABI */
  const pf_op *op;
  const char *variant;
  const char *summary;
  unsigned dtypes;     /* storage dtypes: bit (1u << pf_dtype) */
  unsigned accums;     /* accumulation dtypes; PF_ACCUM_STORAGE allows accum == storage */
  const char *const *faults; /* fault switches this variant honours, NULL-terminated */
  const char *contract;      /* the contract in words (docs/kernels/<op>.md repeats it) */
  /* CPU emulation: outputs (output_count values of c->dtype) and floating-point events. */
  pf_status (*run_cpu)(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe);
  /* Rigorous per-element bound (see pf_bound) for this case and these inputs. */
  void (*bound)(const pf_case *c, const pf_tensor *in, pf_bound *out);
  /* The contract's input domain: 1 when the variant promises to work on these inputs
   * (no overflow, no total underflow, the bound holds); else 0 and one line in why.
   * Outside it, run still reports every verdict; fuzz drivers skip the case. */
  int (*in_domain)(const pf_case *c, const pf_tensor *in, char *why, size_t len);
  /* Variant-specific checks of a case beyond the operation's tables (NULL: none), e.g. a
   * parameter that only one variant honours. PF_ERR_ARG with a one-line message. */
  pf_status (*check)(const pf_case *c);
  /* CUDA: same signature as run_cpu; NULL when the build has no CUDA. PF_ERR_NODEVICE
   * (with a clear message) when no GPU can be used. */
  pf_status (*run_cuda)(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe);
  /* Which algorithm of the operation this variant is (the operation's PF_<OP>_* value): the
   * bound, the domain and the oracle read it, never the variant's name, so that a copy of a
   * built-in variant under another name behaves exactly as that variant. */
  int algo;
  /* The built-in variant whose contract (algo, bound, domain) this one reuses; NULL for a
   * built-in variant. pf_kernel_like() fills a user's kernel from it. A user's check runs after
   * the like's, which always applies (it refuses what the contract does not cover). */
  const char *like;
  /* The parameters it narrows (NULL, or a list ended by a NULL name): see pf_param_range. */
  const pf_param_range *params;
};

#define PF_DT(t) (1u << (t))
#define PF_ACCUM_STORAGE (1u << 31)

/* The built-in families' variant tables, NULL-terminated (kernels/families.c: one line each). */
extern const pf_kernel *const *const pf_builtin_families[];

/* The registry. Built-in kernels are registered on first use. A plugin's kernel is copied
 * (its struct, variant and summary: the plugin may register one from its stack); the op and
 * the tables it points to must live as long as the process. */
pf_status pf_kernel_register(const pf_kernel *k);
/* Whether pf_kernel_register copies what it is given (core/plugin.c, around pf_plugin_init). */
void pf_kernel_register_copies(int on);
size_t pf_kernel_count(void);
const pf_kernel *pf_kernel_at(size_t i);
const pf_kernel *pf_kernel_find(const char *op, const char *variant);
const pf_op *pf_op_find(const char *op);
/* The registered operations, each once, in the order their first variant was registered. */
size_t pf_op_count(void);
const pf_op *pf_op_at(size_t i);
/* The first registered variant of op (NULL: none). */
const pf_kernel *pf_op_first_kernel(const pf_op *op);
int pf_kernel_accepts(const pf_kernel *k, pf_dtype dtype, pf_dtype accum);
int pf_kernel_has_fault(const pf_kernel *k, const char *fault);
int pf_op_param_index(const pf_op *op, const char *name);
/* k's narrowing of its operation's parameter i (NULL: none). */
const pf_param_range *pf_kernel_param(const pf_kernel *k, int i);
/* What parameter i of a case of k is unless told: k's default where it narrows it, else the
 * operation's (a replay line omits it, the minimizer resets to it). */
double pf_kernel_param_default(const pf_kernel *k, int i);
/* c's parameters set to its kernel's defaults (pf_case_init does it); PF_ERR_UNSUPPORTED with
 * one line when a parameter of c is outside what its kernel takes. */
void pf_kernel_param_defaults(const pf_kernel *k, pf_case *c);
pf_status pf_kernel_check_params(const pf_kernel *k, const pf_case *c);
/* Parameter d's training values (pf_param_desc.train): n > 0 values into vals (at most max;
 * numbers rounded to the dtype the frameworks hold them in, choices as indices), or 0 with the
 * integer range lo..hi; -1 when there is none or it is malformed (tests/test_registry.c checks
 * every built-in one). */
int pf_param_train_parse(const pf_param_desc *d, double *vals, int max, double *lo, double *hi);
/* The value parameter i (desc d) of the case of this seed draws from its training values: the
 * same seed, the same value, whatever else is drawn. */
double pf_param_train_draw(const pf_param_desc *d, int i, uint64_t seed);
/* The stages of c's outputs: op->stages, or the one stage "output" laid out as input 0 when it
 * has input 0's size (softmax), else as a vector. Returns how many. */
int pf_case_stages(const pf_case *c, pf_stage *out);
/* A stage's dtype (PF_NDTYPES for PF_STAGE_MIXED) and shape (returns its number of dimensions). */
pf_dtype pf_stage_dtype(const pf_case *c, const pf_stage *s);
int pf_stage_shape(const pf_case *c, const pf_stage *s, size_t *shape);
/* The shape of input t of c holding n values: its dimensions in the case, or a vector. */
int pf_input_shape(const pf_case *c, int t, size_t n, size_t *shape);
/* The algorithm of the case's variant (pf_kernel.algo); 0 if the variant is unknown. */
int pf_case_algo(const pf_case *c);
/* The case's operation: its kernel's (resolved once, pf_case_kernel), else found by its name;
 * NULL for a name no operation has. */
const pf_op *pf_case_op(const pf_case *c);
/* Copies into k the contract of op's built-in variant `like`: algo, bound, domain, variant
 * checks, the contract's text, dtypes and accumulations, and sets k->like. The caller then
 * sets its own name, summary and run functions. PF_ERR_UNKNOWN if there is no such variant. */
pf_status pf_kernel_like(pf_kernel *k, const char *op, const char *like);


#endif
