/* Cross-entropy's row arithmetic, shared by the C emulation (cross_entropy_cpu.c) and a CUDA
 * kernel: every operation rounded to the accumulation dtype (dtype_math.h), exp and log as
 * binary32 expf and logf rounded to it.
 *
 * One row: logits x (values of the storage dtype), target class t, label smoothing eps, z-loss
 * coefficient z, C = the row length:
 *   lse  = log sum_j exp(x_j)
 *   loss = lse - (1 - eps) x_t - (eps / C) sum_j x_j + z lse^2
 *   dx_j = g (p_j (1 + 2 z lse) - eps / C - (1 - eps) [j = t]),   p = softmax(x),
 * g the gradient reaching the row's loss (1 / rows counted for the mean, 1 for sum and none). */
#ifndef PF_CROSS_ENTROPY_MATH_H
#define PF_CROSS_ENTROPY_MATH_H

#include "core/dtype_math.h"
#include "kernels/softmax/softmax_math.h"
#include "kernels/cross_entropy/cross_entropy_spec.h"


/* Fault switches:
 *   ce-no-max                 the log-sum-exp without the max subtracted: exp(x) itself overflows
 *   ce-chunk-no-rescale       chunked: the running sum is not rescaled when a chunk raises the max
 *   ce-mean-counts-ignored    the mean divides by every row, ignored ones included
 *   ce-grad-no-zloss          the gradient forgets the z-loss term 2 z lse p_j */
/* ce-grad-p-in-storage: fused's p at the target rounded to the storage dtype before the
 * gradient's p - 1 (Liger-Kernel's fused cross-entropy until its PR 1329): harmless while p is
 * small, but as p -> 1 a bf16 p is 1 and the target's gradient is lost */
enum { PF_CE_F_NO_MAX = 1, PF_CE_F_CHUNK_NO_RESCALE = 2, PF_CE_F_MEAN_COUNTS_IGNORED = 4, PF_CE_F_GRAD_NO_ZLOSS = 8,
       PF_CE_F_GRAD_P_STORAGE = 16, PF_CE_F_MICROBATCH_MEAN = 32 };
/* Micro-batch k of m over the rows (contiguous, sizes within one): rows [first, next first). */
PF_HD size_t pf_ce_mb_first(size_t rows, size_t m, size_t k) { return k * rows / m; }

/* log in acc: binary32 logf, rounded to acc (z >= 1 here: a sum with a term exp(0) = 1) */
PF_HD double pf_ce_log(pf_dtype acc, double z, unsigned *fe) { return pf_round_fe(acc, (double)logf((float)z), fe); }

/* The row's shift m and sum Z = sum_j exp(x_j - m), in acc. fused and logsoftmax: m the row's
 * largest logit, then the sum in column order. chunked: the columns in chunks of `chunk`, a
 * running max M and sum, Z <- Z exp(M - M') + sum_chunk exp(x_j - M') when a chunk raises M to
 * M' (the online log-sum-exp of fused cross-entropy kernels). */
PF_HD void pf_ce_lse_parts(int algo, int faults, pf_dtype acc, const double *x, size_t cols, size_t chunk, double *m_out,
                           double *z_out, unsigned *fe) {
  const int no_max = faults & PF_CE_F_NO_MAX;
  if (algo != PF_CE_CHUNKED) chunk = cols;
  double M = -INFINITY, Z = 0;
  for (size_t c0 = 0; c0 < cols; c0 += chunk) {
    const size_t c1 = cols - c0 < chunk ? cols : c0 + chunk;
    double mn = M;
    for (size_t j = c0; j < c1; j++) mn = x[j] > mn ? x[j] : mn;
    if (no_max) mn = 0;
    double zc = 0;
    for (size_t j = c0; j < c1; j++) zc = pf_add(acc, zc, pf_softmax_exp(acc, pf_sub(acc, x[j], mn, fe), fe), fe);
    if (c0 == 0) Z = zc;
    else {
      const double r = M == mn || (faults & PF_CE_F_CHUNK_NO_RESCALE) ? 1.0
                                                                    : pf_softmax_exp(acc, pf_sub(acc, M, mn, fe), fe);
      Z = pf_add(acc, pf_mul(acc, Z, r, fe), zc, fe);
    }
    M = mn;
  }
  *m_out = M;
  *z_out = Z;
}

/* fused and chunked, one row that is not ignored: the loss (in acc) and the gradient (dx, in
 * the storage dtype out_t); g the gradient reaching the loss, eps and z values of acc. */
PF_HD double pf_ce_fused_row(int algo, int faults, pf_dtype acc, pf_dtype out_t, const double *x, size_t cols,
                             size_t t, size_t chunk, double eps, double z, double g, double *dx, unsigned *fe) {
  double m, Z;
  pf_ce_lse_parts(algo, faults, acc, x, cols, chunk, &m, &Z, fe);
  const double lse = pf_add(acc, m, pf_ce_log(acc, Z, fe), fe);
  const double c1 = pf_sub(acc, 1.0, eps, fe), ceps = pf_div(acc, eps, (double)cols, fe);
  double loss = pf_sub(acc, lse, pf_mul(acc, c1, x[t], fe), fe);
  if (eps != 0) {
    double sx = 0;
    for (size_t j = 0; j < cols; j++) sx = pf_add(acc, sx, x[j], fe);
    loss = pf_sub(acc, loss, pf_mul(acc, ceps, sx, fe), fe);
  }
  if (z != 0) loss = pf_add(acc, loss, pf_mul(acc, z, pf_mul(acc, lse, lse, fe), fe), fe);
  /* the gradient's factor on p: 1 + 2 z lse (2 z is exact) */
  const double zf = z != 0 && !(faults & PF_CE_F_GRAD_NO_ZLOSS) ? pf_add(acc, 1.0, pf_mul(acc, 2 * z, lse, fe), fe) : 1.0;
  for (size_t j = 0; j < cols; j++) {
    double p = pf_div(acc, pf_softmax_exp(acc, pf_sub(acc, x[j], m, fe), fe), Z, fe);
    if ((faults & PF_CE_F_GRAD_P_STORAGE) && j == t) p = pf_round(out_t, p);
    double q = pf_mul(acc, p, zf, fe);
    if (eps != 0) q = pf_sub(acc, q, ceps, fe);
    if (j == t) q = pf_sub(acc, q, c1, fe);
    dx[j] = pf_round_fe(out_t, pf_mul(acc, g, q, fe), fe);
  }
  return loss;
}

/* logsoftmax (PyTorch's log_softmax then nll_loss), one row that is not ignored: the log-
 * probabilities lp_j = (x_j - m) - log Z stored in out_t (lp: a row of scratch); returns the
 * row's nll -lp_t, and in *smooth the smoothing term -sum_j lp_j (summed in acc, stored in out_t).
 * The backward from the stored lp, given the gradient of the log-probabilities Gt (at the
 * target) and Go (elsewhere), values of out_t: dx_j = G_j - exp(lp_j) sum_k G_k (log_softmax's
 * backward), in acc, stored in out_t. cpu: ATen's CPU kernel, which holds the sum and its log in
 * the storage dtype (L = fl_st(log fl_st(Z))); the CUDA kernel keeps both in acc. */
PF_HD double pf_ce_logsoftmax_row(int cpu, int faults, pf_dtype acc, pf_dtype out_t, const double *x, size_t cols,
                                  size_t t, double Gt, double Go, double *smooth, double *lp, double *dx,
                                  unsigned *fe) {
  double m, Z;
  pf_ce_lse_parts(PF_CE_LOGSOFTMAX, faults, acc, x, cols, cols, &m, &Z, fe);
  const double L = cpu ? pf_round_fe(out_t, pf_ce_log(acc, pf_round_fe(out_t, Z, fe), fe), fe) : pf_ce_log(acc, Z, fe);
  double slp = 0, sg = 0;
  for (size_t j = 0; j < cols; j++) {
    lp[j] = pf_round_fe(out_t, pf_sub(acc, pf_sub(acc, x[j], m, fe), L, fe), fe);
    slp = pf_add(acc, slp, lp[j], fe);
    sg = pf_add(acc, sg, j == t ? Gt : Go, fe);
  }
  *smooth = -pf_round_fe(out_t, slp, fe);
  for (size_t j = 0; j < cols; j++)
    dx[j] = pf_round_fe(out_t, pf_sub(acc, j == t ? Gt : Go, pf_mul(acc, pf_softmax_exp(acc, lp[j], fe), sg, fe), fe), fe);
  return -lp[t];
}

/* PyTorch's label smoothing, (1 - eps) nll + smooth (eps / C), from the reduced (or per-row) nll
 * and smoothing terms: each product and the sum in fp32 (the ops' opmath), each stored in out_t;
 * c1f = fl32(1 - eps), cef = fl32(eps / C) (the Python scalars as the kernels receive them). */
PF_HD double pf_ce_torch_smoothing(pf_dtype out_t, double c1f, double cef, double nll, double smooth, unsigned *fe) {
  const double a = pf_round_fe(out_t, pf_mul(PF_FP32, c1f, nll, fe), fe);
  const double b = pf_round_fe(out_t, pf_mul(PF_FP32, smooth, cef, fe), fe);
  return pf_round_fe(out_t, pf_add(PF_FP32, a, b, fe), fe);
}

/* ATen's CPU nll_loss reduction: the losses added in the storage dtype in a cascade of 8 partial
 * sums (LossNLL.cpp, nll_loss_out_frame): the loss of row b (ignored rows are skipped but
 * counted in b) into level 0, then every level j whose bits of b are 0 (b's digits in base
 * 2^power, power = max(4, ceil(log2 rows) / 8)) passes its sum up to level j + 1; at the end the
 * levels added in order. */
typedef struct {
  double level[8];
} pf_ce_cascade;
PF_HD int pf_ce_cascade_power(size_t rows) {
  int lg = 0;
  for (size_t r = rows > 1 ? rows - 1 : 0; r; r >>= 1) lg++;
  return lg / 8 > 4 ? lg / 8 : 4;
}
PF_HD void pf_ce_cascade_add(pf_ce_cascade *c, pf_dtype st, int power, size_t b, double loss, unsigned *fe) {
  c->level[0] = pf_add(st, c->level[0], loss, fe);
  for (int j = 0; j + 1 < 8; j++) {
    if ((b & ((((size_t)1 << power) - 1) << (j * power))) != 0) break;
    c->level[j + 1] = pf_add(st, c->level[j + 1], c->level[j], fe);
    c->level[j] = 0;
  }
}
PF_HD double pf_ce_cascade_total(const pf_ce_cascade *c, pf_dtype st, unsigned *fe) {
  double s = 0;
  for (int j = 0; j < 8; j++) s = pf_add(st, s, c->level[j], fe);
  return s;
}

#endif
