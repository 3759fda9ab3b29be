/* tp_diff: the parameter set's layout (derived by hand), the seed 002 regression from its
 * case file (the finding names ln1.w on TP rank 1 at the first step where clipping is active,
 * found here by a second computation of the norm in binary64), every fault found within a
 * few cases, correct runs clean, and the legitimate sets narrow while the runs do differ. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/runner.h"
#include "kernels/tp_diff/tp_diff_spec.h"

static void default_case(pf_case *c, pf_dtype t, uint64_t seed) {
  assert_int_equal(pf_case_init(c, "tp_diff", "megatron", seed), PF_OK);
  c->dtype = t;
}

/* TP=1 x DP=2, not tied, 4 micro-batches (two a replica), bf16 */
static void dp2_case(pf_case *c, uint64_t seed) {
  default_case(c, PF_BF16, seed);
  c->params[PF_TPP_DP] = 2;
  c->params[PF_TPP_TP] = 1;
  c->params[PF_TPP_TIED] = 0;
  c->params[PF_TPP_MB] = 4;
}

static pf_verdict run(const pf_case *c, pf_run *r) {
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  if (pf_run_case(c, &o, r)) fail_msg("run failed: %s", pf_error_message());
  return r->cmp.verdict;
}

static void test_tp_layout(void **state) {
  pf_case c;
  default_case(&c, PF_BF16, 1);
  pf_tp_layout L;
  pf_tp_layout_make(&c, &L);
  /* h 8, ffn 16, vocab 11, seq 4: ln1 16, qkv 192 + 24, proj 64 + 8, ln2 16, fc1 128 + 16,
   * fc2 128 + 8, pos 32, embed 88 = 720; replicated: ln 32, biases 16, pos 32 = 80, plus the
   * tied copy's 88 checks */
  assert_int_equal(L.n, 720);
  assert_int_equal(L.nsync, 168);
  assert_int_equal(L.head, 88);
  assert_int_equal(L.b[pf_tp_embed(&L)].offset, 632);
  /* qkv.w is 24 x 8 from element 16: rows 0-11 on rank 0, 12-23 on rank 1 */
  assert_int_equal(pf_tp_owner(&L, 16 + 11 * 8 + 7), 0);
  assert_int_equal(pf_tp_owner(&L, 16 + 12 * 8), 1);
  /* proj.w is 8 x 8 from element 232: columns 0-3 on rank 0, 4-7 on rank 1 */
  assert_int_equal(pf_tp_owner(&L, 232 + 5 * 8 + 3), 0);
  assert_int_equal(pf_tp_owner(&L, 232 + 5 * 8 + 4), 1);
  /* 11 vocabulary rows: 6 on rank 0, 5 on rank 1 */
  assert_int_equal(pf_tp_owner(&L, 632 + 5 * 8), 0);
  assert_int_equal(pf_tp_owner(&L, 632 + 6 * 8), 1);
  assert_int_equal(pf_tp_owner(&L, 3), -1);
  char name[64];
  pf_tp_elem_name(&L, 16 + 12 * 8 + 5, name, sizeof name);
  assert_string_equal(name, "qkv.w[12,5]");
  int kind, d;
  assert_int_equal(pf_tp_sync_elem(&L, 0, &kind, &d), 0);
  assert_int_equal(kind, PF_TP_COPY_TP);
  assert_int_equal(pf_tp_sync_elem(&L, 80, &kind, &d), 632);
  assert_int_equal(kind, PF_TP_COPY_TIED);
  assert_int_equal(d, 0);
  /* TP=2 x DP=2: each replica's 80 replicated and 88 tied checks, then replica 1's 720
   * elements against replica 0's */
  c.params[PF_TPP_DP] = 2;
  pf_tp_layout_make(&c, &L);
  assert_int_equal(L.nsync, 2 * 168 + 720);
  assert_int_equal(pf_tp_sync_elem(&L, 168 + 79, &kind, &d), 631); /* pos.w[3,7], the last replicated */
  assert_int_equal(pf_tp_sync_elem(&L, 168 + 80, &kind, &d), 632);
  assert_int_equal(kind, PF_TP_COPY_TIED);
  assert_int_equal(d, 1);
  assert_int_equal(pf_tp_sync_elem(&L, 336 + 719, &kind, &d), 719);
  assert_int_equal(kind, PF_TP_COPY_DP);
  assert_int_equal(d, 1);
  /* TP=1 x DP=2: no TP copies; every element is rank 0's */
  c.params[PF_TPP_TP] = 1;
  pf_tp_layout_make(&c, &L);
  assert_int_equal(L.nsync, 2 * 88 + 720);
  assert_int_equal(pf_tp_owner(&L, 16 + 12 * 8), -1);
  pf_case_free(&c);
}

/* The step's global gradient norm computed apart: binary64 sums of the bf16 micro-batch
 * gradients (and the head's for the tied embedding), binary64 squares and sum. */
static double norm_binary64(const pf_case *c, const pf_run *r, size_t s) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  double sum = 0;
  for (size_t e = 0; e < L.n; e++) {
    double g = 0;
    for (size_t k = 0; k < L.mb; k++) {
      g += pf_round(PF_BF16, pf_tp_grad(&L, r->in[1].data, s, k, e));
      if (L.tied && e >= L.b[pf_tp_embed(&L)].offset)
        g += pf_round(PF_BF16, pf_tp_grad(&L, r->in[1].data, s, k, L.n + e - L.b[pf_tp_embed(&L)].offset));
    }
    sum += g * g;
  }
  return sqrt(sum);
}

/* Data-parallel replicas (TP=2 x DP=2, 4 micro-batches, tied): each replica sums its two
 * micro-batches in fp32, the replicas' sums are added, then the tied stages'. The buffers are
 * recomputed here in C float arithmetic, (g1 + g2) + (g3 + g4), against the first run's
 * ((g1 + g2) + g3) + g4: they differ on some elements, every case stays inside its set, and
 * a replica that keeps its own sum (dp-grad-unreduced) is named on DP replica 1. */
static void test_tp_data_parallel_replicas(void **state) {
  size_t differ = 0, total = 0;
  for (uint64_t seed = 1; seed <= 30; seed++) {
    pf_case c;
    pf_run r;
    default_case(&c, PF_BF16, seed);
    c.params[PF_TPP_DP] = 2;
    c.params[PF_TPP_MB] = 4;
    if (seed % 2) { /* gradients over 24 binades: sums of bf16 values that fp32 rounds */
      c.inputs[1].dist = PF_DIST_LOGUNIFORM;
      c.inputs[1].exp_min = -24;
      c.inputs[1].exp_max = 0;
    }
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_tp_layout L;
    pf_tp_layout_make(&c, &L);
    for (size_t s = 0; s < L.steps; s++)
      for (size_t e = 0; e < L.n; e++) {
        const int tied = e >= L.b[pf_tp_embed(&L)].offset;
        float q[2][4];
        for (int h = 0; h < 1 + tied; h++)
          for (size_t k = 0; k < 4; k++) {
            const size_t x = h ? L.n + e - L.b[pf_tp_embed(&L)].offset : e;
            q[h][k] = (float)pf_round(PF_BF16, pf_tp_grad(&L, r.in[1].data, s, k, x));
          }
        volatile float seq = ((0.0f + q[0][0]) + q[0][1] + q[0][2]) + q[0][3];
        volatile float rep = ((0.0f + q[0][0]) + q[0][1]) + ((0.0f + q[0][2]) + q[0][3]);
        if (tied) {
          volatile float hs = ((0.0f + q[1][0]) + q[1][1] + q[1][2]) + q[1][3];
          volatile float hr = ((0.0f + q[1][0]) + q[1][1]) + ((0.0f + q[1][2]) + q[1][3]);
          seq = seq + hs;
          rep = rep + hr;
        }
        differ += seq != rep;
        total++;
      }
    pf_run_free(&r);
    if (seed <= 3) {
      strcpy(c.fault, "dp-grad-unreduced");
      assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
      assert_non_null(strstr(r.note, "on DP replica 1 (TP rank"));
      assert_non_null(strstr(r.note, "differs from replica 0's"));
      pf_run_free(&r);
    }
    pf_case_free(&c);
  }
  print_message("the two orders differ on %zu of %zu buffers\n", differ, total);
  assert_true(differ > total / 100); /* they do differ: the set must hold both */
}

static void test_tp_seed002_from_the_regression_file(void **state) {
  pf_case c;
  pf_run r;
  assert_int_equal(pf_case_load(&c, PF_SOURCE_DIR "/corpora/regressions/tp-seed002-replicated-unclipped.json"), PF_OK);
  assert_string_equal(c.fault, "tp-replicated-unclipped");
  assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
  /* the first step where clipping is active, by the second computation */
  size_t first = 0;
  for (size_t s = 0; s < c.shape[0] && !first; s++) {
    const double coef = pf_case_param(&c, "max_norm") / (norm_binary64(&c, &r, s) + 1e-6);
    assert_true(fabs(coef - 1) > 1e-3); /* not at the threshold: the fp32 decision is the same */
    if (coef < 1) first = s + 1;
  }
  assert_true(first > 1); /* the case was chosen so that step 1 does not clip */
  char want[64];
  snprintf(want, sizeof want, "ln1.w[0] on TP rank 1 after step %zu", first);
  assert_non_null(strstr(r.note, want));
  assert_string_equal(r.born, "copies");
  pf_run_free(&r);
  c.fault[0] = 0; /* the same case without the fault is clean */
  assert_int_equal(run(&c, &r), PF_V_OK);
  pf_run_free(&r);
  pf_case_free(&c);
}

/* Over many seeds: the unclipped-replica finding is always ln1.w[0] on TP rank 1 at the first
 * step whose norm (computed apart) clips; a case that never clips has no finding. */
static void test_tp_unclipped_named_at_the_first_clipping_step(void **state) {
  int checked = 0, never = 0;
  for (uint64_t seed = 1; seed <= 60; seed++) {
    pf_case c;
    pf_run r;
    default_case(&c, PF_BF16, seed);
    strcpy(c.fault, "tp-replicated-unclipped");
    const pf_verdict v = run(&c, &r);
    size_t first = 0;
    int near = 0;
    for (size_t s = 0; s < c.shape[0] && !first; s++) {
      const double coef = pf_case_param(&c, "max_norm") / (norm_binary64(&c, &r, s) + 1e-6);
      near |= fabs(coef - 1) < 1e-3;
      if (coef < 1) first = s + 1;
    }
    if (!near) {
      if (!first) {
        assert_int_equal(v, PF_V_OK);
        never++;
      } else {
        char want[64];
        snprintf(want, sizeof want, "ln1.w[0] on TP rank 1 after step %zu:", first);
        if (!strstr(r.note, want)) fail_msg("seed %llu: want '%s', got '%s'", (unsigned long long)seed, want, r.note);
        checked++;
      }
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%d cases named at their first clipping step, %d never clipped\n", checked, never);
  assert_true(checked >= 30);
}

/* Three layers (h 8, ffn 16, vocab 11, seq 4): the layout by hand (each layer 600 elements,
 * named l0. to l2., then pos.w and embed.w); the copy checks reach every layer's replicated
 * parameters; cases of 2 to 4 layers run clean with each step's reported norm equal to the
 * binary64 norm to fp32's precision; seed 002's switch is found. */
static void test_tp_layers(void **state) {
  pf_case c;
  default_case(&c, PF_BF16, 1);
  pf_case_set_param(&c, "layers", 3);
  pf_tp_layout L;
  pf_tp_layout_make(&c, &L);
  assert_int_equal(L.nblocks, 3 * 12 + 2);
  assert_int_equal(L.n, 3 * 600 + 32 + 88);
  assert_string_equal(L.b[0].name, "l0.ln1.w");
  assert_string_equal(L.b[14].name, "l1.qkv.w");
  assert_int_equal(L.b[14].offset, 600 + 16);
  assert_string_equal(L.b[35].name, "l2.fc2.b");
  assert_int_equal(L.b[35].offset, 1200 + 592);
  assert_int_equal(L.b[pf_tp_embed(&L)].offset, 1832);
  char name[64];
  pf_tp_elem_name(&L, 1792 + 3, name, sizeof name);
  assert_string_equal(name, "l2.fc2.b[3]");
  assert_int_equal(pf_tp_owner(&L, 616 + 12 * 8), 1); /* l1.qkv.w row 12: TP rank 1 */
  /* replicated: 48 a layer (ln 32, proj.b and fc2.b 16) and pos.w's 32; the tied copy's 88 */
  assert_int_equal(L.nrep, 3 * 48 + 32);
  assert_int_equal(L.nsync, 176 + 88);
  int kind, d;
  assert_int_equal(pf_tp_sync_elem(&L, 48, &kind, &d), 600); /* l1.ln1.w[0] */
  assert_int_equal(kind, PF_TP_COPY_TP);
  assert_int_equal(pf_tp_sync_elem(&L, 2 * 48 + 47, &kind, &d), 1799); /* l2.fc2.b[7] */
  assert_int_equal(pf_tp_sync_elem(&L, 176, &kind, &d), 1832);
  assert_int_equal(kind, PF_TP_COPY_TIED);
  pf_case_free(&c);
  int norms = 0;
  for (uint64_t seed = 1; seed <= 30; seed++) {
    pf_run r;
    assert_int_equal(pf_case_init(&c, "tp_diff", seed % 2 ? "deepspeed" : "megatron-core", seed), PF_OK);
    c.dtype = PF_BF16;
    pf_case_set_param(&c, "layers", 2 + (double)(seed % 3));
    pf_case_set_param(&c, "tied", 0);
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_tp_layout_make(&c, &L);
    for (size_t s = 0; s < L.steps; s++) {
      const double want = norm_binary64(&c, &r, s), got = r.out[pf_tp_norm_at(&L, 1, s, 1)];
      if (fabs(got - want) > 0x1p-20 * want) fail_msg("seed %llu step %zu: norm %.9g, binary64 %.9g", (unsigned long long)seed, s, got, want);
      norms++;
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%d norms of 2 to 4 layers as computed apart\n", norms);
  default_case(&c, PF_BF16, 1);
  pf_case_set_param(&c, "layers", 3);
  strcpy(c.fault, "tp-replicated-unclipped");
  pf_run r;
  assert_true(pf_verdict_is_finding(run(&c, &r)));
  assert_non_null(strstr(r.note, "l0.ln1.w[0] on TP rank 1"));
  pf_run_free(&r);
  pf_case_free(&c);
}

/* Cases (seeds s0, s0 + 1, ...) until the first finding. */
static int cases_to_find(const char *fault, uint64_t s0) {
  for (int k = 1; k <= 40; k++) {
    pf_case c;
    pf_run r;
    default_case(&c, PF_BF16, s0 + (uint64_t)k - 1);
    strcpy(c.fault, fault);
    const pf_verdict v = run(&c, &r);
    pf_run_free(&r);
    pf_case_free(&c);
    if (pf_verdict_is_finding(v)) return k;
  }
  return 41;
}

/* Two experts, expert-parallel over the replicas (TP=1 x DP=2 x EP=2, 4 micro-batches): the
 * layout by hand; each run's norm recomputed apart in binary64 from buffers derived here: the
 * first run's experts sum micro-batches 1..4, the second's sum two slots, each slot both
 * replicas' micro-batches j and j + 2 added in float and rounded to bf16 once; the reported
 * norms agree to 1e-6, every case is clean, and the expert faults are each found. */
static void test_tp_expert_parallel(void **state) {
  pf_case c;
  default_case(&c, PF_BF16, 1);
  c.params[PF_TPP_EXPERTS] = 2;
  pf_tp_layout L;
  pf_tp_layout_make(&c, &L);
  /* 720 dense + 4 experts' weights of 16 x 8 (128 each) after fc2.b (element 600) */
  assert_int_equal(L.n, 720 + 512);
  assert_int_equal(L.nblocks, 18);
  assert_int_equal(L.exp0, 600);
  assert_int_equal(L.nexp, 512);
  assert_int_equal(L.b[pf_tp_embed(&L)].offset, 632 + 512);
  assert_int_equal(L.ep, 1);
  char name[64];
  pf_tp_elem_name(&L, 600 + 128 + 16 + 1, name, sizeof name); /* 8 x 16 */
  assert_string_equal(name, "exp0.fc2.w[1,1]");
  c.params[PF_TPP_DP] = 2;
  c.params[PF_TPP_TP] = 1;
  c.params[PF_TPP_TIED] = 0;
  c.params[PF_TPP_MB] = 4;
  pf_tp_layout_make(&c, &L);
  assert_int_equal(L.ep, 2);
  /* no TP or tied copies; replica 1 against replica 0 on the 720 dense elements alone */
  assert_int_equal(L.nsync, 720);
  assert_int_equal(pf_tp_nsync(&c), L.nsync);
  int kind, d;
  assert_int_equal(pf_tp_sync_elem(&L, 599, &kind, &d), 599);
  assert_int_equal(pf_tp_sync_elem(&L, 600, &kind, &d), 1112); /* pos.w[0,0]: past the experts */
  assert_int_equal(kind, PF_TP_COPY_DP);
  for (int tied = 0; tied < 2; tied++) /* the count refine uses, against the layout's */
    for (int tp = 1; tp <= 2; tp++)
      for (int ex = 0; ex <= 2; ex += 2) {
        pf_case o = c;
        o.params[PF_TPP_TIED] = tied, o.params[PF_TPP_TP] = tp, o.params[PF_TPP_EXPERTS] = ex;
        pf_tp_layout_make(&o, &L);
        assert_int_equal(pf_tp_nsync(&o), L.nsync);
      }
  pf_case_free(&c);
  size_t slot_differs = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    pf_run r;
    dp2_case(&c, seed);
    c.params[PF_TPP_EXPERTS] = 2;
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_tp_layout_make(&c, &L);
    for (size_t s = 0; s < L.steps; s++) {
      double sq[2] = {0, 0};
      for (size_t e = 0; e < L.n; e++) {
        float q[4];
        for (size_t k = 0; k < 4; k++) q[k] = (float)pf_round(PF_BF16, pf_tp_grad(&L, r.in[1].data, s, k, e));
        volatile float one = ((0.0f + q[0]) + q[1] + q[2]) + q[3], two;
        if (e >= 600 && e < 1112) {
          float slot[2];
          for (size_t j = 0; j < 2; j++) {
            volatile float a = (float)pf_tp_grad(&L, r.in[1].data, s, j, e), b = (float)pf_tp_grad(&L, r.in[1].data, s, j + 2, e);
            volatile float sum = a + b;
            slot[j] = (float)pf_round(PF_BF16, sum);
          }
          two = (0.0f + slot[0]) + slot[1];
          slot_differs += two != one;
        } else
          two = ((0.0f + q[0]) + q[1]) + ((0.0f + q[2]) + q[3]);
        sq[0] += (double)one * one;
        sq[1] += (double)two * two;
      }
      for (int run_ = 0; run_ < 2; run_++) {
        const double got = r.out[pf_tp_norm_at(&L, run_, s, 0)], want = sqrt(sq[run_]);
        assert_true(fabs(got - want) <= 1e-6 * want);
        assert_true(r.out[pf_tp_norm_at(&L, run_, s, 4)] == got); /* replica 1 reports the same */
      }
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%zu expert buffers differ between the runs (slots against micro-batches)\n", slot_differs);
  assert_true(slot_differs > 0);
  static const char *const faults[] = {"expert-norm-averaged", "expert-norm-local", "expert-norm-dropped"};
  for (int f = 0; f < 3; f++) {
    pf_run r;
    default_case(&c, PF_BF16, 1);
    c.params[PF_TPP_EXPERTS] = 2;
    c.params[PF_TPP_DP] = 2;
    c.params[PF_TPP_MB] = 4;
    snprintf(c.fault, sizeof c.fault, "%s", faults[f]);
    assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
    pf_run_free(&r);
    pf_case_free(&c);
  }
}

/* comm=1 (DeepSpeed's engine: the data-parallel all-reduce in bf16), TP=1 x DP=2, 4
 * micro-batches: the first run's buffer is its fp32 sum rounded to bf16 (a group of one still
 * goes through the reduction), the second's the bf16 sum of the replicas' rounded sums; both
 * derived here in float arithmetic and bf16 rounding, their norms recomputed in binary64 agree
 * with the reported ones to 1e-6, every case is clean, and the rounding does change buffers. */
static void test_tp_comm_in_bf16(void **state) {
  size_t rounded = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    pf_case c;
    pf_run r;
    dp2_case(&c, seed);
    c.params[PF_TPP_COMM] = 1;
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_tp_layout L;
    pf_tp_layout_make(&c, &L);
    for (size_t s = 0; s < L.steps; s++) {
      double sq[2] = {0, 0};
      for (size_t e = 0; e < L.n; e++) {
        float q[4];
        for (size_t k = 0; k < 4; k++) q[k] = (float)pf_round(PF_BF16, pf_tp_grad(&L, r.in[1].data, s, k, e));
        volatile float all = ((0.0f + q[0]) + q[1] + q[2]) + q[3], r0 = (0.0f + q[0]) + q[1], r1 = (0.0f + q[2]) + q[3];
        const float one = (float)pf_round(PF_BF16, all);
        volatile float a = (float)pf_round(PF_BF16, r0), b = (float)pf_round(PF_BF16, r1), sum = a + b;
        const float two = (float)pf_round(PF_BF16, sum);
        rounded += one != all;
        sq[0] += (double)one * one;
        sq[1] += (double)two * two;
      }
      for (int run_ = 0; run_ < 2; run_++) {
        const double got = r.out[pf_tp_norm_at(&L, run_, s, 0)], want = sqrt(sq[run_]);
        assert_true(fabs(got - want) <= 1e-6 * want);
      }
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%zu fp32 buffers changed by the round trip through bf16\n", rounded);
  assert_true(rounded > 0);
}

/* DeepSpeed's ZeRO optimizer (tp_diff_spec.h, DS_ZERO2, DS_ZERO1) accumulates in bf16. A second
 * computation of its gradient from the case's inputs, with a bf16 rounding of its own (round
 * to nearest even on the float's bits), checked first on the values DeepSpeed 0.19.8 itself
 * gave on 2 gloo ranks (micro-batch gradients 1, 2^-8, 2^-8 accumulate to 1 at DP=1; 1, 2^-8
 * on replica 0 and 2^-8, 2^-8 on replica 1 reduce to 1 + 2^-7 under stage 2), then against the
 * first step's m of every element: PyTorch's AdamW gives m = fl(0.1 g) at beta1 = 0.9, g the
 * gradient after the clip, coef = fl(1 / fl(fl(norm + 1e-6) / max_norm)) when that quotient
 * exceeds 1 (unscale_and_clip_grads). */
static float bf16_rne(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}
static float bf16_add(float a, float b) {
  volatile float s = a + b; /* exact or once rounded in fp32; then to bf16 */
  return bf16_rne(s);
}
/* the gradient of micro-batches k0.. (n of them, doubled when twice) accumulated in bf16 */
static float zero_acc(const float *g, size_t n, int twice) {
  float a = bf16_rne(twice ? 2 * g[0] : g[0]);
  for (size_t k = 1; k < n; k++) a = bf16_add(a, bf16_rne(twice ? 2 * g[k] : g[k]));
  return a;
}
static float zero_grad(int algo, int dp, const float *g, size_t mb) {
  if (dp == 1) return zero_acc(g, mb, 0);
  const size_t per = mb / 2;
  if (algo == PF_TP_DS_ZERO1) return bf16_add(zero_acc(g, per, 1) / 2, zero_acc(g + per, per, 1) / 2);
  float acc = 0;
  for (size_t j = 0; j < per; j++) {
    const float red = bf16_add(bf16_rne(2 * g[j]) / 2, bf16_rne(2 * g[per + j]) / 2);
    acc = j ? bf16_add(acc, red) : red;
  }
  return acc;
}

static void test_tp_deepspeed_zero_accumulates_in_bf16(void **state) {
  const float dp1[3] = {1, 0x1p-8f, 0x1p-8f}, dp2[4] = {1, 0x1p-8f, 0x1p-8f, 0x1p-8f};
  assert_true(zero_grad(PF_TP_DS_ZERO2, 1, dp1, 3) == 1.0f);
  assert_true(zero_grad(PF_TP_DS_ZERO2, 2, dp2, 4) == 1.0078125f);
  assert_true(zero_grad(PF_TP_DS_ZERO1, 2, dp2, 4) == 1.0078125f); /* (1 + 2^-8 -> 1) + 2^-7 */
  size_t checked = 0, bf16_changed = 0;
  for (int algo = PF_TP_DS_ZERO2; algo <= PF_TP_DS_ZERO1; algo++)
    for (uint64_t seed = 1; seed <= 12; seed++) {
      pf_case c;
      pf_run r;
      assert_int_equal(pf_case_init(&c, "tp_diff", algo == PF_TP_DS_ZERO2 ? "deepspeed-zero2" : "deepspeed-zero1", seed),
                       PF_OK);
      c.dtype = PF_BF16;
      c.params[PF_TPP_TIED] = 0;
      c.params[PF_TPP_BETA1] = 0.9;
      c.params[PF_TPP_MB] = 4 + 2 * (double)(seed % 2);
      c.params[PF_TPP_TP] = seed % 3 == 0 ? 2 : 1;
      c.params[PF_TPP_DP] = seed % 3 == 0 ? 1 : 2;
      assert_int_equal(run(&c, &r), PF_V_OK);
      pf_tp_layout L;
      pf_tp_layout_make(&c, &L);
      float g[6];
      for (int run_ = 0; run_ < 2; run_++) {
        const int dp = run_ ? L.dp : 1;
        const float norm = (float)r.out[pf_tp_norm_at(&L, run_, 0, 0)];
        const float q = (norm + 1e-6f) / (float)c.params[PF_TPP_MAXNORM], coef = 1.0f / q;
        double sq = 0;
        for (size_t e = 0; e < L.n; e++) {
          volatile float f32sum = 0;
          for (size_t k = 0; k < L.mb; k++) {
            g[k] = (float)pf_tp_grad(&L, r.in[1].data, 0, k, e);
            f32sum = f32sum + bf16_rne(g[k]);
          }
          float b = zero_grad(algo, dp, g, L.mb);
          sq += (double)b * b;
          bf16_changed += b != f32sum;
          if (q > 1) b = b * coef;
          const float m = 0.1f * b;
          assert_true((float)r.out[pf_tp_run_at(&L, run_, 0, PF_TP_M, e)] == m);
          checked++;
        }
        assert_true(fabs(norm - sqrt(sq)) <= 1e-6 * sqrt(sq)); /* the norm of those gradients */
      }
      pf_run_free(&r);
      pf_case_free(&c);
    }
  print_message("%zu first-step m values as computed again; %zu gradients differ from an fp32 accumulation\n", checked,
                bf16_changed);
  assert_true(bf16_changed * 4 > checked); /* bf16 accumulation is visible: the check is not vacuous */
}

/* fp16 under Megatron's DynamicGradScaler (scaler=1): the scale schedule derived by hand from
 * grad_scaler.py (growth 2, backoff 0.5, hysteresis 2, growth_interval 2, from 8, min 1: after
 * overflow, none, overflow, overflow, none, none, none, none the scale is 8 8 8 4 2 2 4 4 8, the
 * hysteresis tracker refilled only on growth); then generated cases in which a step is skipped
 * exactly when a scaled micro-batch gradient rounds to inf in fp16, its scale recomputed here
 * from that rule, every rank's state kept as it was and its norm reported as -1, the runs clean;
 * and each rank deciding on its own overflow (found-inf-local) found. */
static void test_tp_dynamic_loss_scale_skips_overflow_steps(void **state) {
  pf_tp_layout L0;
  memset(&L0, 0, sizeof L0);
  L0.dynamic = 1, L0.loss_scale = 8, L0.min_scale = 1, L0.growth_interval = 2, L0.hysteresis = 2;
  pf_tp_scaler sc = pf_tp_scaler_start(&L0);
  const int found[8] = {1, 0, 1, 1, 0, 0, 0, 0};
  const double want[8] = {8, 8, 4, 2, 2, 4, 4, 8};
  for (int i = 0; i < 8; i++) {
    pf_tp_scaler_update(&L0, &sc, found[i]);
    assert_true(sc.scale == want[i]);
  }
  size_t steps = 0, skipped = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    pf_case c;
    pf_run r;
    assert_int_equal(pf_case_init(&c, "tp_diff", seed % 2 ? "megatron-core" : "megatron", seed), PF_OK);
    c.dtype = PF_FP16;
    c.params[PF_TPP_SCALER] = 1;
    c.params[PF_TPP_LOSS_SCALE] = ldexp(1, 15 + (int)(seed % 6));
    c.params[PF_TPP_GROWTH_INTERVAL] = 1 + (double)(seed % 3);
    c.params[PF_TPP_HYSTERESIS] = 1 + (double)(seed % 2);
    c.shape[0] = 6;
    if (seed % 4 == 0) c.params[PF_TPP_TIED] = 0, c.params[PF_TPP_TP] = 1, c.params[PF_TPP_DP] = 2, c.params[PF_TPP_MB] = 4;
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_tp_layout L;
    pf_tp_layout_make(&c, &L);
    double S = L.loss_scale;
    int growth = 0, hyst = L.hysteresis;
    for (size_t s = 0; s < L.steps; s++) {
      int over = 0;
      for (size_t x = 0; x < L.mb * (L.n + L.head); x++) {
        const float v = (float)(S * r.in[1].data[s * L.mb * (L.n + L.head) + x]);
        over |= fabsf(v) >= 65520.0f; /* rounds to inf in fp16 (max 65504, half an ulp 16) */
      }
      steps++;
      skipped += over;
      for (int run_ = 0; run_ < 2; run_++) {
        assert_true((r.out[pf_tp_norm_at(&L, run_, s, 0)] == -1) == over);
        if (over)
          for (int q = 0; q < 4; q++)
            for (size_t e = 0; e < L.n; e++) {
              const double before = s ? r.out[pf_tp_run_at(&L, run_, s - 1, q, e)]
                                      : q == PF_TP_MASTER ? r.in[0].data[e]
                                      : q == PF_TP_PARAM  ? pf_round(PF_FP16, r.in[0].data[e])
                                                          : 0;
              assert_true(r.out[pf_tp_run_at(&L, run_, s, q, e)] == before);
            }
      }
      if (over) { /* grad_scaler.py, by hand */
        growth = 0;
        if (--hyst <= 0) S = fmax(S / 2, L.min_scale);
      } else if (++growth == L.growth_interval) {
        growth = 0, hyst = L.hysteresis, S *= 2;
      }
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%zu of %zu steps skipped\n", skipped, steps);
  assert_true(skipped * 5 > steps && skipped * 5 < 4 * steps); /* both kinds of step, often */
  int found_local = 0;
  for (uint64_t seed = 1; seed <= 60 && !found_local; seed++) {
    pf_case c;
    pf_run r;
    assert_int_equal(pf_case_init(&c, "tp_diff", "megatron-core", seed), PF_OK);
    c.dtype = PF_FP16;
    c.params[PF_TPP_SCALER] = 1;
    c.params[PF_TPP_LOSS_SCALE] = 0x1p18;
    c.params[PF_TPP_HYSTERESIS] = 1;
    c.params[PF_TPP_TIED] = 0;
    snprintf(c.fault, sizeof c.fault, "found-inf-local");
    found_local = run(&c, &r) == PF_V_DIVERGENT && strstr(r.note, "differs from rank 0's copy") != NULL;
    pf_run_free(&r);
    pf_case_free(&c);
  }
  assert_true(found_local);
}

/* DeepSpeed's ZeRO in fp16 (DS_ZERO2, scaler=1), each rule derived by hand from
 * stage_1_and_2.py and loss_scaler.py (0.19.8):
 * - its DynamicLossScaler (window 2, hysteresis 2, from 8, minimum 4): after none, none, none,
 *   overflow, overflow, none, none, none, overflow, overflow, overflow the scale is
 *   8 8 16 16 8 8 8 16 16 8 4 (the first doubling needs window + 1 clean steps; Megatron's rule
 *   would double after 2), and one more overflow at the minimum ends the run;
 * - the gradient is the fp16 accumulation of fl16(S g) (every add rounded to fp16), and a step is
 *   skipped exactly when one of those overflows; seen at least once where no single scaled
 *   micro-batch gradient does (fp32 accumulation, Megatron's, would have taken the step);
 * - fault unscale-after-update (0.19.8's own order): on the step where the scale doubles, with
 *   no clipping, m = fma(0.1, g / 2 - m1, m1) where the correct step has g (torch's lerp). */
/* binary16 round to nearest even, written out here: 11 significant bits, subnormals below
 * 2^-14 in steps of 2^-24, inf from 65520 (65504 plus half its ulp) */
static double f16(double x) {
  if (!isfinite(x)) return x;
  if (fabs(x) >= 65520) return x > 0 ? INFINITY : -INFINITY;
  int ex;
  frexp(x, &ex); /* |x| in [2^(ex-1), 2^ex) */
  const double q = ldexp(1, (ex - 1 < -14 ? -14 : ex - 1) - 10);
  return nearbyint(x / q) * q;
}
/* a DeepSpeed ZeRO-2 case in fp16 under its dynamic scaler from S, not tied */
static void zero16_case(pf_case *c, uint64_t seed, double S, int growth_interval) {
  assert_int_equal(pf_case_init(c, "tp_diff", "deepspeed-zero2", seed), PF_OK);
  c->dtype = PF_FP16;
  c->params[PF_TPP_TIED] = 0;
  c->params[PF_TPP_SCALER] = 1;
  c->params[PF_TPP_LOSS_SCALE] = S;
  c->params[PF_TPP_GROWTH_INTERVAL] = growth_interval;
}
/* element e's fp16 accumulation of step s at scale S, by hand: fl16(S g) of each micro-batch,
 * each sum exact in binary64 and rounded once; *single: some fl16(S g) alone is inf */
static double f16_chain(const pf_tp_layout *L, const double *grads, double S, size_t s, size_t e, int *single) {
  double acc = 0;
  for (size_t k = 0; k < L->mb; k++) {
    const double u = f16(S * pf_tp_grad(L, grads, s, k, e));
    *single |= isinf(u);
    acc = k ? f16(acc + u) : u;
  }
  return acc;
}
static void test_tp_deepspeed_zero_fp16(void **state) {
  pf_tp_layout L0;
  memset(&L0, 0, sizeof L0);
  L0.algo = PF_TP_DS_ZERO2, L0.dynamic = 1, L0.loss_scale = 8, L0.min_scale = 4, L0.growth_interval = 2, L0.hysteresis = 2;
  pf_tp_scaler sc = pf_tp_scaler_start(&L0);
  const int found[11] = {0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1};
  const double want[11] = {8, 8, 16, 16, 8, 8, 8, 16, 16, 8, 4};
  for (int i = 0; i < 11; i++) {
    pf_tp_scaler_update(&L0, &sc, found[i]);
    assert_true(sc.scale == want[i] && !sc.stopped);
  }
  pf_tp_scaler_update(&L0, &sc, 1);
  assert_true(sc.stopped);

  size_t steps = 0, skipped = 0, acc_only = 0;
  for (uint64_t seed = 1; seed <= 30; seed++) {
    pf_case c;
    pf_run r;
    zero16_case(&c, seed, ldexp(1, 14 + (int)(seed % 5)), 1 + (int)(seed % 2));
    c.params[PF_TPP_HYSTERESIS] = 1;
    c.params[PF_TPP_MB] = 6;
    c.shape[0] = 5;
    const pf_verdict v = run(&c, &r);
    assert_true(v == PF_V_OK || !r.in_domain);
    if (!r.in_domain) { /* DeepSpeed would end the run at its minimum: not judged */
      pf_run_free(&r);
      pf_case_free(&c);
      continue;
    }
    pf_tp_layout L;
    pf_tp_layout_make(&c, &L);
    double S = L.loss_scale;
    long iter = 0, last = -1;
    for (size_t s = 0; s < L.steps; s++) {
      int over = 0, single = 0;
      for (size_t e = 0; e < L.n; e++) over |= !isfinite(f16_chain(&L, r.in[1].data, S, s, e, &single));
      steps++;
      skipped += over;
      acc_only += over && !single;
      for (int run_ = 0; run_ < 2; run_++) assert_true((r.out[pf_tp_norm_at(&L, run_, s, 0)] == -1) == over);
      if (over) { /* loss_scaler.py, by hand (hysteresis 1) */
        S = fmax(S / 2, L.min_scale);
        last = iter;
      } else if (iter - last - 1 > 0 && (iter - last - 1) % L.growth_interval == 0)
        S *= 2;
      iter++;
    }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%zu of %zu steps skipped, %zu by an fp16 sum alone\n", skipped, steps, acc_only);
  assert_true(skipped * 10 > steps && skipped * 10 < 9 * steps);
  assert_true(acc_only > 0);

  /* unscale-after-update: two steps at S = 16, window 1, no overflow: the scale doubles after
   * the second, whose gradient 0.19.8 then unscales by 32: clip = clamp(fl(norm / 2 + 1e-6) /
   * max_norm, 1), the gradient fl(g fl(1 / clip)) / 2 (norm the one reported, over 16) */
  size_t checked = 0, halved = 0;
  for (int fault = 0; fault < 2; fault++)
    for (uint64_t seed = 1; seed <= 6; seed++) {
      pf_case c;
      pf_run r;
      zero16_case(&c, seed, 16, 1);
      c.params[PF_TPP_BETA1] = 0.9;
      c.shape[0] = 2;
      if (fault) snprintf(c.fault, sizeof c.fault, "unscale-after-update");
      const pf_verdict v = run(&c, &r);
      assert_true(fault || v == PF_V_OK);
      pf_tp_layout L;
      pf_tp_layout_make(&c, &L);
      const float max_norm = (float)c.params[PF_TPP_MAXNORM];
      int case_halved = 0;
      for (int run_ = 0; run_ < 2; run_++) {
        float coef[2];
        int clip[2];
        for (size_t s = 0; s < 2; s++) {
          const float norm = (float)r.out[pf_tp_norm_at(&L, run_, s, 0)];
          assert_true(norm > 0); /* taken */
          const float q = ((fault && s == 1 ? norm / 2 : norm) + 1e-6f) / max_norm;
          clip[s] = q > 1, coef[s] = 1.0f / q;
        }
        case_halved |= fault && !clip[1];
        for (size_t e = 0; e < L.n; e++) {
          float g[2];
          for (size_t s = 0; s < 2; s++) {
            g[s] = (float)(f16_chain(&L, r.in[1].data, 16, s, e, &(int){0}) / 16);
            if (clip[s]) g[s] = g[s] * coef[s];
          }
          const float m1 = 0.1f * g[0], g2 = fault ? g[1] / 2 : g[1];
          assert_true((float)r.out[pf_tp_run_at(&L, run_, 0, PF_TP_M, e)] == m1);
          assert_true((float)r.out[pf_tp_run_at(&L, run_, 1, PF_TP_M, e)] == fmaf(0.1f, g2 - m1, m1));
          checked++;
        }
      }
      if (case_halved) { /* a halved gradient breaks the contract; the finding names the doubling */
        assert_true(v == PF_V_DIVERGENT);
        assert_non_null(strstr(r.note, "after step 2: "));
        assert_non_null(strstr(r.note, "; loss scale 16 -> 32"));
      }
      halved += case_halved;
      pf_run_free(&r);
      pf_case_free(&c);
    }
  assert_true(halved > 0);
  print_message("%zu m values of the second step as computed by hand; %zu runs halved\n", checked, halved);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void test_tp_faults_found_within_20_cases(void **state) {
  static const char *const faults[] = {"tp-replicated-unclipped", "norm-no-dedup", "norm-not-allreduced",
                                       "tied-grad-unreduced"};
  for (int f = 0; f < 4; f++) {
    int n[7];
    for (int k = 0; k < 7; k++) n[k] = cases_to_find(faults[f], 1 + 1000 * (uint64_t)k);
    qsort(n, 7, sizeof n[0], cmp_int);
    print_message("%s: median %d cases to the first finding (of 7 starts)\n", faults[f], n[3]);
    assert_true(n[3] <= 20);
  }
}

static void test_tp_correct_runs_clean_and_not_vacuous(void **state) {
  size_t differ = 0, values = 0, point_sets = 0, masters = 0;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    pf_case c;
    pf_run r;
    default_case(&c, seed % 3 == 0 ? PF_FP16 : PF_BF16, seed);
    if (seed % 4 == 0) pf_case_set_param(&c, "tied", 0);
    if (seed % 5 == 0) c.shape[3] = 2 + seed % 17; /* odd vocabularies split unevenly */
    pf_case_set_param(&c, "microbatches", 1 + seed % 3);
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_tp_layout L;
    pf_tp_layout_make(&c, &L);
    for (size_t s = 0; s < L.steps; s++)
      for (int q = 0; q < 4; q++)
        for (size_t e = 0; e < L.n; e++) {
          const size_t a = pf_tp_run_at(&L, 0, s, q, e), b = pf_tp_run_at(&L, 1, s, q, e);
          values++;
          differ += r.out[a] != r.out[b];
          if (q == PF_TP_MASTER) {
            masters++;
            point_sets += r.oracle.rounded[a] == r.oracle.rounded_alt[a];
          }
        }
    pf_run_free(&r);
    pf_case_free(&c);
  }
  print_message("%zu of %zu values differ between TP=1 and TP=2; %zu of %zu master sets hold one value\n", differ, values,
                point_sets, masters);
  assert_true(differ * 10 > values);      /* the runs do differ: the sets must allow it */
  assert_true(point_sets * 3 > masters);  /* and the sets stay narrow */
}

/* The round trip (resume_at, issue 30): the second run saved after step k into precfuzz's
 * checkpoint format, every rank dropped, a fresh group loaded from it: bitwise the straight run,
 * over layouts and dtypes (0 findings over 60 round trips, k drawn in [1, steps - 1]); each broken
 * load found in the first case and named at the first step after the save: the masters rebuilt
 * from the bf16 weights, the last pipeline stage's copies at their initial values (seed 004), the
 * first tensor's (ln1.w) Adam state dropped, the step count from 0 (named as such), the loss scale
 * at its start (fp16, the dynamic scaler doubling every step: named as the scale). */
static void test_tp_round_trip(void **state) {
  for (uint64_t seed = 1; seed <= 60; seed++) {
    pf_case c;
    pf_run r;
    if (seed % 5 == 0) dp2_case(&c, seed); /* TP=1 x DP=2 */
    else default_case(&c, seed % 3 == 0 ? PF_FP16 : PF_BF16, seed);
    c.shape[0] = 2 + seed % 4;
    if (seed % 4 == 0) pf_case_set_param(&c, "tied", 0);
    if (c.dtype == PF_FP16) pf_case_set_param(&c, "scaler", 1), pf_case_set_param(&c, "growth_interval", 1);
    pf_case_set_param(&c, "resume_at", 1 + (double)(seed % (c.shape[0] - 1)));
    assert_int_equal(run(&c, &r), PF_V_OK);
    pf_run_free(&r);
    pf_case_free(&c);
  }
  static const char *const faults[5] = {"ckpt-master-from-param", "ckpt-last-stage-init", "ckpt-adam-state-dropped",
                                        "ckpt-step-reset", "ckpt-scale-reset"};
  static const char *const says[5] = {"master was", "embed.w[0,0]'s master was", "ln1.w[0]'s m was",
                                      "the step count of", "the loss scale of"};
  for (int f = 0; f < 5; f++) {
    pf_case c;
    pf_run r;
    default_case(&c, f == 4 ? PF_FP16 : PF_BF16, 1);
    if (f == 4) pf_case_set_param(&c, "scaler", 1), pf_case_set_param(&c, "growth_interval", 1);
    pf_case_set_param(&c, "resume_at", 1);
    strcpy(c.fault, faults[f]);
    assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
    /* named as loaded: the row of step 1 in the resumed run is its state as loaded */
    if (!strstr(r.note, "saved after step 1, loaded into a fresh group: ") || !strstr(r.note, says[f]) ||
        !strstr(r.note, "as loaded"))
      fail_msg("%s: %s", faults[f], r.note);
    pf_run_free(&r);
    pf_case_free(&c);
  }
  /* without a round trip the switches change nothing; and kernels not built in refuse it */
  pf_case c;
  pf_run r;
  default_case(&c, PF_BF16, 1);
  strcpy(c.fault, "ckpt-master-from-param");
  assert_int_equal(run(&c, &r), PF_V_OK);
  pf_run_free(&r);
  pf_case_set_param(&c, "resume_at", 3);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG); /* the last step: nothing after it */
  pf_case_free(&c);
}

/* Resharding (reshard_at = k): each run saved after step k at one layout and loaded at the
 * other (the second run's TP=2 or DP=2 into TP=1 x DP=1, TP=1 into the second's), element by
 * element from the rank that held it: 0 findings over 40 cases of tied and untied layouts, TP=2,
 * DP=2 and experts under EP, bf16 and fp16 (every value lies in the differential's set, which
 * holds for any layout); each broken load found in the first case: row-parallel weights split
 * along the wrong axis (named at a row-parallel weight, as loaded at step k), the masters rebuilt
 * from the bf16 weights, seed 004's last stage at its start (the tied copies differ), the first
 * tensor's Adam state dropped; bad combinations refused. */
static void test_tp_reshard(void **state) {
  for (uint64_t seed = 1; seed <= 40; seed++) {
    pf_case c;
    pf_run r;
    if (seed % 4 == 0) dp2_case(&c, seed);
    else default_case(&c, seed % 3 == 0 ? PF_FP16 : PF_BF16, seed);
    if (seed % 8 == 0) pf_case_set_param(&c, "experts", 2); /* EP=2: each expert on one replica */
    c.shape[0] = 2 + seed % 4;
    if (seed % 5 == 0) pf_case_set_param(&c, "tied", 0);
    if (c.dtype == PF_FP16) pf_case_set_param(&c, "scaler", 1), pf_case_set_param(&c, "growth_interval", 1);
    pf_case_set_param(&c, "reshard_at", 1 + (double)(seed % (c.shape[0] - 1)));
    if (run(&c, &r) != PF_V_OK) fail_msg("seed %llu: %s", (unsigned long long)seed, r.note);
    pf_run_free(&r);
    pf_case_free(&c);
  }
  static const char *const faults[4] = {"reshard-split-axis", "ckpt-master-from-param", "ckpt-last-stage-init",
                                        "ckpt-adam-state-dropped"};
  static const char *const says[4] = {"proj.w[", "master", "the tied copy on pipeline stage 1", "ln1.w[0]"};
  for (int f = 0; f < 4; f++) {
    pf_case c;
    pf_run r;
    default_case(&c, PF_BF16, 1);
    c.shape[0] = 4;
    pf_case_set_param(&c, "reshard_at", 2);
    strcpy(c.fault, faults[f]);
    assert_int_equal(run(&c, &r), PF_V_DIVERGENT);
    if (!strstr(r.note, says[f]) || !strstr(r.note, "after step 2") || !strstr(r.note, "resharded after step 2"))
      fail_msg("%s: %s", faults[f], r.note);
    pf_run_free(&r);
    pf_case_free(&c);
  }
  pf_case c;
  default_case(&c, PF_BF16, 1);
  pf_case_set_param(&c, "reshard_at", 1);
  pf_case_set_param(&c, "resume_at", 1);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG); /* one round trip a case */
  pf_case_set_param(&c, "resume_at", 0);
  pf_case_set_param(&c, "reshard_at", 3);
  assert_int_equal(pf_case_validate(&c), PF_ERR_ARG); /* the last step: nothing after it */
  pf_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tp_layout),
      cmocka_unit_test(test_tp_layers),
      cmocka_unit_test(test_tp_data_parallel_replicas),
      cmocka_unit_test(test_tp_expert_parallel),
      cmocka_unit_test(test_tp_comm_in_bf16),
      cmocka_unit_test(test_tp_deepspeed_zero_accumulates_in_bf16),
      cmocka_unit_test(test_tp_dynamic_loss_scale_skips_overflow_steps),
      cmocka_unit_test(test_tp_deepspeed_zero_fp16),
      cmocka_unit_test(test_tp_seed002_from_the_regression_file),
      cmocka_unit_test(test_tp_unclipped_named_at_the_first_clipping_step),
      cmocka_unit_test(test_tp_faults_found_within_20_cases),
      cmocka_unit_test(test_tp_correct_runs_clean_and_not_vacuous),
      cmocka_unit_test(test_tp_round_trip),
      cmocka_unit_test(test_tp_reshard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
