// Attention backward on the GPU in native types: q, k, v, dO and every stored intermediate (S,
// P, dP, dS, O) in the storage dtype (float, __half, __nv_bfloat16), the GEMMs' elements as
// fused multiply-adds in the accumulation type (fmaf, or __hfma in the storage type: one
// rounding per multiply-add, as the emulation's pf_attn_dot), softmax, the row statistics and
// the elementwise steps in binary32 (core/cuda_native.cuh). Each thread takes one query row
// (the forward, D, P and dS, then dQ) or one key (dV and dK), its sums in the emulation's order
// (attention_bwd_cpu.c, pf_ab_head): the contract's running bounds follow that order. D
// accumulated in the storage dtype (--param delta=storage) adds a binary32 term to a value of
// the storage type: the sum is formed in binary64 and rounded once, as the emulation forms it.
#include "core/cuda_check.h"
#include "core/cuda_module.h"
#include "core/cuda_native.cuh"
#include "kernels/attention_bwd/attention_bwd_cuda.h"

typedef struct {
  pf_attn_bwd_launch L;
  size_t heads;
  float alpha32;
} pf_abn;

__device__ __forceinline__ float pf_abn_fma(float a, float b, float s) { return fmaf(a, b, s); }
__device__ __forceinline__ __half pf_abn_fma(__half a, __half b, __half s) { return __hfma(a, b, s); }
__device__ __forceinline__ __nv_bfloat16 pf_abn_fma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 s) {
  return __hfma(a, b, s);
}

// sum_k a[k sa] b[k sb] in A, one rounding per multiply-add, k in order; as a binary32 value
template <typename T, typename A>
__device__ float pf_abn_dot(const T *a, size_t sa, const T *b, size_t sb, size_t n, unsigned *fe) {
  A s = pf_nat_to<A>(0.0f);
  for (size_t k = 0; k < n; k++) {
    const A x = pf_nat_to<A>(pf_nat_f(a[k * sa])), y = pf_nat_to<A>(pf_nat_f(b[k * sb]));
    const A r = pf_abn_fma(x, y, s);
    if (isinf(pf_nat_f(r)) && isfinite(pf_nat_f(x)) && isfinite(pf_nat_f(y)) && isfinite(pf_nat_f(s))) *fe |= PF_FE_OVERFLOW;
    else if (isnan(pf_nat_f(r)) && !isnan(pf_nat_f(x)) && !isnan(pf_nat_f(y)) && !isnan(pf_nat_f(s))) *fe |= PF_FE_INVALID;
    s = r;
  }
  return pf_nat_f(s);
}

// binary32 operations with their events
__device__ __forceinline__ float pf_abn_add(float a, float b, unsigned *fe) { return pf_nat_add_ev(a, b, fe); }
__device__ __forceinline__ float pf_abn_sub(float a, float b, unsigned *fe) { return pf_nat_sub_ev(a, b, fe); }
__device__ __forceinline__ float pf_abn_mul(float a, float b, unsigned *fe) { return pf_nat_mul_ev(a, b, fe); }
// a binary32 value stored in T (an overflow to inf is an event)
template <typename T> __device__ __forceinline__ T pf_abn_store(float x, unsigned *fe) {
  const T r = pf_nat_to<T>(x);
  if (isinf(pf_nat_f(r)) && isfinite(x)) *fe |= PF_FE_OVERFLOW;
  return r;
}

// s_ij = fl32(alpha32 fl32(q_i . k_j)), -inf where masked (pf_attn_bwd_score)
template <typename T, typename A>
__device__ float pf_abn_score(const pf_abn &N, const T *qi, const T *kj, size_t i, size_t j, unsigned *fe) {
  if (pf_softmax_masked(N.L.mask, i, j, N.L.lq, N.L.lk)) return -INFINITY;
  return pf_abn_mul(N.alpha32, pf_abn_dot<T, A>(qi, 1, kj, 1, N.L.d, fe), fe);
}

// the standard variant, one query row: S stored in T, the safe softmax in binary32 (P in T),
// dP, D = sum dP P, dS; S' = fl_T(alpha32 dS) kept for dQ and dK (in S's place)
template <typename T, typename A>
__global__ void pf_abn_standard_rows(pf_abn N, const T *q, const T *k, const T *v, const T *dO, T *P, T *S, T *dPo,
                                     T *dSo, unsigned *fe_out) {
  const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t Lq = N.L.lq, Lk = N.L.lk, d = N.L.d;
  if (r >= N.heads * Lq) return;
  const size_t h = r / Lq, i = r % Lq;
  const T *qi = q + r * d, *kh = k + h * Lk * d, *vh = v + h * Lk * d, *gi = dO + r * d;
  T *Pi = P + r * Lk, *Si = S + r * Lk, *dPi = dPo + r * Lk, *dSi = dSo + r * Lk;
  unsigned fe = 0;
  float m = -INFINITY;
  for (size_t j = 0; j < Lk; j++) {
    Si[j] = pf_abn_store<T>(pf_abn_score<T, A>(N, qi, kh + j * d, i, j, &fe), &fe);
    if (pf_nat_f(Si[j]) > m) m = pf_nat_f(Si[j]);
  }
  const int hidden = pf_softmax_hidden(N.L.mask, i, Lq, Lk); /* no key to see: P = 0 (PyTorch's) */
  float s = 0;
  for (size_t j = 0; j < Lk && !hidden; j++) s = pf_abn_add(s, pf_nat_exp(pf_abn_sub(pf_nat_f(Si[j]), m, &fe), &fe), &fe);
  for (size_t j = 0; j < Lk; j++) {
    const float e = hidden ? 0.0f : pf_nat_exp(pf_abn_sub(pf_nat_f(Si[j]), m, &fe), &fe);
    Pi[j] = hidden ? pf_abn_store<T>(0.0f, &fe) : pf_abn_store<T>(pf_nat_div_ev(e, s, &fe), &fe);
  }
  float D = 0;
  for (size_t j = 0; j < Lk; j++) {
    dPi[j] = pf_abn_store<T>(pf_abn_dot<T, A>(gi, 1, vh + j * d, 1, d, &fe), &fe);
    D = pf_abn_add(D, pf_abn_mul(pf_nat_f(dPi[j]), pf_nat_f(Pi[j]), &fe), &fe);
  }
  if (N.L.faults & PF_ATTN_BWD_F_NO_DELTA) D = 0;
  for (size_t j = 0; j < Lk; j++) {
    dSi[j] = pf_abn_store<T>(pf_abn_mul(pf_nat_f(Pi[j]), pf_abn_sub(pf_nat_f(dPi[j]), D, &fe), &fe), &fe);
    Si[j] = N.L.faults & PF_ATTN_BWD_F_NO_SCALE ? dSi[j] : pf_abn_store<T>(pf_abn_mul(N.alpha32, pf_nat_f(dSi[j]), &fe), &fe);
  }
  if (fe) atomicOr(fe_out, fe);
}

// D + x accumulated in dacc: binary32, or T (the sum formed in binary64, rounded once)
template <typename T> __device__ __forceinline__ float pf_abn_dacc(const pf_abn &N, float D, float x, unsigned *fe) {
  if (N.L.dacc == PF_FP32) return pf_abn_add(D, x, fe);
  const float r = pf_nat_f(pf_nat_from_double<T>((double)D + (double)x));
  if (isinf(r) && isfinite(D) && isfinite(x)) *fe |= PF_FE_OVERFLOW;
  return r;
}

// flash and flash-pdp, one query row: the forward's O_i and L_i (pf_attn_bwd_flash_fwd_row),
// then D, P recomputed from L_i, dP, dS (P and dS stored in T). w: 2 block + d floats.
template <typename T, typename A>
__global__ void pf_abn_flash_rows(pf_abn N, const T *q, const T *k, const T *v, const T *dO, T *O, T *P, T *dS, float *w,
                                  unsigned *fe_out) {
  const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t Lq = N.L.lq, Lk = N.L.lk, d = N.L.d, Bc = N.L.block;
  if (r >= N.heads * Lq) return;
  const size_t h = r / Lq, i = r % Lq;
  const T *qi = q + r * d, *kh = k + h * Lk * d, *vh = v + h * Lk * d, *gi = dO + r * d;
  T *Oi = O + r * d, *Pi = P + r * Lk, *dSi = dS + r * Lk;
  float *s = w + r * (2 * Bc + d), *o = s + 2 * Bc;
  T *pt = (T *)(s + Bc); /* the block's P in T (fits in Bc floats) */
  unsigned fe = 0;
  /* the forward */
  float m = -INFINITY, l = 0;
  for (size_t e = 0; e < d; e++) o[e] = 0;
  for (size_t j0 = 0; j0 < Lk; j0 += Bc) {
    const size_t nb = Lk - j0 < Bc ? Lk - j0 : Bc;
    float mn = m;
    for (size_t j = 0; j < nb; j++) {
      s[j] = pf_abn_score<T, A>(N, qi, kh + (j0 + j) * d, i, j0 + j, &fe);
      if (s[j] > mn) mn = s[j];
    }
    if (mn == -INFINITY) continue; /* only masked keys so far */
    const float rr = m == mn ? 1.0f : pf_nat_exp(pf_abn_sub(m, mn, &fe), &fe);
    float rs = 0;
    for (size_t j = 0; j < nb; j++) {
      const float p = pf_nat_exp(pf_abn_sub(s[j], mn, &fe), &fe);
      rs = pf_abn_add(rs, p, &fe);
      pt[j] = pf_abn_store<T>(p, &fe);
    }
    l = pf_abn_add(pf_abn_mul(l, rr, &fe), rs, &fe);
    for (size_t e = 0; e < d; e++)
      o[e] = pf_abn_add(pf_abn_mul(o[e], rr, &fe), pf_abn_dot<T, A>(pt, 1, vh + j0 * d + e, d, nb, &fe), &fe);
    m = mn;
  }
  const int hidden = pf_softmax_hidden(N.L.mask, i, Lq, Lk); /* no key to see: O_i = 0, P_i = 0 */
  for (size_t e = 0; e < d; e++) Oi[e] = pf_abn_store<T>(hidden ? 0.0f : pf_nat_div_ev(o[e], l, &fe), &fe);
  const float logl = hidden ? -INFINITY : pf_nat_log(l, &fe);
  const float Lse = hidden || N.L.faults & PF_ATTN_BWD_F_LSE_NO_MAX ? logl : pf_abn_add(m, logl, &fe);
  /* the backward's row */
  float D = 0;
  if (N.L.algo == PF_ATTN_BWD_FLASH)
    for (size_t e = 0; e < d; e++) D = pf_abn_dacc<T>(N, D, pf_abn_mul(pf_nat_f(gi[e]), pf_nat_f(Oi[e]), &fe), &fe);
  /* flash-pdp: D = sum_j p_j dp_j, p and dp recomputed below rather than kept (2 Lk floats a row) */
  if (N.L.algo == PF_ATTN_BWD_FLASH_PDP)
    for (size_t j = 0; j < Lk; j++) {
      const float sc = pf_abn_score<T, A>(N, qi, kh + j * d, i, j, &fe);
      const float p = sc == -INFINITY ? 0.0f : pf_nat_exp(pf_abn_sub(sc, Lse, &fe), &fe);
      const float dp = pf_abn_dot<T, A>(gi, 1, vh + j * d, 1, d, &fe);
      D = pf_abn_dacc<T>(N, D, pf_abn_mul(p, dp, &fe), &fe);
    }
  if (N.L.faults & PF_ATTN_BWD_F_NO_DELTA) D = 0;
  for (size_t j = 0; j < Lk; j++) {
    const float sc = pf_abn_score<T, A>(N, qi, kh + j * d, i, j, &fe);
    const float p = sc == -INFINITY ? 0.0f : pf_nat_exp(pf_abn_sub(sc, Lse, &fe), &fe);
    const float dp = pf_abn_dot<T, A>(gi, 1, vh + j * d, 1, d, &fe);
    dSi[j] = pf_abn_store<T>(pf_abn_mul(p, pf_abn_sub(dp, D, &fe), &fe), &fe);
    Pi[j] = pf_abn_store<T>(p, &fe);
  }
  if (fe) atomicOr(fe_out, fe);
}

// one key: dV_j = P^T dO, dK_j = alpha32 dS^T q (standard: from S' = fl_T(alpha32 dS), no
// further scaling), the queries in order
template <typename T, typename A>
__global__ void pf_abn_keys(pf_abn N, const T *q, const T *dO, const T *P, const T *G, T *dK, T *dV, unsigned *fe_out) {
  const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t Lq = N.L.lq, Lk = N.L.lk, d = N.L.d;
  if (r >= N.heads * Lk) return;
  const size_t h = r / Lk, j = r % Lk;
  const T *Ph = P + h * Lq * Lk + j, *Gh = G + h * Lq * Lk + j, *qh = q + h * Lq * d, *gh = dO + h * Lq * d;
  unsigned fe = 0;
  for (size_t e = 0; e < d; e++) {
    dV[r * d + e] = pf_abn_store<T>(pf_abn_dot<T, A>(Ph, Lk, gh + e, d, Lq, &fe), &fe);
    const float g = pf_abn_dot<T, A>(Gh, Lk, qh + e, d, Lq, &fe);
    const int scale = N.L.algo != PF_ATTN_BWD_STANDARD && !(N.L.faults & PF_ATTN_BWD_F_NO_SCALE);
    dK[r * d + e] = pf_abn_store<T>(scale ? pf_abn_mul(N.alpha32, g, &fe) : g, &fe);
  }
  if (fe) atomicOr(fe_out, fe);
}

// one query: dQ_i = alpha32 dS_i K (standard: from S'), the keys in order
template <typename T, typename A>
__global__ void pf_abn_queries(pf_abn N, const T *k, const T *G, T *dQ, unsigned *fe_out) {
  const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t Lq = N.L.lq, Lk = N.L.lk, d = N.L.d;
  if (r >= N.heads * Lq) return;
  const size_t h = r / Lq;
  const T *Gi = G + r * Lk, *kh = k + h * Lk * d;
  unsigned fe = 0;
  for (size_t e = 0; e < d; e++) {
    const float g = pf_abn_dot<T, A>(Gi, 1, kh + e, d, Lk, &fe);
    const int scale = N.L.algo != PF_ATTN_BWD_STANDARD && !(N.L.faults & PF_ATTN_BWD_F_NO_SCALE);
    dQ[r * d + e] = pf_abn_store<T>(scale ? pf_abn_mul(N.alpha32, g, &fe) : g, &fe);
  }
  if (fe) atomicOr(fe_out, fe);
}

static unsigned pf_abn_blocks(size_t n) { return (unsigned)((n + 127) / 128); }

template <typename T, typename A>
static pf_status pf_abn_run(const pf_abn *N, const double *q, const double *k, const double *v, const double *dO,
                            double *out, unsigned *fe) {
  const size_t H = N->heads, Lq = N->L.lq, Lk = N->L.lk, d = N->L.d;
  const size_t qn = H * Lq * d, kn = H * Lk * d, sn = H * Lq * Lk, Bc = N->L.block;
  const int standard = N->L.algo == PF_ATTN_BWD_STANDARD;
  const size_t nout = qn + 2 * kn + (standard ? 2 * sn : 0), big = qn > kn ? qn : kn;
  double *d64 = NULL;
  T *tq = NULL, *tk = NULL, *tv = NULL, *tg = NULL, *tO = NULL, *tP = NULL, *tS = NULL, *tdP = NULL, *tdS = NULL,
    *tdQ = NULL, *tdK = NULL, *tdV = NULL;
  float *w = NULL;
  unsigned *dfe = NULL, hfe = 0;
  pf_status st = PF_OK;
  T **arrs[] = {&tq, &tk, &tv, &tg, &tdQ, &tdK, &tdV, &tO, &tP, &tS, &tdP, &tdS};
  const size_t lens[] = {qn, kn, kn, qn, qn, kn, kn, qn, sn, sn, sn, sn};
  PF_CUDA_TRY(cudaMalloc(&d64, (nout > big ? nout : big) * sizeof(double)));
  for (int a = 0; a < 12; a++) PF_CUDA_TRY(cudaMalloc(arrs[a], (lens[a] ? lens[a] : 1) * sizeof(T)));
  if (!standard) PF_CUDA_TRY(cudaMalloc(&w, (H * Lq * (2 * Bc + d) + 1) * sizeof(float)));
  PF_CUDA_TRY(cudaMalloc(&dfe, sizeof(unsigned)));
  PF_CUDA_TRY(cudaMemset(dfe, 0, sizeof(unsigned)));
  {
    const double *src[] = {q, k, v, dO};
    T *dst[] = {tq, tk, tv, tg};
    const size_t n[] = {qn, kn, kn, qn};
    for (int a = 0; a < 4; a++) {
      PF_CUDA_TRY(cudaMemcpy(d64, src[a], n[a] * sizeof(double), cudaMemcpyHostToDevice));
      pf_nat_narrow<T><<<pf_abn_blocks(n[a]), 128>>>(d64, dst[a], n[a]);
    }
  }
  if (standard)
    pf_abn_standard_rows<T, A><<<pf_abn_blocks(H * Lq), 128>>>(*N, tq, tk, tv, tg, tP, tS, tdP, tdS, dfe);
  else
    pf_abn_flash_rows<T, A><<<pf_abn_blocks(H * Lq), 128>>>(*N, tq, tk, tv, tg, tO, tP, tS, w, dfe);
  /* the gradient dK and dQ sum: standard's S' (in S), flash's dS (in S too) */
  pf_abn_keys<T, A><<<pf_abn_blocks(H * Lk), 128>>>(*N, tq, tg, tP, tS, tdK, tdV, dfe);
  pf_abn_queries<T, A><<<pf_abn_blocks(H * Lq), 128>>>(*N, tk, tS, tdQ, dfe);
  PF_CUDA_TRY(cudaGetLastError());
  {
    const T *src[] = {tdQ, tdK, tdV, tdP, tdS};
    const size_t n[] = {qn, kn, kn, sn, sn}, at[] = {0, qn, qn + kn, qn + 2 * kn, qn + 2 * kn + sn};
    for (int a = 0; a < (standard ? 5 : 3); a++) {
      pf_nat_widen<T><<<pf_abn_blocks(n[a]), 128>>>(src[a], d64, n[a]);
      PF_CUDA_TRY(cudaGetLastError());
      PF_CUDA_TRY(cudaMemcpy(out + at[a], d64, n[a] * sizeof(double), cudaMemcpyDeviceToHost));
    }
  }
  PF_CUDA_TRY(cudaMemcpy(&hfe, dfe, sizeof(unsigned), cudaMemcpyDeviceToHost));
  *fe |= hfe;
done:
  cudaFree(d64);
  for (int a = 0; a < 12; a++) cudaFree(*arrs[a]);
  cudaFree(w);
  cudaFree(dfe);
  return st;
}

extern "C" pf_status pf_attention_bwd_cuda(const pf_attn_bwd_launch *L, size_t heads, double alpha32, const double *q,
                                           const double *k, const double *v, const double *dO, double *out,
                                           unsigned *fe) {
  const pf_abn N = {*L, heads, (float)alpha32};
  const int storage_acc = L->acc == L->t && L->t != PF_FP32;
  switch (L->t) {
  case PF_FP32: return pf_abn_run<float, float>(&N, q, k, v, dO, out, fe);
  case PF_FP16:
    return storage_acc ? pf_abn_run<__half, __half>(&N, q, k, v, dO, out, fe) : pf_abn_run<__half, float>(&N, q, k, v, dO, out, fe);
  case PF_BF16:
    return storage_acc ? pf_abn_run<__nv_bfloat16, __nv_bfloat16>(&N, q, k, v, dO, out, fe)
                       : pf_abn_run<__nv_bfloat16, float>(&N, q, k, v, dO, out, fe);
  default: return pf_error(PF_ERR_ARG, "attention_bwd on CUDA: no native type for dtype %d", (int)L->t);
  }
}

// the module's entry point for the host side (kernels/attention_bwd/attention_bwd_cpu.c)
PF_CUDA_ENTRY(pf_attention_bwd_cuda)
