/* Attention forward, CPU emulation of every variant, their contracts and the variant table.
 *
 *   O = softmax(Q K^T / sqrt(d) + mask) V     per batch and head; shape [batch, heads,
 *   q_len, k_len, head_dim]; Q is q_len x d, K and V are k_len x d.
 *
 * Variants (Megatron-LM's core attention, megatron/core/transformer/dot_product_attention.py with
 * its fused scaled-masked softmax; FlashAttention-2, Dao 2023, for the blocked online softmax):
 *   post-scale    S = fl_T(fl_A(alpha * QK^T)), alpha = fl_A(1/sqrt d) (the cuBLAS/Megatron baseline)
 *   inward        Q' = fl_T(Q c), K' = fl_T(K c), c = fl32(d^-1/4); S = fl_T(Q' K'^T)
 *   layer-scaled  S = fl_T(fl_A(alpha' * QK^T)), alpha' = fl_A(1/(sqrt(d) L)); the softmax
 *                 multiplies by L in fp32
 *   flash         per query row, key blocks of `block`: scores in fp32, running max and sum,
 *                 P rounded to the storage dtype before P V, output accumulator in fp32
 *                 rescaled when the max grows; S and P are never stored.
 * Non-flash variants store S and P in the storage dtype T (the results a finding's stage is
 * named after) and run the fused safe softmax (kernels/softmax) on S with the mask. The GEMMs
 * accumulate in the case's accumulation dtype A (attention_math.h says how). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "core/runner.h"
#include "kernels/attention/attention.h"
#include "core/kernel.h"
#include "kernels/softmax/softmax.h"

#include "oracles/attention_mpfr.h"

enum { D_B = 0, D_H, D_LQ, D_LK, D_D };
enum { P_LAYER = 0, P_MASK, P_MASKVAL, P_SMACC, P_BLOCK };

static const char *const pf_attn_dims[] = {"batch", "heads", "q_len", "k_len", "head_dim"};
static const char *const pf_attn_inputs[] = {"q", "k", "v"};
static const char *const pf_attn_mask_choices[] = {"none", "causal", "causal-top-left", NULL};
static const char *const pf_attn_maskval_choices[] = {"-inf", "-10000", "lowest", NULL};
static const char *const pf_attn_smacc_choices[] = {"fp32", "storage", NULL};

static const pf_param_desc pf_attn_params[] = {
    {"layer", PF_PARAM_INT, 1, 1, 1024, NULL, "layer number L (layer-scaled only): scores stored L times smaller", 0, "1..96"},
    {"mask", PF_PARAM_CHOICE, 0, 0, 2, pf_attn_mask_choices,
     "causal: query i sees keys j <= i + k_len - q_len (aligned bottom right; none for i < q_len - k_len: O = 0 under -inf); causal-top-left: j <= i "
     "(F.scaled_dot_product_attention's is_causal)", 0, "none,causal,causal-top-left"},
    {"mask_value", PF_PARAM_CHOICE, 0, 0, 2, pf_attn_maskval_choices, "what a masked score holds", 0, "-inf,-10000,lowest"},
    {"softmax_accum", PF_PARAM_CHOICE, 0, 0, 1, pf_attn_smacc_choices,
     "softmax computed in fp32 or in the storage dtype (layer-scaled and flash: fp32 only)", 0, NULL},
    {"block", PF_PARAM_INT, 64, 1, 4096, NULL, "key block size (flash only)", 0, "4,8,64,128"},
};

static int pf_attn_algo(const pf_case *c) { return pf_case_algo(c); }

static size_t pf_attn_heads(const pf_case *c) { return c->shape[D_B] * c->shape[D_H]; }
static size_t pf_attn_o_count(const pf_case *c) { return pf_attn_heads(c) * c->shape[D_LQ] * c->shape[D_D]; }
static size_t pf_attn_s_count(const pf_case *c) { return pf_attn_heads(c) * c->shape[D_LQ] * c->shape[D_LK]; }

static size_t pf_attn_input_count(const pf_case *c, int i) {
  return pf_attn_heads(c) * (i == 0 ? c->shape[D_LQ] : c->shape[D_LK]) * c->shape[D_D];
}

/* Outputs: O, then (non-flash) the stored scores S and probabilities P. */
static size_t pf_attn_output_count(const pf_case *c) {
  return pf_attn_o_count(c) + (pf_attn_algo(c) == PF_ATTN_FLASH ? 0 : 2 * pf_attn_s_count(c));
}

static int pf_attn_stages(const pf_case *c, pf_stage *st) {
  const size_t no = pf_attn_o_count(c), ns = pf_attn_s_count(c);
  if (pf_attn_algo(c) == PF_ATTN_FLASH) {
    st[0] = (pf_stage){"output", 0, no, 0, 0, 4, {D_B, D_H, D_LQ, D_D}, PF_MEASURE_ROW};
    return 1;
  }
  /* in data-flow order: a finding is born in the first stage that has one */
  st[0] = (pf_stage){"scores", no, ns, 1, 0, 4, {D_B, D_H, D_LQ, D_LK}, PF_MEASURE_ROW};
  st[1] = (pf_stage){"probabilities", no + ns, ns, 1, 0, 4, {D_B, D_H, D_LQ, D_LK}, PF_MEASURE_ROW};
  st[2] = (pf_stage){"output", 0, no, 0, 0, 4, {D_B, D_H, D_LQ, D_D}, PF_MEASURE_ROW};
  return 3;
}

static int pf_attn_input_dims(const pf_case *c, int i, int *d) {
  /* q[batch][head][query][d], k and v [batch][head][key][d] */
  d[0] = 0, d[1] = 1, d[2] = i == 0 ? 2 : 3, d[3] = 4;
  return 4;
}

/* per score (batch x heads x q_len x k_len): the emulation about 50 ns + 22 per head_dim
 * element, the oracle 70 + 1.5 (measured: 1x1x256x256 with head_dim 1, 64 and 256) */
static void pf_attention_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double scores = (double)c->shape[0] * (double)c->shape[1] * (double)c->shape[2] * (double)c->shape[3],
               d = (double)c->shape[4];
  *emulation_s = scores * (50e-9 + 22e-9 * d);
  *oracle_s = scores * (70e-9 + 1.5e-9 * d);
}

/* the precision report's sweep: the scan along the inputs' scale, and where a score overflows;
 * the missing rescale shows only when the keys span more than one block */
static const pf_op_sweep pf_attention_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "1x2x8x8x32", .along = "scale", .lo = 0x1p-2, .hi = 0x1p8, .fail = "finding", .cases_div = 2,
    .fault_settings = (const pf_fault_setting[]){{"flash-no-rescale", NULL, {"block=4"}}, {0}},
    .searches = {{"score overflow", "1x1x2x2x16", "value", "overflow,nan", 0, 0, {NULL}}},
    .explanation =
        "The scores are q.k summed over head_dim d terms: with every element x, d x^2, stored as x^2 sqrt(d) after the "
        "1/sqrt(d) scale. post-scale scales after the GEMM: accumulated in fp16 the sum d x^2 itself overflows at x = 64 "
        "(d = 16, 16 x^2 >= 65520); accumulated in fp32 only the stored score 4 x^2 can, at x = 128. inward scales q and k "
        "by d^-1/4 before the GEMM, so even an fp16 accumulator only holds the scaled sum: x = 128 in both. layer-scaled "
        "stores the scores L times smaller (the sweep uses L = 1); flash keeps its scores and running maximum in fp32 "
        "(no fp16 limit with fp32 accumulation), but an fp16 accumulator overflows at x = 64 as post-scale's does. The "
        "search's cases have head_dim 16.",
};

static pf_dtype pf_attn_smacc(const pf_case *c);

/* saturated: a query's probabilities P (the variants that store them) summing short of 1, as
 * softmax's hazard judges a row: a running sum in fp16 or bf16 (softmax_accum=storage) stopped
 * absorbing its terms, and the output, P V, is off by the same factor (4096 equal scores in
 * fp16: P sums to 2). Flash keeps its sum in fp32 and stores no P. */
static void pf_attn_hazards(const pf_case *c, pf_run *r, const pf_hazard_limits *l) {
  if (pf_attn_algo(c) == PF_ATTN_FLASH) return;
  const size_t Lq = c->shape[D_LQ], Lk = c->shape[D_LK], rows = pf_attn_heads(c) * Lq;
  const size_t P0 = pf_attn_o_count(c) + pf_attn_s_count(c);
  const double thr = pf_hazard_threshold(c, l, c->dtype);
  for (size_t u = 0; u < rows; u++) {
    double sy = 0, se = 0;
    for (size_t j = 0; j < Lk; j++) {
      const size_t k = P0 + u * Lk + j;
      if (r->oracle.status[k] == PF_ORACLE_UNDEFINED || !isfinite(r->out[k])) goto next; /* a verdict's */
      sy += r->out[k], se += r->oracle.exact[k];
    }
    if (se > 0 && pf_hazard_beyond(sy / se - 1, thr)) {
      pf_run_flag_hazard(r, PF_H_SATURATED, P0 + u * Lk, sy / se - 1,
                         "head %zu, query %zu: its probabilities sum to %.6g (exact %.6g): the softmax's running sum in "
                         "%s stopped absorbing its terms (error %.3g, threshold %.3g); the output P V is off by as much",
                         u / Lq, u % Lq, sy, se, pf_dtype_name(pf_attn_smacc(c)), sy / se - 1, thr);
      return;
    }
  next:;
  }
}

int pf_decode_attention_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* attention_fuzzer.c */
const pf_op pf_attention_op = {
    .name = "attention",
    .summary = "softmax(Q K^T / sqrt(d) + mask) V per batch and head",
    .ndims = 5,
    .dim_names = pf_attn_dims,
    /* bounded by memory (pf_case_check), not by these: products stay far inside size_t */
    .dim_max = {1024, 1024, (size_t)1 << 20, (size_t)1 << 20, (size_t)1 << 14},
    .dim_default = {1, 1, 16, 16, 16},
    .elems_max = (size_t)1 << 34,
    .nparams = 5,
    .params = pf_attn_params,
    .ninputs = 3,
    .input_names = pf_attn_inputs,
    .input_count = pf_attn_input_count,
    .output_count = pf_attn_output_count,
    .oracle = pf_attention_fwd_mpfr,
    .stages = pf_attn_stages,
    .input_dims = pf_attn_input_dims,
    .batch_dim0 = 1,
    .hazards = pf_attn_hazards,
    .cost = pf_attention_cost,
    .fuzz_decode = pf_decode_attention_fuzzer,
    .sweep = &pf_attention_sweep,
    .hazard_axis = {[PF_H_SATURATED] = "dim:k_len"},
};

/* The dtype the softmax runs in. */
static pf_dtype pf_attn_smacc(const pf_case *c) {
  const int a = pf_attn_algo(c);
  if (a == PF_ATTN_LAYER_SCALED || a == PF_ATTN_FLASH) return PF_FP32;
  return c->params[P_SMACC] == 0 ? PF_FP32 : c->dtype;
}

static pf_status pf_attn_check(const pf_case *c) {
  const int a = pf_attn_algo(c);
  if (a != PF_ATTN_LAYER_SCALED && c->params[P_LAYER] != 1)
    return pf_error(PF_ERR_ARG, "parameter 'layer' applies to the layer-scaled variant only (got %g for %s)",
                    c->params[P_LAYER], c->variant);
  if (a != PF_ATTN_FLASH && c->params[P_BLOCK] != 64)
    return pf_error(PF_ERR_ARG, "parameter 'block' applies to the flash variant only (got %g for %s)",
                    c->params[P_BLOCK], c->variant);
  if ((a == PF_ATTN_LAYER_SCALED || a == PF_ATTN_FLASH) && c->params[P_SMACC] != 0)
    return pf_error(PF_ERR_ARG, "%s computes its softmax in fp32: softmax_accum must be fp32", c->variant);
  return PF_OK;
}

static double pf_attn_maskval(const pf_case *c) {
  return pf_softmax_mask_value((int)c->params[P_MASKVAL], c->dtype);
}

/* The case-to-launch translation (the CUDA kernel's arguments; the flash row reads it too). */
static void pf_attention_launch_fill(const pf_case *c, pf_attn_launch *L, int no_max, int no_rescale, unsigned *fe) {
  const size_t d = c->shape[D_D];
  L->heads = pf_attn_heads(c);
  L->lq = c->shape[D_LQ], L->lk = c->shape[D_LK], L->d = d;
  L->algo = pf_attn_algo(c);
  L->mask = (int)c->params[P_MASK];
  L->no_max = no_max, L->no_rescale = no_rescale;
  L->t = c->dtype, L->acc = c->accum, L->smacc = pf_attn_smacc(c);
  L->maskval = pf_attn_maskval(c);
  L->block = (size_t)c->params[P_BLOCK];
  L->qscale = L->algo == PF_ATTN_INWARD ? pf_round(PF_FP32, pf_attn_inv_fourth_root_d(d)) : 0;
  const double Ly = c->params[P_LAYER];
  const double a = L->algo == PF_ATTN_LAYER_SCALED ? 1.0 / (sqrt((double)d) * Ly) : pf_attn_inv_sqrt_d(d);
  L->alpha_acc = L->algo == PF_ATTN_INWARD || L->algo == PF_ATTN_FLASH ? 1.0 : pf_round_fe(c->accum, a, fe);
  L->sigma_acc = pf_round_fe(L->smacc, L->algo == PF_ATTN_LAYER_SCALED ? Ly : 1.0, fe);
}

pf_attn_launch pf_attention_launch_of(const pf_case *c, unsigned *fe) {
  pf_attn_launch L;
  pf_attention_launch_fill(c, &L, strcmp(c->fault, "softmax-no-max") == 0, strcmp(c->fault, "flash-no-rescale") == 0,
                           fe);
  return L;
}

/* ---- the kernels ---------------------------------------------------------------------- */

typedef struct {
  double *s, *tmp, *kq, *o, *pt; /* scores or softmax scratch, scaled q, scaled K, flash accumulator and P block */
} pf_attn_work;

static void pf_attn_head_rows(const pf_case *c, const double *q, const double *k, const double *v, double *O,
                              double *S, double *P, pf_attn_work *w, int no_max, int no_rescale, unsigned *fe) {
  const size_t Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const pf_dtype T = c->dtype, A = c->accum;
  const int algo = pf_attn_algo(c), mask = (int)c->params[P_MASK];
  const double maskval = pf_attn_maskval(c);
  const double L = c->params[P_LAYER];

  if (algo == PF_ATTN_FLASH) {
    pf_attn_launch Lf;
    pf_attention_launch_fill(c, &Lf, no_max, no_rescale, fe);
    for (size_t i = 0; i < Lq; i++) pf_attn_flash_row(&Lf, q + i * d, k, v, i, O + i * d, w->s, w->pt, w->o, fe);
    return;
  }

  /* scores */
  const double *kk = k;
  double alpha_a = 1.0, qscale = 0;
  if (algo == PF_ATTN_INWARD) {
    qscale = pf_round(PF_FP32, pf_attn_inv_fourth_root_d(d));
    for (size_t x = 0; x < Lk * d; x++) w->kq[x] = pf_round_fe(T, k[x] * qscale, fe);
    kk = w->kq;
  } else {
    const double a = algo == PF_ATTN_LAYER_SCALED ? 1.0 / (sqrt((double)d) * L) : pf_attn_inv_sqrt_d(d);
    alpha_a = pf_round_fe(A, a, fe); /* cuBLAS takes alpha in its compute type */
  }
  const pf_dtype smacc = pf_attn_smacc(c);
  const double sigma = algo == PF_ATTN_LAYER_SCALED ? L : 1.0;
  const double sigma_acc = pf_round_fe(smacc, sigma, fe);
  for (size_t i = 0; i < Lq; i++) {
    const double *qi = q + i * d;
    if (algo == PF_ATTN_INWARD) {
      for (size_t e = 0; e < d; e++) w->tmp[e] = pf_round_fe(T, qi[e] * qscale, fe);
      qi = w->tmp;
    }
    for (size_t j = 0; j < Lk; j++) {
      const double dot = pf_attn_dot(A, qi, 1, kk + j * d, 1, d, fe);
      S[i * Lk + j] = pf_round_fe(T, algo == PF_ATTN_INWARD ? dot : pf_mul(A, alpha_a, dot, fe), fe);
    }
    /* the fused scale-mask-softmax on the stored scores */
    pf_softmax_row(PF_SOFTMAX_SAFE, no_max, smacc, T, S + i * Lk, i, Lq, Lk, sigma_acc, mask, maskval,
                   P + i * Lk, w->s, fe);
    for (size_t e = 0; e < d; e++) O[i * d + e] = pf_round_fe(T, pf_attn_dot(A, P + i * Lk, 1, v + e, d, Lk, fe), fe);
  }
}

pf_status pf_attention_fwd_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const size_t Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const size_t heads = pf_attn_heads(c);
  pf_attn_work w;
  const size_t big = (Lk > d ? Lk : d) + 1;
  w.s = malloc(big * sizeof(double));
  w.tmp = malloc(big * sizeof(double));
  w.o = malloc(big * sizeof(double));
  w.pt = malloc(big * sizeof(double));
  w.kq = malloc((Lk * d + 1) * sizeof(double));
  pf_status st = PF_OK;
  if (!w.s || !w.tmp || !w.o || !w.pt || !w.kq) {
    st = pf_error(PF_ERR_NOMEM, "attention: cannot allocate work space");
  } else {
    const int no_max = strcmp(c->fault, "softmax-no-max") == 0;
    const int no_rescale = strcmp(c->fault, "flash-no-rescale") == 0;
    const size_t no = pf_attn_o_count(c), ns = pf_attn_s_count(c);
    for (size_t h = 0; h < heads; h++) {
      double *S = pf_attn_algo(c) == PF_ATTN_FLASH ? NULL : out + no + h * Lq * Lk;
      double *P = S ? out + no + ns + h * Lq * Lk : NULL;
      pf_attn_head_rows(c, in[0].data + h * Lq * d, in[1].data + h * Lk * d, in[2].data + h * Lk * d,
                        out + h * Lq * d, S, P, &w, no_max, no_rescale, fe);
    }
  }
  free(w.s);
  free(w.tmp);
  free(w.o);
  free(w.pt);
  free(w.kq);
  return st;
}

/* ---- contracts -------------------------------------------------------------------------
 * Rigorous bounds (docs/kernels/attention.md). For query row i of one head:
 * E_j = |alpha| sum_m |q_m k_jm| bounds |s_j| and the GEMM's error; delta_j bounds the
 * error of the score the softmax sees; Delta = max delta_j moves every probability by a
 * factor within e^(+-2 Delta). The softmax's own bound comes from kernels/softmax. The
 * output is bounded absolutely: W = sum_j p_j |v_j| and V1 = sum_j |v_j| weigh the
 * probabilities' errors. */

/* The bound's two O(Lk d) loops per query row, with AVX2 where the processor has it and lane
 * for lane the same operations without (the bounds are the same bits on every machine).
 * Key sums: sum |q_m k_m|, sum q_m k_m and sum |q_m| + |k_m| in four partial sums (lane m mod 4,
 * then (l0 + l1) + (l2 + l3)): the bounds hold for any order of the adds. */
static void pf_attn_key_sums_c(const double *q, const double *k, size_t d, double *sa, double *sd, double *sq) {
  double a[4] = {0, 0, 0, 0}, s[4] = {0, 0, 0, 0}, t[4] = {0, 0, 0, 0};
  for (size_t m = 0; m < d; m++) {
    const double p = q[m] * k[m]; /* exact: values of at most 24 bits */
    a[m % 4] += fabs(p);
    s[m % 4] += p;
    t[m % 4] += fabs(q[m]) + fabs(k[m]);
  }
  *sa = (a[0] + a[1]) + (a[2] + a[3]);
  *sd = (s[0] + s[1]) + (s[2] + s[3]);
  *sq = (t[0] + t[1]) + (t[2] + t[3]);
}
/* Value sums of key row vj: W[e] += pz |v_e|, V1[e] += |v_e| (when the softmax sees the key),
 * vm[e] = max(vm[e], |v_e|): one column per lane, the columns' order untouched. */
static void pf_attn_value_sums_c(const double *vj, size_t d, double pz, int seen, double *W, double *V1, double *vm) {
  for (size_t e = 0; e < d; e++) {
    const double av = fabs(vj[e]);
    W[e] += pz * av;
    if (seen) V1[e] += av;
    vm[e] = av > vm[e] ? av : vm[e];
  }
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2"))) static void pf_attn_key_sums_avx2(const double *q, const double *k, size_t d,
                                                                   double *sa, double *sd, double *sq) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d A = _mm256_setzero_pd(), S = A, T = A;
  size_t m = 0;
  for (; m + 4 <= d; m += 4) {
    const __m256d qv = _mm256_loadu_pd(q + m), kv = _mm256_loadu_pd(k + m), p = _mm256_mul_pd(qv, kv);
    A = _mm256_add_pd(A, _mm256_andnot_pd(sign, p));
    S = _mm256_add_pd(S, p);
    T = _mm256_add_pd(T, _mm256_add_pd(_mm256_andnot_pd(sign, qv), _mm256_andnot_pd(sign, kv)));
  }
  double a[4], s[4], t[4];
  _mm256_storeu_pd(a, A);
  _mm256_storeu_pd(s, S);
  _mm256_storeu_pd(t, T);
  for (; m < d; m++) { /* lane m mod 4, as the plain loop */
    const double p = q[m] * k[m];
    a[m % 4] += fabs(p);
    s[m % 4] += p;
    t[m % 4] += fabs(q[m]) + fabs(k[m]);
  }
  *sa = (a[0] + a[1]) + (a[2] + a[3]);
  *sd = (s[0] + s[1]) + (s[2] + s[3]);
  *sq = (t[0] + t[1]) + (t[2] + t[3]);
}
__attribute__((target("avx2"))) static void pf_attn_value_sums_avx2(const double *vj, size_t d, double pz, int seen,
                                                                     double *W, double *V1, double *vm) {
  const __m256d sign = _mm256_set1_pd(-0.0), P = _mm256_set1_pd(pz);
  size_t e = 0;
  for (; e + 4 <= d; e += 4) {
    const __m256d av = _mm256_andnot_pd(sign, _mm256_loadu_pd(vj + e));
    _mm256_storeu_pd(W + e, _mm256_add_pd(_mm256_loadu_pd(W + e), _mm256_mul_pd(P, av)));
    if (seen) _mm256_storeu_pd(V1 + e, _mm256_add_pd(_mm256_loadu_pd(V1 + e), av));
    _mm256_storeu_pd(vm + e, _mm256_max_pd(_mm256_loadu_pd(vm + e), av));
  }
  pf_attn_value_sums_c(vj + e, d - e, pz, seen, W + e, V1 + e, vm + e);
}
#else
#define pf_attn_key_sums_avx2 pf_attn_key_sums_c
#define pf_attn_value_sums_avx2 pf_attn_value_sums_c
#endif
static void pf_attn_key_sums(const double *q, const double *k, size_t d, double *sa, double *sd, double *sq) {
  if (pf_avx2()) pf_attn_key_sums_avx2(q, k, d, sa, sd, sq);
  else pf_attn_key_sums_c(q, k, d, sa, sd, sq);
}
static void pf_attn_value_sums(const double *vj, size_t d, double pz, int seen, double *W, double *V1, double *vm) {
  if (pf_avx2()) pf_attn_value_sums_avx2(vj, d, pz, seen, W, V1, vm);
  else pf_attn_value_sums_c(vj, d, pz, seen, W, V1, vm);
}

static double pf_pow1p(double x, double k) { return exp(k * log1p(x)) * (1 + 0x1p-40); }

typedef struct {
  double *E, *sapprox, *delta, *xs, *pd; /* Lk each */
  double *W, *V1, *vm;                   /* d each */
} pf_attn_bwork;

/* Fills the bounds of row i of one head: O[d] (stride 1), S[Lk], P[Lk] (NULL for flash). */
static void pf_attn_row_bound(const pf_case *c, const double *q, const double *k, const double *v, size_t i,
                              pf_bound *bO, pf_bound *bS, pf_bound *bP, pf_attn_bwork *w, int *in_domain, char *why,
                              size_t wlen) {
  const size_t Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const pf_dtype T = c->dtype, A = c->accum;
  const int algo = pf_attn_algo(c), mask = (int)c->params[P_MASK];
  const double maskval = pf_attn_maskval(c), L = c->params[P_LAYER];
  const double uT = pf_unit_roundoff(T), uA = pf_unit_roundoff(A), u32 = 0x1p-24;
  const double sigT = pf_min_subnormal(T), sigA = pf_min_subnormal(A), sig32 = 0x1p-149;
  const double alpha = pf_attn_inv_sqrt_d(d) * (1 + 0x1p-51); /* an upper bound of 1/sqrt(d) */
  const double gd = pf_pow1p(uA, (double)d) - 1;              /* d roundings of the dot product */
  const double eps32 = 0x1p-22;                               /* expf: 2 ulps */
  const double *qi = q + i * d;
  double maxE = 0, X = 0;
  int ok = 1;
  for (size_t j = 0; j < Lk; j++) {
    double sa, sd, sq;
    pf_attn_key_sums(qi, k + j * d, d, &sa, &sd, &sq);
    w->E[j] = alpha * sa * (1 + (double)(d + 2) * 0x1p-52);
    w->sapprox[j] = sd / sqrt((double)d);
    const double E = w->E[j];
    double delta, stored_abs, accmax = sa * (1 + gd);
    switch (algo) {
    case PF_ATTN_INWARD: {
      const double ec = 0x1p-24 + 0x1p-50, cq = pf_attn_inv_fourth_root_d(d) * (1 + ec);
      const double pre = E * ((1 + ec) * (1 + ec) * (1 + uT) * (1 + uT) * (1 + gd) - 1) +
                         (sigT / 2) * cq * (1 + uT) * sq * (1 + gd) + (sigT * sigT / 4) * (double)d * (1 + gd) +
                         (double)d * sigA;
      stored_abs = pre;
      delta = pre * (1 + uT) + E * uT + sigT / 2;
      accmax = E * (1 + ec) * (1 + ec) * (1 + uT) * (1 + uT) * (1 + gd) + (double)d * sigT;
      break;
    }
    case PF_ATTN_LAYER_SCALED: {
      const double ea = 0x1p-51 + uA;
      const double pre = E * ((1 + ea) * (1 + gd) * (1 + uA) - 1) + alpha * (double)d * sigA * (1 + uA) * (1 + uA);
      stored_abs = pre / L;
      delta = (pre + E * uT * (1 + ea) * (1 + gd) * (1 + uA) + L * sigT / 2) * (1 + u32) + E * u32;
      break;
    }
    case PF_ATTN_FLASH: {
      const double ea = 0x1p-24 + 0x1p-52;
      stored_abs = 0;
      delta = E * ((1 + ea) * (1 + gd) * (1 + u32) * (1 + u32) - 1) + alpha * (double)d * sigA * 4 + sig32;
      break;
    }
    default: {
      const double pre = E * ((1 + gd) * (1 + uA) * (1 + uA) - 1) + alpha * (double)d * sigA * (1 + uA) * (1 + uA);
      stored_abs = pre;
      delta = pre * (1 + uT) + E * uT * (1 + uA) * (1 + uA) + sigT / 2;
      break;
    }
    }
    w->delta[j] = delta;
    if (bS) bS[j] = (pf_bound){0, stored_abs * 1.0001};
    /* domain: the accumulator and the stored score stay finite */
    const double stored_max = (E + delta) / (algo == PF_ATTN_LAYER_SCALED ? L : 1.0);
    if (ok && (accmax >= pf_max_finite(A) * (1 - 4 * uA) ||
               (algo != PF_ATTN_FLASH && stored_max >= pf_max_finite(T) * (1 - 4 * uT)) ||
               (algo == PF_ATTN_FLASH && E + delta >= pf_max_finite(PF_FP32)))) {
      ok = 0;
      snprintf(why, wlen, "query %zu, key %zu: |scores| up to %.4g (accumulating %.4g) leave %s", i, j,
               stored_max, accmax, pf_dtype_name(accmax >= pf_max_finite(A) * (1 - 4 * uA) ? A : T));
    }
    if (E > maxE) maxE = E;
  }
  /* a query the causal mask hides from every key: under -inf its P and O are 0 by definition
   * (PyTorch's), exactly; under a finite sentinel its scores are one rounded value, whose
   * differences are exactly 0 (no Delta) */
  const int hidden = pf_softmax_hidden(mask, i, Lq, Lk);
  if (hidden && isinf(maskval)) {
    for (size_t j = 0; bP && j < Lk; j++) bP[j] = (pf_bound){0, 0};
    for (size_t e = 0; e < d; e++) bO[e] = (pf_bound){0, 0};
    *in_domain = ok;
    return;
  }
  /* Delta over the positions the softmax sees as scores */
  double Delta = 0, vmax_s = -INFINITY;
  for (size_t j = 0; j < Lk; j++) {
    const int masked = pf_softmax_masked(mask, i, j, Lq, Lk);
    const double dj = masked ? (isinf(maskval) || hidden ? 0 : fabs(maskval) * uA) : w->delta[j];
    if (dj > Delta) Delta = dj;
    const double sj = masked ? maskval : w->sapprox[j];
    if (sj > vmax_s) vmax_s = sj;
    if (!masked && fabs(w->sapprox[j]) + w->delta[j] > X) X = fabs(w->sapprox[j]) + w->delta[j];
  }
  /* the probabilities as binary64 computes them, for the weights W (their own error is
   * far below the slack applied to W) */
  double Z = 0;
  for (size_t j = 0; j < Lk; j++) {
    const int masked = pf_softmax_masked(mask, i, j, Lq, Lk);
    const double sj = masked ? maskval : w->sapprox[j];
    w->pd[j] = isinf(sj) ? 0 : exp(sj - vmax_s);
    Z += w->pd[j];
  }
  const double wslack = exp(2 * (double)(d + 4) * 0x1p-52 * (maxE + 1)) * (1 + 0x1p-30);
  const double e2D = exp(2 * Delta);

  double relP = INFINITY, absP = INFINITY;
  if (algo != PF_ATTN_FLASH) {
    /* the softmax sees sigma * stored score; pass magnitudes that bound |sigma * s_hat| */
    const double sigma = algo == PF_ATTN_LAYER_SCALED ? L : 1.0;
    for (size_t j = 0; j < Lk; j++) w->xs[j] = (fabs(w->sapprox[j]) + w->delta[j]) / sigma;
    const pf_bound sm = pf_softmax_bound_row(PF_SOFTMAX_SAFE, pf_attn_smacc(c), T, sigma, w->xs, i, Lq, Lk, mask, maskval);
    relP = e2D * (1 + sm.rel) - 1;
    absP = sm.abs * e2D;
    for (size_t j = 0; j < Lk; j++) bP[j] = (pf_bound){relP * 1.0001, absP * 1.0001};
    if (ok && !isfinite(relP)) {
      ok = 0;
      snprintf(why, wlen, "query %zu: no error bound holds for the softmax of %zu scores in %s", i, Lk,
               pf_dtype_name(pf_attn_smacc(c)));
    }
  }
  const double gL = pf_pow1p(uA, (double)Lk) - 1;
  const size_t Bc = (size_t)c->params[P_BLOCK];
  const double nblocks = (double)((Lk + Bc - 1) / Bc);
  /* flash: block rescales the running max may make (counted with 2 Delta of slack) */
  double Rb = 0;
  if (algo == PF_ATTN_FLASH) {
    double run = -INFINITY;
    for (size_t j0 = 0; j0 < Lk; j0 += Bc) {
      double mb = -INFINITY;
      for (size_t j = j0; j < Lk && j < j0 + Bc; j++) {
        const int masked = pf_softmax_masked(mask, i, j, Lq, Lk);
        const double sj = masked ? maskval : w->sapprox[j];
        if (sj > mb) mb = sj;
      }
      if (run != -INFINITY && mb > run - 2 * Delta - 1e-300) Rb += 1;
      if (mb > run) run = mb;
    }
  }
  /* per column: W = sum_j p_j |v_je|, V1 = sum_j |v_je| over the keys the softmax sees, and the
   * largest |v_je|; key by key, so that V is read in the order it is stored */
  for (size_t e = 0; e < d; e++) w->W[e] = w->V1[e] = w->vm[e] = 0;
  for (size_t j = 0; j < Lk; j++)
    pf_attn_value_sums(v + j * d, d, w->pd[j] / Z, !(pf_softmax_masked(mask, i, j, Lq, Lk) && isinf(maskval)), w->W,
                       w->V1, w->vm);
  for (size_t e = 0; e < d; e++) {
    double W = w->W[e];
    const double V1 = w->V1[e], vm = w->vm[e];
    W *= wslack * (1 + (double)Lk * 0x1p-52);
    /* the P V accumulation stays finite: its partial sums are at most sum |p v| <= V1 */
    const double accmax = algo == PF_ATTN_FLASH ? fmin(pf_max_finite(A), pf_max_finite(PF_FP32)) : pf_max_finite(A);
    if (ok && V1 * 1.01 >= accmax * (1 - 4 * uA)) {
      ok = 0;
      snprintf(why, wlen, "query %zu, dim %zu: sum |v| = %.4g may overflow the P V accumulation in %s", i, e, V1,
               pf_dtype_name(A));
    }
    double abs, rel;
    if (algo != PF_ATTN_FLASH) {
      const double rho = (1 + relP) * (1 + uT) - 1, a = absP * (1 + uT) + sigT / 2;
      abs = rho * W + a * V1 + gL * (W * (1 + rho) + a * V1) + (double)Lk * sigA;
      rel = A != T ? uA : 0;
      abs *= 1 + rel;
    } else {
      const double X2 = 2 * (X + Delta);
      const double f = exp(u32 * X2) * (1 + eps32), g = exp(-u32 * X2) * (1 - eps32);
      const double Th_hi = f * (1 + uT) * pf_pow1p(uA, (double)Bc) * pow(f, Rb) * pf_pow1p(u32, 2 * nblocks);
      const double Th_lo = g * (1 - uT) / pf_pow1p(uA, (double)Bc) * pow(g, Rb) / pf_pow1p(u32, 2 * nblocks);
      const double Ph_hi = f * pf_pow1p(u32, (double)Bc) * pow(f, Rb) * pf_pow1p(u32, 2 * nblocks);
      const double Ph_lo = g / pf_pow1p(u32, (double)Bc) * pow(g, Rb) / pf_pow1p(u32, 2 * nblocks);
      const double kappa = fmax(Th_hi / Ph_lo - 1, 1 - Th_lo / Ph_hi);
      const double abs32 = 2 * sig32 + sig32;
      const double absf = ((abs32 * (1 + uT) + sigT / 2) * V1 + Rb * abs32 * (double)Lk * (vm + 1)) / Ph_lo +
                          nblocks * (double)Bc * sigA;
      abs = (e2D - 1) * W + e2D * W * kappa + absf;
      rel = T != PF_FP32 ? u32 : 0;
      abs *= 1 + rel;
    }
    if (!isfinite(abs)) abs = rel = INFINITY;
    bO[e] = (pf_bound){rel * 1.0001 + (rel > 0 ? 0x1p-60 : 0), abs * 1.0001};
  }
  *in_domain = ok;
}

/* The rows of one case, split over threads: each row writes its own bounds; the first row
 * (in row order) outside the domain is the one reported, whatever the thread count. */
typedef struct {
  const pf_case *c;
  const pf_tensor *in;
  pf_bound *out;
  const unsigned char *finite_kv; /* per head */
  size_t bad[PF_MAX_THREADS];     /* per thread: its first row outside the domain (SIZE_MAX: none) */
  char why[PF_MAX_THREADS][200];
} pf_attn_bjob;

static void pf_attn_bound_rows(void *ctx, int t, size_t begin, size_t end) {
  pf_attn_bjob *J = ctx;
  const pf_case *c = J->c;
  const size_t Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D];
  const size_t no = pf_attn_o_count(c), ns = pf_attn_s_count(c);
  const int flash = pf_attn_algo(c) == PF_ATTN_FLASH;
  pf_attn_bwork w;
  double *buf = malloc((5 * Lk + 3 * d) * sizeof(double));
  pf_bound *scratch = malloc((d + 2 * Lk) * sizeof(pf_bound));
  if (!buf || !scratch) abort(); /* a row's worth: a broken invariant */
  w.E = buf, w.sapprox = buf + Lk, w.delta = buf + 2 * Lk, w.xs = buf + 3 * Lk, w.pd = buf + 4 * Lk;
  w.W = buf + 5 * Lk, w.V1 = w.W + d, w.vm = w.V1 + d;
  J->bad[t] = SIZE_MAX;
  for (size_t u = begin; u < end; u++) {
    const size_t h = u / Lq, i = u % Lq;
    const double *q = J->in[0].data + h * Lq * d, *k = J->in[1].data + h * Lk * d, *v = J->in[2].data + h * Lk * d;
    pf_bound *bO = J->out ? J->out + u * d : scratch;
    pf_bound *bS = flash ? NULL : J->out ? J->out + no + u * Lk : scratch + d;
    pf_bound *bP = flash ? NULL : J->out ? J->out + no + ns + u * Lk : scratch + d + Lk;
    /* rows with a NaN or an infinity in what they read are undefined (oracle: range) */
    int finite = J->finite_kv[h];
    for (size_t m = 0; m < d; m++) finite &= isfinite(q[i * d + m]);
    int ok = 1;
    char rowwhy[200] = "";
    if (finite) pf_attn_row_bound(c, q, k, v, i, bO, bS, bP, &w, &ok, rowwhy, sizeof rowwhy);
    else {
      for (size_t e = 0; e < d; e++) bO[e] = (pf_bound){INFINITY, INFINITY};
      for (size_t j = 0; bS && j < Lk; j++) bS[j] = bP[j] = (pf_bound){INFINITY, INFINITY};
    }
    if (!ok && J->bad[t] == SIZE_MAX) {
      J->bad[t] = u;
      snprintf(J->why[t], sizeof J->why[t], "head %zu, %s", h, rowwhy);
    }
  }
  free(buf);
  free(scratch);
}

/* Runs the bound over every row; fills out (NULL: domain only). */
static int pf_attn_bound_all(const pf_case *c, const pf_tensor *in, pf_bound *out, char *why, size_t wlen) {
  const size_t Lq = c->shape[D_LQ], Lk = c->shape[D_LK], d = c->shape[D_D], heads = pf_attn_heads(c);
  pf_attn_bjob *J = calloc(1, sizeof *J);
  unsigned char *finite_kv = malloc(heads ? heads : 1);
  if (!J || !finite_kv) abort();
  for (size_t h = 0; h < heads; h++) {
    const double *k = in[1].data + h * Lk * d, *v = in[2].data + h * Lk * d;
    int f = 1;
    for (size_t x = 0; x < Lk * d; x++) f &= isfinite(k[x]) && isfinite(v[x]);
    finite_kv[h] = (unsigned char)f;
  }
  J->c = c, J->in = in, J->out = out, J->finite_kv = finite_kv;
  const int threads = pf_parallel_threads(heads * Lq, 8.0 * (double)Lk * (double)d);
  pf_parallel_for(heads * Lq, threads, pf_attn_bound_rows, J);
  size_t first = SIZE_MAX;
  int at = 0;
  for (int t = 0; t < threads; t++)
    if (J->bad[t] < first) first = J->bad[t], at = t;
  if (first != SIZE_MAX && why) snprintf(why, wlen, "%s", J->why[at]);
  free(finite_kv);
  free(J);
  return first == SIZE_MAX;
}

void pf_attention_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  pf_attn_bound_all(c, in, out, NULL, 0);
}

int pf_attention_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t Lk = c->shape[D_LK];
  const pf_dtype sm = pf_attn_smacc(c);
  if ((double)Lk > pf_max_finite(sm) / 2) {
    snprintf(why, len, "k_len %zu: the softmax sum may exceed %s's range", Lk, pf_dtype_name(sm));
    return 0;
  }
  return pf_attn_bound_all(c, in, NULL, why, len);
}

#define PF_ATTN_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
#define PF_ATTN_ACCUMS (PF_DT(PF_FP32) | PF_ACCUM_STORAGE)
static const char *const pf_attn_faults[] = {"softmax-no-max", NULL};
static const char *const pf_flash_faults[] = {"flash-no-rescale", "softmax-no-max", NULL};

#ifdef PF_HAVE_CUDA
#include "kernels/attention/attention_cuda.h"
#include "core/cuda_module.h"
/* the CUDA kernel, in the module (core/cuda_module.h) */
pf_status pf_attention_cuda(const pf_attn_launch *L, const double *q, const double *k, const double *v, double *out,
                            unsigned *fe) {
  __typeof__(&pf_attention_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_attention_cuda", (void **)&fn);
  return st ? st : fn(L, q, k, v, out, fe);
}
static pf_status pf_attention_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_attn_launch L = pf_attention_launch_of(c, fe);
  return pf_attention_cuda(&L, in[0].data, in[1].data, in[2].data, out, fe);
}
#define PF_ATTN_RUN_CUDA pf_attention_cuda_case
#else
#define PF_ATTN_RUN_CUDA NULL
#endif

static const pf_kernel pf_attention_post_scale = {
    PF_KERNEL_ABI, &pf_attention_op, "post-scale", "S = fl(alpha Q K^T) stored, fused softmax, P V (cuBLAS/Megatron)",
    PF_ATTN_DTYPES, PF_ATTN_ACCUMS, pf_attn_faults,
    "scores: |S - alpha QK^T| <= E((1+g_d)(1+u_A)^2 - 1) + alpha d s_A, E = alpha sum|q k|, g_d = (1+u_A)^d - 1; "
    "probabilities: safe softmax bound times e^(2 Delta); output: rho W + a V1 + g_L (W(1+rho) + a V1); "
    "domain: accumulator and stored scores finite, softmax bound finite",
    pf_attention_fwd_cpu, pf_attention_bound, pf_attention_in_domain, pf_attn_check, PF_ATTN_RUN_CUDA, .algo = PF_ATTN_POST_SCALE};
static const pf_kernel pf_attention_inward = {
    PF_KERNEL_ABI, &pf_attention_op, "inward", "Q and K each times d^-1/4 and rounded before the GEMM",
    PF_ATTN_DTYPES, PF_ATTN_ACCUMS, pf_attn_faults,
    "as post-scale with two more roundings of each operand ((1+u_T)^2 on E) and their subnormal floor; same domain",
    pf_attention_fwd_cpu, pf_attention_bound, pf_attention_in_domain, pf_attn_check, PF_ATTN_RUN_CUDA, .algo = PF_ATTN_INWARD};
static const pf_kernel pf_attention_layer_scaled = {
    PF_KERNEL_ABI, &pf_attention_op, "layer-scaled", "scores stored L times smaller; softmax multiplies by L in fp32",
    PF_ATTN_DTYPES, PF_ATTN_ACCUMS, pf_attn_faults,
    "as post-scale with alpha' = 1/(sqrt(d) L) and one more fp32 rounding (L S) in the softmax; the stored "
    "scores' range is L times larger",
    pf_attention_fwd_cpu, pf_attention_bound, pf_attention_in_domain, pf_attn_check, PF_ATTN_RUN_CUDA, .algo = PF_ATTN_LAYER_SCALED};
static const pf_kernel pf_attention_flash = {
    PF_KERNEL_ABI, &pf_attention_op, "flash", "key blocks, running max and sum, rescaled fp32 output accumulator",
    PF_ATTN_DTYPES, PF_ATTN_ACCUMS, pf_flash_faults,
    "output: (e^(2 Delta) - 1) W + e^(2 Delta) W kappa + floors, kappa from the per-term factors (expf, P to T, "
    "block GEMM, R_b rescales, fp32 adds); domain: accumulator and fp32 scores finite",
    pf_attention_fwd_cpu, pf_attention_bound, pf_attention_in_domain, pf_attn_check, PF_ATTN_RUN_CUDA, .algo = PF_ATTN_FLASH};

const pf_kernel *const pf_attention_kernels[] = {&pf_attention_post_scale, &pf_attention_inward,
                                                 &pf_attention_layer_scaled, &pf_attention_flash, NULL};
