/* The kernel registry: the built-in families' kernels first (kernels/families.c), then any
 * registered at run time. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/case.h"
#include "core/kernel.h"
#include "core/rng.h"

#define PF_MAX_KERNELS 256
static const pf_kernel *pf_registry[PF_MAX_KERNELS];
static size_t pf_nregistry;
static int pf_builtins_done;

static void pf_register_builtins(void) {
  if (pf_builtins_done) return;
  pf_builtins_done = 1;
  for (size_t t = 0; pf_builtin_families[t]; t++)
    for (size_t i = 0; pf_builtin_families[t][i]; i++) pf_kernel_register(pf_builtin_families[t][i]);
}

/* A name that may go into a file path and a command line: 1 to PF_NAME_LEN - 1 (47, what a
 * case holds) of [A-Za-z0-9._-]. */
static int pf_name_ok(const char *s) {
  if (!s || !*s || strlen(s) >= PF_NAME_LEN) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
      return 0;
  return 1;
}

/* The tables a kernel brings, checked once at registration so that nothing later reads a NULL
 * or an out-of-range field: the first that is wrong, by name. */
static pf_status pf_kernel_check(const pf_kernel *k) {
  const pf_op *op = k->op;
#define PF_BAD(...) return pf_error(PF_ERR_ARG, "kernel registration: " __VA_ARGS__)
  if (!pf_name_ok(op->name)) PF_BAD("op name must be 1 to %d of A-Z a-z 0-9 . _ -", PF_NAME_LEN - 1);
  if (!pf_name_ok(k->variant)) PF_BAD("%s: variant name must be 1 to %d of A-Z a-z 0-9 . _ -", op->name, PF_NAME_LEN - 1);
  if (!op->summary || !k->summary) PF_BAD("%s/%s: summary is NULL", op->name, k->variant);
  if (op->ndims < 1 || op->ndims > PF_MAX_DIMS) PF_BAD("%s: ndims %d is not in [1, %d]", op->name, op->ndims, PF_MAX_DIMS);
  if (!op->dim_names) PF_BAD("%s: dim_names is NULL", op->name);
  for (int d = 0; d < op->ndims; d++) {
    if (!op->dim_names[d]) PF_BAD("%s: dim_names[%d] is NULL", op->name, d);
    if (op->dim_max[d] < 1 || op->dim_default[d] < 1 || op->dim_default[d] > op->dim_max[d])
      PF_BAD("%s: dimension %d: default %zu not in [1, max %zu]", op->name, d, op->dim_default[d], op->dim_max[d]);
  }
  if (op->elems_max < 1) PF_BAD("%s: elems_max is 0", op->name);
  if (op->nparams < 0 || op->nparams > PF_MAX_PARAMS || (op->nparams && !op->params))
    PF_BAD("%s: nparams %d with %s params", op->name, op->nparams, op->params ? "its" : "no");
  for (int i = 0; i < op->nparams; i++)
    if (!pf_name_ok(op->params[i].name)) PF_BAD("%s: parameter %d has no proper name", op->name, i);
  if (op->ninputs < 1 || op->ninputs > PF_MAX_INPUTS || !op->input_names)
    PF_BAD("%s: ninputs %d is not in [1, %d], or input_names is NULL", op->name, op->ninputs, PF_MAX_INPUTS);
  for (int i = 0; i < op->ninputs; i++)
    if (!pf_name_ok(op->input_names[i])) PF_BAD("%s: input %d has no proper name", op->name, i);
  if (!op->input_count || !op->output_count || !op->oracle)
    PF_BAD("%s: input_count, output_count and oracle are required", op->name);
  if (!k->dtypes || (k->dtypes & ~(unsigned)((1u << PF_NDTYPES) - 1)))
    PF_BAD("%s/%s: dtypes 0x%x names no dtype or an unknown one", op->name, k->variant, k->dtypes);
  if (!k->accums || (k->accums & ~(unsigned)(((1u << PF_NDTYPES) - 1) | PF_ACCUM_STORAGE)))
    PF_BAD("%s/%s: accums 0x%x names no dtype or an unknown one", op->name, k->variant, k->accums);
  if (k->like) { /* the contract it claims: a built-in variant of its operation */
    const pf_kernel *b = pf_kernel_find(op->name, k->like);
    if (!b || b->like) PF_BAD("%s/%s: like '%.40s' is no built-in variant of %s (see precfuzz list)", op->name, k->variant, k->like, op->name);
  }
  /* its parameter ranges: the operation's parameters, each once, within the operation's
   * range, with a default they hold */
  for (int n = 0; k->params && k->params[n].name; n++) {
    const pf_param_range *r = &k->params[n];
    const int i = pf_op_param_index(op, r->name);
    if (n >= PF_MAX_PARAMS || i < 0) PF_BAD("%s/%s: params[%d]: '%.40s' is no parameter of %s", op->name, k->variant, n, r->name, op->name);
    for (int m = 0; m < n; m++)
      if (strcmp(k->params[m].name, r->name) == 0) PF_BAD("%s/%s: params: '%s' named twice", op->name, k->variant, r->name);
    const pf_param_desc *d = &op->params[i];
    if (d->type == PF_PARAM_CHOICE) {
      int nch = 0;
      while (d->choices[nch]) nch++;
      if (!r->choices || (nch < 32 && (r->choices >> nch)))
        PF_BAD("%s/%s: params.%s: choices 0x%x names none of its %d choices, or one it does not have", op->name, k->variant, r->name, r->choices, nch);
      if (!(r->def >= 0 && r->def < nch && r->def == (int)r->def && (r->choices >> (int)r->def & 1)))
        PF_BAD("%s/%s: params.%s: default %g is not the index of a choice it takes", op->name, k->variant, r->name, r->def);
      continue;
    }
    if (!(r->lo >= d->min && r->hi <= d->max && r->lo <= r->hi))
      PF_BAD("%s/%s: params.%s: [%g, %g] is not a range within [%g, %g]", op->name, k->variant, r->name, r->lo, r->hi, d->min, d->max);
    if (!(r->def >= r->lo && r->def <= r->hi) || (d->type == PF_PARAM_INT && r->def != floor(r->def)) ||
        (d->held && !pf_dtype_holds((pf_dtype)(d->held - 1), r->def)))
      PF_BAD("%s/%s: params.%s: default %g is not a value it takes", op->name, k->variant, r->name, r->def);
  }
  /* one op, one table: a second op of the same name would answer for the first */
  const pf_op *same = pf_op_find(op->name);
  if (same && same != op) PF_BAD("op '%s' is already registered, with another table", op->name);
#undef PF_BAD
  return PF_OK;
}

/* plugins' kernels, copied: the registry does not keep a pointer into a plugin's stack */
static int pf_copying;
typedef struct {
  pf_kernel k;
  char variant[PF_NAME_LEN], summary[512];
  pf_param_range params[PF_MAX_PARAMS + 1]; /* its parameter ranges, names pointing at the op's */
  pf_status (*own_check)(const pf_case *c); /* a like's variant: its own check, after the like's */
} pf_kernel_copy;
static pf_kernel_copy pf_copies[PF_MAX_KERNELS];
static size_t pf_ncopies;
void pf_kernel_register_copies(int on) { pf_copying = on; }

/* A copied variant's check: the like's (its contract's), then its own. */
static pf_status pf_copy_check(const pf_case *c) {
  for (size_t i = 0; i < pf_ncopies; i++) {
    const pf_kernel_copy *k = &pf_copies[i];
    if (strcmp(k->k.variant, c->variant) != 0 || strcmp(k->k.op->name, c->kernel) != 0) continue;
    const pf_kernel *b = k->k.like ? pf_kernel_find(c->kernel, k->k.like) : NULL;
    pf_status st = b && b->check ? b->check(c) : PF_OK;
    if (!st && k->own_check) st = k->own_check(c);
    return st;
  }
  return PF_OK;
}

pf_status pf_kernel_register(const pf_kernel *k) {
  pf_register_builtins();
  if (!k || k->abi != PF_KERNEL_ABI || !k->op || !k->variant || !k->run_cpu || !k->bound || !k->in_domain)
    return pf_error(PF_ERR_ARG, "kernel registration: incomplete kernel or ABI %d (expected %d)",
                    k ? k->abi : -1, PF_KERNEL_ABI);
  pf_status st = pf_kernel_check(k);
  if (st) return st;
  if (pf_kernel_find(k->op->name, k->variant))
    return pf_error(PF_ERR_ARG, "kernel %s/%s is already registered", k->op->name, k->variant);
  if (pf_nregistry == PF_MAX_KERNELS) return pf_error(PF_ERR_NOMEM, "kernel registry full");
  if (pf_copying) {
    if (strlen(k->summary) >= sizeof pf_copies[0].summary)
      return pf_error(PF_ERR_ARG, "kernel registration: %s/%s: summary over %zu characters", k->op->name, k->variant,
                      sizeof pf_copies[0].summary - 1);
    pf_kernel_copy *c = &pf_copies[pf_ncopies++];
    c->k = *k;
    snprintf(c->variant, sizeof c->variant, "%s", k->variant);
    snprintf(c->summary, sizeof c->summary, "%s", k->summary);
    c->k.variant = c->variant, c->k.summary = c->summary;
    int n = 0;
    for (; k->params && k->params[n].name; n++) {
      c->params[n] = k->params[n];
      c->params[n].name = k->op->params[pf_op_param_index(k->op, k->params[n].name)].name;
    }
    c->params[n].name = NULL;
    c->k.params = n ? c->params : NULL;
    if (k->like) { /* the like's check always applies; the plugin's own after it */
      const pf_kernel *b = pf_kernel_find(k->op->name, k->like);
      c->own_check = k->check != b->check ? k->check : NULL;
      c->k.check = pf_copy_check;
    }
    k = &c->k;
  }
  pf_registry[pf_nregistry++] = k;
  return PF_OK;
}

size_t pf_kernel_count(void) {
  pf_register_builtins();
  return pf_nregistry;
}

const pf_kernel *pf_kernel_at(size_t i) {
  pf_register_builtins();
  return i < pf_nregistry ? pf_registry[i] : NULL;
}

const pf_kernel *pf_kernel_find(const char *op, const char *variant) {
  pf_register_builtins();
  for (size_t i = 0; i < pf_nregistry; i++)
    if (strcmp(pf_registry[i]->op->name, op) == 0 && strcmp(pf_registry[i]->variant, variant) == 0)
      return pf_registry[i];
  return NULL;
}

const pf_op *pf_op_find(const char *op) {
  pf_register_builtins();
  for (size_t i = 0; i < pf_nregistry; i++)
    if (strcmp(pf_registry[i]->op->name, op) == 0) return pf_registry[i]->op;
  return NULL;
}

/* i's operation is new: no earlier variant has it */
static int pf_op_first_at(size_t i) {
  for (size_t j = 0; j < i; j++)
    if (pf_registry[j]->op == pf_registry[i]->op) return 0;
  return 1;
}

size_t pf_op_count(void) {
  pf_register_builtins();
  size_t n = 0;
  for (size_t i = 0; i < pf_nregistry; i++) n += (size_t)pf_op_first_at(i);
  return n;
}

const pf_op *pf_op_at(size_t k) {
  pf_register_builtins();
  for (size_t i = 0; i < pf_nregistry; i++)
    if (pf_op_first_at(i) && k-- == 0) return pf_registry[i]->op;
  return NULL;
}

const pf_kernel *pf_op_first_kernel(const pf_op *op) {
  pf_register_builtins();
  for (size_t i = 0; i < pf_nregistry; i++)
    if (pf_registry[i]->op == op) return pf_registry[i];
  return NULL;
}

int pf_kernel_accepts(const pf_kernel *k, pf_dtype dtype, pf_dtype accum) {
  if (!(k->dtypes & PF_DT(dtype))) return 0;
  return (k->accums & PF_DT(accum)) || ((k->accums & PF_ACCUM_STORAGE) && accum == dtype);
}

int pf_kernel_has_fault(const pf_kernel *k, const char *fault) {
  for (size_t i = 0; k->faults && k->faults[i]; i++)
    if (strcmp(k->faults[i], fault) == 0) return 1;
  return 0;
}

int pf_case_algo(const pf_case *c) {
  const pf_kernel *k = pf_case_kernel(c);
  return k ? k->algo : 0;
}

const pf_op *pf_case_op(const pf_case *c) {
  const pf_kernel *k = pf_case_kernel(c);
  return k ? k->op : pf_op_find(c->kernel);
}

pf_status pf_kernel_like(pf_kernel *k, const char *op, const char *like) {
  const pf_kernel *b = pf_kernel_find(op, like);
  if (!b || b->like) /* a user's variant is no contract to copy: its own may differ */
    return pf_error(PF_ERR_UNKNOWN, "like: %s has no built-in variant '%s' (see precfuzz list)", op, like);
  k->abi = PF_KERNEL_ABI;
  k->op = b->op;
  k->algo = b->algo;
  k->bound = b->bound;
  k->in_domain = b->in_domain;
  k->check = b->check;
  k->contract = b->contract;
  k->dtypes = b->dtypes;
  k->accums = b->accums;
  k->like = b->variant;
  static const char *const no_faults[] = {NULL}; /* a user's variant honours none of the built-in's */
  k->faults = no_faults;
  return PF_OK;
}

int pf_op_param_index(const pf_op *op, const char *name) {
  for (int i = 0; i < op->nparams; i++)
    if (strcmp(op->params[i].name, name) == 0) return i;
  return -1;
}

const pf_param_range *pf_kernel_param(const pf_kernel *k, int i) {
  for (int n = 0; k->params && k->params[n].name; n++)
    if (strcmp(k->params[n].name, k->op->params[i].name) == 0) return &k->params[n];
  return NULL;
}

double pf_kernel_param_default(const pf_kernel *k, int i) {
  const pf_param_range *r = pf_kernel_param(k, i);
  return r ? r->def : k->op->params[i].def;
}

void pf_kernel_param_defaults(const pf_kernel *k, pf_case *c) {
  for (int i = 0; i < k->op->nparams; i++) c->params[i] = pf_kernel_param_default(k, i);
}

int pf_param_train_parse(const pf_param_desc *d, double *vals, int max, double *lo, double *hi) {
  if (!d->train || !d->train[0] || strlen(d->train) >= 512) return -1;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", d->train);
  char *dots = strstr(buf, "..");
  if (dots) { /* LO..HI: an integer parameter's log-uniform range */
    *dots = 0;
    double a, b;
    if (d->type != PF_PARAM_INT || pf_parse_double(buf, &a) || pf_parse_double(dots + 2, &b) || !(a >= 1) || !(a <= b) ||
        a != floor(a) || b != floor(b) || a < d->min || b > d->max || b > 0x1p53)
      return -1;
    *lo = a;
    *hi = b;
    return 0;
  }
  const size_t len = strlen(buf);
  if (buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,")) return -1; /* an empty value */
  int n = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    double v = -1;
    if (n == max) return -1;
    if (d->type == PF_PARAM_CHOICE) {
      for (int j = 0; d->choices[j]; j++)
        if (strcmp(d->choices[j], t) == 0) v = j;
      if (v < 0) return -1;
    } else {
      if (pf_parse_double(t, &v) || !(v >= d->min && v <= d->max) || (d->type == PF_PARAM_INT && v != floor(v)))
        return -1;
      if (d->held && !pf_dtype_holds((pf_dtype)(d->held - 1), v)) v = pf_round((pf_dtype)(d->held - 1), v);
    }
    vals[n++] = v;
  }
  return n ? n : -1;
}

double pf_param_train_draw(const pf_param_desc *d, int i, uint64_t seed) {
  double vals[64], lo = 0, hi = 0;
  const int n = pf_param_train_parse(d, vals, 64, &lo, &hi);
  if (n < 0) return d->def;
  pf_rng_small r; /* a stream per case and parameter: a draw does not depend on which others were drawn */
  pf_rng_small_init(&r, pf_seed_mix(pf_seed_mix(seed, 0x7061726d73ULL /* "parms" */), (uint64_t)i));
  double v;
  if (n > 0) {
    v = vals[pf_rng_small_below(&r, (uint64_t)n)];
  } else { /* an octave [2^e, 2^(e+1)) within [lo, hi], then an integer uniformly in it */
    const int e0 = ilogb(lo), e1 = ilogb(hi);
    const int e = e0 + (int)pf_rng_small_below(&r, (uint64_t)(e1 - e0 + 1));
    const double a = fmax(lo, ldexp(1, e)), b = fmin(hi, ldexp(1, e + 1) - 1);
    v = a + (double)pf_rng_small_below(&r, (uint64_t)(b - a) + 1);
  }
  return v;
}

pf_status pf_kernel_check_params(const pf_kernel *k, const pf_case *c) {
  for (int i = 0; i < k->op->nparams; i++) {
    const pf_param_range *r = pf_kernel_param(k, i);
    const pf_param_desc *d = &k->op->params[i];
    const double v = c->params[i];
    if (!r) continue;
    if (d->type == PF_PARAM_CHOICE && !(r->choices >> (int)v & 1)) {
      char names[160] = "";
      for (int j = 0; d->choices[j]; j++)
        if (r->choices >> j & 1)
          snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", d->choices[j]);
      return pf_error(PF_ERR_UNSUPPORTED, "%s/%s takes %s %s only, not %s", c->kernel, c->variant, d->name, names,
                      d->choices[(int)v]);
    }
    if (d->type != PF_PARAM_CHOICE && !(v >= r->lo && v <= r->hi))
      return pf_error(PF_ERR_UNSUPPORTED, "%s/%s takes %s in [%g, %g] only, not %g", c->kernel, c->variant, d->name, r->lo,
                      r->hi, v);
  }
  return PF_OK;
}

int pf_case_stages(const pf_case *c, pf_stage *out) {
  const pf_op *op = pf_case_op(c);
  if (op->stages) return op->stages(c, out);
  memset(out, 0, sizeof *out);
  out->name = "output";
  out->count = op->output_count(c);
  if (op->input_dims && op->input_count(c, 0) == out->count) out->ndims = op->input_dims(c, 0, out->dims);
  return 1;
}

pf_dtype pf_stage_dtype(const pf_case *c, const pf_stage *s) {
  return s->held == PF_STAGE_MIXED ? PF_NDTYPES : s->held > 0 ? (pf_dtype)(s->held - 1) : c->dtype;
}

/* dims over the case's shape, when they hold n values; else a vector of n */
static int pf_dims_shape(const pf_case *c, const int *dims, int nd, size_t n, size_t *shape) {
  size_t m = 1;
  for (int d = 0; d < nd; d++) m *= (shape[d] = c->shape[dims[d]]);
  if (nd > 0 && m == n) return nd;
  shape[0] = n;
  return 1;
}

int pf_stage_shape(const pf_case *c, const pf_stage *s, size_t *shape) {
  return pf_dims_shape(c, s->dims, s->ndims, s->count, shape);
}

int pf_input_shape(const pf_case *c, int t, size_t n, size_t *shape) {
  const pf_op *op = pf_case_op(c);
  int dims[PF_MAX_DIMS];
  const int nd = op->input_dims ? op->input_dims(c, t, dims) : 0;
  return pf_dims_shape(c, dims, nd, n, shape);
}

