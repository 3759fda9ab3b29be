/* The tensor-parallel differential (issue 5): the mixed-precision optimizer step of
 * DeepSpeed's BF16_Optimizer / Megatron (fp32 gradient buffers, the fp32 norm of the
 * deduplicated parameters, clipping, FusedAdam) on a parameter set shaped like a transformer layer and its
 * embeddings, run as TP=1 and as TP=2 (both with PP=2 when the embedding is tied to the LM
 * head: its two copies on two stages), one thread per simulated rank, with a harness all-reduce that sums in fp32 in rank
 * order; the second run may instead be TP=1 x DP=2 or TP=2 x DP=2 (params tp, dp): data-parallel
 * replicas that split the micro-batches and SUM all-reduce their gradient buffers. Several steps per case. Outputs: the copy checks (replicated elements on TP rank 1
 * against rank 0, the tied copy on stage 1 against stage 0: bitwise) and both runs' master,
 * parameter and Adam state; the oracle (oracles/tp_mpfr.c) gives for every value the set a
 * correct run may produce.
 * With experts=2 an MoE layer's two experts join the parameters; with dp=2 the second run holds
 * them expert-parallel (EP=2 over the replicas), their norm summed over the expert group.
 * Faults (bugs the frameworks had; docs/kernels/tp-diff.md): tp-replicated-unclipped, norm-no-dedup, norm-not-allreduced,
 * tied-grad-unreduced, dp-grad-unreduced, expert-norm-averaged, expert-norm-local, expert-norm-dropped. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/runner.h"
#include "kernels/adam/adam_math.h"
#include "core/checkpoint.h"
#include "core/kernel.h"
#include "kernels/tp_diff/tp_diff_spec.h"

#include "oracles/tp_mpfr.h"

static const char *const pf_tp_dims[] = {"steps", "hidden", "ffn", "vocab", "seq"};
static const char *const pf_tp_inputs[] = {"init", "grads", "gscale"};
static const pf_param_desc pf_tp_params[PF_TP_NPARAMS] = {
    {"max_norm", PF_PARAM_REAL, 1.0, 0x1p-60, 0x1p60, NULL, "clip the global gradient norm to this", 0, NULL},
    {"lr", PF_PARAM_REAL, 1e-3, 0, 1, NULL, "Adam learning rate", 0, NULL},
    {"beta1", PF_PARAM_REAL, 0.9, 0, 0.999999, NULL, "Adam beta1", 0, NULL},
    {"beta2", PF_PARAM_REAL, 0.95, 0, 0.9999999, NULL, "Adam beta2", 0, NULL},
    {"eps", PF_PARAM_REAL, 1e-8, 0x1p-100, 1, NULL, "Adam eps", 0, NULL},
    {"wd", PF_PARAM_REAL, 0.1, 0, 1, NULL, "weight decay of the weights (none for LayerNorm parameters and biases)", 0, NULL},
    {"microbatches", PF_PARAM_INT, 2, 1, 64, NULL, "micro-batch gradients accumulated per step", 0, NULL},
    {"tied", PF_PARAM_INT, 1, 0, 1, NULL, "1: the embedding is tied to the LM head on a second pipeline stage (both runs PP=2)", 0, NULL},
    {"spread", PF_PARAM_REAL, 3, 0, 60, NULL,
     "each step's gradients are scaled by 2^(spread x) with x in [-1, 1] from input gscale, around the clipping threshold", 0, NULL},
    {"loss_scale", PF_PARAM_REAL, 0, 0, 0x1p60, NULL, "fp16: the static loss scale S (0: 2^12); bf16: must be 0", 0, NULL},
    {"tp", PF_PARAM_INT, 2, 1, 2, NULL, "tensor-parallel ranks of the second run (the first is TP=1)", 0, NULL},
    {"dp", PF_PARAM_INT, 1, 1, 2, NULL,
     "data-parallel replicas of the second run, each summing its share of the micro-batches, the sums all-reduced", 0, NULL},
    {"experts", PF_PARAM_INT, 0, 0, 2, NULL,
     "2: an MoE layer's two experts (fc1, fc2 each); with dp=2 the second run is expert-parallel (EP=2, expert e on "
     "replica e), the norm summing the experts over the expert group", 0, NULL},
    {"comm", PF_PARAM_INT, 0, 0, 1, NULL,
     "1: gradients reduced over the data-parallel group in the storage dtype, as DeepSpeed's engine does by "
     "default (every run: each replica's fp32 buffer rounded to bf16, the replicas' sum rounded again)", 0, NULL},
    {"scaler", PF_PARAM_INT, 0, 0, 1, NULL,
     "fp16: 0 a static loss scale; 1 the dynamic scaler, Megatron's DynamicGradScaler or, for the ZeRO variants, "
     "DeepSpeed's DynamicLossScaler (from loss_scale; steps whose gradients overflow are skipped on every rank, the "
     "scale halved after hysteresis of them and doubled after growth_interval steps without, DeepSpeed's after one "
     "more)", 0, NULL},
    {"growth_interval", PF_PARAM_INT, 1000, 1, 1000, NULL, "scaler=1: steps without an overflow before the scale doubles", 0, NULL},
    {"hysteresis", PF_PARAM_INT, 2, 1, 64, NULL, "scaler=1: overflows before the scale halves", 0, NULL},
    {"min_loss_scale", PF_PARAM_REAL, 1, 1, 0x1p60, NULL, "scaler=1: the scale is never halved below this", 0, NULL},
    {"layers", PF_PARAM_INT, 1, 1, PF_TP_MAXLAYERS, NULL,
     "transformer layers, each ln1, qkv, proj, ln2, fc1, fc2 (more than one: named l0.ln1.w, l1.ln1.w, ...), before "
     "the experts and the embeddings", 0, NULL},
    {"resume_at", PF_PARAM_INT, 0, 0, 1e6, NULL,
     "k > 0: the second run is also saved after step k (precfuzz's checkpoint format), every rank dropped, and a "
     "fresh group loaded from it runs the rest; it must equal the same run straight, bit for bit (built-in variants)",
     0, NULL},
    {"reshard_at", PF_PARAM_INT, 0, 0, 1e6, NULL,
     "k > 0: each run changes layout after step k through a checkpoint: the first saved at the second run's layout "
     "and loaded at TP=1 x DP=1, the second saved at TP=1 x DP=1 and loaded at its own layout; both judged by the "
     "differential's set", 0, NULL},
};

/* One stage's buffer of replica d: its micro-batches' gradients (x: the gradient's index) in
 * the dtype, summed in fp32 in order; scaled, as the kernels hold it until the unscale. */
static double pf_tp_replica_sum(const pf_tp_layout *L, double S, const double *grads, size_t s, size_t x, int d,
                                int dp, unsigned *fe) {
  double buf = 0;
  const size_t per = L->mb / (size_t)dp;
  for (size_t k = (size_t)d * per; k < ((size_t)d + 1) * per; k++)
    buf = pf_add(PF_FP32, buf, pf_round_fe(L->dtype, S * pf_tp_grad(L, grads, s, k, x), fe), fe);
  return buf;
}

/* DeepSpeedZeroOptimizer's gradient of element x for replica d of dp (tp_diff_spec.h, DS_ZERO2 and
 * DS_ZERO1) in the storage dtype (bf16, or fp16 scaled by S), every add rounded to it (an add of
 * two bf16 or fp16 values: fl32 then the dtype is the correctly rounded sum, 24 >= 2 p + 2). At
 * DP=2 each micro-batch gradient arrives as fl(2 S g) (the loss times 2: the engine averages) and
 * is halved in the reduction's dtype: the storage dtype (comm), else fp32, where halving is exact.
 * Fault dp-grad-unreduced: each replica keeps its own halves. */
static double pf_tp_zero_half(const pf_tp_layout *L, double u, unsigned *fe) {
  return L->comm ? pf_round_fe(L->dtype, u / 2, fe) : u / 2;
}
static double pf_tp_zero_sum(const pf_tp_layout *L, double S, const double *grads, size_t s, size_t x, int d,
                             int dp, int unreduced, unsigned *fe) {
  const pf_dtype T = L->dtype, F = PF_FP32;
  const size_t per = L->mb / (size_t)dp;
  double acc = 0;
  if (dp == 1) {
    for (size_t k = 0; k < L->mb; k++) {
      const double u = pf_round_fe(T, S * pf_tp_grad(L, grads, s, k, x), fe);
      acc = k ? pf_round_fe(T, pf_add(F, acc, u, fe), fe) : u;
    }
    return acc;
  }
  if (L->algo == PF_TP_DS_ZERO2) { /* every micro-batch reduced, the reduced sums accumulated */
    for (size_t j = 0; j < per; j++) {
      double h[2];
      for (int r = 0; r < 2; r++) h[r] = pf_tp_zero_half(L, pf_round_fe(T, 2 * S * pf_tp_grad(L, grads, s, r * per + j, x), fe), fe);
      const double red = unreduced ? h[d] : pf_round_fe(T, pf_add(F, h[0], h[1], fe), fe);
      acc = j ? pf_round_fe(T, pf_add(F, acc, red, fe), fe) : red;
    }
    return acc;
  }
  double h[2]; /* stage 1: each replica's micro-batches accumulated, then one reduction */
  for (int r = 0; r < 2; r++) {
    double a = 0;
    for (size_t j = 0; j < per; j++) {
      const double u = pf_round_fe(T, 2 * S * pf_tp_grad(L, grads, s, r * per + j, x), fe);
      a = j ? pf_round_fe(T, pf_add(F, a, u, fe), fe) : u;
    }
    h[r] = pf_tp_zero_half(L, a, fe);
  }
  return unreduced ? h[d] : pf_round_fe(T, pf_add(F, h[0], h[1], fe), fe);
}

/* --- the ranks ------------------------------------------------------------------------ */

struct pf_tp_world;
typedef struct {
  struct pf_tp_world *world;
  int tp, pp, dp;
  size_t nloc;
  size_t *elem;            /* global indices held, in global order */
  double *master, *param, *m, *v, *g, *part;
  double *hist;            /* steps x nloc x 4 */
  double *shist;           /* steps x PF_TP_NSTATE: the step count and the scaler after each step */
  double *norms;           /* steps: the gradient norm this rank's step computed (-1: skipped) */
  pf_tp_scaler sc;         /* this rank's loss scaler */
  size_t taken;            /* the steps taken (not skipped): Adam's step count */
  unsigned fe;
} pf_tp_rank;

typedef struct pf_tp_world {
  const pf_case *c;
  const pf_tp_layout *L;
  const double *grads;
  const double *init;
  int TP, PP, DP, R;
  int f_unclipped, f_nodedup, f_noallreduce, f_untied, f_dpunreduced, f_expavg, f_explocal, f_expdrop, f_foundlocal;
  int f_unscalenew; /* both runs: DeepSpeed 0.19.8's own order (unscale-after-update) */
  int found_board[8]; /* each rank's found_inf (fp16) */
  pthread_barrier_t bar;
  double norm_board[8], expert_board[8]; /* each rank's squared norm of its dense and its expert norm set */
  double block_board[8][PF_TP_MAXBLOCKS]; /* each rank's per-tensor fp32 norms (-1: not held), PF_TP_TORCH */
  double group_board[8][2]; /* each rank's fp32 squared norm of its partition of each parameter group, DS_ZERO */
  pf_tp_rank rank[8]; /* rank[4 dp + 2 pp + tp] */
  pthread_t thread[8];
  size_t s0, s1; /* the steps the ranks run now: [s0, s1) */
} pf_tp_world;

/* A rank's history row s: its master, parameter, m and v, and beside them its optimizer state
 * (what a checkpoint must carry too), after step s (or, in a resumed run, as loaded). */
static void pf_tp_record(pf_tp_rank *me, size_t s) {
  for (size_t x = 0; x < me->nloc; x++) {
    double *h = me->hist + (s * me->nloc + x) * 4;
    h[PF_TP_MASTER] = me->master[x];
    h[PF_TP_PARAM] = me->param[x];
    h[PF_TP_M] = me->m[x];
    h[PF_TP_V] = me->v[x];
  }
  double *o = me->shist + s * PF_TP_NSTATE;
  o[PF_TP_ST_TAKEN] = (double)me->taken;
  o[PF_TP_ST_SCALE] = me->sc.scale;
  o[PF_TP_ST_GROWTH] = (double)me->sc.growth_tracker;
  o[PF_TP_ST_HYST] = (double)me->sc.cur_hysteresis;
  o[PF_TP_ST_ITER] = (double)me->sc.cur_iter;
}

static int pf_tp_slot(int dp, int pp, int tp) { return dp * 4 + pp * 2 + tp; }

static int pf_tp_is_tied(const pf_tp_layout *L, size_t e) {
  return L->tied && e >= L->b[pf_tp_embed(L)].offset;
}

static void pf_tp_sync(pf_tp_world *w) {
  if (w->R > 1) pthread_barrier_wait(&w->bar);
}

static size_t pf_tp_local(const pf_tp_rank *k, size_t e);

/* An expert's buffer under EP=2 (its replica holds it alone): in micro-batch slot j both
 * replicas' tokens reach it, micro-batches j and j + mb/2, and its backward GEMM leaves their
 * gradients summed and rounded to the dtype once: fl(fl32(S g_j + S g_j+mb/2)); the slots summed
 * in fp32 in order, as the replica's other buffers are. */
static double pf_tp_expert_sum(const pf_tp_layout *L, double S, const double *grads, size_t s, size_t x, unsigned *fe) {
  double buf = 0;
  const size_t half = L->mb / 2;
  for (size_t j = 0; j < half; j++) {
    const double a = S * pf_tp_grad(L, grads, s, j, x), b = S * pf_tp_grad(L, grads, s, j + half, x);
    buf = pf_add(PF_FP32, buf, pf_round_fe(L->dtype, pf_add(PF_FP32, a, b, fe), fe), fe);
  }
  return buf;
}

/* One rank's whole run: every step of section 1 (accumulate, tie, norm, clip, Adam, write back). */
static void *pf_tp_rank_main(void *arg) {
  pf_tp_rank *me = arg;
  pf_tp_world *w = me->world;
  const pf_tp_layout *L = w->L;
  const pf_case *c = w->c;
  const pf_dtype F = PF_FP32, T = L->dtype;
  const pf_tp_rank *peer = w->PP == 2 ? &w->rank[pf_tp_slot(me->dp, 1 - me->pp, me->tp)] : NULL;
  const pf_tp_rank *replica = w->DP == 2 ? &w->rank[pf_tp_slot(1 - me->dp, me->pp, me->tp)] : NULL;
  const int zero = pf_tp_algo_zero(L->algo);
  for (size_t s = w->s0; s < w->s1; s++) {
    const double S = me->sc.scale, inv = pf_round(F, 1.0 / S);
    /* 1-2. gradient buffers: this replica's micro-batches (stage 1: the LM head's
     * contributions to the tied weight), scaled until the unscale below */
    for (size_t x = 0; x < me->nloc; x++) {
      const size_t e = me->elem[x];
      const size_t gx = me->pp == 1 ? L->n + (e - L->b[pf_tp_embed(L)].offset) : e;
      me->g[x] = zero                                ? pf_tp_zero_sum(L, S, w->grads, s, gx, me->dp, w->DP, w->f_dpunreduced, &me->fe)
                 : w->DP == 2 && pf_tp_ep_elem(L, e) ? pf_tp_expert_sum(L, S, w->grads, s, gx, &me->fe)
                                                     : pf_tp_replica_sum(L, S, w->grads, s, gx, me->dp, w->DP, &me->fe);
    }
    /* comm: the reduction's all-reduce runs in the storage dtype, on every run (a group of one
     * too): the fp32 buffer goes in rounded to it (DS_ZERO: reduced above) */
    if (L->comm && !zero)
      for (size_t x = 0; x < me->nloc; x++) me->g[x] = pf_round_fe(T, me->g[x], &me->fe);
    pf_tp_sync(w);
    if (w->DP == 2 && !zero) {
      /* SUM all-reduce over the data-parallel group (replica 0 + replica 1) of every element
       * both hold (an expert under EP=2 is one replica's: not reduced); fault: each replica
       * keeps its own sum */
      for (size_t x = 0; x < me->nloc; x++) {
        if (pf_tp_ep_elem(L, me->elem[x])) {
          me->part[x] = me->g[x];
          continue;
        }
        const double o = replica->g[pf_tp_local(replica, me->elem[x])];
        const double a = me->dp == 0 ? me->g[x] : o, b = me->dp == 0 ? o : me->g[x];
        me->part[x] = w->f_dpunreduced ? me->g[x] : pf_add(F, a, b, &me->fe);
        if (L->comm) me->part[x] = pf_round_fe(T, me->part[x], &me->fe); /* a bf16 sum of two bf16 values */
      }
      pf_tp_sync(w);
      memcpy(me->g, me->part, me->nloc * sizeof *me->g);
      pf_tp_sync(w);
    }
    /* then the tied weight's copies are summed over the tied group */
    if (w->PP == 2) {
      /* SUM all-reduce over the tied group (stage 0 + stage 1): both hold the same elements
       * of the tied weight, in the same order; fault: the optimizer reads the local buffer */
      for (size_t x = 0, y = 0; x < me->nloc; x++) {
        if (!pf_tp_is_tied(L, me->elem[x])) continue;
        while (!pf_tp_is_tied(L, peer->elem[y]) || peer->elem[y] != me->elem[x]) y++;
        const double a = me->pp == 0 ? me->g[x] : peer->g[y], b = me->pp == 0 ? peer->g[y] : me->g[x];
        me->part[x] = w->f_untied ? me->g[x] : pf_add(F, a, b, &me->fe);
      }
    }
    pf_tp_sync(w);
    int found = 0;
    for (size_t x = 0; x < me->nloc; x++) {
      if (w->PP == 2 && pf_tp_is_tied(L, me->elem[x])) me->g[x] = me->part[x];
      if (T == PF_FP16) me->g[x] = pf_mul(F, me->g[x], inv, &me->fe);
      found |= !isfinite(me->g[x]);
    }
    /* 3. fp16: found_inf MAX all-reduced over the model-parallel group (fault: this rank's own),
     * the scaler updated; a step with one is skipped (below, after the collectives) */
    if (T == PF_FP16) { /* the same on every rank: all or none pass the barrier */
      w->found_board[pf_tp_slot(me->dp, me->pp, me->tp)] = found;
      pf_tp_sync(w);
      if (!w->f_foundlocal) /* Megatron: over the model-parallel group; DeepSpeed's ZeRO: over DP and TP */
        for (int r = 0; r < w->TP * w->PP * (zero ? w->DP : 1); r++)
          found |= w->found_board[pf_tp_slot(zero ? r / (w->TP * w->PP) : me->dp, (r / w->TP) % w->PP, r % w->TP)];
      pf_tp_scaler_update(L, &me->sc, found);
    }
    const int skip = T == PF_FP16 && found;
    /* 4. the squared norm of this rank's norm set: per-tensor norms in fp32, squared, summed
     * (megatron-core: the norm of the per-tensor norms, squared); the experts' apart (their
     * own optimizer in Megatron, their own group in DeepSpeed) */
    const int core = L->algo == PF_TP_MEGATRON_CORE, torch = L->algo == PF_TP_TORCH;
    const int slot = pf_tp_slot(me->dp, me->pp, me->tp);
    /* megatron-core's ChainedOptimizer pools the expert optimizer's gradients with the dense ones
     * when both reduce their norms over the same group (no EP): one norm of norms */
    const int pooled = core && !(w->DP == 2 && L->ep == 2);
    double local = 0, local_e = 0;
    for (int k = 0, x = 0; k < L->nblocks; k++) {
      double sumsq = 0;
      int any = 0;
      for (; (size_t)x < me->nloc && pf_tp_block_of(L, me->elem[x], &(size_t){0}, &(size_t){0}) == k; x++) {
        sumsq = pf_add(F, sumsq, pf_mul(F, me->g[x], me->g[x], &me->fe), &me->fe);
        any = 1;
      }
      const int counted = me->pp == 0 && (L->b[k].kind != PF_TP_REP || me->tp == 0 || w->f_nodedup);
      w->block_board[slot][k] = any && me->pp == 0 ? pf_round(F, sqrt(sumsq)) : -1;
      if (any && counted) {
        const double nk = pf_round(F, sqrt(sumsq));
        double *into = L->b[k].expert >= 0 && !pooled ? &local_e : &local;
        *into = pf_add(F, *into, pf_mul(F, nk, nk, &me->fe), &me->fe);
      }
    }
    if (core) {
      const double nn = pf_round(F, sqrt(local)), ne = pf_round(F, sqrt(local_e));
      local = pf_mul(F, nn, nn, &me->fe);
      local_e = pf_mul(F, ne, ne, &me->fe);
    }
    w->norm_board[slot] = local;
    w->expert_board[slot] = local_e;
    if (zero) /* DeepSpeedZeroOptimizer: per parameter group (tp_diff_spec.h) */
      for (int q = 0; q < 2; q++) {
        /* this replica's partition of the group's flat buffer (the TP rank's elements of the
         * group in order, padded to a multiple of 2 DP, split evenly) */
        size_t cnt = 0, pos = 0;
        for (size_t x = 0; x < me->nloc; x++) cnt += (L->b[pf_tp_block_of(L, me->elem[x], &(size_t){0}, &(size_t){0})].decay != 0) == (q == 0);
        const size_t part = w->DP == 2 ? (cnt + 3) / 4 * 2 : cnt, lo = (size_t)me->dp * part, hi = lo + part;
        double sq64 = 0; /* binary64, as get_norm_dtype() on the CPU */
        for (int k = 0, x = 0; k < L->nblocks; k++) {
          double piece = 0;
          int any = 0;
          for (; (size_t)x < me->nloc && pf_tp_block_of(L, me->elem[x], &(size_t){0}, &(size_t){0}) == k; x++) {
            if ((L->b[k].decay != 0) != (q == 0)) continue;
            /* of the scaled gradient (fp16: S g, exact in binary64), as DeepSpeed takes it */
            if (pos >= lo && pos < hi) piece += (S * me->g[x]) * (S * me->g[x]), any = 1;
            pos++;
          }
          const int counted = L->b[k].kind != PF_TP_REP || me->tp == 0 || w->f_nodedup;
          if (any && counted) {
            const double r = sqrt(piece);
            sq64 += r * r;
          }
        }
        w->group_board[slot][q] = pf_round(F, sq64);
      }
    pf_tp_sync(w);
    /* over the model-parallel group (TP x PP) of this replica: each replica holds every dense
     * gradient; the experts' over the expert group: every replica's under EP=2 */
    double total = 0, total_e = 0;
    double zero_norm = 0;
    if (zero) {
      /* each group's squares SUM all-reduced over DP, then over TP (fault: this rank's alone),
       * rooted; the groups' norms combined by vector_norm in fp32 */
      double sq = 0;
      for (int q = 0; q < 2; q++) {
        double t = 0;
        if (w->f_noallreduce) t = w->group_board[slot][q];
        else
          for (int r = 0; r < w->TP; r++) {
            double a = 0;
            for (int d = 0; d < w->DP; d++) a = pf_add(F, a, w->group_board[pf_tp_slot(d, 0, r)][q], &me->fe);
            t = pf_add(F, t, a, &me->fe);
          }
        const double nq = pf_round(F, sqrt(t));
        sq = pf_add(F, sq, pf_mul(F, nq, nq, &me->fe), &me->fe);
      }
      zero_norm = pf_round(F, sqrt(sq)) / S; /* the scaled norm over S: exact (a power of two) */
    } else if (torch) {
      /* clip_grad_norm_ on DTensors: a sharded tensor's norm is the root of its TP ranks' squared
       * local norms summed (rank order), a replicated one's the local norm; then the norm of the
       * norms, in tensor order. Faults: a replicated tensor summed over the ranks like a sharded
       * one (norm-no-dedup); each rank's local shards alone (norm-not-allreduced) */
      for (int k = 0; k < L->nblocks; k++) {
        const int split = w->TP == 2 && L->b[k].kind != PF_TP_REP;
        double nk;
        if (w->f_noallreduce || (!split && !w->f_nodedup)) nk = w->block_board[pf_tp_slot(me->dp, 0, me->tp)][k];
        else {
          double sq = 0;
          for (int r = 0; r < w->TP; r++) {
            const double a = w->block_board[pf_tp_slot(me->dp, 0, r)][k];
            sq = pf_add(F, sq, pf_mul(F, a, a, &me->fe), &me->fe);
          }
          nk = pf_round(F, sqrt(sq));
        }
        total = pf_add(F, total, pf_mul(F, nk, nk, &me->fe), &me->fe);
      }
    } else if (w->f_noallreduce) {
      total = local;
      total_e = local_e;
    } else {
      for (int r = 0; r < w->TP * w->PP; r++) {
        total = pf_add(F, total, w->norm_board[pf_tp_slot(me->dp, r / w->TP, r % w->TP)], &me->fe);
        if (!(w->DP == 2 && L->ep == 2) || w->f_explocal)
          total_e = pf_add(F, total_e, w->expert_board[pf_tp_slot(me->dp, r / w->TP, r % w->TP)], &me->fe);
      }
      if (w->DP == 2 && L->ep == 2 && !w->f_explocal) {
        for (int r = 0; r < w->R; r++)
          total_e = pf_add(F, total_e, w->expert_board[pf_tp_slot(r / (w->TP * w->PP), (r / w->TP) % w->PP, r % w->TP)],
                           &me->fe);
        if (w->f_expavg) total_e = pf_mul(F, total_e, 0.5, &me->fe); /* averaged over the DP group */
      }
    }
    if (w->f_expdrop) total_e = 0;
    pf_tp_sync(w);
    /* 5. clip every gradient on every rank (fault: replicated ones on TP ranks > 0 skipped).
     * With experts the total norm is the norm of the dense and the expert norm (Megatron's
     * ChainedOptimizer in binary64; DeepSpeed stacks the two fp32 norms) */
    double coef;
    int clip;
    if (core) { /* binary64 root and coefficient (Python floats), the scale rounded to fp32 */
      const double d64 = sqrt(total), e64 = sqrt(total_e);
      const double n64 = L->experts && !pooled ? sqrt(d64 * d64 + e64 * e64) : d64;
      const double c64 = c->params[PF_TPP_MAXNORM] / (n64 + 1.0e-6);
      me->norms[s] = pf_round(F, n64);
      clip = c64 < 1;
      coef = pf_round(F, c64);
    } else {
      double norm = zero ? zero_norm : pf_round(F, sqrt(total));
      if (L->experts) {
        const double ne = pf_round(F, sqrt(total_e));
        norm = pf_round(F, sqrt(pf_add(F, pf_mul(F, norm, norm, &me->fe), pf_mul(F, ne, ne, &me->fe), &me->fe)));
      }
      me->norms[s] = norm;
      coef = pf_tp_coef(L->algo, c->params[PF_TPP_MAXNORM], norm);
      clip = coef < 1;
      if (w->f_unscalenew && zero && !skip && me->sc.scale != S) {
        /* DeepSpeed 0.19.8's ZeRO step updates the scaler before unscale_and_clip_grads, which
         * divides by the new scale S': clip = clamp(fl(fl(norm_S / S' + 1e-6) / max_norm), 1),
         * the gradients times fl(1 / (clip S')): the unscaled gradient times fl(1 / clip) and
         * S / S' (1/2 on a growth step); the norm it reports is over the old S */
        const double r = S / me->sc.scale;
        coef = pf_tp_coef(L->algo, c->params[PF_TPP_MAXNORM], norm * r);
        clip = coef < 1;
        for (size_t x = 0; x < me->nloc; x++) me->g[x] = pf_mul(F, me->g[x], r, &me->fe);
      }
    }
    if (skip) { /* the step skipped: the state as it was, no norm (reported as -1) */
      me->norms[s] = -1;
      pf_tp_record(me, s);
      continue;
    }
    me->taken++;
    if (clip)
      for (size_t x = 0; x < me->nloc; x++) {
        size_t i, j;
        const int k = pf_tp_block_of(L, me->elem[x], &i, &j);
        if (w->f_unclipped && me->tp != 0 && L->b[k].kind == PF_TP_REP) continue;
        me->g[x] = pf_mul(F, me->g[x], coef, &me->fe);
      }
    /* 6-7. FusedAdam (AdamW, fp32), or PyTorch's single-tensor AdamW in fp32 (DeepSpeed on
     * the CPU), on the masters; write-back by round to nearest even */
    const int adam = L->algo == PF_TP_MEGATRON ? PF_ADAM_FUSED : PF_ADAM_TORCH;
    const double lr = c->params[PF_TPP_LR], b1 = c->params[PF_TPP_BETA1], b2 = c->params[PF_TPP_BETA2];
    const double eps = c->params[PF_TPP_EPS];
    const pf_adam_hyper hw = pf_adam_hyper_make(lr, b1, b2, eps, c->params[PF_TPP_WD], (double)me->taken, 1);
    const pf_adam_hyper h0 = pf_adam_hyper_make(lr, b1, b2, eps, 0, (double)me->taken, 1);
    for (size_t x = 0; x < me->nloc; x++) {
      size_t i, j;
      const int k = pf_tp_block_of(L, me->elem[x], &i, &j);
      pf_adam_step(adam, PF_ADAM_MODE_ADAMW, F, F, L->b[k].decay ? &hw : &h0, &me->master[x], me->g[x],
                   &me->m[x], &me->v[x], &me->fe);
      me->param[x] = pf_round_fe(T, me->master[x], &me->fe);
    }
    pf_tp_record(me, s);
  }
  return NULL;
}

static void pf_tp_world_free(pf_tp_world *w) {
  for (int r = 0; r < 8; r++) {
    pf_tp_rank *k = &w->rank[r];
    free(k->elem), free(k->master), free(k->param), free(k->m), free(k->v), free(k->g), free(k->part), free(k->hist);
    free(k->norms), free(k->shist);
  }
}

/* Sets up TP x DP (with PP=2 when tied): every rank's elements at their initial values, before
 * step 1. The faults act on the second run (TP=2 or DP=2). */
static pf_status pf_tp_world_init(pf_tp_world *w, const pf_case *c, const pf_tp_layout *L, const pf_tensor *in, int TP,
                                  int DP) {
  memset(w, 0, sizeof *w);
  w->c = c;
  w->L = L;
  w->init = in[0].data;
  w->grads = in[1].data;
  w->TP = TP;
  w->PP = L->tied ? 2 : 1; /* both runs hold a tied weight on two stages */
  w->DP = DP;
  w->R = w->TP * w->PP * w->DP;
  if (TP == 2 || DP == 2) {
    w->f_unclipped = strcmp(c->fault, "tp-replicated-unclipped") == 0;
    w->f_nodedup = strcmp(c->fault, "norm-no-dedup") == 0;
    w->f_noallreduce = strcmp(c->fault, "norm-not-allreduced") == 0;
    w->f_untied = strcmp(c->fault, "tied-grad-unreduced") == 0;
    w->f_dpunreduced = strcmp(c->fault, "dp-grad-unreduced") == 0;
    w->f_expavg = strcmp(c->fault, "expert-norm-averaged") == 0;
    w->f_explocal = strcmp(c->fault, "expert-norm-local") == 0;
    w->f_expdrop = strcmp(c->fault, "expert-norm-dropped") == 0;
    w->f_foundlocal = strcmp(c->fault, "found-inf-local") == 0;
  }
  w->f_unscalenew = strcmp(c->fault, "unscale-after-update") == 0;
  for (int dp = 0; dp < w->DP; dp++)
  for (int pp = 0; pp < w->PP; pp++)
    for (int tp = 0; tp < w->TP; tp++) {
      pf_tp_rank *k = &w->rank[pf_tp_slot(dp, pp, tp)];
      k->world = w;
      k->sc = pf_tp_scaler_start(L);
      k->tp = tp;
      k->pp = pp;
      k->dp = dp;
      k->elem = malloc(L->n * sizeof(size_t));
      if (!k->elem) return pf_error(PF_ERR_NOMEM, "tp: cannot allocate a rank");
      for (size_t e = 0; e < L->n; e++) {
        const int own = TP == 1 ? -1 : pf_tp_owner(L, e);
        int held = pp == 0 ? (own < 0 || own == tp) : (pf_tp_is_tied(L, e) && (own < 0 || own == tp));
        if (DP == 2 && pf_tp_ep_elem(L, e)) { /* EP=2: expert x on replica x */
          size_t i, j;
          held = held && L->b[pf_tp_block_of(L, e, &i, &j)].expert == dp;
        }
        if (held) k->elem[k->nloc++] = e;
      }
      const size_t m = k->nloc ? k->nloc : 1;
      k->master = malloc(m * sizeof(double));
      k->param = malloc(m * sizeof(double));
      k->m = calloc(m, sizeof(double));
      k->v = calloc(m, sizeof(double));
      k->g = malloc(m * sizeof(double));
      k->part = malloc(m * sizeof(double));
      k->hist = malloc(L->steps * m * 4 * sizeof(double));
      k->norms = malloc(L->steps * sizeof(double));
      k->shist = malloc(L->steps * PF_TP_NSTATE * sizeof(double));
      if (!k->master || !k->param || !k->m || !k->v || !k->g || !k->part || !k->hist || !k->norms || !k->shist)
        return pf_error(PF_ERR_NOMEM, "tp: cannot allocate a rank's %zu elements", k->nloc);
      for (size_t x = 0; x < k->nloc; x++) {
        k->master[x] = w->init[k->elem[x]];
        k->param[x] = pf_round(L->dtype, k->master[x]);
      }
    }
  return PF_OK;
}

/* Runs steps [s0, s1) on every rank; their histories fill in. */
static pf_status pf_tp_world_steps(pf_tp_world *w, size_t s0, size_t s1) {
  w->s0 = s0, w->s1 = s1;
  if (w->R > 1 && pthread_barrier_init(&w->bar, NULL, (unsigned)w->R)) return pf_error(PF_ERR_NOMEM, "tp: no barrier");
  int started = 0, failed = 0;
  for (int r = 0; r < w->R; r++) { /* rank r = (dp PP + pp) TP + tp */
    pf_tp_rank *k = &w->rank[pf_tp_slot(r / (w->TP * w->PP), (r / w->TP) % w->PP, r % w->TP)];
    if (w->R == 1) pf_tp_rank_main(k);
    else if (pthread_create(&w->thread[r], NULL, pf_tp_rank_main, k)) failed = 1;
    else started++;
    if (failed) break;
  }
  for (int r = 0; r < started; r++) pthread_join(w->thread[r], NULL);
  if (w->R > 1) pthread_barrier_destroy(&w->bar);
  if (failed) return pf_error(PF_ERR_NOMEM, "tp: cannot start the rank threads");
  return PF_OK;
}

/* Every step of TP x DP from the start: on return w->rank[] hold the histories. */
static pf_status pf_tp_world_run(pf_tp_world *w, const pf_case *c, const pf_tp_layout *L, const pf_tensor *in, int TP,
                                 int DP) {
  const pf_status st = pf_tp_world_init(w, c, L, in, TP, DP);
  return st ? st : pf_tp_world_steps(w, 0, L->steps);
}

/* --- the round trip (resume_at): save after step k, drop every rank, load, go on ---------- */

/* The local index of global element e on a rank (binary search: elem is sorted). */
static size_t pf_tp_local(const pf_tp_rank *k, size_t e) {
  size_t lo = 0, hi = k->nloc;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (k->elem[mid] < e) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}


/* A rank's number in a checkpoint: (dp PP + pp) TP + tp, as torch.distributed numbers them. */
static pf_tp_rank *pf_tp_rank_at(pf_tp_world *w, int r) {
  return &w->rank[pf_tp_slot(r / (w->TP * w->PP), (r / w->TP) % w->PP, r % w->TP)];
}

/* Every rank's master, parameter, m, v, step count and loss scaler after step `step`, as a
 * checkpoint in dir (core/checkpoint.h). */
static pf_status pf_tp_save(pf_tp_world *w, const char *dir, size_t step) {
  pf_checkpoint ck;
  memset(&ck, 0, sizeof ck);
  snprintf(ck.writer, sizeof ck.writer, "tp_diff/%s", w->c->variant);
  ck.step = step;
  pf_status st = PF_OK;
  for (int r = 0; r < w->R && !st; r++) {
    const pf_tp_rank *k = pf_tp_rank_at(w, r);
    if (!st) st = pf_ckpt_put_tensor(&ck, r, "master", PF_FP32, k->master, k->nloc);
    if (!st) st = pf_ckpt_put_tensor(&ck, r, "param", w->L->dtype, k->param, k->nloc);
    if (!st) st = pf_ckpt_put_tensor(&ck, r, "exp_avg", PF_FP32, k->m, k->nloc);
    if (!st) st = pf_ckpt_put_tensor(&ck, r, "exp_avg_sq", PF_FP32, k->v, k->nloc);
    const double nums[7] = {(double)k->taken, k->sc.scale, (double)k->sc.cur_iter, (double)k->sc.last_overflow_iter,
                            (double)k->sc.cur_hysteresis, (double)k->sc.growth_tracker, (double)k->sc.stopped};
    static const char *const names[7] = {"step", "scale", "cur_iter", "last_overflow_iter", "cur_hysteresis",
                                         "growth_tracker", "stopped"};
    for (int i = 0; i < 7 && !st; i++) st = pf_ckpt_put_number(&ck, r, names[i], nums[i]);
  }
  if (!st) st = pf_checkpoint_write(dir, &ck);
  pf_checkpoint_free(&ck);
  return st;
}

/* Where rank k of a world of another layout (`from`, the one that saved) held global element e:
 * its rank number and local index, a rank of the same pipeline stage first (the tied embedding's
 * copy on stage 1 comes from stage 1); -1 when none. */
static int pf_tp_holder(const pf_tp_world *from, const pf_tp_rank *k, size_t e, size_t *x) {
  int any = -1;
  size_t ax = 0;
  for (int r = 0; r < from->R; r++) {
    const pf_tp_rank *a = pf_tp_rank_at((pf_tp_world *)from, r);
    const size_t i = pf_tp_local(a, e);
    if (i >= a->nloc || a->elem[i] != e) continue;
    if (a->pp == k->pp) {
      *x = i;
      return r;
    }
    if (any < 0) any = r, ax = i;
  }
  *x = ax;
  return any;
}

/* reshard-split-axis: the global element a rank of TP=2 loads for its element e of a row-parallel
 * block when the load splits that block along the other axis (rows, not columns: checkpoint
 * conversion's partition_dim mix-up); e itself for any other block. */
static size_t pf_tp_split_axis_wrong(const pf_tp_layout *L, const pf_tp_rank *k, size_t e) {
  size_t i, j;
  const pf_tp_block *b = &L->b[pf_tp_block_of(L, e, &i, &j)];
  if (b->kind != PF_TP_ROW || b->cols % 2 || b->rows % 2) return e;
  const size_t half = b->cols / 2, x = i * half + (j - (size_t)k->tp * half); /* its place in the shard */
  return b->offset + ((size_t)k->tp * (b->rows / 2) + x / b->cols) * b->cols + x % b->cols;
}

/* A fresh group's state from the checkpoint in dir, saved by a group of the same layout (from
 * NULL: rank r loads rank r's tensors) or of the layout of `from` (resharding: each element from
 * a rank that held it; `from` gives the layout, the values come from the files). The faults are
 * what broken load code does: ckpt-master-from-param (the masters rebuilt from the low-precision
 * weights), ckpt-last-stage-init (the last pipeline stage's copies back at their initial values:
 * seed 004's LayerNorm), ckpt-adam-state-dropped (the first tensor's Adam state not loaded),
 * ckpt-step-reset (the step count from 0: bias correction starts over), ckpt-scale-reset (the
 * loss scaler at its start), reshard-split-axis (resharding into TP=2: row-parallel weights split
 * along rows). A checkpoint saved after another step than k is refused. */
static pf_status pf_tp_load(pf_tp_world *w, const char *dir, const pf_tp_world *from, size_t at_step) {
  pf_checkpoint ck;
  pf_status st = pf_checkpoint_read(dir, &ck);
  if (st) return st;
  if (ck.step != at_step) {
    st = pf_error(PF_ERR_ARG, "checkpoint %s: saved after step %llu, the case loads it after step %zu", dir,
                  (unsigned long long)ck.step, at_step);
    pf_checkpoint_free(&ck);
    return st;
  }
  const char *f = w->c->fault;
  const int f_master = strcmp(f, "ckpt-master-from-param") == 0, f_stage = strcmp(f, "ckpt-last-stage-init") == 0;
  const int f_adam = strcmp(f, "ckpt-adam-state-dropped") == 0, f_step = strcmp(f, "ckpt-step-reset") == 0;
  const int f_scale = strcmp(f, "ckpt-scale-reset") == 0;
  const int f_axis = from && from->TP == 1 && w->TP == 2 && strcmp(f, "reshard-split-axis") == 0;
  const int R = from ? from->R : w->R;
  static const char *const tn[4] = {"master", "param", "exp_avg", "exp_avg_sq"};
  const double *src[8][4];
  if (ck.nranks != R)
    st = from ? pf_error(PF_ERR_PARSE, "checkpoint %s: %d ranks, the group that saved it had %d", dir, ck.nranks, R)
              : pf_error(PF_ERR_PARSE, "checkpoint %s: %d ranks, TP=%d x PP=%d x DP=%d loading it has %d", dir, ck.nranks,
                         w->TP, w->PP, w->DP, R);
  for (int r = 0; r < R && !st; r++) { /* every saved rank's tensors, of the length it held */
    const size_t n = from ? pf_tp_rank_at((pf_tp_world *)from, r)->nloc : pf_tp_rank_at(w, r)->nloc;
    for (int q = 0; q < 4 && !st; q++) {
      const pf_ckpt_tensor *t = pf_ckpt_tensor_of(&ck, r, tn[q]);
      const pf_dtype want = q == 1 ? w->L->dtype : PF_FP32;
      if (!t || t->n != n)
        st = pf_error(PF_ERR_PARSE, "checkpoint %s: rank %d: tensor %s %s (the rank held %zu elements)", dir, r, tn[q],
                      t ? "has another length" : "missing", n);
      else if (t->dtype != want)
        st = pf_error(PF_ERR_PARSE, "checkpoint %s: rank %d: tensor %s is %s, the case's is %s", dir, r, tn[q],
                      pf_dtype_name(t->dtype), pf_dtype_name(want));
      else src[r][q] = t->data;
    }
  }
  static const char *const names[7] = {"step", "scale", "cur_iter", "last_overflow_iter", "cur_hysteresis",
                                       "growth_tracker", "stopped"};
  for (int r = 0; r < w->R && !st; r++) {
    pf_tp_rank *k = pf_tp_rank_at(w, r);
    double *into[4] = {k->master, k->param, k->m, k->v};
    for (size_t x = 0; x < k->nloc && !st; x++) {
      size_t y = x;
      const size_t e = f_axis ? pf_tp_split_axis_wrong(w->L, k, k->elem[x]) : k->elem[x];
      const int j = from ? pf_tp_holder(from, k, e, &y) : r;
      if (j < 0) {
        st = pf_error(PF_ERR_PARSE, "checkpoint %s: no rank held element %zu", dir, e);
        break;
      }
      for (int q = 0; q < 4; q++) into[q][x] = src[j][q][y];
    }
    double v[7];
    for (int i = 0; i < 7 && !st; i++) { /* every rank's step count and scaler are equal: rank 0's when resharding */
      const pf_ckpt_number *n = pf_ckpt_number_of(&ck, from ? 0 : r, names[i]);
      if (!n) st = pf_error(PF_ERR_PARSE, "checkpoint %s: rank %d: number %s missing", dir, from ? 0 : r, names[i]);
      else if (i != 1 && !(n->value == floor(n->value) && fabs(n->value) <= 0x1p31)) /* counters, held as integers */
        st = pf_error(PF_ERR_PARSE, "checkpoint %s: rank %d: number %s is %.17g, not an integer in [-2^31, 2^31]", dir,
                      from ? 0 : r, names[i], n->value);
      else if (i == 0 && n->value < 0)
        st = pf_error(PF_ERR_PARSE, "checkpoint %s: rank %d: number step is %.17g, not a count", dir, from ? 0 : r, n->value);
      else v[i] = n->value;
    }
    if (st) break;
    k->taken = (size_t)v[0];
    k->sc.scale = v[1], k->sc.cur_iter = (long)v[2], k->sc.last_overflow_iter = (long)v[3];
    k->sc.cur_hysteresis = (long)v[4], k->sc.growth_tracker = (long)v[5], k->sc.stopped = (int)v[6];
    for (size_t x = 0; x < k->nloc; x++) {
      if (f_master) k->master[x] = k->param[x];
      if (f_stage && w->PP == 2 && k->pp == 1) k->master[x] = w->init[k->elem[x]], k->param[x] = pf_round(w->L->dtype, k->master[x]);
      if (f_adam && pf_tp_block_of(w->L, k->elem[x], &(size_t){0}, &(size_t){0}) == 0) k->m[x] = k->v[x] = 0;
    }
    if (f_step) k->taken = 0;
    if (f_scale) k->sc = pf_tp_scaler_start(w->L);
  }
  pf_checkpoint_free(&ck);
  return st;
}

/* A run with a round trip after step k: steps 1..k at TPa x DPa, saved to a checkpoint in a fresh
 * directory, every rank's state dropped (its world freed), a fresh group set up at TPb x DPb and
 * loaded from the checkpoint, steps k+1..N. The same layout (resume_at): rank r loads rank r's
 * tensors; another (reshard_at): each element from a rank that held it. user (not NULL): the
 * checkpoint the user's code wrote (--checkpoint), at TPb x DPb, is loaded instead, rank r's
 * tensors into rank r. On return w (TPb x DPb) holds the whole run's histories: the rows before
 * the save the first group's (each rank's own, or each element's from a rank that held it, the
 * same stage first), the row of step k its state as loaded, so that a load that changes anything
 * shows at step k. With --save-checkpoint the checkpoint stays, named for the saving layout. */
static pf_status pf_tp_world_round_trip(pf_tp_world *w, const pf_case *c, const pf_tp_layout *L, const pf_tensor *in,
                                        size_t k, int TPa, int DPa, int TPb, int DPb, const char *user) {
  const char *tmp = getenv("TMPDIR");
  char base[4096], dir[4200], layout[32];
  snprintf(layout, sizeof layout, "tp%d-dp%d", TPa, DPa);
  const int kept = !user && pf_checkpoint_keep_path(layout, dir, sizeof dir);
  snprintf(base, sizeof base, "%s/precfuzz-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!kept && !user && !mkdtemp(base)) return pf_error(PF_ERR_IO, "tp: cannot make a directory for the checkpoint (%s)", strerror(errno));
  if (!kept && !user) snprintf(dir, sizeof dir, "%s/step-%zu", base, k);
  const int same = TPa == TPb && DPa == DPb;
  pf_tp_world *before = malloc(sizeof *before);
  pf_status st = before ? pf_tp_world_init(before, c, L, in, TPa, DPa) : pf_error(PF_ERR_NOMEM, "tp: out of memory");
  if (!st) st = pf_tp_world_steps(before, 0, k);
  if (!st && !user) st = pf_tp_save(before, dir, k);
  if (!st) st = pf_tp_world_init(w, c, L, in, TPb, DPb);
  /* resharding: the saving layout says who held what; the user's checkpoint is at w's own */
  if (!st) st = user ? pf_tp_load(w, user, NULL, k) : pf_tp_load(w, dir, same ? NULL : before, k);
  for (int r = 0; r < w->R && !st; r++) {
    pf_tp_rank *b = pf_tp_rank_at(w, r);
    const pf_tp_rank *a0 = pf_tp_rank_at(before, same ? r : 0); /* every rank reports the same norm and state */
    for (size_t x = 0; x < b->nloc; x++) {
      size_t y = x;
      const pf_tp_rank *a = same ? a0 : pf_tp_rank_at(before, pf_tp_holder(before, b, b->elem[x], &y));
      for (size_t s = 0; s < k; s++) memcpy(b->hist + (s * b->nloc + x) * 4, a->hist + (s * a->nloc + y) * 4, 4 * sizeof(double));
    }
    memcpy(b->norms, a0->norms, k * sizeof(double));
    memcpy(b->shist, a0->shist, k * PF_TP_NSTATE * sizeof(double));
    pf_tp_record(b, k - 1);
    for (int q = 0; q < before->R; q++) b->fe |= pf_tp_rank_at(before, q)->fe;
  }
  if (!st) st = pf_tp_world_steps(w, k, L->steps);
  if (before) pf_tp_world_free(before);
  free(before);
  if (!kept && !user) {
    pf_checkpoint_remove(dir);
    rmdir(base);
  }
  return st;
}

/* Which run the user's checkpoint (--checkpoint) is for when the case reshards: 1 when it is at
 * TP=1 (the second run's state converted to it: that run goes on at TP=1 from it), 2 when at the
 * second run's layout (the first run's, converted); told apart by the number of ranks. */
static pf_status pf_tp_user_side(const pf_case *c, const pf_tp_layout *L, int *side) {
  pf_checkpoint ck;
  pf_status st = pf_checkpoint_read(c->checkpoint, &ck);
  if (st) return st;
  const int pp = L->tied ? 2 : 1, r1 = pp, r2 = L->tp * L->dp * pp;
  *side = ck.nranks == r1 ? 1 : ck.nranks == r2 ? 2 : 0;
  if (!*side)
    st = pf_error(PF_ERR_PARSE, "checkpoint %s: %d ranks: neither layout of the case (TP=1 x PP=%d: %d ranks; TP=%d x PP=%d "
                  "x DP=%d: %d)", c->checkpoint, ck.nranks, pp, r1, L->tp, pp, L->dp, r2);
  pf_checkpoint_free(&ck);
  return st;
}

pf_status pf_tp_cpu(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  /* zeroed: a world that a failure left unset is freed as empty */
  pf_tp_world *w1 = calloc(1, sizeof *w1), *w2 = calloc(1, sizeof *w2);
  if (!w1 || !w2) {
    free(w1), free(w2);
    return pf_error(PF_ERR_NOMEM, "tp: cannot allocate the worlds");
  }
  pf_status st = PF_OK;
  const char *user = c->checkpoint[0] ? c->checkpoint : NULL;
  if (L.reshard) { /* each run changes layout at the checkpoint: the second's to TP=1 and the reverse;
                    * with the user's checkpoint, the run it continues does and the other runs straight */
    int side = 0;
    if (user) st = pf_tp_user_side(c, &L, &side);
    if (!st)
      st = side == 2 ? pf_tp_world_run(w1, c, &L, in, 1, 1)
                     : pf_tp_world_round_trip(w1, c, &L, in, L.reshard, L.tp, L.dp, 1, 1, user);
    if (!st)
      st = side == 1 ? pf_tp_world_run(w2, c, &L, in, L.tp, L.dp)
                     : pf_tp_world_round_trip(w2, c, &L, in, L.reshard, 1, 1, L.tp, L.dp, user);
  } else {
    st = pf_tp_world_run(w1, c, &L, in, 1, 1);
    if (!st)
      st = L.resume ? pf_tp_world_round_trip(w2, c, &L, in, L.resume, L.tp, L.dp, L.tp, L.dp, user)
                    : pf_tp_world_run(w2, c, &L, in, L.tp, L.dp);
  }
  if (!st && L.resume) { /* the round trip against the same run straight: bitwise */
    pf_tp_world *ws = malloc(sizeof *ws);
    st = ws ? pf_tp_world_run(ws, c, &L, in, L.tp, L.dp) : pf_error(PF_ERR_NOMEM, "tp: out of memory");
    for (size_t s = 0; !st && s < L.steps; s++) {
      for (size_t e = 0; e < L.n; e++) { /* every copy of e: the first one that differs */
        double code = 0, was = 0, is = 0;
        for (int r = 0; r < w2->R && code == 0; r++) {
          const pf_tp_rank *a = pf_tp_rank_at(ws, r), *b = pf_tp_rank_at(w2, r);
          const size_t x = pf_tp_local(a, e);
          if (x >= a->nloc || a->elem[x] != e) continue;
          const double *p = a->hist + (s * a->nloc + x) * 4, *q = b->hist + (s * b->nloc + x) * 4;
          for (int k = 0; k < 4 && code == 0; k++)
            if (memcmp(&p[k], &q[k], sizeof(double)) != 0) code = 1 + k, was = p[k], is = q[k];
        }
        double *o = out + pf_tp_resume_at(&L, s, e);
        o[0] = code, o[1] = was, o[2] = is;
      }
      for (int slot = 0; slot < PF_TP_SLOTS; slot++) { /* each rank's step count and scaler */
        double code = 0, was = 0, is = 0;
        const int dp = slot / 4, pp = slot / 2 % 2, tp = slot % 2;
        if (dp < w2->DP && pp < w2->PP && tp < w2->TP) {
          const double *p = ws->rank[slot].shist + s * PF_TP_NSTATE, *q = w2->rank[slot].shist + s * PF_TP_NSTATE;
          for (int k = 0; k < PF_TP_NSTATE && code == 0; k++)
            if (p[k] != q[k]) code = 1 + k, was = p[k], is = q[k];
        }
        double *o = out + pf_tp_state_at(&L, s, slot);
        o[0] = code, o[1] = was, o[2] = is;
      }
    }
    if (ws) pf_tp_world_free(ws);
    free(ws);
  }
  if (!st) {
    const pf_tp_rank *one = &w1->rank[0];
    for (size_t s = 0; s < L.steps; s++) {
      for (size_t e = 0; e < L.n; e++) { /* the second run gathered from replica 0 (an expert's under EP) */
        const int own = pf_tp_owner(&L, e);
        size_t i, j;
        const int d = pf_tp_ep_elem(&L, e) ? L.b[pf_tp_block_of(&L, e, &i, &j)].expert : 0;
        const pf_tp_rank *k = &w2->rank[pf_tp_slot(d, 0, own < 0 ? 0 : own)];
        const double *a = one->hist + (s * one->nloc + e) * 4, *b = k->hist + (s * k->nloc + pf_tp_local(k, e)) * 4;
        for (int q = 0; q < 4; q++) {
          out[pf_tp_run_at(&L, 0, s, q, e)] = a[q];
          out[pf_tp_run_at(&L, 1, s, q, e)] = b[q];
        }
      }
      /* the norms each rank reported (a slot the run has no rank for: coordinate 0's) */
      for (int run = 0; run < 2; run++) {
        const pf_tp_world *w = run ? w2 : w1;
        for (int slot = 0; slot < PF_TP_SLOTS; slot++) {
          const int dp = slot / 4 < w->DP ? slot / 4 : 0, pp = slot / 2 % 2 < w->PP ? slot / 2 % 2 : 0,
                    tp = slot % 2 < w->TP ? slot % 2 : 0;
          out[pf_tp_norm_at(&L, run, s, slot)] = w->rank[pf_tp_slot(dp, pp, tp)].norms[s];
        }
      }
      /* copy checks: code 0 when master, parameter, m and v are bitwise equal to the
       * reference copy, else 1 + the first quantity that differs; then that difference */
      for (size_t j = 0; j < L.nsync; j++) {
        int kind, d;
        const size_t e = pf_tp_sync_elem(&L, j, &kind, &d);
        const int own = pf_tp_owner(&L, e), at = own < 0 ? 0 : own;
        const pf_tp_rank *ref = &w2->rank[pf_tp_slot(kind == PF_TP_COPY_DP ? 0 : d, 0, at)];
        const pf_tp_rank *cpy = &w2->rank[kind == PF_TP_COPY_TP     ? pf_tp_slot(d, 0, 1)
                                          : kind == PF_TP_COPY_TIED ? pf_tp_slot(d, 1, at)
                                                                    : pf_tp_slot(d, 0, at)];
        const double *a = ref->hist + (s * ref->nloc + pf_tp_local(ref, e)) * 4;
        const double *b = cpy->hist + (s * cpy->nloc + pf_tp_local(cpy, e)) * 4;
        double code = 0, diff = 0;
        for (int q = 0; q < 4 && code == 0; q++)
          if (memcmp(&a[q], &b[q], sizeof(double)) != 0) {
            code = 1 + q;
            diff = pf_round(PF_FP32, b[q] - a[q]);
          }
        out[pf_tp_sync_at(&L, s, j)] = code;
        out[pf_tp_sync_at(&L, s, j) + 1] = diff;
      }
    }
    for (int r = 0; r < 8; r++) *fe |= w1->rank[r].fe | w2->rank[r].fe;
  }
  pf_tp_world_free(w1);
  pf_tp_world_free(w2);
  free(w1), free(w2);
  return st;
}

/* --- the operation --------------------------------------------------------------------- */

static size_t pf_tp_input_count(const pf_case *c, int i) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  return i == 0 ? L.n : i == 1 ? L.steps * L.mb * (L.n + L.head) : L.steps;
}
static pf_dtype pf_tp_input_dtype(const pf_case *c, int i) { return PF_FP32; }
static size_t pf_tp_outputs(const pf_case *c) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  return pf_tp_output_count(&L);
}
static int pf_tp_stages(const pf_case *c, pf_stage *st) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  st[0] = (pf_stage){"copies", 0, 2 * L.steps * L.nsync, 0, PF_STAGE_MIXED, 0, {0}, PF_MEASURE_NONE};
  st[1] = (pf_stage){"tp1", pf_tp_run_at(&L, 0, 0, 0, 0), 4 * L.steps * L.n, 0, PF_STAGE_MIXED, 0, {0}, PF_MEASURE_NONE};
  st[2] = (pf_stage){"tp2", pf_tp_run_at(&L, 1, 0, 0, 0), 4 * L.steps * L.n, 0, PF_STAGE_MIXED, 0, {0}, PF_MEASURE_NONE};
  st[3] = (pf_stage){"norms", pf_tp_norm_at(&L, 0, 0, 0), 2 * PF_TP_SLOTS * L.steps, 0, PF_STAGE_MIXED, 0, {0}, PF_MEASURE_NONE};
  if (!L.resume) return 4;
  st[4] = (pf_stage){"resume", pf_tp_resume_at(&L, 0, 0), 3 * L.steps * (L.n + PF_TP_SLOTS), 0, PF_STAGE_MIXED, 0, {0},
                     PF_MEASURE_NONE};
  return 5;
}

/* Gradients around the clipping threshold: every step's are scaled so that at spread 0 the
 * global norm is about max_norm, times 2^(spread x_s), x_s = clamp(z_s / 2, -1, 1) from the
 * drawn gscale (which then holds the factor): clipping is active in some steps, not others. */
static void pf_tp_prepare(const pf_case *c, pf_tensor *in) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  const double base = c->params[PF_TPP_MAXNORM] / sqrt((double)(L.n + L.head));
  const size_t per = L.mb * (L.n + L.head);
  for (size_t s = 0; s < L.steps; s++) {
    double x = in[2].data[s] / 2;
    x = x < -1 ? -1 : x > 1 ? 1 : x;
    if (!isfinite(in[2].data[s])) x = 0;
    const double f = pf_round(PF_FP32, exp2(c->params[PF_TPP_SPREAD] * x));
    in[2].data[s] = f;
    for (size_t y = 0; y < per; y++) in[1].data[s * per + y] = pf_round(PF_FP32, in[1].data[s * per + y] * base * f);
  }
}

static pf_status pf_tp_check(const pf_case *c) {
  if (c->params[PF_TPP_RESHARD] != 0) {
    if (c->params[PF_TPP_RESHARD] >= (double)c->shape[0])
      return pf_error(PF_ERR_ARG, "reshard_at (%.0f) must be a step before the last (steps: %zu)", c->params[PF_TPP_RESHARD],
                      c->shape[0]);
    if (c->params[PF_TPP_RESUME] != 0)
      return pf_error(PF_ERR_ARG, "resume_at and reshard_at: one round trip a case (the same layout, or the other)");
    const pf_kernel *k = pf_case_kernel(c);
    if (k && k->like && !pf_kernel_param(k, PF_TPP_RESHARD))
      return pf_error(PF_ERR_UNSUPPORTED, "reshard_at: %s/%s does not take it (its hello's params do not name reshard_at)",
                      c->kernel, c->variant);
  }
  if (c->params[PF_TPP_RESUME] != 0) {
    if (c->params[PF_TPP_RESUME] >= (double)c->shape[0])
      return pf_error(PF_ERR_ARG, "resume_at (%.0f) must be a step before the last (steps: %zu)", c->params[PF_TPP_RESUME],
                      c->shape[0]);
    /* a kernel process does the round trip with its own save and load: it says so by taking
     * resume_at in its hello */
    const pf_kernel *k = pf_case_kernel(c);
    if (k && k->like && !pf_kernel_param(k, PF_TPP_RESUME))
      return pf_error(PF_ERR_UNSUPPORTED, "resume_at: %s/%s does not take it (its hello's params do not name resume_at: "
                                          "it has no save and load of its own wired to the round trip)", c->kernel, c->variant);
  }
  /* precfuzz's own checkpoints (kept, or the user's loaded): a built-in variant's round trip */
  const int trip = c->params[PF_TPP_RESUME] != 0 || c->params[PF_TPP_RESHARD] != 0;
  const int process = pf_case_kernel(c) && pf_case_kernel(c)->like;
  if (pf_checkpoint_keeping() && !trip)
    return pf_error(PF_ERR_ARG, "--save-checkpoint: the case saves none (a round trip does: --param resume_at=K or reshard_at=K)");
  if (pf_checkpoint_keeping() && process)
    return pf_error(PF_ERR_ARG, "--save-checkpoint: %s/%s is a kernel process: it saves with its own code, where it likes",
                    c->kernel, c->variant);
  if (c->checkpoint[0] && !trip)
    return pf_error(PF_ERR_ARG, "checkpoint: say the step it was saved after: --param resume_at=K (it holds the second "
                                "run's layout) or reshard_at=K (either run's, converted to the other's)");
  if (c->checkpoint[0] && process)
    return pf_error(PF_ERR_UNSUPPORTED, "checkpoint: %s/%s is a kernel process, whose own save and load do the round "
                                        "trip (resume_at); a checkpoint is loaded into a built-in variant", c->kernel, c->variant);
  if (c->params[PF_TPP_TP] == 2) {
    if (c->shape[1] % 2) return pf_error(PF_ERR_ARG, "hidden (%zu) must be even: TP=2 splits it (Megatron's divide())", c->shape[1]);
    if (c->shape[2] % 2) return pf_error(PF_ERR_ARG, "ffn (%zu) must be even: TP=2 splits it (Megatron's divide())", c->shape[2]);
    if (c->shape[3] < 2) return pf_error(PF_ERR_ARG, "vocab (%zu) must be at least 2: TP=2 splits it", c->shape[3]);
  }
  const size_t mb = (size_t)c->params[PF_TPP_MB], dp = (size_t)c->params[PF_TPP_DP];
  if (mb % dp)
    return pf_error(PF_ERR_ARG, "microbatches (%zu) must be a multiple of dp (%zu): the replicas split them evenly", mb, dp);
  if (c->params[PF_TPP_EXPERTS] == 1) return pf_error(PF_ERR_ARG, "experts must be 0 or 2");
  if (c->params[PF_TPP_COMM] != 0 && c->dtype != PF_BF16 && !(c->dtype == PF_FP16 && pf_tp_algo_zero(pf_case_algo(c))))
    return pf_error(PF_ERR_ARG, "comm=1 (the reduction in the storage dtype) is for bf16 (and DeepSpeed's ZeRO in fp16)");
  if (c->params[PF_TPP_EXPERTS] != 0 && pf_case_algo(c) == PF_TP_TORCH)
    return pf_error(PF_ERR_UNSUPPORTED, "tp_diff/torch has no experts (experts must be 0)");
  if (pf_tp_algo_zero(pf_case_algo(c))) {
    if (c->dtype == PF_FP32) return pf_error(PF_ERR_UNSUPPORTED, "tp_diff/%s is bf16 or fp16", c->variant);
    if (c->params[PF_TPP_TIED] != 0)
      return pf_error(PF_ERR_UNSUPPORTED, "tp_diff/%s has no pipeline stages (tied must be 0)", c->variant);
    if (c->params[PF_TPP_EXPERTS] != 0)
      return pf_error(PF_ERR_UNSUPPORTED, "tp_diff/%s has no experts (experts must be 0)", c->variant);
  }
  if (c->dtype == PF_FP32 && pf_case_algo(c) != PF_TP_TORCH)
    return pf_error(PF_ERR_UNSUPPORTED, "tp: dtype fp32 has no mixed-precision step (bf16 or fp16)");
  if (c->dtype == PF_BF16 && c->params[PF_TPP_LOSS_SCALE] != 0)
    return pf_error(PF_ERR_ARG, "loss_scale is for fp16; bf16 runs without loss scaling");
  const double S = c->params[PF_TPP_LOSS_SCALE];
  if (S != 0 && (S < 1 || frexp(S, &(int){0}) != 0.5))
    return pf_error(PF_ERR_ARG, "loss_scale (%g) must be a power of two >= 1", S);
  if (c->params[PF_TPP_SCALER] == 0 && (c->params[PF_TPP_GROWTH_INTERVAL] != 1000 || c->params[PF_TPP_HYSTERESIS] != 2 ||
                                         c->params[PF_TPP_MIN_SCALE] != 1))
    return pf_error(PF_ERR_ARG, "growth_interval, hysteresis and min_loss_scale are for the dynamic scaler (scaler=1)");
  if (c->params[PF_TPP_SCALER] != 0) {
    if (c->dtype != PF_FP16) return pf_error(PF_ERR_ARG, "scaler=1 (a dynamic loss scale) is for fp16");
    if (c->params[PF_TPP_EXPERTS] != 0)
      return pf_error(PF_ERR_UNSUPPORTED, "scaler=1 with experts: the expert-parallel overflow is not modelled (experts must be 0)");
    const double m = c->params[PF_TPP_MIN_SCALE];
    if (frexp(m, &(int){0}) != 0.5) return pf_error(PF_ERR_ARG, "min_loss_scale (%g) must be a power of two", m);
    if (m > (S > 0 ? S : 0x1p12))
      return pf_error(PF_ERR_ARG, "min_loss_scale (%g) must not exceed the initial loss_scale (%g)", m, S > 0 ? S : 0x1p12);
  }
  return PF_OK;
}

/* Domain: finite inputs; a squared norm far from fp32's range; in fp16 with a static scale, no
 * scaled micro-batch gradient or sum of them near fp16's range (an overflow skips the step, the
 * same on every configuration; under the dynamic scaler those steps are the question). */
static int pf_tp_in_domain(const pf_case *c, const pf_tensor *in, char *why, size_t len) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  for (int k = 0; k < 3; k++)
    for (size_t x = 0; x < in[k].n; x++)
      if (!isfinite(in[k].data[x])) {
        snprintf(why, len, "input %s has a non-finite value", pf_tp_inputs[k]);
        return 0;
      }
  /* the squared norm must stay well inside fp32 (an inf norm zeroes every gradient) */
  for (size_t s = 0; s < L.steps; s++) {
    double sq = 0;
    for (size_t e = 0; e < L.n; e++) {
      double a = 0;
      for (size_t k = 0; k < L.mb; k++) {
        a += fabs(pf_tp_grad(&L, in[1].data, s, k, e));
        if (L.tied && e >= L.b[pf_tp_embed(&L)].offset) a += fabs(pf_tp_grad(&L, in[1].data, s, k, L.n + e - L.b[pf_tp_embed(&L)].offset));
      }
      sq += a * a;
    }
    if (!(sq < 0x1p120)) {
      snprintf(why, len, "step %zu: the squared gradient norm (up to %g) comes near fp32's range", s + 1, sq);
      return 0;
    }
  }
  if (L.dtype == PF_FP16 && L.dynamic && pf_tp_algo_zero(L.algo)) {
    /* DeepSpeed's ZeRO accumulates in fp16: whether a step overflows depends on the layout (at
     * DP=2 the gradients arrive doubled, fl(2 S g)); the runs must skip the same steps, or their
     * scales part, and DeepSpeed's scaler must not reach the overflow that ends its run */
    pf_tp_scaler sc = pf_tp_scaler_start(&L); /* both runs' while they skip the same steps */
    unsigned fe = 0;
    for (size_t s = 0; s < L.steps; s++) {
      int found[2] = {0, 0}; /* TP=1 x DP=1; the second run (its gradients differ only at DP=2) */
      for (int run = 0; run < (L.dp == 2 ? 2 : 1); run++)
        for (size_t e = 0; e < L.n && !found[run]; e++)
          found[run] = !isfinite(pf_tp_zero_sum(&L, sc.scale, in[1].data, s, e, 0, run ? L.dp : 1, 0, &fe));
      if (L.dp == 2 && found[0] != found[1]) {
        snprintf(why, len, "fp16: step %zu overflows in %s only (DeepSpeed's fp16 accumulation): the runs' loss scales part",
                 s + 1, found[0] ? "TP=1 x DP=1" : "the second run");
        return 0;
      }
      pf_tp_scaler_update(&L, &sc, found[0]);
      if (sc.stopped) {
        snprintf(why, len, "fp16: step %zu overflows at min_loss_scale %g: DeepSpeed raises \"Current loss scale already at "
                 "minimum\" and ends the run", s + 1, L.min_scale);
        return 0;
      }
    }
  }
  if (L.dtype == PF_FP16 && !L.dynamic) /* under the dynamic scaler an overflow is a skipped step, in the contract */
    for (size_t x = 0; x < in[1].n; x++)
      if (fabs(in[1].data[x]) * L.loss_scale * (double)(2 * L.mb) >= pf_max_finite(PF_FP16) / 2) {
        snprintf(why, len, "fp16: S g = %g for %zu micro-batches comes near fp16's range", fabs(in[1].data[x]) * L.loss_scale,
                 L.mb);
        return 0;
      }
  return 1;
}

/* A copy that is not bitwise equal, or a value outside the oracle's set, is divergent. */
static pf_verdict pf_tp_refine(const pf_case *c, const pf_tensor *in, size_t i, double y, pf_verdict v, double rounded,
                               pf_bound b) {
  /* the copy checks come first, the round trip's at the end: pairs (code, difference) */
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  if (i < 2 * L.steps * L.nsync) return i % 2 == 0 && y != 0 ? PF_V_DIVERGENT : PF_V_OK;
  const size_t r0 = pf_tp_resume_at(&L, 0, 0);
  if (L.resume && i >= r0) return (i - r0) % 3 == 0 && y != 0 ? PF_V_DIVERGENT : PF_V_OK;
  return v == PF_V_OK || v == PF_V_RANGE ? v : PF_V_DIVERGENT;
}

static const char *const pf_tp_q[4] = {"master", "parameter", "m", "v"};

/* Names the first finding: the earliest step; in it the copy checks, then TP=2, then TP=1. */
static const char *const pf_tp_state_names[PF_TP_NSTATE] = {"step count", "loss scale", "growth tracker",
                                                             "hysteresis tracker", "scaler iteration"};

static void pf_tp_review_runs(const pf_case *c, pf_run *r) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  /* the round trip first: the earliest step where the resumed run is not the straight one */
  for (size_t s = 0; L.resume && s < L.steps; s++) {
    /* step k's row of the resumed run is its state as loaded: a difference there is the load's */
    const int loaded = s + 1 == L.resume;
    char what[112];
    size_t x = SIZE_MAX;
    for (int slot = 0; slot < PF_TP_SLOTS && x == SIZE_MAX; slot++)
      if (pf_verdict_is_finding(r->cmp.elem[pf_tp_state_at(&L, s, slot)])) {
        x = pf_tp_state_at(&L, s, slot);
        snprintf(what, sizeof what, "the %s of DP replica %d, pipeline stage %d, TP rank %d",
                 pf_tp_state_names[(int)r->out[x] - 1], slot / 4, slot / 2 % 2, slot % 2);
      }
    for (size_t e = 0; e < L.n && x == SIZE_MAX; e++)
      if (pf_verdict_is_finding(r->cmp.elem[pf_tp_resume_at(&L, s, e)])) {
        x = pf_tp_resume_at(&L, s, e);
        char name[64];
        pf_tp_elem_name(&L, e, name, sizeof name);
        snprintf(what, sizeof what, "%s's %s", name, pf_tp_q[(int)r->out[x] - 1]);
      }
    if (x == SIZE_MAX) continue;
    if (loaded && c->checkpoint[0])
      snprintf(r->note, sizeof r->note,
               "the checkpoint given (--checkpoint), loaded after step %zu: %s is %.9g in the run straight, %.9g in the "
               "checkpoint (bound 0: bit for bit)",
               L.resume, what, r->out[x + 1], r->out[x + 2]);
    else if (c->checkpoint[0])
      snprintf(r->note, sizeof r->note,
               "the checkpoint given (--checkpoint), loaded after step %zu (equal to the run straight there): after step "
               "%zu %s is %.9g, %.9g in the run straight (bound 0: bit for bit)",
               L.resume, s + 1, what, r->out[x + 2], r->out[x + 1]);
    else if (loaded)
      snprintf(r->note, sizeof r->note,
               "the run saved after step %zu, loaded into a fresh group: %s was %.9g when saved, %.9g as loaded "
               "(bound 0: bit for bit)",
               L.resume, what, r->out[x + 1], r->out[x + 2]);
    else
      snprintf(r->note, sizeof r->note,
               "the run saved after step %zu, loaded into a fresh group (equal as loaded): after step %zu %s is %.9g, "
               "%.9g in the run straight (bound 0: bit for bit)",
               L.resume, s + 1, what, r->out[x + 2], r->out[x + 1]);
    r->born = "resume";
    r->born_at = x;
    r->note_whole = 1;
    return;
  }
  for (size_t s = 0; s < L.steps; s++) {
    for (size_t j = 0; j < L.nsync; j++) {
      const size_t x = pf_tp_sync_at(&L, s, j);
      if (!pf_verdict_is_finding(r->cmp.elem[x])) continue;
      int kind, d;
      const size_t e = pf_tp_sync_elem(&L, j, &kind, &d);
      char name[64], of[32] = "";
      pf_tp_elem_name(&L, e, name, sizeof name);
      if (L.dp > 1) snprintf(of, sizeof of, " of DP replica %d", d);
      const int q = (int)r->out[x] - 1, own = pf_tp_owner(&L, e);
      if (kind == PF_TP_COPY_TIED)
        snprintf(r->note, sizeof r->note,
                 "%s: the tied copy on pipeline stage 1 (TP rank %d%s) after step %zu: its %s differs from stage 0's by "
                 "%.3g (bound 0: both copies of a tied weight must be bitwise equal)",
                 name, own < 0 ? 0 : own, of, s + 1, pf_tp_q[q], r->out[x + 1]);
      else if (kind == PF_TP_COPY_DP)
        snprintf(r->note, sizeof r->note,
                 "%s on DP replica %d (TP rank %d) after step %zu: its %s differs from replica 0's by %.3g (bound 0: "
                 "data-parallel replicas must hold bitwise equal parameters and state)",
                 name, d, own < 0 ? 0 : own, s + 1, pf_tp_q[q], r->out[x + 1]);
      else
        snprintf(r->note, sizeof r->note,
                 "%s on TP rank 1%s after step %zu: its %s differs from rank 0's copy by %.3g (bound 0: a replicated "
                 "parameter and its Adam state must be bitwise equal on every rank)",
                 name, of, s + 1, pf_tp_q[q], r->out[x + 1]);
      r->born = "copies";
      r->born_at = x;
      r->note_whole = 1;
      return;
    }
    for (int run = 1; run >= 0; run--)
      for (int slot = 0; slot < PF_TP_SLOTS; slot++) {
        const size_t x = pf_tp_norm_at(&L, run, s, slot);
        if (!pf_verdict_is_finding(r->cmp.elem[x])) continue;
        char layout[32], of[32] = "";
        pf_tp_run_name(&L, run, layout, sizeof layout);
        if (run == 1 && L.dp > 1) snprintf(of, sizeof of, ", DP replica %d", slot / 4);
        snprintf(r->note, sizeof r->note,
                 "the gradient norm %s's step reported (%s, pipeline stage %d, TP rank %d%s) at step %zu: %.9g outside "
                 "[%.9g, %.9g] (the values any summation order of the norm allows)",
                 c->variant, layout, slot / 2 % 2, slot % 2, of, s + 1, r->out[x], r->oracle.rounded[x],
                 r->oracle.rounded_alt[x]);
        r->born = "norms";
        r->born_at = x;
        return;
      }
    for (int run = 1; run >= 0; run--)
      for (int q = 0; q < 4; q++)
        for (size_t e = 0; e < L.n; e++) {
          const size_t x = pf_tp_run_at(&L, run, s, q, e);
          if (!pf_verdict_is_finding(r->cmp.elem[x])) continue;
          char name[64], rank[64] = "", layout[32];
          pf_tp_elem_name(&L, e, name, sizeof name);
          pf_tp_run_name(&L, run, layout, sizeof layout);
          const int own = run == 1 ? pf_tp_owner(&L, e) : -2;
          if (own == -1 && L.tp == 2) snprintf(rank, sizeof rank, " (%s, every rank)", layout);
          else if (own >= 0) snprintf(rank, sizeof rank, " (%s, rank %d)", layout, own);
          else snprintf(rank, sizeof rank, " (%s)", layout);
          const double y = r->out[x], lo = r->oracle.rounded[x], hi = r->oracle.rounded_alt[x];
          const double d = y < lo ? lo - y : y - hi;
          /* under the dynamic scaler, the step's scale and the next one's (replayed from the
           * oracle's skipped steps, whose norm set is -1): a doubling step says so */
          char scale[80] = "";
          if (L.dynamic) {
            pf_tp_scaler sc = pf_tp_scaler_start(&L);
            double at = sc.scale;
            for (size_t t = 0; t <= s; t++) {
              at = sc.scale;
              pf_tp_scaler_update(&L, &sc, r->oracle.rounded[pf_tp_norm_at(&L, 0, t, 0)] == -1);
            }
            snprintf(scale, sizeof scale, "; loss scale %g -> %g", at, sc.scale);
          }
          snprintf(r->note, sizeof r->note,
                   "%s%s after step %zu: %s %.9g outside [%.9g, %.9g] by %.3g (the values any summation order of "
                   "the norm allows, through the coefficient and Adam)%s",
                   name, rank, s + 1, pf_tp_q[q], y, lo, hi, isnan(d) ? NAN : d, scale);
          r->born = run ? "tp2" : "tp1";
          r->born_at = x;
          return;
        }
  }
}

/* A finding in a case that reshards says so: its values came through the other layout's save. */
static void pf_tp_review(const pf_case *c, pf_run *r) {
  pf_tp_review_runs(c, r);
  const size_t k = (size_t)c->params[PF_TPP_RESHARD], n = strlen(r->note);
  if (k && n && c->checkpoint[0])
    snprintf(r->note + n, sizeof r->note - n, "; a run went on from the checkpoint given (--checkpoint) after step %zu", k);
  else if (k && n)
    snprintf(r->note + n, sizeof r->note - n, "; each run resharded after step %zu (TP=%.0f x DP=%.0f to TP=1 and back)", k,
             c->params[PF_TPP_TP], c->params[PF_TPP_DP]);
}

/* per step, parameter and micro-batch: the rank simulation about 170 ns, the oracle 65
 * (measured: 3x64x256x1000x4, 2 micro-batches) */
static void pf_tp_cost(const pf_case *c, double *emulation_s, double *oracle_s) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  const double units = (double)L.steps * (double)(L.n + L.head) * (double)L.mb;
  *emulation_s = 170e-9 * units;
  *oracle_s = 65e-9 * units;
}

/* the precision report's sweep: clean runs in each dtype (every one must pass) and each fault's
 * cases to its first finding */
static const pf_op_sweep pf_tp_sweep = {
    .kind = PF_SWEEP_DIFFERENTIAL,
    .clean_cases = 60, .clean_cases_quick = 4, .fault_cases = 40,
    /* where each fault's code runs: a second data-parallel replica, the experts, a dynamic fp16
     * scaler that overflows, a checkpoint's round trip or change of layout */
    .fault_settings = (const pf_fault_setting[]){
        {"dp-grad-unreduced", NULL, {"tp=1", "dp=2"}},
        {"expert-norm-averaged", NULL, {"experts=2", "dp=2"}},
        {"expert-norm-local", NULL, {"experts=2", "dp=2"}},
        {"expert-norm-dropped", NULL, {"experts=2", "dp=2"}},
        {"found-inf-local", "fp16", {"scaler=1", "loss_scale=0x1p18", "hysteresis=1"}},
        {"ckpt-master-from-param", NULL, {"resume_at=1"}},
        {"ckpt-last-stage-init", NULL, {"resume_at=1"}},
        {"ckpt-adam-state-dropped", NULL, {"resume_at=1"}},
        {"ckpt-step-reset", NULL, {"resume_at=1"}},
        {"ckpt-scale-reset", "fp16", {"scaler=1", "growth_interval=1", "resume_at=1"}},
        {"unscale-after-update", "fp16", {"scaler=1", "growth_interval=1"}},
        {"reshard-split-axis", NULL, {"reshard_at=1"}},
        {0}},
    .explanation = "TP=1 against TP=2 mixed-precision optimizer steps: replicated parameters bitwise equal on every "
                   "rank, both runs inside the set of values every summation order of the norm allows. Clean runs must "
                   "give no finding; each fault must be found.",
};

int pf_decode_tp_diff_fuzzer(const uint8_t *data, size_t size, pf_case *out); /* tp_diff_fuzzer.c */
const pf_op pf_tp_op = {
    .name = "tp_diff",
    .summary = "TP=1 against TP=2 (both PP=2 when tied) mixed-precision optimizer steps of a transformer layer's parameters",
    .ndims = 5,
    .dim_names = pf_tp_dims,
    .dim_max = {64, 1024, 4096, 65536, 4096},
    .dim_default = {3, 8, 16, 11, 4},
    .elems_max = (size_t)1 << 24,
    .nparams = PF_TP_NPARAMS,
    .params = pf_tp_params,
    .ninputs = 3,
    .input_names = pf_tp_inputs,
    .input_count = pf_tp_input_count,
    .input_dtype = pf_tp_input_dtype,
    .output_count = pf_tp_outputs,
    .oracle = pf_tp_mpfr,
    .stages = pf_tp_stages,
    .prepare = pf_tp_prepare,
    .refine = pf_tp_refine,
    .review = pf_tp_review,
    .takes_checkpoint = 1,
    .cost = pf_tp_cost,
    .fuzz_decode = pf_decode_tp_diff_fuzzer,
    .sweep = &pf_tp_sweep,
    .command = "diff-tp",
    .command_summary = "TP=1 against TP=2 optimizer steps: replicated copies and rounding sets",
    .command_dtype = "bf16",
    .command_help =
        "usage: precfuzz diff-tp [--fault NAME] [--cases N] [--seed N] [--json] [-t bf16|fp16]\n"
        "                       [--shape STEPSxHIDDENxFFNxVOCABxSEQ] [--param NAME=VALUE]... [run's options]\n\n"
        "Runs the mixed-precision optimizer step of a transformer layer's parameters as TP=1 and as\n"
        "TP=2 (PP=2 when the embedding is tied to the LM head), one thread per rank, and checks that\n"
        "replicated parameters and tied copies stay bitwise equal on every rank and that both runs'\n"
        "master, parameter, m and v stay in the set every summation order of the norm allows\n"
        "(the kernel tp_diff; precfuzz list shows its parameters). Default dtype bf16.\n"
        "--param tp=1 --param dp=2 makes the second run TP=1 x DP=2 (data-parallel replicas, the\n"
        "micro-batches split among them, their gradient buffers all-reduced); tp=2 dp=2: TP=2 x DP=2.\n"
        "--param experts=2 adds an MoE layer's two experts; with dp=2 the second run holds them\n"
        "expert-parallel (EP=2: expert e on replica e, the norm summing them over the expert group).\n"
        "--param comm=1 reduces the gradients in bf16, as DeepSpeed's engine does by default.\n"
        "-t fp16 --param scaler=1: the framework's dynamic loss scale (Megatron's; DeepSpeed's for\n"
        "its ZeRO variants); steps that overflow are skipped.\n"
        "-v deepspeed-zero2 / deepspeed-zero1 (with --param tied=0): DeepSpeed's ZeRO optimizer,\n"
        "the gradients accumulated in bf16 or fp16, reduced every micro-batch (stage 2) or once (stage 1).\n"
        "Faults: tp-replicated-unclipped, norm-no-dedup, norm-not-allreduced, tied-grad-unreduced,\n"
        "dp-grad-unreduced, expert-norm-averaged, expert-norm-local, expert-norm-dropped, found-inf-local,\n"
        "unscale-after-update (DeepSpeed 0.19.8's ZeRO order: gradients unscaled by the updated scale).\n"
        "Exit status: 0 no finding, 1 findings, 2 bad usage or input.\n",
};

static void pf_tp_bound(const pf_case *c, const pf_tensor *in, pf_bound *out) {
  const size_t n = pf_tp_outputs(c);
  for (size_t x = 0; x < n; x++) out[x] = (pf_bound){0, 0}; /* the oracle's sets are the bound */
}

static const char *const pf_tp_faults[] = {"tp-replicated-unclipped", "norm-no-dedup", "norm-not-allreduced",
                                           "tied-grad-unreduced", "dp-grad-unreduced", "expert-norm-averaged",
                                           "expert-norm-local", "expert-norm-dropped",
                                           "ckpt-master-from-param", "ckpt-last-stage-init", "ckpt-adam-state-dropped", "ckpt-step-reset", "reshard-split-axis", NULL};
/* the fp16 variants' too: each rank skips on its own found_inf (not all-reduced) */
static const char *const pf_tp_fp16_faults[] = {"tp-replicated-unclipped", "norm-no-dedup", "norm-not-allreduced",
                                                "tied-grad-unreduced", "dp-grad-unreduced", "expert-norm-averaged",
                                                "expert-norm-local", "expert-norm-dropped", "found-inf-local",
                                                "ckpt-master-from-param", "ckpt-last-stage-init", "ckpt-adam-state-dropped", "ckpt-step-reset", "ckpt-scale-reset", "reshard-split-axis", NULL};
/* plain PyTorch has no experts here, in fp32 no loss scaler, and its parameters are their own
 * masters (a master rebuilt from the parameter is the master) */
static const char *const pf_tp_torch_faults[] = {"tp-replicated-unclipped", "norm-no-dedup", "norm-not-allreduced",
                                                 "tied-grad-unreduced", "dp-grad-unreduced",
                                                 "ckpt-last-stage-init", "ckpt-adam-state-dropped", "ckpt-step-reset", "reshard-split-axis", NULL};
static const pf_param_range pf_tp_torch_params[] = {{"experts", 0, 0, 0, 0}, {0}};
/* DeepSpeed's ZeRO optimizer here: one pipeline stage, no experts */
static const pf_param_range pf_tp_zero_params[] = {{"tied", 0, 0, 0, 0}, {"experts", 0, 0, 0, 0}, {0}};
#define PF_TP_ZERO_CONTRACT                                                                                           \
  "replicated parameters bitwise equal across ranks after every step; TP=1 and gathered TP=2 or DP=2 master, "        \
  "parameter, m and v inside the set every summation order of the norm allows, through the bf16 accumulation, "      \
  "DeepSpeed's ZeRO coefficient and PyTorch's AdamW; the reported norm inside its set"
/* DeepSpeed's ZeRO optimizer here has neither pipeline stages (no last stage to initialize) nor
 * experts */
static const char *const pf_tp_zero_faults[] = {"tp-replicated-unclipped", "norm-no-dedup", "norm-not-allreduced",
                                                "dp-grad-unreduced", "found-inf-local", "unscale-after-update",
                                                "ckpt-master-from-param", "ckpt-adam-state-dropped", "ckpt-step-reset", "ckpt-scale-reset", "reshard-split-axis", NULL};
static const pf_kernel pf_tp_tab[] = {
    {PF_KERNEL_ABI, &pf_tp_op, "megatron",
     "DeepSpeed BF16_Optimizer / Megatron: fp32 gradient buffers, fp32 norm of the deduplicated norm set, clip, FusedAdam",
     PF_DT(PF_BF16) | PF_DT(PF_FP16), PF_DT(PF_FP32), pf_tp_fp16_faults,
     "replicated parameters and tied copies bitwise equal across ranks after every step; TP=1 and gathered TP=2 "
     "master, parameter, m and v inside the set every summation order of the norm allows",
     pf_tp_cpu, pf_tp_bound, pf_tp_in_domain, pf_tp_check, NULL, PF_TP_MEGATRON, NULL, NULL},
    {PF_KERNEL_ABI, &pf_tp_op, "deepspeed",
     "DeepSpeed 0.19.8 BF16_Optimizer with torch.optim.AdamW on the CPU: fp32 gradient buffers, fp32 norm of the "
     "deduplicated norm set, coef = reciprocal(norm + 1e-6) * max_norm, PyTorch's single-tensor AdamW",
     PF_DT(PF_BF16), PF_DT(PF_FP32), pf_tp_faults,
     "replicated parameters and tied copies bitwise equal across ranks after every step; TP=1 and gathered TP=2 "
     "master, parameter, m and v inside the set every summation order of the norm allows, through DeepSpeed's "
     "coefficient and PyTorch's AdamW",
     pf_tp_cpu, pf_tp_bound, pf_tp_in_domain, pf_tp_check, NULL, PF_TP_DEEPSPEED, NULL, NULL},
    {PF_KERNEL_ABI, &pf_tp_op, "megatron-core",
     "megatron-core 0.16.1 Float16OptimizerWithFloat16Params without apex or TE on the CPU: fp32 main grads, the "
     "fp32 norm of per-tensor norms squared and all-reduced, binary64 root and coefficient, fp32 scale, PyTorch's AdamW",
     PF_DT(PF_BF16) | PF_DT(PF_FP16), PF_DT(PF_FP32), pf_tp_fp16_faults,
     "replicated parameters and tied copies bitwise equal across ranks after every step; TP=1 and gathered TP=2 "
     "master, parameter, m and v inside the set every summation order of the norm allows, through Megatron's "
     "binary64 coefficient and PyTorch's AdamW; the reported norm (rounded to fp32) inside its set",
     pf_tp_cpu, pf_tp_bound, pf_tp_in_domain, pf_tp_check, NULL, PF_TP_MEGATRON_CORE, NULL, NULL},
    {PF_KERNEL_ABI, &pf_tp_op, "torch",
     "plain PyTorch 2.15 in fp32 on the CPU: clip_grad_norm_ (per-tensor norms, a TP-sharded DTensor's from its ranks' "
     "squared local norms; the norm of the norms; coef = reciprocal(norm + 1e-6) * max_norm), PyTorch's AdamW",
     PF_DT(PF_FP32), PF_DT(PF_FP32), pf_tp_torch_faults,
     "replicated parameters and tied copies bitwise equal across ranks after every step; TP=1 and gathered TP=2 "
     "parameter, m and v inside the set every summation order of the norm allows, through clip_grad_norm_'s "
     "coefficient and PyTorch's AdamW; the reported norm inside its set",
     pf_tp_cpu, pf_tp_bound, pf_tp_in_domain, pf_tp_check, NULL, PF_TP_TORCH, NULL, pf_tp_torch_params},
    {PF_KERNEL_ABI, &pf_tp_op, "deepspeed-zero2",
     "DeepSpeed 0.19.8 DeepSpeedZeroOptimizer, ZeRO stage 2, bf16 with bf16 gradient accumulation, torch AdamW on the "
     "CPU: every micro-batch reduced over DP, the reduced gradients accumulated in bf16; binary64 norms of each "
     "partition's pieces, per parameter group, combined in fp32; coef = 1 / clamp((norm + 1e-6) / max_norm, min=1)",
     PF_DT(PF_BF16) | PF_DT(PF_FP16), PF_DT(PF_FP32), pf_tp_zero_faults,
     PF_TP_ZERO_CONTRACT,
     pf_tp_cpu, pf_tp_bound, pf_tp_in_domain, pf_tp_check, NULL, PF_TP_DS_ZERO2, NULL, pf_tp_zero_params},
    {PF_KERNEL_ABI, &pf_tp_op, "deepspeed-zero1",
     "DeepSpeed 0.19.8 DeepSpeedZeroOptimizer, ZeRO stage 1, bf16 with bf16 gradient accumulation, torch AdamW on the "
     "CPU: each replica's micro-batches accumulated in bf16, then reduced over DP once; norm and coefficient as "
     "deepspeed-zero2",
     PF_DT(PF_BF16) | PF_DT(PF_FP16), PF_DT(PF_FP32), pf_tp_zero_faults,
     PF_TP_ZERO_CONTRACT,
     pf_tp_cpu, pf_tp_bound, pf_tp_in_domain, pf_tp_check, NULL, PF_TP_DS_ZERO1, NULL, pf_tp_zero_params},
};
const pf_kernel *const pf_tp_kernels[] = {&pf_tp_tab[0], &pf_tp_tab[1], &pf_tp_tab[2], &pf_tp_tab[3],
                                          &pf_tp_tab[4], &pf_tp_tab[5], NULL};
