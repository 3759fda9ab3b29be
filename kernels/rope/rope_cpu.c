/* Rotary position embeddings: CPU emulation of every variant, their contracts and the variant
 * table.
 *
 *   y = t rotated pair by pair by theta_{p,k} = P B^(-2k/dim) (rope_spec.h has the definition).
 *
 * Variants:
 *   torch  Megatron-core's unfused RoPE as PyTorch runs it on the CPU (megatron-core 0.16.1,
 *          torch 2.15; HF Llama's is the same arithmetic): the fp32 table inv_freq, positions
 *          torch.arange(n, dtype=inv_freq.dtype) + offset, torch.outer(seq, inv_freq), cos and sin
 *          cast to t's dtype, t * cos + rotate_half(t) * sin in t's dtype. Accumulation fp32 (the
 *          table as Megatron keeps it) or the storage dtype (a model cast to bf16 with its
 *          inv_freq buffer: positions, angles, cos and sin all in bf16)
 *   fused  a fused RoPE kernel (Transformer Engine's fused_apply_rotary_pos_emb, apex's): the
 *          same fp32 angles, cos and sin in fp32, the rotation in fp32 (an FMA), rounded once */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hazard.h"
#include "core/kernel.h"
#include "core/runner.h"
#include "kernels/rope/rope.h"

#include "oracles/rope_mpfr.h"

static const char *const pf_rope_dims[] = {"positions", "heads", "dim"};
static const char *const pf_rope_inputs[] = {"t"};
static const char *const pf_rope_scalings[] = {"none", "linear", "ntk", NULL};
static const char *const pf_rope_layouts[] = {"half", "interleaved", NULL};

static const pf_param_desc pf_rope_params[] = {
    {"base", PF_PARAM_REAL, 10000, 2, 1e9, NULL,
     "the frequencies' base B: omega_k = B^(-2k/dim) (10^4 GPT-NeoX and Llama 2, 5 10^5 Llama 3, 10^6 Code Llama)",
     0, "10000,500000,1000000"},
    {"scaling", PF_PARAM_CHOICE, PF_ROPE_SCALE_NONE, 0, 2, pf_rope_scalings,
     "context extension: none; linear (positions divided by factor: position interpolation, Megatron's "
     "seq_len_interpolation_factor); ntk (the base multiplied by factor^(dim/(dim-2)))",
     0, "none,none,linear,ntk"},
    {"factor", PF_PARAM_REAL, 1, 1, 1024, NULL, "the scaling's factor (1 unless scaling is linear or ntk)", 0,
     "4,8,32"},
    {"offset", PF_PARAM_INT, 0, 0, 1 << 30, NULL,
     "the first row's position: row i is at position offset + i (long contexts without long tensors)", 0,
     "1..1000000"},
    {"layout", PF_PARAM_CHOICE, PF_ROPE_LAYOUT_HALF, 0, 1, pf_rope_layouts,
     "the pairs rotated together: half (j, j + dim/2: GPT-NeoX, Llama, Megatron's default) or interleaved "
     "(2k, 2k+1: GPT-J, Megatron's rotary_interleaved)",
     0, "half,half,interleaved"},
};

static size_t pf_rope_count(const pf_case *c) { return c->shape[0] * c->shape[1] * c->shape[2]; }
static size_t pf_rope_input_count(const pf_case *c, int i) {
  (void)i;
  return pf_rope_count(c);
}
static int pf_rope_input_dims(const pf_case *c, int i, int *d) {
  (void)c, (void)i;
  d[0] = 0, d[1] = 1, d[2] = 2; /* t[position][head][j] */
  return 3;
}

/* y normwise per head vector: a rotation's error is an angle's, shared by the vector's pairs */
static int pf_rope_stages(const pf_case *c, pf_stage *st) {
  st[0] = (pf_stage){"y", 0, pf_rope_count(c), 0, 0, 3, {0, 1, 2}, PF_MEASURE_ROW};
  return 1;
}

static int pf_rope_faults_of(const pf_case *c) {
  return (strcmp(c->fault, "rope-angle-in-storage") == 0 ? PF_ROPE_F_ANGLE_IN_STORAGE : 0) |
         (strcmp(c->fault, "rope-sin-sign") == 0 ? PF_ROPE_F_SIN_SIGN : 0) |
         (strcmp(c->fault, "rope-cos-in-storage") == 0 ? PF_ROPE_F_COS_IN_STORAGE : 0);
}

pf_rope_launch pf_rope_launch_of(const pf_case *c, int faults) {
  pf_rope_launch L;
  L.positions = c->shape[PF_ROPE_D_POS];
  L.heads = c->shape[PF_ROPE_D_HEADS];
  L.dim = c->shape[PF_ROPE_D_DIM];
  L.algo = pf_case_algo(c);
  L.faults = faults;
  L.scaling = (int)c->params[PF_ROPE_P_SCALING];
  L.layout = (int)c->params[PF_ROPE_P_LAYOUT];
  L.dtype = c->dtype;
  L.accum = c->accum;
  L.base = c->params[PF_ROPE_P_BASE];
  L.factor = c->params[PF_ROPE_P_FACTOR];
  L.offset = c->params[PF_ROPE_P_OFFSET];
  return L;
}

double pf_rope_row_tables(const pf_rope_launch *L, const double *inv, size_t i, double *theta, double *c, double *s,
                          unsigned *fe) {
  const double seq = pf_rope_seq(L, i, fe);
  for (size_t k = 0; k < L->dim / 2; k++) {
    theta[k] = pf_rope_theta(L, seq, inv[k], fe);
    pf_rope_cos_sin(L, theta[k], &c[k], &s[k]);
  }
  return seq;
}

pf_status pf_rope_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_rope_launch L = pf_rope_launch_of(c, pf_rope_faults_of(c));
  const size_t h = L.dim / 2, n = L.heads * L.dim;
  double *w = malloc(4 * h * sizeof(double));
  if (!w) return pf_error(PF_ERR_NOMEM, "rope: cannot allocate tables of %zu", h);
  double *inv = w, *th = w + h, *cs = w + 2 * h, *sn = w + 3 * h;
  for (size_t k = 0; k < h; k++) inv[k] = pf_rope_inv_freq(&L, k);
  for (size_t i = 0; i < L.positions; i++) {
    pf_rope_row_tables(&L, inv, i, th, cs, sn, fe);
    const double *t = in[0].data + i * n;
    for (size_t hd = 0; hd < L.heads; hd++)
      for (size_t j = 0; j < L.dim; j++) {
        size_t k, q;
        int sign;
        pf_rope_pair(L.layout, L.dim, j, &k, &q, &sign);
        out[i * n + hd * L.dim + j] = pf_rope_apply(&L, t[hd * L.dim + j], t[hd * L.dim + q], sign, cs[k], sn[k], fe);
      }
  }
  free(w);
  return PF_OK;
}

#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#include "kernels/rope/rope_cuda.h"
/* the native CUDA kernel, in the module (core/cuda_module.h) */
static pf_status pf_rope_cuda_case(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  __typeof__(&pf_rope_cuda) fn;
  const pf_status st = pf_cuda_entry("pf_rope_cuda", (void **)&fn);
  if (st) return st;
  const pf_rope_launch L = pf_rope_launch_of(c, pf_rope_faults_of(c));
  return fn(&L, in[0].data, out, fe);
}
#define PF_ROPE_RUN_CUDA pf_rope_cuda_case
#else
#define PF_ROPE_RUN_CUDA NULL
#endif

/* ---- contracts ---------------------------------------------------------------------------
 * Per element y_j = t_j cos(theta) + sign t_j' sin(theta), the kernel's value before its final
 * rounding within
 *   |t_j| Ec + |t_j'| Es + the roundings of its products (and, fused in bf16/fp16, of its fp32 sum)
 * of the exact one, where Ec bounds |cos_used - cos(theta)|:
 *   Ec = E_theta + U ulp_32(cos) + (the cast of cos to the storage dtype: half an ulp of it),
 *   E_theta = |theta_hat - P omega|: the variant's own angle against the exact one (evaluated in
 *   binary64 within PF_ROPE_ANGLE_REL), so a table in bf16 or an fp32 angle at position 10^6 is
 *   inside the contract, and judged by the hazard imprecise instead; plus |seq| ulp(inv_freq) and
 *   ulp(theta) in the table's dtype, for a power within 1 ulp (SLEEF's powf);
 *   U = 1 for torch (SLEEF's cosf and sinf, and glibc's, are within 1 ulp), 2 for fused (CUDA's
 *   sincosf: 2 ulps). The roundings are taken at the largest value any kernel within the
 *   contract can hold there (cos_used up to Ec away from the emulation's). */
static double pf_rope_rerr(pf_dtype t, double mag) {
  const pf_format f = pf_format_of(t);
  return ldexp(1.0, -f.prec) * mag * (1 + 0x1p-20) + ldexp(1.0, f.emin - f.prec);
}

/* E_theta for position row i, frequency k: the emulation's angle theta_hat (from its seq and inv)
 * against the exact one, widened to any kernel of the variant: its power within 1 ulp (SLEEF's
 * powf) may give an inv_freq one ulp of the table's dtype away, and its product then round to a
 * neighbour of theta_hat (measured: base 2, dim 64 gives an inv_freq[3] one ulp from the
 * correctly rounded one on PyTorch) */
static double pf_rope_theta_err(const pf_rope_launch *L, size_t i, size_t k, double seq, double inv, double theta_hat) {
  const double P = pf_rope_position(L->scaling, L->factor, L->offset + (double)i);
  const double om = pow(pf_rope_base(L->scaling, L->base, L->factor, L->dim), -(double)(2 * k) / (double)L->dim);
  const double th = P * om;
  return fabs(theta_hat - th) + PF_ROPE_ANGLE_REL * th + fabs(seq) * pf_ulp(L->accum, inv) +
         pf_ulp(L->accum, theta_hat);
}

/* |cos_used - cos(theta)| for the value v the emulation uses (cos or sin) */
static double pf_rope_trig_err(const pf_rope_launch *L, double v, double eth) {
  const int U = L->algo == PF_ROPE_FUSED ? 2 : 1;
  double e = eth + U * 0x1p-23 * fabs(v) * (1 + 0x1p-20) + 0x1p-149;
  if (L->accum != PF_FP32) e += pf_rope_rerr(L->accum, fabs(v) + e); /* cos of the table's dtype */
  if (L->algo == PF_ROPE_TORCH && L->dtype != PF_FP32 && L->dtype != L->accum)
    e += pf_rope_rerr(L->dtype, fabs(v) + e); /* .to(t.dtype) */
  return e < 2 + fabs(v) ? e : 2 + fabs(v);  /* both within [-1, 1] */
}

static int pf_rope_bounds(const pf_case *c, const pf_tensor *in, pf_bound *out, char *why, size_t len) {
  const pf_rope_launch L = pf_rope_launch_of(c, 0);
  const size_t h = L.dim / 2, n = L.heads * L.dim;
  double *w = malloc(6 * h * sizeof(double));
  if (!w) {
    for (size_t q = 0; out && q < pf_rope_count(c); q++) out[q] = (pf_bound){INFINITY, INFINITY};
    if (why) snprintf(why, len, "no memory for the bounds' tables");
    return 0;
  }
  double *inv = w, *th = w + h, *cs = w + 2 * h, *sn = w + 3 * h, *ec = w + 4 * h, *es = w + 5 * h;
  for (size_t k = 0; k < h; k++) inv[k] = pf_rope_inv_freq(&L, k);
  const pf_dtype t = L.dtype;
  int ok = 1;
  for (size_t i = 0; i < L.positions && (ok || out); i++) {
    unsigned fe = 0;
    const double seq = pf_rope_row_tables(&L, inv, i, th, cs, sn, &fe);
    for (size_t k = 0; k < h; k++) {
      if (!isfinite(th[k])) {
        if (ok && why)
          snprintf(why, len, "position %.17g: the angle of frequency %zu leaves %s (%g)", L.offset + (double)i, k,
                   pf_dtype_name(L.accum), th[k]);
        ok = 0;
        ec[k] = es[k] = INFINITY;
        continue;
      }
      const double eth = pf_rope_theta_err(&L, i, k, seq, inv[k], th[k]);
      ec[k] = pf_rope_trig_err(&L, cs[k], eth);
      es[k] = pf_rope_trig_err(&L, sn[k], eth);
    }
    const double *tv = in[0].data + i * n;
    for (size_t hd = 0; hd < L.heads; hd++)
      for (size_t j = 0; j < L.dim; j++) {
        size_t k, q;
        int sign;
        pf_rope_pair(L.layout, L.dim, j, &k, &q, &sign);
        const double a = fabs(tv[hd * L.dim + j]), b = fabs(tv[hd * L.dim + q]);
        const double ma = a * (fabs(cs[k]) + 2 * ec[k]), mb = b * (fabs(sn[k]) + 2 * es[k]);
        double e = a * ec[k] + b * es[k];
        if (L.algo == PF_ROPE_TORCH) e += pf_rope_rerr(t, ma) + pf_rope_rerr(t, mb);
        else e += pf_rope_rerr(PF_FP32, mb) + (t != PF_FP32 ? pf_rope_rerr(PF_FP32, ma + mb) : 0);
        if (out) out[i * n + hd * L.dim + j] = e < INFINITY ? (pf_bound){0x1p-45, e * (1 + 0x1p-20) + 0x1p-1074}
                                                            : (pf_bound){INFINITY, INFINITY};
        if (ok && why && !(2 * (ma + mb) < pf_max_finite(t))) {
          snprintf(why, len, "position %.17g: y of head %zu, element %zu may overflow %s on the way",
                   L.offset + (double)i, hd, j, pf_dtype_name(t));
          ok = 0;
        }
      }
  }
  free(w);
  return ok;
}

void pf_rope_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) { pf_rope_bounds(c, in, out, NULL, 0); }

/* Domain: finite inputs, every angle finite in the table's dtype (fp16 positions end at 65504),
 * no overflow on the way. */
int pf_rope_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  const size_t n = pf_rope_count(c), row = c->shape[1] * c->shape[2];
  for (size_t q = 0; q < n; q++)
    if (!isfinite(in[0].data[q])) {
      snprintf(why, len, "position row %zu: t[%zu] is not finite", q / row, q % row);
      return 0;
    }
  return pf_rope_bounds(c, in, NULL, why, len);
}

static pf_status pf_rope_check(const pf_case *c) {
  const size_t dim = c->shape[PF_ROPE_D_DIM];
  const int scaling = (int)c->params[PF_ROPE_P_SCALING];
  if (dim % 2) return pf_error(PF_ERR_ARG, "rope: dim must be even (pairs are rotated), got %zu", dim);
  if (scaling == PF_ROPE_SCALE_NTK && dim < 4)
    return pf_error(PF_ERR_ARG, "rope: scaling ntk needs dim of 4 or more (the base scales by factor^(dim/(dim-2)))");
  if (scaling == PF_ROPE_SCALE_NONE && c->params[PF_ROPE_P_FACTOR] != 1)
    return pf_error(PF_ERR_ARG, "rope: parameter 'factor' applies to scaling linear or ntk (got %g with none)",
                    c->params[PF_ROPE_P_FACTOR]);
  return PF_OK;
}

/* positions x heads x dim elements: the emulation about 12 ns each and 60 ns per angle (cos, sin
 * and the bound's pow); the oracle's fast path 25 ns per element and 150 ns per angle */
static void pf_rope_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  const double n = (double)pf_rope_count(c), a = (double)c->shape[0] * (double)(c->shape[2] / 2);
  *emulation_s = 12e-9 * n + 60e-9 * a;
  *oracle_s = 25e-9 * n + 150e-9 * a;
}

static const pf_fault_setting pf_rope_fault_settings[] = {
    {"rope-angle-in-storage", "bf16", {"offset=4096", NULL}},
    {"rope-sin-sign", NULL, {NULL}},
    {"rope-cos-in-storage", "bf16", {NULL}},
    {NULL, NULL, {NULL}},
};

/* the precision report's sweep: the scan along the position (the angle's lost fractional bits),
 * and where each variant's rotation stops being usable */
static const pf_op_sweep pf_rope_sweep = {
    .kind = PF_SWEEP_SCAN,
    .shape = "4x2x64", .along = "param:offset", .lo = 0, .hi = 1 << 24, .fail = "finding", .cases_div = 1,
    .fault_settings = pf_rope_fault_settings,
    .searches = {{"rotation imprecise from position", "1x4x128", "param:offset", "imprecise", 0, 1 << 30, {NULL}},
                 {"rotation imprecise from position, below fp16's 65504", "1x4x128", "param:offset", "imprecise", 0,
                  65000, {NULL}}},
    .explanation =
        "RoPE rotates each pair of a head's vector by the angle p omega_k. The angle is a product that grows with the "
        "position p while its dtype keeps a fixed number of bits: computed in fp32 its error reaches 2^-24 p omega_k, "
        "so the fastest frequencies (omega_0 = 1) lose their fractional bits of angle at p in the 10^5-10^6 that long "
        "contexts use, and the rotated q and k carry that error; with the table in bf16 (a model cast whole) the "
        "positions themselves round to 8 bits from p = 256, and the rotation is noise from a few hundred positions "
        "on. The hazard imprecise marks where the rotation's error passes the dtype's threshold.",
};

int pf_decode_rope_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* rope_fuzzer.c */
const pf_op pf_rope_op = {
    .name = "rope",
    .summary = "rotary position embeddings: each pair of q or k rotated by position x frequency",
    .ndims = 3,
    .dim_names = pf_rope_dims,
    .dim_max = {(size_t)1 << 24, (size_t)1 << 16, (size_t)1 << 16},
    .dim_default = {16, 2, 64},
    .elems_max = (size_t)1 << 30,
    .nparams = PF_ROPE_NPARAMS,
    .params = pf_rope_params,
    .ninputs = 1,
    .input_names = pf_rope_inputs,
    .input_count = pf_rope_input_count,
    .output_count = pf_rope_count,
    .oracle = pf_rope_mpfr,
    .stages = pf_rope_stages,
    .input_dims = pf_rope_input_dims,
    .cost = pf_rope_cost,
    .fuzz_decode = pf_decode_rope_fuzzer,
    .sweep = &pf_rope_sweep,
    .hazard_axis = {[PF_H_IMPRECISE] = "param:offset"},
};

#define PF_ROPE_DTYPES (PF_DT(PF_FP32) | PF_DT(PF_FP16) | PF_DT(PF_BF16))
static const char *const pf_rope_torch_faults[] = {"rope-angle-in-storage", "rope-sin-sign", NULL};
static const char *const pf_rope_fused_faults[] = {"rope-angle-in-storage", "rope-sin-sign", "rope-cos-in-storage",
                                                   NULL};
#define PF_ROPE_CONTRACT                                                                                              \
  "each y within |t_j| Ec + |t_j'| Es + its products' roundings of the exact rotation, Ec and Es the distance of "   \
  "the cos and sin used from the exact ones: the variant's own angle error, 1 ulp of fp32 per cos or sin (fused: 2), " \
  "the casts (rope_cpu.c); domain: finite t, every angle finite in the table's dtype, no overflow on the way"

static const pf_kernel pf_rope_torch = {
    PF_KERNEL_ABI, &pf_rope_op, "torch",
    "Megatron-core's RoPE on PyTorch's CPU (megatron-core 0.16.1, torch 2.15): fp32 table and angle (or the "
    "storage dtype's), cos and sin cast to t's dtype, t cos + rotate_half(t) sin in t's dtype",
    PF_ROPE_DTYPES, PF_DT(PF_FP32) | PF_ACCUM_STORAGE, pf_rope_torch_faults, PF_ROPE_CONTRACT, pf_rope_cpu,
    pf_rope_bound, pf_rope_in_domain, pf_rope_check, NULL, .algo = PF_ROPE_TORCH};
static const pf_kernel pf_rope_fused = {
    PF_KERNEL_ABI, &pf_rope_op, "fused",
    "a fused RoPE kernel (Transformer Engine's, apex's): fp32 angle, cos and sin, the rotation in fp32 (an FMA), one "
    "rounding",
    PF_ROPE_DTYPES, PF_DT(PF_FP32), pf_rope_fused_faults, PF_ROPE_CONTRACT, pf_rope_cpu, pf_rope_bound,
    pf_rope_in_domain, pf_rope_check, PF_ROPE_RUN_CUDA, .algo = PF_ROPE_FUSED};

const pf_kernel *const pf_rope_kernels[] = {&pf_rope_torch, &pf_rope_fused, NULL};
