/* The minimizer (minimize.h): shrinks a finding while its kernel, variant and verdict stay the same,
 * deterministically, to a readable case file. Passes, repeated until none changes anything:
 * 1. every dimension to 1, 2, half, one less (generated inputs are drawn again from the same
 *    seeds: a shorter tensor is a prefix of the longer one's stream);
 * 2. generated inputs turned into explicit values (the drawn values before the operation's
 *    prepare, which replay applies again), when there are at most 4096 of them; then the
 *    dimensions again, keeping the values at the first or the last indices (operations that
 *    state their inputs' layout: pf_op.input_dims);
 * 3. every explicit value replaced by 0, then +-1, then the power of two nearest to it, then
 *    itself rounded to 1, 2, 4, 8 or 16 significant bits (shorter hex), the first that keeps
 *    the verdict;
 * 4. every parameter back to its default.
 * precfuzz minimize (cli/minimize_cmd.c) then writes the case (with "expect" set to the
 * verdict) and the replay command. */
#include "cli/minimize.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_common.h"
#include "core/plugin.h"
#include "core/runner.h"
#include "core/kernel.h"

/* The driver (and fault) a path names: a directory "<driver>" or "<driver>-<fault>". */
static void pf_path_driver(const char *path, char *drv, size_t dlen, char *fault, size_t flen) {
  drv[0] = fault[0] = 0;
  char *p = strdup(path);
  if (!p) return;
  for (char *tok = strtok(p, "/"); tok; tok = strtok(NULL, "/")) {
    pf_fuzz_driver ds[64];
    const int nd = pf_fuzz_drivers(ds, 64);
    for (int i = 0; i < nd && i < 64; i++) {
      const size_t n = strlen(ds[i].driver);
      if (strncmp(tok, ds[i].driver, n) == 0 && (tok[n] == 0 || tok[n] == '-')) {
        snprintf(drv, dlen, "%s", ds[i].driver);
        snprintf(fault, flen, "%s", tok[n] == '-' ? tok + n + 1 : "");
      }
    }
  }
  free(p);
}

pf_status pf_load_input(const char *path, const char *driver, const char *fault, pf_case *c, char *what, size_t len) {
  memset(c, 0, sizeof *c);
  char *data = NULL;
  size_t n = 0;
  pf_status st = pf_read_file(path, &data, &n);
  if (st) return st;
  char drv[64], pfault[64];
  pf_path_driver(path, drv, sizeof drv, pfault, sizeof pfault);
  if (driver) snprintf(drv, sizeof drv, "%s", driver);
  /* A case: a file named *.json, or JSON text; a raw input may begin with '{' too, so
   * without a .json name a text that is not JSON is raw when a driver is known. */
  size_t i = 0;
  while (i < n && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) i++;
  const size_t pl = strlen(path);
  const int named_json = pl >= 5 && strcmp(path + pl - 5, ".json") == 0;
  int is_case = !driver && (named_json || (i < n && data[i] == '{'));
  if (is_case && !named_json && drv[0]) {
    cJSON *j = strlen(data) == n ? cJSON_ParseWithLength(data, n) : NULL;
    is_case = j != NULL;
    cJSON_Delete(j);
  }
  if (is_case) {
    free(data);
    snprintf(what, len, "case file");
    return pf_case_load(c, path);
  }
  if (!drv[0]) {
    free(data);
    char names[1024];
    pf_fuzz_driver_names(names, sizeof names);
    return pf_error(PF_ERR_ARG, "%s: not a case file (no JSON object) and no driver in its path: name it with --driver "
                    "(%s)", path, names);
  }
  pf_fuzz_driver dv;
  const pf_fuzz_driver *d = pf_fuzz_driver_find(drv, &dv) ? &dv : NULL;
  if (!d) {
    free(data);
    return pf_error(PF_ERR_UNKNOWN, "--driver: unknown driver '%s'", drv);
  }
  const char *env = getenv("PF_FUZZ_FAULT");
  const char *f = fault ? fault : pfault[0] ? pfault : env && *env ? env : NULL;
  if (f && *f) {
    int honoured = 0;
    for (size_t k = 0; k < pf_kernel_count(); k++)
      honoured |= pf_kernel_at(k)->op == d->op && pf_kernel_has_fault(pf_kernel_at(k), f);
    if (!honoured) {
      free(data);
      return pf_error(PF_ERR_UNKNOWN, "fault '%s' is not a fault of %s's kernel %s", f, d->driver, d->op->name);
    }
  }
  /* the decoder reads the fault from the environment, as the driver does */
  char *saved = env ? strdup(env) : NULL;
  if (f && *f) setenv("PF_FUZZ_FAULT", f, 1);
  else unsetenv("PF_FUZZ_FAULT");
  const int ok = d->op->fuzz_decode((const uint8_t *)data, n, c);
  if (saved) setenv("PF_FUZZ_FAULT", saved, 1);
  else unsetenv("PF_FUZZ_FAULT");
  free(saved);
  free(data);
  if (!ok) return pf_error(PF_ERR_PARSE, "%s: %zu bytes are too short for %s (a truncated input?)", path, n, d->driver);
  snprintf(what, len, "raw input of %s%s%s", d->driver, f && *f ? " with fault " : "", f && *f ? f : "");
  return PF_OK;
}

/* --- the minimizer ------------------------------------------------------------------- */

typedef struct {
  pf_verdict verdict;
  size_t tries, kept;
} pf_min_state;

/* Does c still give the verdict? (An invalid case does not.) */
static int pf_min_keeps(pf_min_state *m, const pf_case *c) {
  m->tries++;
  if (pf_case_validate(c)) return 0;
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  pf_run r;
  const pf_status st = pf_run_case(c, &o, &r);
  const int keep = !st && r.cmp.verdict == m->verdict;
  pf_run_free(&r);
  m->kept += keep;
  return keep;
}

int pf_minimize_explicit(const pf_case *c) {
  for (int t = 0; t < c->ninputs; t++)
    if (c->inputs[t].dist != PF_DIST_VALUES) return 0;
  return 1;
}

size_t pf_minimize_elements(const pf_case *c) {
  const pf_op *op = pf_case_kernel(c)->op;
  size_t n = 0;
  for (int t = 0; t < op->ninputs; t++) n += op->input_count(c, t);
  return n;
}

/* Pass 1: smaller dimensions (generated inputs only: explicit ones fix the counts). */
static int pf_min_shape(pf_min_state *m, pf_case *c) {
  if (pf_minimize_explicit(c)) return 0;
  int changed = 0;
  for (int d = 0; d < c->ndims; d++) {
    const size_t cur = c->shape[d];
    const size_t cand[4] = {1, 2, cur / 2, cur - 1};
    for (int k = 0; k < 4; k++) {
      if (cand[k] < 1 || cand[k] >= c->shape[d]) continue;
      pf_case t;
      if (pf_case_copy(&t, c)) continue;
      t.shape[d] = cand[k];
      if (pf_min_keeps(m, &t)) {
        pf_case_free(c);
        *c = t;
        changed = 1;
        break;
      }
      pf_case_free(&t);
    }
  }
  return changed;
}

/* Pass 1b: smaller dimensions of explicit values, for operations that say how their inputs
 * are laid out over the dimensions: the values at the indices that remain are kept. */
static int pf_min_shape_explicit(pf_min_state *m, pf_case *c) {
  const pf_op *op = pf_case_kernel(c)->op;
  if (!pf_minimize_explicit(c) || !op->input_dims) return 0;
  int changed = 0;
  for (int d = 0; d < c->ndims; d++) {
    const size_t cur = c->shape[d];
    const size_t cand[4] = {1, 2, cur / 2, cur - 1};
    for (int k = 0; k < 8; k++) {
      /* the first indices of dimension d, then the last ones */
      const size_t want = cand[k % 4], skip = k < 4 ? 0 : cur - want;
      if (want < 1 || want >= c->shape[d]) continue;
      pf_case t;
      if (pf_case_copy(&t, c)) continue;
      t.shape[d] = want;
      int ok = 1;
      for (int i = 0; i < op->ninputs && ok; i++) {
        int dims[PF_MAX_DIMS];
        const int nd = op->input_dims(c, i, dims);
        size_t n = 1;
        for (int a = 0; a < nd; a++) n *= t.shape[dims[a]];
        ok = nd > 0 && n == op->input_count(&t, i);
        double *v = ok ? malloc((n ? n : 1) * sizeof(double)) : NULL;
        ok = ok && v;
        for (size_t x = 0; ok && x < n; x++) {
          /* x's multi-index in the new shape, its position in the old */
          size_t rest = x, old = 0, stride = 1;
          for (int a = nd - 1; a >= 0; a--) {
            const size_t ia = rest % t.shape[dims[a]];
            rest /= t.shape[dims[a]];
            old += (ia + (dims[a] == d ? skip : 0)) * stride;
            stride *= c->shape[dims[a]];
          }
          v[x] = c->inputs[i].values[old];
        }
        if (ok) {
          free(t.inputs[i].values);
          t.inputs[i].values = v;
          t.inputs[i].nvalues = n;
        } else {
          free(v);
        }
      }
      if (ok && pf_min_keeps(m, &t)) {
        pf_case_free(c);
        *c = t;
        changed = 1;
        break;
      }
      pf_case_free(&t);
    }
  }
  return changed;
}

/* Pass 2: the drawn values, made explicit. */
static int pf_min_values_explicit(pf_min_state *m, pf_case *c) {
  if (pf_minimize_explicit(c) || pf_minimize_elements(c) > 4096) return 0;
  const pf_op *op = pf_case_kernel(c)->op;
  pf_case t;
  if (pf_case_copy(&t, c)) return 0;
  for (int i = 0; i < op->ninputs; i++) {
    pf_tensor x;
    const pf_dtype dt = op->input_dtype ? op->input_dtype(c, i) : c->dtype;
    if (pf_tensor_alloc(&x, dt, op->input_count(c, i)) || pf_tensor_generate(&x, &c->inputs[i])) {
      pf_tensor_free(&x);
      pf_case_free(&t);
      return 0;
    }
    pf_gen_free(&t.inputs[i]);
    pf_gen_default(&t.inputs[i]);
    t.inputs[i].dist = PF_DIST_VALUES;
    t.inputs[i].values = x.data; /* owned by the generator now */
    t.inputs[i].nvalues = x.n;
  }
  if (pf_min_keeps(m, &t)) {
    pf_case_free(c);
    *c = t;
    return 1;
  }
  pf_case_free(&t);
  return 0;
}

/* x rounded to b significant bits (nearest, ties away: only a candidate). */
static double pf_min_bits(double x, int b) {
  if (x == 0 || !isfinite(x)) return x;
  int e;
  const double f = frexp(x, &e);
  return ldexp(round(ldexp(f, b)), e - b);
}

/* Pass 3: simpler values, element by element. */
static int pf_min_simplify(pf_min_state *m, pf_case *c) {
  if (!pf_minimize_explicit(c)) return 0;
  const pf_op *op = pf_case_kernel(c)->op;
  int changed = 0;
  for (int t = 0; t < op->ninputs; t++) {
    const pf_dtype dt = op->input_dtype ? op->input_dtype(c, t) : c->dtype;
    for (size_t i = 0; i < c->inputs[t].nvalues; i++) {
      const double x = c->inputs[t].values[i];
      if (x == 0) continue;
      double cand[9];
      int nc = 0;
      cand[nc++] = 0;
      if (isfinite(x)) {
        cand[nc++] = copysign(1.0, x);
        int e;
        frexp(x, &e);
        const double p2 = fabs(x) >= 0.75 * ldexp(1.0, e) ? ldexp(1.0, e) : ldexp(1.0, e - 1);
        cand[nc++] = copysign(p2, x);
        for (int b = 1; b <= 16; b *= 2) cand[nc++] = pf_min_bits(x, b);
      }
      for (int k = 0; k < nc; k++) {
        const double v = cand[k];
        if (v == x || pf_round(dt, v) != v) continue;
        /* only simpler: fewer significant bits or a smaller magnitude */
        c->inputs[t].values[i] = v;
        if (pf_min_keeps(m, c)) {
          changed = 1;
          break;
        }
        c->inputs[t].values[i] = x;
      }
    }
  }
  return changed;
}

/* Pass 4: parameters back to their defaults (a spike, a decay, a window that the finding
 * does not need), one at a time. */
static int pf_min_params(pf_min_state *m, pf_case *c) {
  const pf_op *op = pf_case_kernel(c)->op;
  int changed = 0;
  for (int i = 0; i < op->nparams; i++) {
    const double def = pf_kernel_param_default(pf_case_kernel(c), i); /* the variant's, where it narrows */
    if (c->params[i] == def) continue;
    const double was = c->params[i];
    c->params[i] = def;
    if (pf_min_keeps(m, c)) changed = 1;
    else c->params[i] = was;
  }
  return changed;
}

static void pf_min_rounds(pf_min_state *m, pf_case *c) {
  for (int round = 0; round < 64; round++) {
    int changed = pf_min_shape(m, c);
    changed |= pf_min_values_explicit(m, c);
    changed |= pf_min_shape_explicit(m, c);
    changed |= pf_min_simplify(m, c);
    changed |= pf_min_params(m, c);
    if (!changed) break;
  }
  snprintf(c->expect, sizeof c->expect, "%s", pf_verdict_name(m->verdict));
}

size_t pf_minimize_case(pf_case *c, pf_verdict v, size_t *runs) {
  pf_min_state m = {v, 0, 0};
  pf_min_rounds(&m, c);
  if (runs) *runs = m.tries;
  return pf_minimize_elements(c);
}
