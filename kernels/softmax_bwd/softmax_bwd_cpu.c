/* Softmax backward: the gradient of the row softmax with respect to its input,
 *
 *   dx_i = s_i (dy_i - sum_j dy_j s_j),   s = softmax(x) of the row,
 *
 * as training computes it, the forward's probabilities y standing in for s. Variants:
 *   stored     the forward (safe softmax in the accumulation dtype) stored y in the storage dtype
 *              and the backward reads it back (PyTorch's softmax and _softmax_backward_data);
 *   recompute  the backward recomputes y from x in the accumulation dtype and never stores it
 *              (fused kernels; flash attention recomputes its probabilities so).
 * The backward runs in the accumulation dtype (softmax_bwd_math.h) and writes dx in the storage
 * dtype. The oracle is the exact gradient at x (oracles/softmax_bwd_mpfr.c), the same for both:
 * what storing y costs is part of the stored variant's contract. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/case.h"
#include "core/kernel.h"
#include "kernels/softmax/softmax.h"
#include "kernels/softmax_bwd/softmax_bwd_math.h"

#include "oracles/softmax_bwd_mpfr.h"

static const char *const pf_softmax_bwd_dims[] = {"rows", "cols"};
static const char *const pf_softmax_bwd_inputs[] = {"x", "dy"};

static size_t pf_softmax_bwd_count(const pf_case *c) { return c->shape[0] * c->shape[1]; }
static size_t pf_softmax_bwd_input_count(const pf_case *c, int i) { return pf_softmax_bwd_count(c); }

static int pf_softmax_bwd_input_dims(const pf_case *c, int i, int *d) {
  d[0] = 0, d[1] = 1; /* x[row][col], dy[row][col] */
  return 2;
}

/* One stage, dx, laid out as x. Its rows cancel (to exactly 0 where dy is constant), so an error
 * relative to a row says nothing there; the imprecise hazard judges dx against the whole
 * tensor's norm (a cancelled row's rounding noise counts only when it is the gradient). */
static int pf_softmax_bwd_stages(const pf_case *c, pf_stage *st) {
  st[0] = (pf_stage){"dx", 0, c->shape[0] * c->shape[1], 0, 0, 2, {0, 1}, PF_MEASURE_TENSOR};
  return 1;
}

static int pf_softmax_bwd_faults(const pf_case *c) {
  return (strcmp(c->fault, "softmax-bwd-no-sum") == 0 ? PF_SOFTMAX_BWD_F_NO_SUM : 0) |
         (strcmp(c->fault, "softmax-bwd-sum-in-storage") == 0 ? PF_SOFTMAX_BWD_F_SUM_IN_STORAGE : 0);
}

/* The dtype the variant holds y in: the storage dtype (stored) or the accumulation dtype. */
static pf_dtype pf_softmax_bwd_ydtype(const pf_case *c) {
  return pf_case_algo(c) == PF_SOFTMAX_BWD_STORED ? c->dtype : c->accum;
}

pf_status pf_softmax_bwd_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  double *y = malloc(2 * (cols ? cols : 1) * sizeof(double)), *tmp = y + cols;
  if (!y) return pf_error(PF_ERR_NOMEM, "softmax_bwd: cannot allocate a row of %zu", cols);
  const int faults = pf_softmax_bwd_faults(c);
  for (size_t i = 0; i < rows; i++) {
    /* the forward's probabilities: safe softmax in acc, rounded to the dtype y is held in */
    pf_softmax_row(PF_SOFTMAX_SAFE, 0, c->accum, pf_softmax_bwd_ydtype(c), in[0].data + i * cols, i, rows, cols, 1.0,
                   PF_MASK_NONE, -INFINITY, y, tmp, fe);
    pf_softmax_bwd_row(faults, c->accum, c->dtype, y, in[1].data + i * cols, cols, out + i * cols, fe);
  }
  free(y);
  return PF_OK;
}

/* ---- the contract ---------------------------------------------------------------------------
 * Notation: u, sig the unit roundoff and smallest subnormal of the accumulation dtype; n the row
 * length; s the exact softmax of the row, y what the variant holds for it, with
 * |y_j - s_j| <= rho s_j + alpha (the forward softmax's bound, softmax.h, then the rounding to
 * the dtype y is held in: rho = rel + u_y (1 + rel), alpha = abs (1 + u_y) + sig_y / 2).
 * With A = sum |dy_j| s_j, B = sum |dy_j|, C = (1 + rho) A + alpha B (>= sum |dy_j y_j|):
 *   |S^ - S| <= Delta = rho A + alpha B + gamma_n C + n sig (1 + gamma_n)
 *     (n products and n - 1 additions, Higham's gamma_n = n u / (1 - n u), each rounding
 *     adding at most sig / 2 in the subnormal range);
 *   |fl(dy_i - S^) - d_i| <= D_i = Delta + u (|d_i| + Delta) + sig / 2,  d_i = dy_i - S;
 *   |y_i fl(dy_i - S^) - s_i d_i| <= (rho s_i + alpha)(|d_i| + D_i) + s_i D_i,
 *     and, when the storage dtype is not the accumulation dtype, the product's own rounding
 *     u ((1 + rho) s_i + alpha)(|d_i| + D_i) + sig / 2.
 * That is the bound of element i (absolute: pf_bound.abs; rel 0), before the rounding to the
 * storage dtype. s, A, B and d are evaluated in binary64 and the result inflated for it. */
static void pf_softmax_bwd_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  const pf_dtype acc = c->accum, yt = pf_softmax_bwd_ydtype(c);
  const double u = pf_unit_roundoff(acc), sig = pf_min_subnormal(acc);
  const double uy = pf_unit_roundoff(yt), sigy = pf_min_subnormal(yt);
  const double n = (double)cols, gam = n * u < 0.5 ? n * u / (1 - n * u) : INFINITY;
  const double slack = (n + 64) * 0x1p-50; /* the binary64 evaluation of s, A, d */
  const int product_rounded = c->dtype != acc;
  for (size_t i = 0; i < rows; i++) {
    const double *x = in[0].data + i * cols, *dy = in[1].data + i * cols;
    pf_bound *b = out + i * cols;
    /* the forward's bound on the quotient (out_t = the dtype y is held in: see softmax.h) */
    const pf_bound f = pf_softmax_bound_row(PF_SOFTMAX_SAFE, acc, yt, 1.0, x, i, rows, cols, PF_MASK_NONE, -INFINITY);
    const double rho = f.rel + uy * (1 + f.rel), alpha = f.abs * (1 + uy) + sigy / 2;
    double m = -INFINITY, z = 0, A = 0, B = 0, S = 0;
    for (size_t j = 0; j < cols; j++) m = x[j] > m ? x[j] : m;
    for (size_t j = 0; j < cols; j++) z += exp(x[j] - m);
    for (size_t j = 0; j < cols; j++) {
      const double sj = exp(x[j] - m) / z;
      A += fabs(dy[j]) * sj, B += fabs(dy[j]), S += dy[j] * sj;
    }
    A *= 1 + slack;
    const double C = (1 + rho) * A + alpha * B;
    const double Delta = rho * A + alpha * B + gam * C + n * sig * (1 + gam);
    for (size_t j = 0; j < cols; j++) {
      /* s_j again (no row buffer that could fail to be allocated), and |d_j|, both rounded up */
      const double si = exp(x[j] - m) / z * (1 + slack), d = fabs(dy[j] - S) + slack * (fabs(dy[j]) + A);
      const double D = Delta + u * (d + Delta) + sig / 2;
      double e = (rho * si + alpha) * (d + D) + si * D;
      if (product_rounded) e += u * ((1 + rho) * si + alpha) * (d + D) + sig / 2;
      e *= 1 + 0x1p-40;
      b[j] = isfinite(e) ? (pf_bound){0, e} : (pf_bound){INFINITY, INFINITY}; /* rho, alpha, Delta too */
    }
  }
}

/* Domain: finite inputs, and |dy| at most a quarter of the largest finite of the storage and
 * accumulation dtypes (dy - S, with |S| up to max |dy|, then stays finite, and so does dx). */
static int pf_softmax_bwd_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t n = c->shape[0] * c->shape[1], cols = c->shape[1];
  const pf_dtype small = pf_max_finite(c->dtype) < pf_max_finite(c->accum) ? c->dtype : c->accum;
  const double big = pf_max_finite(small) / 4;
  if ((double)cols * pf_unit_roundoff(c->accum) >= 0.25) {
    snprintf(why, len, "row length %zu: no error bound holds for that many terms accumulated in %s", cols,
             pf_dtype_name(c->accum));
    return 0;
  }
  for (size_t k = 0; k < n; k++) {
    if (!isfinite(in[0].data[k]) || !isfinite(in[1].data[k])) {
      snprintf(why, len, "row %zu: a non-finite input (the gradient is undefined there)", k / cols);
      return 0;
    }
    if (fabs(in[1].data[k]) > big) {
      snprintf(why, len, "row %zu: |dy| = %g is beyond a quarter of %s's largest finite", k / cols,
               fabs(in[1].data[k]), pf_dtype_name(small));
      return 0;
    }
  }
  return 1;
}

/* rows x cols elements: the forward and the backward about 50 ns each, the oracle's fast path
 * 0.11 us (measured: 2 cases of 8x65536 bf16, --threads 1; MPFR alone 3.9 us) */
static void pf_softmax_bwd_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 50e-9 * n;
  *oracle_s = 0.11e-6 * n;
}

/* the precision report's sweep: the scan along the incoming gradient's scale, and the row length
 * from which dx is imprecise (with storage accumulation; in fp32 none up to 2048) */
static const pf_op_sweep pf_softmax_bwd_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x64", .along = "scale:dy", .lo = 0x1p-20, .hi = 0x1p12, .fail = "finding", .cases_div = 1,
    .searches = {{"imprecise gradient", "1x2", "dim:cols", "imprecise", 2, 2048, {NULL}}},
    .explanation =
        "dx = y (dy - sum dy y) is carried in the accumulation dtype and rounded once to the storage dtype. The "
        "stored variant reads y back from the storage dtype, so its error follows the storage dtype's unit roundoff "
        "(bf16's 2^-9) on every element, and where a probability is below the storage dtype's subnormals it is read "
        "as 0 and its gradient lost; the recomputing variant holds y in the accumulation dtype. Where dy_i is close to "
        "the row's weighted mean the difference cancels: the error there is absolute, not relative (the contract). "
        "Accumulated in fp16 or bf16, the sum S stops absorbing terms as the row grows: dx becomes imprecise against "
        "the tensor's norm from about 1000 columns in fp16 and 300 in bf16.",
};

int pf_decode_softmax_bwd_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* softmax_bwd_fuzzer.c */
const pf_op pf_softmax_bwd_op = {
    .name = "softmax_bwd",
    .summary = "the gradient of the row softmax: dx = y (dy - sum(dy y))",
    .ndims = 2,
    .dim_names = pf_softmax_bwd_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 24},
    .dim_default = {4, 256},
    .elems_max = (size_t)1 << 30,
    .ninputs = 2,
    .input_names = pf_softmax_bwd_inputs,
    .input_count = pf_softmax_bwd_input_count,
    .output_count = pf_softmax_bwd_count,
    .batch_dim0 = 1,
    .oracle = pf_softmax_bwd_mpfr,
    .stages = pf_softmax_bwd_stages,
    .input_dims = pf_softmax_bwd_input_dims,
    .cost = pf_softmax_bwd_cost,
    .fuzz_decode = pf_decode_softmax_bwd_fuzzer,
    .sweep = &pf_softmax_bwd_sweep,
};

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/softmax_bwd/softmax_bwd_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_softmax_bwd_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_softmax_bwd_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_softmax_bwd_cuda", (void **)&fn);
  if (st) return st;
  const pf_softmax_bwd_launch L = {c->shape[0], c->shape[1], pf_case_algo(c) == PF_SOFTMAX_BWD_STORED,
                                   pf_softmax_bwd_faults(c), c->dtype, c->accum};
  return fn(&L, in[0].data, in[1].data, out, fe);
}
#define PF_SOFTMAX_BWD_RUN_CUDA pf_softmax_bwd_cuda_case
#else
#define PF_SOFTMAX_BWD_RUN_CUDA NULL
#endif

#define PF_SOFTMAX_BWD_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
#define PF_SOFTMAX_BWD_ACCUMS (PF_DT(PF_FP32) | PF_ACCUM_STORAGE)
static const char *const pf_softmax_bwd_fault_names[] = {"softmax-bwd-no-sum", "softmax-bwd-sum-in-storage", NULL};

static const pf_kernel pf_softmax_bwd_stored = {
    PF_KERNEL_ABI, &pf_softmax_bwd_op, "stored",
    "the forward's y stored in the storage dtype, read back: dx = y (dy - sum dy y) in the accumulation dtype",
    PF_SOFTMAX_BWD_DTYPES, PF_SOFTMAX_BWD_ACCUMS, pf_softmax_bwd_fault_names,
    "|dx^_i - dx_i| <= (rho s_i + alpha)(|d_i| + D_i) + s_i D_i [+ u ((1+rho) s_i + alpha)(|d_i| + D_i) + sig/2], "
    "D_i = Delta (1+u) + u |d_i| + sig/2, Delta = rho A + alpha B + gamma_n C + n sig (1+gamma_n), rho and alpha the "
    "safe softmax's bound then y's rounding to the storage dtype; domain: finite inputs, |dy| <= max/4",
    pf_softmax_bwd_cpu, pf_softmax_bwd_bound, pf_softmax_bwd_in_domain, NULL, PF_SOFTMAX_BWD_RUN_CUDA,
    .algo = PF_SOFTMAX_BWD_STORED};
static const pf_kernel pf_softmax_bwd_recompute = {
    PF_KERNEL_ABI, &pf_softmax_bwd_op, "recompute",
    "y recomputed from x in the accumulation dtype, never stored: dx = y (dy - sum dy y)",
    PF_SOFTMAX_BWD_DTYPES, PF_SOFTMAX_BWD_ACCUMS, pf_softmax_bwd_fault_names,
    "as stored, with y held in the accumulation dtype (rho, alpha: the safe softmax's bound and the division's "
    "rounding); domain as stored",
    pf_softmax_bwd_cpu, pf_softmax_bwd_bound, pf_softmax_bwd_in_domain, NULL, PF_SOFTMAX_BWD_RUN_CUDA,
    .algo = PF_SOFTMAX_BWD_RECOMPUTE};

const pf_kernel *const pf_softmax_bwd_kernels[] = {&pf_softmax_bwd_stored, &pf_softmax_bwd_recompute, NULL};
