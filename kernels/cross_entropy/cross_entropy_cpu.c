/* Cross-entropy loss, forward and backward, over rows as long as a vocabulary: CPU emulation,
 * contract, variant table.
 *
 *   logsoftmax  PyTorch's F.cross_entropy: log_softmax (max subtracted, the sum of exp in the
 *               accumulation dtype) stored in the storage dtype, then nll_loss on the stored
 *               log-probabilities, label smoothing composed as cross_entropy_loss_label_smoothing
 *               does; backward: the log-probabilities' gradients as autograd makes them, then
 *               log_softmax's backward dx = G - exp(lp) sum G from the stored lp
 *               (aten/src/ATen/native/LossNLL.cpp, SoftMax.cpp, torch 2.15)
 *   logsoftmax-cpu  the same on ATen's CPU kernels: the row's sum and its log held in the
 *               storage dtype, nll_loss's mean or sum in its cascade in the storage dtype
 *   fused       one kernel per row in the accumulation dtype: log-sum-exp, loss, and the
 *               gradient written over the logits (the fused cross-entropy kernels of Megatron,
 *               flash-attn and Liger: no log-probabilities stored)
 *   chunked     fused with the log-sum-exp taken over chunks of `chunk` columns, a running max
 *               and a rescaled running sum (the online form those kernels use for long rows)
 * Inputs: logits [rows x cols] in the storage dtype, target [rows] (class indices, held in fp32;
 * a row whose target is ignore_index has loss 0 and gradient 0 and is not counted by the mean).
 * Outputs: the per-row losses, the reduced loss (mean or sum; absent for reduction none), the
 * gradient of the reduced loss (of the sum of the per-row losses for none) with respect to the
 * logits. The formulas: cross_entropy_math.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/case.h"
#include "core/errbound.h"
#include "kernels/cross_entropy/cross_entropy_math.h"
#include "core/kernel.h"

#include "oracles/cross_entropy_mpfr.h"

enum { P_EPS, P_Z, P_IGNORE, P_RED, P_CHUNK, P_MB };
static const char *const pf_ce_dims[] = {"rows", "cols"};
static const char *const pf_ce_inputs[] = {"logits", "target"};
static const char *const pf_ce_reductions[] = {"mean", "sum", "none", NULL};
static const pf_param_desc pf_ce_params[] = {
    {"label_smoothing", PF_PARAM_REAL, 0, 0, 1, NULL, "eps: the target is (1 - eps) one-hot + eps / cols uniform",
     PF_HELD(PF_FP32), "0,0.1"},
    {"z_loss", PF_PARAM_REAL, 0, 0, 1, NULL, "z: adds z lse^2 to each row's loss (fused and chunked)", PF_HELD(PF_FP32), "0,1e-4"},
    {"ignore_index", PF_PARAM_INT, -100, -16777216, 16777216, NULL, "a target equal to it: the row is ignored", 0, NULL},
    {"reduction", PF_PARAM_CHOICE, 0, 0, 2, pf_ce_reductions, "of the per-row losses", 0, "mean,sum,none"},
    {"chunk", PF_PARAM_INT, 4096, 1, 16777216, NULL, "columns per chunk of the running log-sum-exp (chunked only)", 0, "256,1024,4096"},
    {"microbatches", PF_PARAM_INT, 1, 1, 65536, NULL,
     "the rows form this many micro-batches of gradient accumulation (contiguous, sizes within one), each run "
     "alone; the mean divides each by the whole batch's count, the reduced loss adds their shares (fused, chunked)",
     0, "1,2,4"},
};

static int pf_ce_red(const pf_case *c) { return (int)c->params[P_RED]; }
static size_t pf_ce_nred(const pf_case *c) { return pf_ce_red(c) == PF_CE_NONE ? 0 : 1; }
static size_t pf_ce_input_count(const pf_case *c, int i) { return i == 0 ? c->shape[0] * c->shape[1] : c->shape[0]; }
static pf_dtype pf_ce_input_dtype(const pf_case *c, int i) { return i == 0 ? c->dtype : PF_FP32; }
static size_t pf_ce_output_count(const pf_case *c) { return c->shape[0] + pf_ce_nred(c) + c->shape[0] * c->shape[1]; }
/* the dtype the losses are held in: the storage dtype (PyTorch), the accumulation dtype (fused) */
static int pf_ce_is_ls(int algo) { return algo == PF_CE_LOGSOFTMAX || algo == PF_CE_LOGSOFTMAX_CPU; }
static pf_dtype pf_ce_loss_dtype(const pf_case *c) { return pf_ce_is_ls(pf_case_algo(c)) ? c->dtype : c->accum; }

static int pf_ce_input_dims(const pf_case *c, int i, int *d) {
  d[0] = 0, d[1] = 1; /* logits[row][col], target[row] */
  return i == 0 ? 2 : 1;
}

/* The losses are judged normwise over the rows (a loss near 0 computed as lse - x_t loses its
 * digits and nothing of training with them); the reduced loss alone; the gradient by row. */
static int pf_ce_stages(const pf_case *c, pf_stage *st) {
  const size_t rows = c->shape[0], nr = pf_ce_nred(c);
  const int lh = PF_HELD(pf_ce_loss_dtype(c));
  int n = 0;
  st[n++] = (pf_stage){"loss", 0, rows, 0, lh, 1, {0}, PF_MEASURE_TENSOR};
  if (nr) st[n++] = (pf_stage){"reduced", rows, 1, 0, lh, 0, {0}, PF_MEASURE_ELEMENT};
  st[n++] = (pf_stage){"dlogits", rows + nr, rows * c->shape[1], 0, 0, 2, {0, 1}, PF_MEASURE_ROW};
  return n;
}

static int pf_ce_faults(const pf_case *c) {
  static const char *const names[] = {"ce-no-max", "ce-chunk-no-rescale", "ce-mean-counts-ignored", "ce-grad-no-zloss",
                                      "ce-grad-p-in-storage", "ce-microbatch-mean"};
  for (int i = 0; i < 6; i++)
    if (strcmp(c->fault, names[i]) == 0) return 1 << i;
  return 0;
}

/* Row i's target: -1 when ignored. Targets are checked (pf_ce_check, the domain) to be class
 * indices or the ignore index. */
static long pf_ce_target(const pf_case *c, const pf_tensor *in, size_t i) {
  const double t = in[1].data[i];
  return t == c->params[P_IGNORE] ? -1 : (long)t;
}

static size_t pf_ce_counted(const pf_case *c, const pf_tensor *in, int faults) {
  size_t n = 0;
  for (size_t i = 0; i < c->shape[0]; i++) n += pf_ce_target(c, in, i) >= 0 || (faults & PF_CE_F_MEAN_COUNTS_IGNORED);
  return n;
}

/* Generated targets: a class index drawn from the generated value's bits, and one row in eight
 * ignored (explicit targets are taken as they are). With generated logits too, one row in four
 * is confident, as a model late in training is: its target is the row's largest logit, raised
 * by a margin of 2^k (k = 0..4), so that p at the target is near 1 (with a uniform target p is
 * about 1/cols, and a gradient that loses everything as p -> 1 shows in 1 case of 200). */
static void pf_ce_prepare(const pf_case *c, pf_tensor *in) {
  if (c->inputs[1].dist == PF_DIST_VALUES) return;
  const size_t cols = c->shape[1];
  for (size_t i = 0; i < c->shape[0]; i++) {
    const uint64_t h = (pf_bits_of_double(in[1].data[i]) + i) * 0x9e3779b97f4a7c15ull;
    in[1].data[i] = ((h >> 40) & 7) == 7 ? c->params[P_IGNORE] : (double)((h >> 11) % cols);
    if (((h >> 40) & 7) == 7 || ((h >> 44) & 3) != 0 || c->inputs[0].dist == PF_DIST_VALUES) continue;
    double *x = in[0].data + i * cols;
    size_t t = 0;
    for (size_t j = 1; j < cols; j++)
      if (x[j] > x[t] || !(x[t] == x[t])) t = j;
    const double raised = pf_round(c->dtype, x[t] + ldexp(1.0, (int)((h >> 46) % 5)));
    if (isfinite(x[t]) && isfinite(raised)) x[t] = raised;
    in[1].data[i] = (double)t;
  }
}

/* The gradient logsoftmax's backward starts from, per row: -(d loss / d lp_j) at the target (*gt)
 * and elsewhere (*go), values of the storage dtype st, as PyTorch's autograd makes them: the
 * scalars' products in fp32 stored in st, nll_loss's -(grad / total_weight) in st, the mean's
 * division in fp32 stored in st, the two uses of lp (nll, the smoothing sum) added in st. */
static void pf_ce_ls_grads(int red, double eps, double nc, size_t cols, pf_dtype st, double *gt, double *go,
                           unsigned *fe) {
  const pf_dtype F = PF_FP32;
  if (eps == 0) {
    *gt = red == PF_CE_MEAN ? pf_round_fe(st, pf_div(F, 1.0, nc, fe), fe) : 1.0, *go = 0;
    return;
  }
  const double gn = pf_round_fe(st, pf_round(F, 1.0 - eps), fe), gr = pf_round_fe(st, pf_round(F, eps / (double)cols), fe);
  const double nllg = red == PF_CE_MEAN ? pf_round_fe(st, pf_div(F, gn, nc, fe), fe) : gn;
  *go = red == PF_CE_MEAN ? pf_round_fe(st, pf_div(F, gr, nc, fe), fe) : gr;
  *gt = pf_round_fe(st, pf_add(F, nllg, *go, fe), fe);
}

pf_status pf_cross_entropy_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t rows = c->shape[0], cols = c->shape[1], nr = pf_ce_nred(c);
  const int algo = pf_case_algo(c), faults = pf_ce_faults(c), red = pf_ce_red(c), ls = pf_ce_is_ls(algo);
  const int cpu = algo == PF_CE_LOGSOFTMAX_CPU;
  const pf_dtype acc = c->accum, st = c->dtype, lt = pf_ce_loss_dtype(c);
  double *lp = ls ? malloc(cols * sizeof(double)) : NULL;
  if (ls && !lp) return pf_error(PF_ERR_NOMEM, "cross_entropy: cannot allocate a row of %zu", cols);
  const double eps = pf_round_fe(acc, c->params[P_EPS], fe), z = pf_round_fe(acc, c->params[P_Z], fe);
  const double nc = (double)pf_ce_counted(c, in, faults);
  /* fused: the gradient reaching each row's loss, 1 / counted for the mean, in acc; logsoftmax:
   * the gradients of the log-probabilities (pf_ce_ls_grads), and PyTorch's smoothing scalars */
  const double g = red == PF_CE_MEAN ? pf_div(acc, 1.0, nc, fe) : 1.0;
  const double epsp = c->params[P_EPS], c1f = pf_round(PF_FP32, 1.0 - epsp), cef = pf_round(PF_FP32, epsp / (double)cols);
  double gt = 0, go = 0;
  if (ls) pf_ce_ls_grads(red, epsp, nc, cols, st, &gt, &go, fe);
  double sum = 0, ssum = 0;
  pf_ce_cascade cas = {{0}};
  const int power = pf_ce_cascade_power(rows);
  /* micro-batches (fused, chunked): each one's sum, its share of the mean (sum / the batch's
   * count), the shares added; ce-microbatch-mean: each one's own mean, their average over m
   * (per-micro-batch normalisation, as HF transformers' gradient accumulation before 4.46) */
  const size_t m = (size_t)c->params[P_MB];
  const int mbmean = faults & PF_CE_F_MICROBATCH_MEAN;
  size_t mb = 0, mb_end = rows;
  double total = 0, nk = nc, gi = g;
  for (size_t i = 0; i < rows; i++) {
    if (m > 1 && (i == 0 || i == mb_end)) { /* micro-batch mb begins at row i */
      if (i) {
        total = pf_add(acc, total, red != PF_CE_MEAN ? sum : pf_div(acc, sum, mbmean ? nk : nc, fe), fe);
        sum = 0, mb++;
      }
      mb_end = pf_ce_mb_first(rows, m, mb + 1);
      nk = 0;
      for (size_t r = i; r < mb_end; r++) nk += pf_ce_target(c, in, r) >= 0;
      if (mbmean && red == PF_CE_MEAN) gi = pf_div(acc, pf_div(acc, 1.0, nk, fe), (double)m, fe);
    }
    const long t = pf_ce_target(c, in, i);
    double *dx = out + rows + nr + i * cols;
    if (t < 0) {
      out[i] = 0;
      for (size_t j = 0; j < cols; j++) dx[j] = 0;
      continue;
    }
    const double *x = in[0].data + i * cols;
    if (!ls) {
      out[i] = pf_round_fe(lt, pf_ce_fused_row(algo, faults, acc, st, x, cols, (size_t)t, (size_t)c->params[P_CHUNK], eps,
                                               z, gi, dx, fe), fe);
      sum = pf_add(acc, sum, out[i], fe);
      continue;
    }
    double smooth;
    const double nll = pf_ce_logsoftmax_row(cpu, faults, acc, st, x, cols, (size_t)t, -gt, -go, &smooth, lp, dx, fe);
    out[i] = epsp == 0 ? nll : pf_ce_torch_smoothing(st, c1f, cef, nll, smooth, fe); /* the per-row (none) loss */
    if (cpu) pf_ce_cascade_add(&cas, st, power, i, nll, fe);
    else sum = pf_add(acc, sum, nll, fe);
    ssum = pf_add(PF_FP32, ssum, smooth, fe);
  }
  if (nr && ls) {
    /* nll_loss's reduction: the CPU kernel's cascade and division in st, the CUDA kernel's in acc;
     * the smoothing term's sum over the rows in fp32, stored in st, divided in fp32 */
    double nll = cpu ? pf_ce_cascade_total(&cas, st, fe) : sum;
    if (red == PF_CE_MEAN) nll = cpu ? pf_div(st, nll, pf_round_fe(st, nc, fe), fe) : pf_div(acc, nll, nc, fe);
    nll = pf_round_fe(st, nll, fe);
    double sm = pf_round_fe(st, ssum, fe);
    if (red == PF_CE_MEAN) sm = pf_round_fe(st, pf_div(PF_FP32, sm, nc, fe), fe);
    out[rows] = epsp == 0 ? nll : pf_ce_torch_smoothing(st, c1f, cef, nll, sm, fe);
  } else if (nr && m > 1) {
    total = pf_add(acc, total, red != PF_CE_MEAN ? sum : pf_div(acc, sum, mbmean ? nk : nc, fe), fe);
    out[rows] = pf_round_fe(lt, mbmean && red == PF_CE_MEAN ? pf_div(acc, total, (double)m, fe) : total, fe);
  } else if (nr) out[rows] = pf_round_fe(lt, red == PF_CE_MEAN ? pf_div(acc, sum, nc, fe) : sum, fe);
  free(lp);
  return PF_OK;
}

/* ---- the contract ---------------------------------------------------------------------------
 * The bound of every output follows the variant's own sequence of operations with running
 * error bounds (core/errbound.h): each value paired with the exact quantity it stands for
 * and a bound on their distance, each operation adding its rounding in the dtype it is done in
 * (u |z| + sig / 2), expf and logf their 2 ulps (pf_eb_exp, pf_eb_log). Long sums (of exp, of
 * the logits, of the log-probabilities) add the binary64 evaluation of the exact quantity,
 * k 2^-52 sum |terms| for k terms. The result is an absolute bound per element before its final
 * rounding; an intermediate whose bound reaches its dtype's largest finite makes the bound
 * infinite, and the domain ends there. */
typedef struct {
  pf_eb loss;   /* the row's loss before its rounding to the loss's dtype */
  pf_eb nll, smooth; /* logsoftmax: -lp_t and -sum lp (stored), the reductions' terms */
  int over;     /* an intermediate may overflow: no bound */
  const char *what;
} pf_ce_rowb;

/* sum_j exp(x_j - m) as the variant takes it (the chunks' running max and rescaling mirrored) */
static pf_eb pf_ce_eb_sumexp(int algo, pf_dtype acc, const double *x, size_t cols, size_t chunk, double *m_out) {
  if (algo != PF_CE_CHUNKED) chunk = cols;
  double M = -INFINITY, chunks = 0;
  pf_eb Z = pf_eb_exact(0);
  for (size_t c0 = 0; c0 < cols; c0 += chunk) {
    const size_t c1 = cols - c0 < chunk ? cols : c0 + chunk;
    double mn = M;
    for (size_t j = c0; j < c1; j++) mn = x[j] > mn ? x[j] : mn;
    pf_eb zc = pf_eb_exact(0);
    for (size_t j = c0; j < c1; j++) zc = pf_eb_add(acc, zc, pf_eb_exp(acc, pf_eb_sub(acc, pf_eb_exact(x[j]), pf_eb_exact(mn))));
    zc.e += (double)(c1 - c0) * 0x1p-52 * zc.v;
    if (c0 == 0) Z = zc;
    else if (M == mn) Z = pf_eb_add(acc, Z, zc);
    else Z = pf_eb_add(acc, pf_eb_mul(acc, Z, pf_eb_exp(acc, pf_eb_sub(acc, pf_eb_exact(M), pf_eb_exact(mn)))), zc);
    M = mn, chunks += 1;
  }
  Z.e += 2 * chunks * 0x1p-52 * Z.v; /* the binary64 rescalings of the exact partial sums */
  *m_out = M;
  return Z;
}

/* Row bounds: the loss's (returned in r) and each gradient element's (b, cols of them). */
static void pf_ce_row_bound(const pf_case *c, const double *x, size_t t, pf_eb g, pf_eb Gt, pf_eb Go, pf_ce_rowb *r,
                            pf_bound *b) {
  const size_t cols = c->shape[1];
  const int algo = pf_case_algo(c);
  const pf_dtype acc = c->accum, st = c->dtype, F = PF_FP32;
  const double epsv = c->params[P_EPS], zv = c->params[P_Z];
  const pf_eb eps = pf_eb_const(acc, epsv), z = pf_eb_const(acc, zv), C = pf_eb_exact((double)cols);
  const pf_eb one = pf_eb_exact(1), c1 = pf_eb_sub(acc, one, eps), ceps = pf_eb_div(acc, eps, C);
  double m;
  r->over = 0;
  r->what = "the sum of exp";
  const pf_eb Z = pf_ce_eb_sumexp(algo, acc, x, cols, (size_t)c->params[P_CHUNK], &m);
  r->what = "the log-sum-exp";
  /* the CPU kernel holds Z and log Z in the storage dtype */
  const pf_eb L = algo == PF_CE_LOGSOFTMAX_CPU ? pf_eb_log(st, pf_eb_store(st, Z)) : pf_eb_log(acc, Z);
  if (pf_ce_is_ls(algo)) {
    /* lp_j = fl_st((x_j - m) - L); nll = -lp_t; smooth = fl_st(-sum lp); the per-row loss nll,
     * or PyTorch's smoothing fl_st(fl32(fl_st(c1f nll) + fl_st(cef smooth))) */
    r->what = "the log-probabilities";
    pf_eb slp = pf_eb_exact(0), lpt = pf_eb_exact(0), sg = pf_eb_exact(0);
    double asum = 0;
    for (size_t j = 0; j < cols; j++) {
      const pf_eb lp = pf_eb_store(st, pf_eb_sub(acc, pf_eb_sub(acc, pf_eb_exact(x[j]), pf_eb_exact(m)), L));
      if (j == t) lpt = lp;
      slp = pf_eb_add(acc, slp, lp), asum += fabs(lp.v) + lp.e;
      sg = pf_eb_add(acc, sg, j == t ? Gt : Go);
    }
    slp.e += (double)cols * 0x1p-52 * asum;
    sg.e += (double)cols * 0x1p-52 * fabs(sg.v);
    r->what = "the loss";
    r->nll = (pf_eb){-lpt.v, lpt.e};
    r->smooth = pf_eb_store(st, (pf_eb){-slp.v, slp.e});
    r->loss = epsv == 0 ? r->nll
                        : pf_eb_add(F, pf_eb_store(st, pf_eb_mul(F, pf_eb_const(F, 1 - epsv), r->nll)),
                                    pf_eb_store(st, pf_eb_mul(F, pf_eb_const(F, epsv / (double)cols), r->smooth)));
    /* dx_j = G_j - exp(lp_j) SG, with Gt, Go the magnitudes of -G (pf_ce_ls_grads) */
    r->what = "the gradient";
    for (size_t j = 0; j < cols; j++) {
      const pf_eb lp = pf_eb_store(st, pf_eb_sub(acc, pf_eb_sub(acc, pf_eb_exact(x[j]), pf_eb_exact(m)), L));
      /* -G_j + exp(lp_j) * (-SG): the signs of the products do not change the bounds */
      const pf_eb d = pf_eb_sub(acc, pf_eb_mul(acc, pf_eb_exp(acc, lp), sg), j == t ? Gt : Go);
      b[j] = pf_eb_bound(d);
      if (!(fabs(d.v) + d.e < pf_max_finite(st))) b[j] = (pf_bound){INFINITY, INFINITY};
    }
  } else {
    r->what = "the log-sum-exp";
    const pf_eb lse = pf_eb_add(acc, pf_eb_exact(m), L);
    r->what = "the loss";
    pf_eb loss = pf_eb_sub(acc, lse, pf_eb_mul(acc, c1, pf_eb_exact(x[t])));
    if (epsv != 0) {
      pf_eb sx = pf_eb_exact(0);
      double asum = 0;
      for (size_t j = 0; j < cols; j++) sx = pf_eb_add(acc, sx, pf_eb_exact(x[j])), asum += fabs(x[j]);
      sx.e += (double)cols * 0x1p-52 * asum;
      loss = pf_eb_sub(acc, loss, pf_eb_mul(acc, ceps, sx));
    }
    if (zv != 0) loss = pf_eb_add(acc, loss, pf_eb_mul(acc, z, pf_eb_mul(acc, lse, lse)));
    r->loss = loss;
    r->what = "the gradient";
    const pf_eb zf = zv != 0 ? pf_eb_add(acc, one, pf_eb_mul(acc, (pf_eb){2 * z.v, 2 * z.e}, lse)) : one;
    for (size_t j = 0; j < cols; j++) {
      const pf_eb p = pf_eb_div(acc, pf_eb_exp(acc, pf_eb_sub(acc, pf_eb_exact(x[j]), pf_eb_exact(m))), Z);
      pf_eb q = zv != 0 ? pf_eb_mul(acc, p, zf) : p;
      if (epsv != 0) q = pf_eb_sub(acc, q, ceps);
      if (j == t) q = pf_eb_sub(acc, q, c1);
      const pf_eb d = pf_eb_mul(acc, g, q);
      b[j] = pf_eb_bound(d);
      if (!(fabs(d.v) + d.e < pf_max_finite(st))) b[j] = (pf_bound){INFINITY, INFINITY};
    }
  }
  r->over = !isfinite(r->loss.e) || !isfinite(r->loss.v);
  if (r->over) r->what = "the loss (its smoothing or z-loss term)";
  for (size_t j = 0; j < cols && !r->over; j++) r->over = !isfinite(b[j].abs);
  if (!r->over) r->what = NULL;
}

/* The whole case: every row, then the reduced loss. Returns the first row that has no bound
 * (rows: none), with what overflows there in *what. */
static size_t pf_ce_bound_all(const pf_case *c, const pf_tensor *in, pf_bound *out, const char **what) {
  const size_t rows = c->shape[0], cols = c->shape[1], nr = pf_ce_nred(c);
  const int red = pf_ce_red(c), mean = red == PF_CE_MEAN, ls = pf_ce_is_ls(pf_case_algo(c));
  const int cpu = pf_case_algo(c) == PF_CE_LOGSOFTMAX_CPU, power = pf_ce_cascade_power(rows);
  const pf_dtype acc = c->accum, lt = pf_ce_loss_dtype(c), st = c->dtype, F = PF_FP32;
  const double nc = (double)pf_ce_counted(c, in, 0), eps = c->params[P_EPS];
  const pf_eb N = pf_eb_exact(nc), one = pf_eb_exact(1);
  const pf_eb c1f = pf_eb_const(F, 1 - eps), cef = pf_eb_const(F, eps / (double)cols);
  /* fused: g = 1 / nc in acc. logsoftmax: the magnitudes of pf_ce_ls_grads' gradients */
  const pf_eb g = mean ? pf_eb_div(acc, one, N) : one;
  pf_eb Gt = mean ? pf_eb_store(st, pf_eb_div(F, one, N)) : one, Go = pf_eb_exact(0);
  if (eps != 0) {
    const pf_eb gn = pf_eb_store(st, c1f), gr = pf_eb_store(st, cef);
    Go = mean ? pf_eb_store(st, pf_eb_div(F, gr, N)) : gr;
    Gt = pf_eb_store(st, pf_eb_add(F, mean ? pf_eb_store(st, pf_eb_div(F, gn, N)) : gn, Go));
  }
  size_t bad = rows;
  pf_eb sum = pf_eb_exact(0), ssum = pf_eb_exact(0), lev[8];
  for (int j = 0; j < 8; j++) lev[j] = pf_eb_exact(0);
  double asum = 0, smag = 0;
  /* micro-batches: each one's sum, its share (the sum / the batch's count for the mean), added */
  const size_t m = (size_t)c->params[P_MB];
  size_t mb = 0, mb_end = m > 1 ? pf_ce_mb_first(rows, m, 1) : rows;
  pf_eb total = pf_eb_exact(0);
  for (size_t i = 0; i < rows; i++) {
    if (m > 1 && i == mb_end) {
      total = pf_eb_add(acc, total, mean ? pf_eb_div(acc, sum, pf_eb_const(acc, nc)) : sum);
      sum = pf_eb_exact(0);
      mb_end = pf_ce_mb_first(rows, m, ++mb + 1);
    }
    const long t = pf_ce_target(c, in, i);
    pf_bound *b = out + rows + nr + i * cols;
    if (t < 0) {
      out[i] = (pf_bound){0, 0};
      for (size_t j = 0; j < cols; j++) b[j] = (pf_bound){0, 0};
      continue;
    }
    pf_ce_rowb r;
    pf_ce_row_bound(c, in[0].data + i * cols, (size_t)t, g, Gt, Go, &r, b);
    if (r.over && bad == rows) bad = i, *what = r.what;
    out[i] = pf_eb_bound(r.loss);
    if (!(fabs(r.loss.v) + r.loss.e < pf_max_finite(lt))) {
      out[i] = (pf_bound){INFINITY, INFINITY};
      if (bad == rows) bad = i, *what = "the loss";
    }
    /* the reductions add what is held: the fused losses rounded to their dtype; logsoftmax's nll
     * (in the CPU kernel's cascade in st) and its smoothing terms (in fp32) */
    const pf_eb held = ls ? r.nll : pf_eb_store(lt, r.loss);
    asum += fabs(held.v) + held.e;
    if (ls) ssum = pf_eb_add(F, ssum, r.smooth), smag += fabs(r.smooth.v) + r.smooth.e;
    if (!cpu) {
      sum = pf_eb_add(acc, sum, held);
      continue;
    }
    lev[0] = pf_eb_add(st, lev[0], held); /* pf_ce_cascade_add */
    for (int j = 0; j + 1 < 8 && (i & ((((size_t)1 << power) - 1) << (j * power))) == 0; j++)
      lev[j + 1] = pf_eb_add(st, lev[j + 1], lev[j]), lev[j] = pf_eb_exact(0);
  }
  if (nr) {
    for (int j = 0; cpu && j < 8; j++) sum = pf_eb_add(st, sum, lev[j]);
    const pf_dtype rt = cpu ? st : acc; /* the CPU kernel divides in the storage dtype */
    pf_eb R;
    if (m > 1) {
      R = pf_eb_add(acc, total, mean ? pf_eb_div(acc, sum, pf_eb_const(acc, nc)) : sum);
      R.e += (double)rows * 0x1p-52 * asum;
    } else {
      sum.e += (double)rows * 0x1p-52 * asum;
      R = mean ? pf_eb_div(rt, sum, pf_eb_const(rt, nc)) : sum;
    }
    if (ls && eps != 0) { /* PyTorch's smoothing of the reduced terms */
      ssum.e += (double)rows * 0x1p-52 * smag;
      pf_eb sm = pf_eb_store(st, ssum);
      if (mean) sm = pf_eb_store(st, pf_eb_div(F, sm, N));
      R = pf_eb_add(F, pf_eb_store(st, pf_eb_mul(F, c1f, pf_eb_store(st, R))), pf_eb_store(st, pf_eb_mul(F, cef, sm)));
    }
    out[rows] = pf_eb_bound(R);
    if (!(fabs(R.v) + R.e < pf_max_finite(lt))) {
      out[rows] = (pf_bound){INFINITY, INFINITY};
      if (bad == rows) bad = 0, *what = "the reduced loss";
    }
  }
  return bad;
}

static void pf_ce_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const char *what = NULL;
  pf_ce_bound_all(c, in, out, &what);
}

/* Explicit targets: each a class index in [0, cols) or the ignore index; z-loss and chunk only
 * where the variant honours them (elsewhere they would be silently ignored). */
static pf_status pf_ce_check(const pf_case *c) {
  if (pf_ce_is_ls(pf_case_algo(c)) && c->params[P_Z] != 0)
    return pf_error(PF_ERR_ARG, "z_loss: %s/%s (PyTorch's cross_entropy) has no z-loss; fused and chunked have", c->kernel,
                    c->variant);
  if (pf_case_algo(c) != PF_CE_CHUNKED && c->params[P_CHUNK] != pf_ce_params[P_CHUNK].def)
    return pf_error(PF_ERR_ARG, "chunk: %s/%s takes the whole row at once; the parameter is chunked's", c->kernel,
                    c->variant);
  if (c->params[P_MB] > 1 && pf_ce_is_ls(pf_case_algo(c)))
    return pf_error(PF_ERR_ARG, "microbatches: %s/%s is PyTorch's cross_entropy on one batch; fused and chunked take "
                                "micro-batches", c->kernel, c->variant);
  if (c->params[P_MB] > (double)c->shape[0])
    return pf_error(PF_ERR_ARG, "microbatches: %.0f micro-batches of %zu rows: at most one per row", c->params[P_MB],
                    c->shape[0]);
  const pf_gen *g = &c->inputs[1];
  if (c->ninputs < 2 || g->dist != PF_DIST_VALUES || !g->values) return PF_OK;
  for (size_t i = 0; i < g->nvalues; i++) {
    const double t = g->values[i];
    if (t == c->params[P_IGNORE]) continue;
    if (!(t >= 0 && t < (double)c->shape[1] && t == floor(t)))
      return pf_error(PF_ERR_ARG, "target %zu: %.17g is not a class index in [0, %zu) nor the ignore index %.17g", i, t,
                      c->shape[1], c->params[P_IGNORE]);
  }
  return PF_OK;
}

/* Domain: finite logits; for the mean, at least one row counted; every intermediate's bound
 * below its dtype's largest finite (pf_ce_bound_all: where it is not, the variant may overflow
 * there, and the why names the quantity). */
static int pf_ce_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t rows = c->shape[0], cols = c->shape[1];
  for (size_t k = 0; k < rows * cols; k++)
    if (!isfinite(in[0].data[k])) {
      snprintf(why, len, "row %zu: a non-finite logit (the loss is undefined there)", k / cols);
      return 0;
    }
  if (pf_ce_red(c) == PF_CE_MEAN && pf_ce_counted(c, in, 0) == 0) {
    snprintf(why, len, "every row is ignored: the mean is 0/0");
    return 0;
  }
  pf_bound *b = malloc(pf_ce_output_count(c) * sizeof *b);
  if (!b) {
    snprintf(why, len, "out of memory for the bounds of %zu outputs", pf_ce_output_count(c));
    return 0;
  }
  const char *what = NULL;
  const size_t bad = pf_ce_bound_all(c, in, b, &what);
  free(b);
  if (bad < rows) {
    double X = 0;
    for (size_t j = 0; j < cols; j++) X = fmax(X, fabs(in[0].data[bad * cols + j]));
    snprintf(why, len, "row %zu: %s may exceed its dtype's range (largest |logit| in the row: %g)", bad,
             what ? what : "a value", X);
    return 0;
  }
  return 1;
}

/* rows x cols elements: the emulation 130 ns each, the oracle 0.45 us each by its fast path (rows
 * spread wider than 600 go to MPFR, 12 us each with --threads 1) (measured: 2 cases of 2x262144
 * bf16 with --threads 1: 0.07 s, 0.22 s, and 6.35 s with --oracle mpfr) */
static void pf_ce_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)c->shape[0] * (double)c->shape[1];
  *emulation_s = 130e-9 * n;
  *oracle_s = 0.45e-6 * n;
}

static const pf_op_sweep pf_ce_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "2x256", .along = "scale:logits", .lo = 0x1p-4, .hi = 0x1p14, .fail = "finding", .cases_div = 4,
    .searches = {{"overflow", "1x256", "scale:logits", "overflow", 0x1p-4, 0x1p16, {"target:value=0"}}},
    /* the two faults that show only with their setting: a z-loss, chunks shorter than the row */
    .fault_settings = (const pf_fault_setting[]){{"ce-grad-no-zloss", NULL, {"z_loss=0x1p-4"}},
                                                 {"ce-chunk-no-rescale", NULL, {"chunk=16"}},
                                                 {"ce-microbatch-mean", NULL, {"microbatches=2"}},
                                                 {0}},
    .explanation =
        "The loss is log sum exp(x) - x_t: the log-sum-exp subtracts the row's maximum, so no exp overflows at any "
        "logit scale, but lse = m + log Z and lse - x_t lose the small loss of a confident row to the rounding of m "
        "(absolute error u |m|). logsoftmax (PyTorch) stores the log-probabilities in the storage dtype and its backward "
        "exponentiates the stored values: a log-probability of magnitude L held in bf16 is off by up to 2^-9 L, and "
        "the probability computed from it by the factor exp(2^-9 L), so its gradients lose accuracy as the logits "
        "spread. fused and chunked hold everything in the accumulation dtype and write only the gradient. With fp32 "
        "accumulation no variant overflows before the logits themselves leave their dtype; accumulated in fp16, z-loss's "
        "lse^2 overflows once lse reaches 256.",
};

int pf_decode_cross_entropy_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* cross_entropy_fuzzer.c */
const pf_op pf_cross_entropy_op = {
    .name = "cross_entropy",
    .summary = "cross-entropy loss over vocabulary-long rows, forward and backward: loss, reduced loss, dlogits",
    .ndims = 2,
    .dim_names = pf_ce_dims,
    .dim_max = {(size_t)1 << 20, (size_t)1 << 24},
    .dim_default = {4, 1024},
    .elems_max = (size_t)1 << 30,
    .nparams = sizeof pf_ce_params / sizeof pf_ce_params[0],
    .params = pf_ce_params,
    .ninputs = 2,
    .input_names = pf_ce_inputs,
    .input_count = pf_ce_input_count,
    .input_dtype = pf_ce_input_dtype,
    .output_count = pf_ce_output_count,
    .oracle = pf_cross_entropy_mpfr,
    .stages = pf_ce_stages,
    .prepare = pf_ce_prepare,
    .input_dims = pf_ce_input_dims,
    .cost = pf_ce_cost,
    .fuzz_decode = pf_decode_cross_entropy_fuzzer,
    .sweep = &pf_ce_sweep,
};

#define PF_CE_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
#define PF_CE_ACCUMS (PF_DT(PF_FP32) | PF_ACCUM_STORAGE)
static const char *const pf_ce_faults_all[] = {"ce-no-max", "ce-mean-counts-ignored", "ce-grad-no-zloss",
                                               "ce-grad-p-in-storage", "ce-microbatch-mean", NULL};
static const char *const pf_ce_faults_ls[] = {"ce-no-max", "ce-mean-counts-ignored", NULL};
static const char *const pf_ce_faults_chunked[] = {"ce-no-max", "ce-chunk-no-rescale", "ce-mean-counts-ignored",
                                                   "ce-grad-no-zloss", "ce-grad-p-in-storage", "ce-microbatch-mean", NULL};
#define PF_CE_CONTRACT_TAIL                                                                                           \
  "; the bound of each output follows the variant's operations with running error bounds (u |z| + sig/2 per "      \
  "rounding, 2 ulps per expf and logf), absolute, before the output's rounding; domain: finite logits, valid "     \
  "targets, every intermediate's bound within its dtype's range"

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/cross_entropy/cross_entropy_cuda.h"
/* fused and chunked's native CUDA kernel, in the module (core/cuda_module.h): the scalars set
 * up as pf_cross_entropy_cpu sets them up */
static pf_status pf_ce_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_cross_entropy_cuda) fn;
  pf_status st = pf_cuda_entry("pf_cross_entropy_cuda", (void **)&fn);
  if (st) return st;
  const size_t rows = c->shape[0];
  long *target = malloc((rows ? rows : 1) * sizeof(long));
  if (!target) return pf_error(PF_ERR_NOMEM, "cross_entropy: cannot allocate %zu targets", rows);
  for (size_t i = 0; i < rows; i++) target[i] = pf_ce_target(c, in, i);
  const pf_dtype acc = c->accum;
  const int faults = pf_ce_faults(c), red = pf_ce_red(c);
  const double nc = (double)pf_ce_counted(c, in, faults), eps = pf_round_fe(acc, c->params[P_EPS], fe);
  const pf_ce_launch L = {rows,
                          c->shape[1],
                          pf_case_algo(c) == PF_CE_CHUNKED ? (size_t)c->params[P_CHUNK] : c->shape[1],
                          faults,
                          red == PF_CE_MEAN,
                          red != PF_CE_NONE,
                          c->dtype,
                          acc,
                          eps,
                          pf_round_fe(acc, c->params[P_Z], fe),
                          pf_div(acc, eps, (double)c->shape[1], fe),
                          red == PF_CE_MEAN ? pf_div(acc, 1.0, nc, fe) : 1.0,
                          nc,
                          (size_t)c->params[P_MB]};
  if (faults & PF_CE_F_MICROBATCH_MEAN) {
    free(target);
    return pf_error(PF_ERR_UNSUPPORTED, "the fault ce-microbatch-mean is the CPU emulation's only (--backend cpu)");
  }
  st = fn(&L, in[0].data, target, out, fe);
  free(target);
  return st;
}
#define PF_CE_RUN_CUDA pf_ce_cuda_case
#else
#define PF_CE_RUN_CUDA NULL
#endif

static const pf_kernel pf_ce_logsoftmax = {
    PF_KERNEL_ABI, &pf_cross_entropy_op, "logsoftmax",
    "PyTorch's F.cross_entropy: log_softmax stored in the storage dtype, nll_loss on it; backward from the stored "
    "log-probabilities",
    PF_CE_DTYPES, PF_CE_ACCUMS, pf_ce_faults_ls,
    "losses held in the storage dtype; lp = fl((x - m) - log Z) stored, nll = -lp_t, smoothing PyTorch's "
    "fl(fl(fl32(1-eps) nll) + fl(fl32(eps/C) fl(-sum lp))) per row and of the reduced terms; dx = G - exp(lp) sum G "
    "with G as autograd makes it (pf_ce_ls_grads)" PF_CE_CONTRACT_TAIL,
    pf_cross_entropy_cpu, pf_ce_bound, pf_ce_in_domain, pf_ce_check, NULL, .algo = PF_CE_LOGSOFTMAX};
static const pf_kernel pf_ce_logsoftmax_cpu = {
    PF_KERNEL_ABI, &pf_cross_entropy_op, "logsoftmax-cpu",
    "PyTorch's F.cross_entropy on the CPU: as logsoftmax, with the row's sum and its log held in the storage dtype",
    PF_CE_DTYPES, PF_CE_ACCUMS, pf_ce_faults_ls,
    "as logsoftmax, with L = fl_st(log fl_st(Z)) (ATen's CPU log_softmax holds both in the input's dtype)"
    PF_CE_CONTRACT_TAIL,
    pf_cross_entropy_cpu, pf_ce_bound, pf_ce_in_domain, pf_ce_check, NULL, .algo = PF_CE_LOGSOFTMAX_CPU};
static const pf_kernel pf_ce_fused = {
    PF_KERNEL_ABI, &pf_cross_entropy_op, "fused",
    "one pass per row in the accumulation dtype: log-sum-exp, loss (z-loss, smoothing), gradient written in the "
    "storage dtype",
    PF_CE_DTYPES, PF_CE_ACCUMS, pf_ce_faults_all,
    "losses held in the accumulation dtype; lse = m + log Z, loss = lse - c1 x_t - eps/C sum x + z lse^2, "
    "dx = g (p (1 + 2 z lse) - eps/C - c1 [t])" PF_CE_CONTRACT_TAIL,
    pf_cross_entropy_cpu, pf_ce_bound, pf_ce_in_domain, pf_ce_check, PF_CE_RUN_CUDA, .algo = PF_CE_FUSED};
static const pf_kernel pf_ce_chunked = {
    PF_KERNEL_ABI, &pf_cross_entropy_op, "chunked",
    "fused with an online log-sum-exp over chunks of `chunk` columns (running max, rescaled running sum)",
    PF_CE_DTYPES, PF_CE_ACCUMS, pf_ce_faults_chunked,
    "as fused, with Z taken chunk by chunk: Z <- Z exp(M - M') + sum_chunk exp(x - M')" PF_CE_CONTRACT_TAIL,
    pf_cross_entropy_cpu, pf_ce_bound, pf_ce_in_domain, pf_ce_check, PF_CE_RUN_CUDA, .algo = PF_CE_CHUNKED};

const pf_kernel *const pf_cross_entropy_kernels[] = {&pf_ce_logsoftmax, &pf_ce_logsoftmax_cpu, &pf_ce_fused, &pf_ce_chunked,
                                                     NULL};
