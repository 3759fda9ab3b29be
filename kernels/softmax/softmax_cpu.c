/* Softmax forward, CPU emulation of every variant, their contracts and the variant table.
 *
 *   y[i, j] = exp(t[i, j]) / sum_k exp(t[i, k]),  t[i, j] = alpha * x[i, j], or the mask
 *   sentinel (-inf, -10000, or the storage dtype's lowest finite) at masked positions.
 *
 * Variants: naive (no max subtracted), safe (row max subtracted, two passes), online (one
 * pass, running max, rescaled running sum). Accumulation in fp32 or in the storage dtype
 * (every operation rounded to it). Output in the storage dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runner.h"
#include "core/kernel.h"
#include "kernels/softmax/softmax.h"

#include "oracles/softmax_mpfr.h"

static const char *const pf_softmax_dims[] = {"rows", "cols"};
static const char *const pf_softmax_inputs[] = {"x"};
static const char *const pf_mask_choices[] = {"none", "causal", "causal-top-left", NULL};
static const char *const pf_maskval_choices[] = {"-inf", "-10000", "lowest", NULL};

enum { P_ALPHA = 0, P_MASK = 1, P_MASKVAL = 2 };
static const pf_param_desc pf_softmax_params[] = {
    {"alpha", PF_PARAM_REAL, 1.0, 0.0, 0x1p64, NULL,
     "multiplies x before the softmax (attention's 1/sqrt(d)); rounded to the accumulation dtype by the kernel", 0,
     NULL /* not drawn: it would rescale what --scale asks for */},
    {"mask", PF_PARAM_CHOICE, 0, 0, 2, pf_mask_choices,
     "causal: row i sees columns j <= i + cols - rows (aligned bottom right; none for i < rows - cols: 0 under -inf); causal-top-left: j <= i", 0,
     "none,causal,causal-top-left"},
    {"mask_value", PF_PARAM_CHOICE, 0, 0, 2, pf_maskval_choices, "what a masked position holds", 0, "-inf,-10000,lowest"},
};

static size_t pf_softmax_count(const pf_case *c) { return c->shape[0] * c->shape[1]; }
static size_t pf_softmax_input_count(const pf_case *c, int i) { return pf_softmax_count(c); }

static int pf_softmax_input_dims(const pf_case *c, int i, int *d) {
  d[0] = 0, d[1] = 1; /* x[row][col] */
  return 2;
}

/* saturated: a row's outputs sum to more than 1 beyond the imprecise threshold of the dtype
 * (their exact values sum to 1): every output was divided by a denominator that fell short of
 * the exact sum of exponentials, a running sum that stopped absorbing its terms. */
static void pf_softmax_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const double thr = pf_hazard_threshold(c, l, c->dtype);
  for (size_t i = 0; i < rows; i++) {
    double sy = 0, se = 0;
    for (size_t j = 0; j < cols; j++) {
      const size_t k = i * cols + j;
      if (r->oracle.status[k] == PF_ORACLE_UNDEFINED || !isfinite(r->out[k])) goto next; /* a NaN row: a verdict's */
      sy += r->out[k], se += r->oracle.exact[k];
    }
    if (se > 0 && pf_hazard_beyond(sy / se - 1, thr)) {
      pf_run_flag_hazard(r, PF_H_SATURATED, i * cols, sy / se - 1,
                         "row %zu: its outputs sum to %.6g (exact %.6g): the denominator fell short of the sum of "
                         "exponentials by %.3g (threshold %.3g), a running sum that stopped absorbing its terms",
                         i, sy, se, sy / se - 1, thr);
      return;
    }
  next:;
  }
}

/* rows x cols elements: the emulation about 31 ns each, the oracle 20 (measured: 1x65536 fp32) */
static void pf_softmax_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 31e-9 * n;
  *oracle_s = 20e-9 * n;
}

/* the precision report's sweep: the scan along the inputs' scale, and where exp overflows and
 * every exp underflows */
static const pf_op_sweep pf_softmax_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x64", .along = "scale", .lo = 0x1p-2, .hi = 0x1p12, .fail = "finding", .cases_div = 1,
    .searches = {{"overflow", "1x1", "value", "overflow,nan", 0, 0, {NULL}},
                 {"underflow", "1x1", "value", "underflow,nan", -1, -1, {NULL}}},
    .explanation =
        "naive computes exp(x) directly: it overflows the dtype it is computed in when x > ln(max): 11.09 in fp16, "
        "88.72 in fp32 and bf16 (the same exponent range); with every exp of a row rounded to 0 (x < ln of half the "
        "least subnormal) it divides 0 by 0. safe and online subtract the row's maximum first, so every exponent is at "
        "most 0 and the sum at least 1: no overflow and no total underflow at any scale; what remains is the rounding of "
        "x - max, which grows with |x| (the error versus scale plot).",
};

int pf_decode_softmax_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* softmax_fuzzer.c */
const pf_op pf_softmax_op = {
    .name = "softmax",
    .summary = "row softmax of alpha * x with optional causal mask",
    .ndims = 2,
    .dim_names = pf_softmax_dims,
    /* the shape is bounded by memory (pf_case_check: PF_BYTES_PER_OUTPUT a judged element) */
    .dim_max = {(size_t)1 << 24, (size_t)1 << 24},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 30,
    .nparams = 3,
    .params = pf_softmax_params,
    .ninputs = 1,
    .input_names = pf_softmax_inputs,
    .input_count = pf_softmax_input_count,
    .output_count = pf_softmax_count,
    .batch_dim0 = 1,
    .oracle = pf_softmax_fwd_mpfr,
    .input_dims = pf_softmax_input_dims,
    .hazards = pf_softmax_hazards,
    .cost = pf_softmax_cost,
    .fuzz_decode = pf_decode_softmax_fuzzer,
    .sweep = &pf_softmax_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:cols"},
};

static int pf_softmax_algo(const pf_case *c) { return pf_case_algo(c); }

pf_status pf_softmax_fwd_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  double *tmp = malloc(cols * sizeof(double));
  if (!tmp) return pf_error(PF_ERR_NOMEM, "softmax: cannot allocate a row of %zu", cols);
  const int algo = pf_softmax_algo(c);
  const int faults = (strcmp(c->fault, "softmax-no-max") == 0 ? PF_SOFTMAX_F_NO_MAX : 0) |
                     (strcmp(c->fault, "softmax-round-toward-zero") == 0 ? PF_SOFTMAX_F_ROUND_TOWARD_ZERO : 0);
  const double alpha_acc = pf_round_fe(c->accum, c->params[P_ALPHA], fe);
  const int mask = (int)c->params[P_MASK];
  const double maskval = pf_softmax_mask_value((int)c->params[P_MASKVAL], c->dtype);
  for (size_t i = 0; i < rows; i++)
    pf_softmax_row(algo, faults, c->accum, c->dtype, in[0].data + i * cols, i, rows, cols, alpha_acc, mask,
                   maskval, out + i * cols, tmp, fe);
  free(tmp);
  return PF_OK;
}

/* ---- contracts ---------------------------------------------------------------------------
 * Rigorous bounds, derived in docs/kernels/softmax.md. Notation: u the unit roundoff of the
 * accumulation dtype, s its smallest subnormal, n the row length, X = max |alpha x| over the
 * row (and |sentinel| where masked with a finite one), expf within 2 ulps of binary32. */

#define PF_EXPF_REL 0x1p-22 /* 2 ulps of binary32, relative */

/* (1 + d)^k, rounded up a little: the factor k roundings of relative size d can make. */
static double pf_pow1p(double d, double k) { return exp(k * log1p(d)) * (1 + 0x1p-40); }

/* The bound of row i (every element of a row shares it). */
pf_bound pf_softmax_bound_row(int algo, pf_dtype acc, pf_dtype out_t, double alpha, const double *x, size_t i,
                              size_t rows, size_t cols, int mask, double maskval) {
  const double u = pf_unit_roundoff(acc), sig = pf_min_subnormal(acc);
  /* exp: expf's own error, then the rounding to acc; below the normal range, absolute error */
  const double ue = acc == PF_FP32 ? 0 : u;
  const double eps_e = (1 + PF_EXPF_REL) * (1 + ue) - 1;
  const double abs_e = 2 * 0x1p-149 + sig;
  const double ud = acc == out_t ? 0 : u; /* the division's rounding, unless it is the output's */
  /* a row the causal mask hides whole: 0 by definition under -inf; under a finite sentinel its
   * scores are one rounded value, their differences exactly 0: the bound of a row of zeros
   * (naive exponentiates the sentinel itself: the general bound) */
  const int hidden = pf_softmax_hidden(mask, i, rows, cols);
  if (hidden && maskval == -INFINITY) return (pf_bound){0, 0};
  const int equal = hidden && algo != PF_SOFTMAX_NAIVE;

  /* X: largest |score|; vmax: largest score; n: terms; R: running-max increases the
   * online variant may see (counted with the scores' own rounding as slack). One pass: the
   * unmasked scores' largest magnitude and count, the finite sentinels' count, the top score. */
  double X = 0, vmax = -INFINITY, n = 0, R = 0, top = -INFINITY, sentinels = 0;
  for (size_t j = 0; j < cols; j++) {
    const int masked = !equal && pf_softmax_masked(mask, i, j, rows, cols);
    const double v = equal ? 0 : masked ? maskval : alpha * x[j];
    if (!isfinite(v)) continue; /* -inf contributes an exact 0; NaN/+inf: undefined row */
    if (v > top) top = v;
    if (masked) {
      sentinels += 1;
      continue;
    }
    n += 1;
    if (fabs(v) > X) X = fabs(v);
  }
  /* A finite sentinel (-10000, lowest) far below the row's top score: its term is 0 as computed
   * (exp of anything near maskval - top underflows in acc) and below sig/2 exactly, so it stays
   * out of X (its magnitude would make tau, and the bound, useless) and of n; what it adds to
   * the exact sum (>= 1 shifted) is at most delta, relative. A sentinel near the top counts. */
  const int drop = sentinels > 0 && isfinite(top) &&
                   maskval - top + 4 * u * (fabs(maskval) + fabs(top)) + 1 < log(sig / 2) - 1;
  const double delta = drop ? sentinels * exp(maskval - top) : 0;
  if (sentinels > 0 && !drop) {
    n += sentinels;
    if (fabs(maskval) > X) X = fabs(maskval);
  }
  /* |t - v| <= tau: the scale and the product each rounded once (or the sentinel once) */
  const double tau = (2 * u + u * u) * X + sig / 2;
  const double X2 = 2 * X + 2 * tau;           /* bound on |t_a - t_b| */
  const double er = u * X2;                    /* error of one rounded difference */
  for (size_t j = 0; j < cols; j++) {
    const int masked = !equal && pf_softmax_masked(mask, i, j, rows, cols);
    const double v = equal ? 0 : masked ? maskval : alpha * x[j];
    if (!isfinite(v) || (masked && drop)) continue;
    if (vmax != -INFINITY && v > vmax - 2 * tau) R += 1;
    if (v > vmax) vmax = v;
  }
  double rel = INFINITY, abs = INFINITY;
  if (isfinite(X) && n > 0) {
    const double adds_hi = pf_pow1p(u, n - 1), adds_lo = 1 / pf_pow1p(u, n - 1) * (1 - 0x1p-40);
    double num_hi, num_lo, G_hi, G_lo, abs_num, abs_den;
    if (algo == PF_SOFTMAX_ONLINE) {
      const double step_hi = exp(er) * (1 + eps_e) * (1 + u), step_lo = exp(-er) * (1 - eps_e) * (1 - u);
      num_hi = exp(2 * tau + er) * (1 + eps_e);
      num_lo = exp(-2 * tau - er) * (1 - eps_e);
      G_hi = num_hi * pow(step_hi, R) * adds_hi;
      G_lo = num_lo * pow(step_lo, R) * adds_lo;
      abs_num = abs_e;
      abs_den = (n * abs_e + R * (n * abs_e + sig)) * G_hi;
    } else {
      /* safe: exponents within eta of the exact shifted ones, and the exact sum is >= 1.
       * naive: exponents within tau, the exact sum >= e^vmax: absolute terms scale by e^-vmax */
      const double eta = algo == PF_SOFTMAX_SAFE ? 2 * tau + er : tau;
      const double a = algo == PF_SOFTMAX_SAFE ? abs_e : abs_e * exp(-vmax);
      num_hi = exp(eta) * (1 + eps_e);
      num_lo = exp(-eta) * (1 - eps_e);
      G_hi = num_hi * adds_hi;
      G_lo = num_lo * adds_lo;
      abs_num = a;
      abs_den = n * a * adds_hi;
    }
    /* the dropped sentinels' exact terms: the exact sum is larger by a factor up to 1 + delta */
    G_hi *= 1 + delta;
    const double den_lo = G_lo - abs_den, den_hi = G_hi + abs_den;
    if (den_lo > 0 && isfinite(den_hi)) {
      rel = fmax(num_hi * (1 + ud) / den_lo - 1, 1 - num_lo * (1 - ud) / den_hi);
      abs = abs_num * (1 + ud) / den_lo + sig / 2;
      /* slack for the binary64 evaluation of the bound itself */
      rel = rel * 1.0001 + 0x1p-60;
      abs = abs * 1.0001;
    }
  }
  if (!(rel >= 0) || !(abs >= 0) || !isfinite(rel) || !isfinite(abs)) rel = abs = INFINITY;
  return (pf_bound){rel, abs};
}

static pf_bound pf_softmax_row_bound(const pf_case *c, const pf_tensor *in, size_t i) {
  const size_t cols = c->shape[1];
  return pf_softmax_bound_row(pf_softmax_algo(c), c->accum, c->dtype, c->params[P_ALPHA], in[0].data + i * cols, i,
                              c->shape[0], cols, (int)c->params[P_MASK],
                              pf_softmax_mask_value((int)c->params[P_MASKVAL], c->dtype));
}

void pf_softmax_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  for (size_t i = 0; i < rows; i++) {
    const pf_bound b = pf_softmax_row_bound(c, in, i);
    for (size_t j = 0; j < cols; j++) out[i * cols + j] = b;
  }
}

/* Domain: every score alpha x (and the sentinel) is finite in the accumulation dtype, and
 * the row sum of terms <= 1 cannot overflow it (n <= max finite / 2). The naive variant
 * exponentiates the scores themselves: it needs each row's largest score M to satisfy
 * ln(min normal) < M < ln(max finite / n), so that neither the largest term nor the sum
 * leaves the accumulation dtype's normal range. */
int pf_softmax_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const pf_dtype acc = c->accum;
  const double alpha = c->params[P_ALPHA], big = pf_max_finite(acc);
  const int mask = (int)c->params[P_MASK];
  const double maskval = pf_softmax_mask_value((int)c->params[P_MASKVAL], c->dtype);
  if ((double)cols > big / 2) {
    snprintf(why, len, "row length %zu: the sum may exceed %s's range", cols, pf_dtype_name(acc));
    return 0;
  }
  const double lo = log(pf_min_normal(acc)) + 0.01, hi = log(big / (double)cols) - 0.01;
  for (size_t i = 0; i < rows; i++) {
    double M = -INFINITY;
    int defined = 1;
    for (size_t j = 0; j < cols; j++) {
      const int masked = pf_softmax_masked(mask, i, j, rows, cols);
      const double v = masked ? maskval : alpha * in[0].data[i * cols + j];
      if (isnan(v) || v == INFINITY) defined = 0; /* an undefined row: the input's, verdict range */
      if (!masked && isfinite(v) && fabs(v) > big) {
        snprintf(why, len, "row %zu: alpha*x = %g is beyond %s's range", i, v, pf_dtype_name(acc));
        return 0;
      }
      if (isfinite(v) && v > M) M = v;
    }
    if (defined && isfinite(M) && pf_softmax_algo(c) == PF_SOFTMAX_NAIVE && (M <= lo || M >= hi)) {
      snprintf(why, len, "row %zu: naive needs the largest score in (%.4g, %.4g) for %s, got %.6g", i, lo, hi,
               pf_dtype_name(acc), M);
      return 0;
    }
    if (defined && isfinite(M) && !isfinite(pf_softmax_row_bound(c, in, i).rel)) {
      snprintf(why, len, "row %zu: no error bound holds for %zu terms accumulated in %s", i, cols, pf_dtype_name(acc));
      return 0;
    }
  }
  return 1;
}

/* The case-to-launch translation for softmax.cu: the same parameters the CPU loop uses
 * (compiled everywhere, so tests check it without a device). */
pf_softmax_launch pf_softmax_launch_of(const pf_case *c, unsigned *fe) {
  pf_softmax_launch L;
  L.rows = c->shape[0];
  L.cols = c->shape[1];
  L.algo = pf_softmax_algo(c);
  L.no_max = strcmp(c->fault, "softmax-no-max") == 0;
  L.mask = (int)c->params[P_MASK];
  L.acc = c->accum;
  L.out_t = c->dtype;
  L.alpha_acc = pf_round_fe(c->accum, c->params[P_ALPHA], fe);
  L.maskval = pf_softmax_mask_value((int)c->params[P_MASKVAL], c->dtype);
  return L;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
/* the CUDA kernel, in the module (core/cuda_module.h) */
pf_status pf_softmax_fwd_cuda(const pf_softmax_launch *L, const double *x, double *y, unsigned *fe) {
  __typeof__(&pf_softmax_fwd_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_softmax_fwd_cuda", (void **)&fn);
  return st ? st : fn(L, x, y, fe);
}
static pf_status pf_softmax_fwd_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_softmax_launch L = pf_softmax_launch_of(c, fe);
  return pf_softmax_fwd_cuda(&L, in[0].data, out, fe);
}
#define PF_SOFTMAX_RUN_CUDA pf_softmax_fwd_cuda_case
#else
#define PF_SOFTMAX_RUN_CUDA NULL
#endif

#define PF_SOFTMAX_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
#define PF_SOFTMAX_ACCUMS (PF_DT(PF_FP32) | PF_ACCUM_STORAGE)
static const char *const pf_softmax_faults[] = {"softmax-no-max", "softmax-round-toward-zero", NULL};
static const char *const pf_naive_faults[] = {"softmax-round-toward-zero", NULL};

static const pf_kernel pf_softmax_naive = {
    PF_KERNEL_ABI, &pf_softmax_op, "naive", "exp(t) / sum exp(t), no max subtracted",
    PF_SOFTMAX_DTYPES, PF_SOFTMAX_ACCUMS, pf_naive_faults,
    "rel = e^tau (1+eps_e)(1+u_d) / (e^-tau (1-eps_e)(1-u)^(n-1) - n a (1+u)^(n-1)) - 1, "
    "a = (2^-148 + s) e^-max(t), abs = a (1+u_d) / (...) + s/2; domain: ln(min normal) < max(t) < ln(max/n)",
    pf_softmax_fwd_cpu, pf_softmax_bound, pf_softmax_in_domain, NULL, PF_SOFTMAX_RUN_CUDA, .algo = PF_SOFTMAX_NAIVE};
static const pf_kernel pf_softmax_safe = {
    PF_KERNEL_ABI, &pf_softmax_op, "safe", "two passes: row max, then exp(t - max) / sum",
    PF_SOFTMAX_DTYPES, PF_SOFTMAX_ACCUMS, pf_softmax_faults,
    "as naive with tau -> eta = 2 tau + 2u(X + tau) and a = 2^-148 + s (the shifted sum is >= 1); "
    "domain: |alpha x| <= max finite of the accumulation dtype",
    pf_softmax_fwd_cpu, pf_softmax_bound, pf_softmax_in_domain, NULL, PF_SOFTMAX_RUN_CUDA, .algo = PF_SOFTMAX_SAFE};
static const pf_kernel pf_softmax_online = {
    PF_KERNEL_ABI, &pf_softmax_op, "online", "one pass: running max, running sum rescaled when the max grows",
    PF_SOFTMAX_DTYPES, PF_SOFTMAX_ACCUMS, pf_softmax_faults,
    "rel = e^eta (1+eps_e)(1+u_d) / (G_lo - A) - 1, G_lo = e^-eta (1-eps_e) (e^-r (1-eps_e)(1-u))^R (1-u)^(n-1), "
    "r = 2u(X + tau), R = running-max increases, A = (n + R(n+1)) (2^-148 + s) G_hi; domain as safe",
    pf_softmax_fwd_cpu, pf_softmax_bound, pf_softmax_in_domain, NULL, PF_SOFTMAX_RUN_CUDA, .algo = PF_SOFTMAX_ONLINE};

const pf_kernel *const pf_softmax_kernels[] = {&pf_softmax_naive, &pf_softmax_safe, &pf_softmax_online, NULL};
