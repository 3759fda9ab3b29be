/* What a case of the tensor-parallel differential means, for the rank simulation (tp_diff_cpu.c)
 * and the oracle (oracles/tp_mpfr.c) alike: a parameter set shaped like transformer layers and
 * their embeddings, how the ranks hold it, its gradients, and the layout of the outputs
 * (tp_diff_spec.c).
 * Sources: DeepSpeed deepspeed/runtime/bf16_optimizer.py and deepspeed/runtime/utils.py (the
 * global norm over deduplicated parameters), Megatron megatron/core/optimizer/clip_grads.py. */
#ifndef PF_TP_DIFF_SPEC_H
#define PF_TP_DIFF_SPEC_H

#include <stddef.h>

#include "core/case.h"
#include "kernels/loss_scale/loss_scale_spec.h"

/* The framework whose step the variant computes (pf_kernel.algo):
 * MEGATRON: DeepSpeed/Megatron with FusedAdam: coef = fl(max_norm / fl(norm + 1e-6)), FusedAdam's fp32 step;
 * DEEPSPEED: DeepSpeed 0.19.8's BF16_Optimizer with torch.optim.AdamW on the CPU, as it runs on
 *   gloo ranks: coef = fl(fl(1 / fl(norm + 1e-6)) fl(max_norm)) (Tensor.__rtruediv__ is
 *   reciprocal() * other), and PyTorch's single-tensor AdamW in fp32 (adam_math.h, PF_ADAM_TORCH);
 * MEGATRON_CORE: megatron-core 0.16.1's Float16OptimizerWithFloat16Params without apex or
 *   Transformer Engine (megatron/core/optimizer/clip_grads.py with utils.py's local
 *   multi-tensor fallbacks): each rank's norm is the fp32 norm of its per-tensor fp32 norms,
 *   squared in fp32, all-reduced; the root and coef = max_norm / (norm + 1e-6) in binary64
 *   (Python floats); a gradient is clipped as fl(g fl32(coef)); PyTorch's AdamW as DEEPSPEED's.
 *   The norm it returns is binary64: the adapter reports it rounded to fp32.
 * TORCH: plain PyTorch 2.15 in fp32 (torch/nn/utils/clip_grad.py, torch/distributed/tensor):
 *   parameters are their own masters; clip_grad_norm_ takes each tensor's norm (a TP-sharded
 *   DTensor's as the root of its ranks' squared local norms summed), the norm of those norms,
 *   coef = reciprocal(norm + 1e-6) * max_norm as DEEPSPEED, clamped to 1; PyTorch's AdamW.
 * DS_ZERO2, DS_ZERO1: DeepSpeed 0.19.8's DeepSpeedZeroOptimizer (runtime/zero/stage_1_and_2.py),
 *   bf16 with the gradients accumulated in bf16 (its default), through the engine on the CPU:
 *   each micro-batch's bf16 gradient added to the bf16 accumulator (fl(acc + g)); at DP=2 the
 *   engine averages over the replicas, so the case's sum is the loss times 2, each gradient
 *   fl(2 g) divided by 2 in the reduction's dtype (comm) before the replicas' bf16 sum; stage 2
 *   reduces every micro-batch and accumulates the reduced sums, stage 1 reduces each replica's
 *   accumulated sum once. The norm (get_grad_norm_direct) per parameter group: each parameter's
 *   piece of the rank's partition normed in binary64 (get_norm_dtype()), squared and summed in
 *   binary64, rounded to fp32, SUM all-reduced over DP then TP, rooted; the groups' norms
 *   combined by vector_norm in fp32; coef = 1 / fl(fl(norm + 1e-6) / max_norm) when that
 *   quotient exceeds 1 (unscale_and_clip_grads); PyTorch's AdamW. No pipeline stages, no experts.
 *   fp16 (loss scaled, FP16 config): the same with fp16 for bf16 and each micro-batch gradient
 *   fl(S g) (fl(2 S g) at DP=2); the step is skipped when the accumulated fp16 gradients hold an
 *   inf or NaN anywhere (has_overflow, MAX over DP and TP); the norm is taken of the scaled
 *   gradients and divided by S, and the gradients are multiplied by fl(1 / (clip S)), which
 *   is the unscaled gradient times the bf16 coefficient (S a power of two). */
enum { PF_TP_MEGATRON = 0, PF_TP_DEEPSPEED = 1, PF_TP_MEGATRON_CORE = 2, PF_TP_TORCH = 3, PF_TP_DS_ZERO2 = 4,
       PF_TP_DS_ZERO1 = 5 };
static inline int pf_tp_algo_zero(int algo) { return algo == PF_TP_DS_ZERO2 || algo == PF_TP_DS_ZERO1; }

/* How a block is held by TP=2 ranks (Megatron): replicated on every rank, column-parallel
 * (rows = output features split), row-parallel (columns = input features split), or
 * vocab-parallel (embedding rows split; the only split that may be uneven: rank 0 takes the
 * larger half). */
enum { PF_TP_REP = 0, PF_TP_COL = 1, PF_TP_ROW = 2, PF_TP_VOCAB = 3 };

/* 12 per layer (up to PF_TP_MAXLAYERS), 4 more with two experts, then the position and the (tied)
 * embedding, always the last */
#define PF_TP_MAXLAYERS 4
#define PF_TP_MAXBLOCKS (12 * PF_TP_MAXLAYERS + 4 + 2)
typedef struct {
  char name[16];     /* "ln1.w"; with several layers "l0.ln1.w", "l1.ln1.w", ... */
  size_t rows, cols; /* a vector is rows x 1 */
  int kind;
  int decay;         /* weight decay applies (weights; not LayerNorm parameters or biases) */
  size_t offset;     /* first element in the global order */
  int expert;        /* -1: dense; else the expert it belongs to (MoE: held by DP replica `expert` when EP=2) */
} pf_tp_block;

typedef struct {
  size_t steps, h, f, V, seq, mb;
  int layers;        /* transformer layers, each the same 12 parameters (ln1 ... fc2.b) */
  int tp, dp;        /* the second run's layout: TP (1 or 2) x DP (1 or 2) data-parallel replicas, each
                      * summing its share of the micro-batches, the replicas' buffers SUM all-reduced;
                      * the first run is TP=1 x DP=1 (both PP=2 when tied) */
  size_t nrep;       /* replicated elements (checked on TP rank 1 when tp is 2) */
  int tied;          /* the embedding is tied to the LM head, held by a second pipeline stage */
  int algo;          /* PF_TP_MEGATRON, ...: the case's variant's */
  pf_dtype dtype;    /* parameters and micro-batch gradients (bf16, fp16 with loss scaling; fp32: TORCH) */
  double loss_scale; /* fp16: the loss scale S (dynamic: the first step's); bf16: 1 */
  int dynamic;       /* fp16: the framework's dynamic scaler moves S (pf_tp_scaler); 0: S stays */
  int growth_interval, hysteresis;
  double min_scale;
  int experts;       /* 0, or 2: an MoE layer's two experts (each an fc1 and an fc2 weight) */
  int ep;            /* the second run's expert-parallel size: 2 when it has experts and DP=2 (expert e on
                      * replica e, its gradient from both replicas' tokens, no data-parallel reduction) */
  size_t exp0, nexp; /* the experts' first element and their count (contiguous) */
  int comm;          /* 1: the data-parallel reduction in the storage dtype (DeepSpeed's engine): every
                      * replica's fp32 buffer rounded to it, the replicas' sum rounded again */
  int nblocks;
  pf_tp_block b[PF_TP_MAXBLOCKS];
  size_t n;          /* parameters, all blocks */
  size_t resume;     /* the step after which the second run is saved and loaded (0: straight) */
  size_t reshard;    /* the step after which each run is saved and loaded at the other layout (0: none) */
  size_t head;       /* head contributions per step and micro-batch (V h if tied, else 0) */
  size_t nsync;      /* copy checks per step (pf_tp_sync_elem) */
} pf_tp_layout;

/* the block index of the (tied) embedding: the last */
static inline int pf_tp_embed(const pf_tp_layout *L) { return L->nblocks - 1; }
/* e is an expert's element held by one DP replica (the second run has EP=2) */
static inline int pf_tp_ep_elem(const pf_tp_layout *L, size_t e) {
  return L->ep == 2 && e >= L->exp0 && e < L->exp0 + L->nexp;
}

/* The clip coefficient each framework computes from the fp32 norm (fp32 values in doubles);
 * both are nonincreasing in the norm. */
static inline double pf_tp_coef(int algo, double max_norm, double norm) {
  const float d = (float)norm + (float)1e-6;
  if (pf_tp_algo_zero(algo)) { /* clip = clamp(fl(d / max_norm), min=1); grads times fl(1 / clip) */
    const float q = d / (float)max_norm;
    return q > 1 ? (double)(1.0f / q) : 1.0;
  }
  if (algo == PF_TP_DEEPSPEED || algo == PF_TP_TORCH) return (double)((1.0f / d) * (float)max_norm);
  return (double)((float)max_norm / d);
}

/* Parameter indices (the table in tp_diff_cpu.c). */
enum { PF_TPP_MAXNORM = 0, PF_TPP_LR, PF_TPP_BETA1, PF_TPP_BETA2, PF_TPP_EPS, PF_TPP_WD, PF_TPP_MB, PF_TPP_TIED,
       PF_TPP_SPREAD, PF_TPP_LOSS_SCALE, PF_TPP_TP, PF_TPP_DP, PF_TPP_EXPERTS, PF_TPP_COMM, PF_TPP_SCALER,
       PF_TPP_GROWTH_INTERVAL, PF_TPP_HYSTERESIS, PF_TPP_MIN_SCALE, PF_TPP_LAYERS, PF_TPP_RESUME, PF_TPP_RESHARD,
       PF_TP_NPARAMS };

/* The loss scale of each step (fp16). Every step whose unscaled gradients hold an inf or NaN
 * (found on any rank: Megatron all-reduces found_inf with MAX over the model-parallel group,
 * DeepSpeed's ZeRO its overflow flag over the data- and the model-parallel groups) is skipped: no
 * norm, no clip, no Adam step (Adam's step count counts only the steps taken).
 * Static: S stays. Dynamic, Megatron: megatron-core 0.16.1's DynamicGradScaler.update (growth 2,
 * backoff 0.5): an overflow resets the growth tracker and takes one from the hysteresis tracker,
 * and when that reaches 0 halves S (not below min_scale); growth_interval steps in a row without
 * one double S and refill the hysteresis tracker (which nothing else refills).
 * Dynamic, DeepSpeed (DS_ZERO2, DS_ZERO1): 0.19.8's DynamicLossScaler.update_scale
 * (runtime/fp16/loss_scaler.py; scale_window = growth_interval, delayed_shift = hysteresis,
 * consecutive_hysteresis off): hysteresis as Megatron's, but S doubles when the steps since the
 * last overflow, less one, are a positive multiple of the window (so the first doubling after an
 * overflow or the start needs window + 1 clean steps, the next ones window each), and an overflow
 * that would halve S when it is already min_scale raises "Current loss scale already at minimum"
 * and ends the run (stopped). Both are the loss-scaling family's models (PF_LS_MEGATRON,
 * PF_LS_DEEPSPEED_019), checked bit for bit against the frameworks' scalers there. */
typedef pf_ls_state pf_tp_scaler; /* the loss-scaling family's scaler (loss_scale_spec.h) */
static inline int pf_tp_scaler_kind(const pf_tp_layout *L) {
  return pf_tp_algo_zero(L->algo) ? PF_LS_DEEPSPEED_019 : PF_LS_MEGATRON;
}
static inline pf_tp_scaler pf_tp_scaler_start(const pf_tp_layout *L) {
  return pf_ls_start(pf_tp_scaler_kind(L), L->loss_scale, L->min_scale, L->growth_interval, L->hysteresis);
}
static inline void pf_tp_scaler_update(const pf_tp_layout *L, pf_tp_scaler *sc, int found) {
  if (L->dynamic) pf_ls_update(pf_tp_scaler_kind(L), sc, found);
}

void pf_tp_layout_make(const pf_case *c, pf_tp_layout *L);
/* The copy checks per step (L->nsync) from the case alone: what the operation's refine needs per
 * output, without the blocks. */
size_t pf_tp_nsync(const pf_case *c);
/* The block of global element e, and e's row and column in it. */
int pf_tp_block_of(const pf_tp_layout *L, size_t e, size_t *row, size_t *col);
/* The TP rank (0 or 1) holding element e in the second run; -1 when every rank holds it (a
 * replicated element, or the second run is TP=1). */
int pf_tp_owner(const pf_tp_layout *L, size_t e);
/* "fc1.w[3,5]" */
void pf_tp_elem_name(const pf_tp_layout *L, size_t e, char *buf, size_t len);

/* Inputs: init (n masters), grads (steps x mb x (n + head) true micro-batch gradients), the
 * per-step gradient scale (steps). */
static inline double pf_tp_grad(const pf_tp_layout *L, const double *grads, size_t s, size_t k, size_t x) {
  return grads[(s * L->mb + k) * (L->n + L->head) + x];
}

/* Output layout: for every step, nsync pairs (code, difference) of copy checks; then the
 * first (TP=1) run's and the gathered second run's master, parameter, m and v of every
 * element; then the gradient norm each rank's step reported (-1 for a skipped step, as
 * DeepSpeed marks an invalid norm), per run and step, in 8 slots
 * (DP replica d, pipeline stage pp, TP rank tp: slot 4 d + 2 pp + tp; a slot no rank of the run
 * holds repeats the rank at 0 in each coordinate the run lacks). */
#define PF_TP_SLOTS 8
enum { PF_TP_MASTER = 0, PF_TP_PARAM = 1, PF_TP_M = 2, PF_TP_V = 3 };
static inline size_t pf_tp_sync_at(const pf_tp_layout *L, size_t s, size_t j) { return (s * L->nsync + j) * 2; }
static inline size_t pf_tp_run_at(const pf_tp_layout *L, int run, size_t s, int q, size_t e) {
  return 2 * L->steps * L->nsync + (((size_t)run * L->steps + s) * 4 + (size_t)q) * L->n + e;
}
static inline size_t pf_tp_norm_at(const pf_tp_layout *L, int run, size_t s, int slot) {
  return 2 * L->steps * L->nsync + 8 * L->steps * L->n + ((size_t)run * L->steps + s) * PF_TP_SLOTS + (size_t)slot;
}
/* resume_at = k > 0 (the built-in variants): the second run also saved after step k, its ranks
 * dropped and a fresh group loaded from the checkpoint for the steps after k, against the same
 * run straight; the resumed run's row of step k is its state as loaded. Per step, per element
 * (every copy of it, in rank order): a code (0 bitwise equal, else 1 + the first of master,
 * parameter, m, v that differs), its value in the straight run and in the resumed one; then per
 * step and slot the rank's optimizer state beside its tensors: a code (0 equal, else 1 + the
 * first of PF_TP_ST_* that differs) and its two values. */
enum { PF_TP_ST_TAKEN = 0, PF_TP_ST_SCALE, PF_TP_ST_GROWTH, PF_TP_ST_HYST, PF_TP_ST_ITER, PF_TP_NSTATE };
static inline size_t pf_tp_resume_at(const pf_tp_layout *L, size_t s, size_t e) {
  return pf_tp_norm_at(L, 2, 0, 0) + (s * L->n + e) * 3;
}
static inline size_t pf_tp_state_at(const pf_tp_layout *L, size_t s, int slot) {
  return pf_tp_norm_at(L, 2, 0, 0) + 3 * L->steps * L->n + (s * PF_TP_SLOTS + (size_t)slot) * 3;
}
static inline size_t pf_tp_output_count(const pf_tp_layout *L) {
  return pf_tp_norm_at(L, 2, 0, 0) + (L->resume ? 3 * L->steps * (L->n + PF_TP_SLOTS) : 0);
}
/* Copy check j (per step; in the second run): for each DP replica d, its replicated elements
 * on TP rank 1 against TP rank 0 (when tp is 2), then its tied embedding's copy on stage 1
 * against stage 0 (when tied); then for each replica d > 0 every element (gathered over TP)
 * against replica 0's, but the experts' when EP=2 (each is on one replica). Returns the
 * element; *kind and *replica say which check. */
enum { PF_TP_COPY_TP = 0, PF_TP_COPY_TIED = 1, PF_TP_COPY_DP = 2 };
size_t pf_tp_sync_elem(const pf_tp_layout *L, size_t j, int *kind, int *replica);
/* "TP=2", "TP=1 x DP=2", ...: the second run's layout (run 1), or the first's (run 0) */
void pf_tp_run_name(const pf_tp_layout *L, int run, char *buf, size_t len);

#endif
