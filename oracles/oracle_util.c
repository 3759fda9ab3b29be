#include "oracles/oracle_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double pf_mpfr_round_dtype(mpfr_srcptr x, pf_dtype t) {
  if (mpfr_nan_p(x)) return NAN;
  if (mpfr_inf_p(x)) return mpfr_sgn(x) < 0 ? -INFINITY : INFINITY;
  if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;
  const pf_format f = pf_format_of(t);
  const long e = (long)mpfr_get_exp(x) - 1;   /* |x| in [2^e, 2^(e+1)) */
  if (e > f.emax + 1) return mpfr_sgn(x) < 0 ? -INFINITY : INFINITY;
  if (e < f.emin - f.prec - 1) return mpfr_signbit(x) ? -0.0 : 0.0; /* below half the smallest subnormal */
  const long q = (e < f.emin ? f.emin : e) - (f.prec - 1); /* the quantum's exponent */
  mpfr_t k;
  mpfr_init2(k, mpfr_get_prec(x) > 64 ? mpfr_get_prec(x) : 64);
  mpfr_mul_2si(k, x, -q, MPFR_RNDN);  /* exact */
  mpfr_rint(k, k, MPFR_RNDN);         /* to an integer, ties to even */
  mpfr_mul_2si(k, k, q, MPFR_RNDN);   /* exact */
  double d = mpfr_get_d(k, MPFR_RNDN); /* exact: at most prec bits, exponent in range */
  mpfr_clear(k);
  const double top = ldexp(1.0, f.emax + 1);
  if (fabs(d) >= top) return d < 0 ? -INFINITY : INFINITY;
  if (d == 0) return mpfr_signbit(x) ? -0.0 : 0.0;
  return d;
}

static char *pf_mpfr_hex(mpfr_srcptr x) {
  char *s = NULL;
  if (mpfr_nan_p(x)) return strdup("nan");
  if (mpfr_inf_p(x)) return strdup(mpfr_sgn(x) < 0 ? "-inf" : "inf");
  if (mpfr_asprintf(&s, "%Ra", x) < 0) return NULL;
  char *r = strdup(s);
  mpfr_free_str(s);
  return r;
}

int pf_oracle_settle(pf_oracle_result *r, size_t i, mpfr_srcptr lo, mpfr_srcptr hi, pf_dtype t, int final,
                     int keep_hex) {
  r->dtype[i] = (unsigned char)t;
  const double a = pf_mpfr_round_dtype(lo, t), b = pf_mpfr_round_dtype(hi, t);
  /* both ends on one value of t; zeros of either sign count as one (an exact zero's sign is
   * not judged: the comparison treats -0 and +0 alike) */
  const int same = a == b && (signbit(a) == signbit(b) || a == 0);
  if (!same && !final) return 0;
  if (same && a == 0 && !mpfr_zero_p(hi) && (mpfr_zero_p(lo) || mpfr_sgn(lo) != mpfr_sgn(hi)) &&
      mpfr_get_exp(hi) <= mpfr_get_emin() + 1) {
    /* the enclosure reaches down to 0 only because MPFR's exponent range ends there */
    r->exact[i] = r->rounded[i] = r->rounded_alt[i] = 0;
    r->status[i] = PF_ORACLE_TINY;
    if (keep_hex && r->hex) {
      free(r->hex[i]);
      r->hex[i] = strdup("0x0p+0");
    }
    return 1;
  }
  mpfr_t mid;
  mpfr_init2(mid, mpfr_get_prec(lo) + 1);
  mpfr_add(mid, lo, hi, MPFR_RNDN); /* the midpoint of the enclosure (within it) */
  mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
  r->exact[i] = mpfr_get_d(mid, MPFR_RNDN);
  r->rounded[i] = a;
  r->rounded_alt[i] = b;
  r->status[i] = same ? PF_ORACLE_NUMBER : PF_ORACLE_TIE;
  if (keep_hex && r->hex) {
    free(r->hex[i]);
    r->hex[i] = pf_mpfr_hex(mid);
  }
  mpfr_clear(mid);
  return 1;
}

/* element i is 0 exactly, with that status */
static void pf_oracle_set_0(pf_oracle_result *r, size_t i, pf_dtype t, int keep_hex, unsigned char status) {
  r->dtype[i] = (unsigned char)t;
  r->exact[i] = r->rounded[i] = r->rounded_alt[i] = 0;
  r->status[i] = status;
  if (keep_hex && r->hex) {
    free(r->hex[i]);
    r->hex[i] = strdup("0x0p+0");
  }
}

void pf_oracle_set_tiny(pf_oracle_result *r, size_t i, pf_dtype t, int keep_hex) {
  pf_oracle_set_0(r, i, t, keep_hex, PF_ORACLE_TINY);
}

void pf_oracle_set_zero(pf_oracle_result *r, size_t i, pf_dtype t, int keep_hex) {
  pf_oracle_set_0(r, i, t, keep_hex, PF_ORACLE_NUMBER);
}

void pf_oracle_set_undefined(pf_oracle_result *r, size_t i, int keep_hex) {
  r->exact[i] = r->rounded[i] = r->rounded_alt[i] = NAN;
  r->status[i] = PF_ORACLE_UNDEFINED;
  if (keep_hex && r->hex) {
    free(r->hex[i]);
    r->hex[i] = strdup("nan");
  }
}

pf_mpfr_range pf_mpfr_range_widen(void) {
  pf_mpfr_range r = {mpfr_get_emin(), mpfr_get_emax()};
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  return r;
}

void pf_mpfr_range_restore(pf_mpfr_range r) {
  mpfr_set_emin(r.emin);
  mpfr_set_emax(r.emax);
}

typedef struct {
  void (*fn)(void *, int, size_t, size_t);
  void *ctx;
} pf_mpfr_job;

static void pf_mpfr_chunk(void *p, int t, size_t b, size_t e) {
  const pf_mpfr_job *j = p;
  const pf_mpfr_range saved = pf_mpfr_range_widen(); /* per thread in MPFR */
  j->fn(j->ctx, t, b, e);
  pf_mpfr_range_restore(saved);
  /* a worker thread ends here: its MPFR caches (constants, the integer pool high-precision exp
   * draws from) would be lost with it, leaked (ASan's leak check found them) */
  if (t > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
}

void pf_oracle_parallel(size_t n, int threads, void (*fn)(void *ctx, int thread, size_t begin, size_t end),
                        void *ctx) {
  pf_mpfr_job j = {fn, ctx};
  pf_parallel_for(n, threads, pf_mpfr_chunk, &j);
}

/* pf_oracle_by_rows's job: the caller's row functions and, per thread, what it counted */
typedef struct {
  const void *ctx;
  int (*fast)(const void *, size_t, pf_oracle_result *);
  void (*mpfr)(const void *, size_t, long *);
  pf_oracle_result *out;
  long prec0;
  size_t fast_units[PF_MAX_THREADS], mpfr_units[PF_MAX_THREADS];
  long max_prec[PF_MAX_THREADS];
} pf_rows_job;

static void pf_rows_chunk(void *ctx, int t, size_t begin, size_t end) {
  pf_rows_job *k = ctx;
  k->max_prec[t] = k->prec0;
  for (size_t i = begin; i < end; i++) {
    if (k->fast && k->fast(k->ctx, i, k->out)) {
      k->fast_units[t]++;
      continue;
    }
    k->mpfr_units[t]++;
    k->mpfr(k->ctx, i, &k->max_prec[t]);
  }
}

pf_status pf_oracle_by_rows(size_t rows, double row_cost, const pf_oracle_opts *opts, pf_oracle_result *out,
                            const void *ctx, int (*fast)(const void *ctx, size_t row, pf_oracle_result *out),
                            void (*mpfr)(const void *ctx, size_t row, long *max_prec)) {
  pf_rows_job *k = calloc(1, sizeof *k);
  if (!k) return pf_error(PF_ERR_NOMEM, "oracle: out of memory");
  k->ctx = ctx, k->mpfr = mpfr, k->out = out;
  k->fast = opts->mpfr_only || opts->keep_hex ? NULL : fast; /* hex asks for >= 160 bits: MPFR's */
  k->prec0 = opts->prec < 64 ? 64 : opts->prec;
  const int threads = pf_parallel_threads(rows, row_cost);
  pf_oracle_parallel(rows, threads, pf_rows_chunk, k);
  out->max_prec = k->prec0;
  for (int t = 0; t < threads; t++) {
    out->fast_units += k->fast_units[t];
    out->mpfr_units += k->mpfr_units[t];
    if (k->max_prec[t] > out->max_prec) out->max_prec = k->max_prec[t];
  }
  free(k);
  return PF_OK;
}

/* a is a multiple of 2^lsb(a) (a != 0) */
static long pf_mpfr_lsb(mpfr_srcptr a) { return (long)mpfr_get_exp(a) - (long)mpfr_min_prec(a); }

void pf_mpfr_exact_add(mpfr_ptr r, mpfr_srcptr a, mpfr_srcptr b, int s) {
  if (mpfr_zero_p(b)) {
    if (r != a) {
      mpfr_set_prec(r, mpfr_get_prec(a));
      mpfr_set(r, a, MPFR_RNDN);
    }
    return;
  }
  if (mpfr_zero_p(a)) {
    mpfr_set_prec(r, mpfr_get_prec(b));
    if (s > 0) mpfr_set(r, b, MPFR_RNDN);
    else mpfr_neg(r, b, MPFR_RNDN);
    return;
  }
  const long ea = (long)mpfr_get_exp(a), eb = (long)mpfr_get_exp(b), la = pf_mpfr_lsb(a), lb = pf_mpfr_lsb(b);
  const long p = (ea > eb ? ea : eb) + 1 - (la < lb ? la : lb);
  if (r == a) {
    if (p > (long)mpfr_get_prec(r)) mpfr_prec_round(r, p, MPFR_RNDN); /* grows: exact */
  } else {
    mpfr_set_prec(r, p);
  }
  if (s > 0) mpfr_add(r, a, b, MPFR_RNDN); /* exact: p bits hold it */
  else mpfr_sub(r, a, b, MPFR_RNDN);
}

void pf_mpfr_exact_mul(mpfr_ptr r, mpfr_srcptr a, mpfr_srcptr b) {
  const long p = (long)(mpfr_min_prec(a) + mpfr_min_prec(b));
  mpfr_set_prec(r, p < MPFR_PREC_MIN ? MPFR_PREC_MIN : p);
  mpfr_mul(r, a, b, MPFR_RNDN); /* exact: p bits hold it */
}

void pf_mpfr_exact_mul_d(mpfr_ptr r, mpfr_srcptr a, double d, mpfr_ptr t) {
  mpfr_set_prec(t, 53);
  mpfr_set_d(t, d, MPFR_RNDN); /* exact */
  pf_mpfr_exact_mul(r, a, t);
}

pf_status pf_oracle_rows_then_columns(size_t rows, size_t cols, const pf_oracle_opts *opts, pf_oracle_result *out,
                                      void *ctx, int (*fast_row)(const void *, size_t, pf_oracle_result *),
                                      void (*mpfr_row)(const void *, size_t, long *), pf_oracle_range_fn fast_cols,
                                      pf_oracle_range_fn prepare, pf_oracle_range_fn mpfr_cols, unsigned char *left,
                                      long *max_prec) {
  const pf_status st = pf_oracle_by_rows(rows, 300.0 * (double)cols, opts, out, ctx, fast_row, mpfr_row);
  if (st) return st;
  size_t nleft = 0;
  if (opts->mpfr_only || opts->keep_hex) { /* no fast path: every column is MPFR's */
    for (size_t j = 0; j < cols; j++) left[j] = 1;
  } else {
    pf_oracle_parallel(cols, pf_parallel_threads(cols, 50.0 * (double)rows), fast_cols, ctx);
  }
  for (size_t j = 0; j < cols; j++) nleft += left[j];
  out->fast_units += cols - nleft;
  out->mpfr_units += nleft;
  if (!nleft) return PF_OK;
  const long p0 = opts->prec < 64 ? 64 : opts->prec;
  for (int t = 0; t < PF_MAX_THREADS; t++) max_prec[t] = p0;
  pf_oracle_parallel(rows, pf_parallel_threads(rows, 100.0 * (double)cols), prepare, ctx);
  pf_oracle_parallel(cols, pf_parallel_threads(cols, 300.0 * (double)rows), mpfr_cols, ctx);
  for (int t = 0; t < PF_MAX_THREADS; t++)
    if (max_prec[t] > out->max_prec) out->max_prec = max_prec[t];
  return PF_OK;
}
