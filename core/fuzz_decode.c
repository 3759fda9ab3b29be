/* Decoding a fuzz driver's bytes into a case (fuzz_decode.h). */
#include "core/fuzz_decode.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plugin.h"

uint8_t pf_bytes_u8(pf_bytes *b) { return b->pos < b->n ? b->p[b->pos++] : 0; }

uint64_t pf_bytes_u64(pf_bytes *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | pf_bytes_u8(b);
  return v;
}

/* $PF_FUZZ_MAX_DIM, read once: 0 when unset; a bad value ends the run (exit 2, one line) */
static size_t pf_fuzz_max_dim(void) {
  static size_t v;
  static int read;
  if (read++) return v;
  const char *s = getenv("PF_FUZZ_MAX_DIM");
  if (!s || !*s) return v = 0;
  char *end;
  errno = 0;
  const unsigned long long x = strtoull(s, &end, 10);
  if (*s == '-' || *end || errno || x < 1 || x > ((size_t)1 << 24)) {
    fprintf(stderr, "fuzz driver: PF_FUZZ_MAX_DIM=%s is not an integer in [1, 16777216]\n", s);
    exit(2);
  }
  return v = (size_t)x;
}

size_t pf_fuzz_dim(pf_bytes *b, size_t small, size_t large) {
  const uint8_t v = pf_bytes_u8(b);
  const size_t cap = pf_fuzz_max_dim();
  if (cap) large = cap;
  if (v < 252 || large <= small) return 1 + v % small;
  /* small * (large / small)^(w / 255), at least small + 1 */
  const double e = pf_bytes_u8(b) / 255.0;
  size_t n = (size_t)((double)small * pow((double)large / (double)small, e) + 0.5);
  return n <= small ? small + 1 : n > large ? large : n;
}

const char *pf_fuzz_fault(void) {
  const char *f = getenv("PF_FUZZ_FAULT");
  return f && *f ? f : NULL;
}

/* name is one of the comma-separated names in list */
static int pf_fuzz_listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
}

const pf_kernel *pf_fuzz_begin(const char *op, pf_bytes *b, pf_case *c) {
  /* $PRECFUZZ_KERNELS: a user's variants join the built-in ones the first byte picks from */
  if (pf_plugins_load_env()) {
    fprintf(stderr, "fuzz driver: PRECFUZZ_KERNELS: %s\n", pf_error_message());
    exit(2);
  }
  const char *fault = pf_fuzz_fault();
  /* $PF_FUZZ_VARIANT aims the driver at one variant, or a comma-separated few (a user's
   * kernels get every input) */
  const char *only = getenv("PF_FUZZ_VARIANT");
  if (only && !*only) only = NULL;
  const pf_kernel *cands[64];
  size_t nc = 0;
  for (size_t i = 0; i < pf_kernel_count() && nc < 64; i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (strcmp(k->op->name, op) == 0 && (!fault || pf_kernel_has_fault(k, fault)) &&
        (!only || pf_fuzz_listed(only, k->variant)))
      cands[nc++] = k;
  }
  if (!nc && only) {
    fprintf(stderr, "fuzz driver: PF_FUZZ_VARIANT=%s names no variant of %s%s%s (precfuzz list)\n", only, op,
            fault ? " with fault " : "", fault ? fault : "");
    exit(2);
  }
  /* every name listed is a variant of op (a misspelt one would quietly get no input); once */
  static int listed_checked;
  for (const char *p = listed_checked++ ? NULL : only; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    const size_t len = strcspn(p, ",");
    int known = 0;
    for (size_t i = 0; i < pf_kernel_count() && !known; i++) {
      const pf_kernel *k = pf_kernel_at(i);
      known = strcmp(k->op->name, op) == 0 && strlen(k->variant) == len && strncmp(k->variant, p, len) == 0;
    }
    if (!known) {
      fprintf(stderr, "fuzz driver: PF_FUZZ_VARIANT: '%.*s' is no variant of %s (precfuzz list)\n", (int)len, p, op);
      exit(2);
    }
  }
  if (!nc) {
    fprintf(stderr, "fuzz driver: PF_FUZZ_FAULT=%s names no fault of %s\n", fault ? fault : "", op);
    abort();
  }
  const pf_kernel *k = cands[pf_bytes_u8(b) % nc];
  if (pf_case_init(c, op, k->variant, 0)) abort();
  if (fault) snprintf(c->fault, sizeof c->fault, "%s", fault);
  return k;
}

void pf_fuzz_fit_param(const pf_kernel *k, pf_case *c, const char *name) {
  const int i = pf_op_param_index(k->op, name);
  const pf_param_range *r = i >= 0 ? pf_kernel_param(k, i) : NULL;
  if (!r) return;
  const pf_param_desc *d = &k->op->params[i];
  double *v = &c->params[i];
  if (d->type == PF_PARAM_CHOICE) {
    if (r->choices >> (int)*v & 1) return;
    int n = 0; /* the (v mod n)-th of the n choices it takes */
    for (int j = 0; j < 32; j++) n += r->choices >> j & 1;
    for (int j = 0, want = (int)*v % n; j < 32; j++)
      if ((r->choices >> j & 1) && want-- == 0) {
        *v = j;
        break;
      }
    return;
  }
  if (*v < r->lo) *v = r->lo;
  if (*v > r->hi) *v = r->hi;
  if ((d->type == PF_PARAM_INT && *v != floor(*v)) || (d->held && !pf_dtype_holds((pf_dtype)(d->held - 1), *v)))
    *v = r->def;
}
void pf_fuzz_raw_values(pf_bytes *b, pf_gen *g, pf_dtype t, size_t n) {
  const size_t w = t == PF_FP32 ? 4 : 2;
  pf_gen_free(g);
  g->dist = PF_DIST_VALUES;
  g->values = malloc((n ? n : 1) * sizeof(double));
  if (!g->values) abort();
  g->nvalues = n;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits = 0;
    for (size_t k = 0; k < w; k++) bits = bits << 8 | pf_bytes_u8(b);
    g->values[i] = pf_decode(t, bits);
  }
}
