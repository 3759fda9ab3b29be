/* The host side of the CUDA backend, without a device: backend names, the CPU-GPU output
 * comparison, the error path when no device can be used (CUDA_VISIBLE_DEVICES= hides every
 * device, so this holds on GPU machines too), a kernel without a CUDA implementation, and the
 * case-to-launch translations (softmax, clip, loss scaling, attention) and Adam's multi-tensor
 * chunk table, checked against values derived by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/backend.h"
#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"
#endif
#include "core/runner.h"
#include "kernels/adam/adam_cuda.h"
#include "kernels/attention/attention.h"
#include "kernels/clip/clip.h"
#include "kernels/loss_scale/loss_scale.h"
#include "kernels/softmax/softmax.h"

static void test_backend_names(void **state) {
  int b = -1;
  assert_int_equal(pf_backend_parse("cpu", &b), PF_OK);
  assert_int_equal(b, PF_BACKEND_CPU);
  assert_int_equal(pf_backend_parse("cuda", &b), PF_OK);
  assert_int_equal(b, PF_BACKEND_CUDA);
  assert_int_equal(pf_backend_parse("gpu", &b), PF_ERR_ARG);
  assert_non_null(strstr(pf_error_message(), "'gpu' is not cpu or cuda"));
  assert_string_equal(pf_backend_name(PF_BACKEND_CUDA), "cuda");
}

/* bitwise: 1 = 1 and NaN = NaN; +0 and -0 differ in bits but are 0 ulps apart; 1 and
 * 1 + 2^-10 are 1 fp16 ulp apart but 2^13 fp32 ulps; 65504 and inf are adjacent in fp16;
 * NaN against a number is INT64_MAX. */
/* The default options say the CPU whatever the memory held before (an uninitialised backend
 * sent test_loss_scale's runs to CUDA in an ASan build). */
static void test_default_options_are_the_cpu(void **state) {
  pf_oracle_opts o;
  memset(&o, 0xff, sizeof o);
  pf_oracle_opts_default(&o);
  assert_int_equal(o.backend, PF_BACKEND_CPU);
  assert_int_equal(o.domain_only, 0);
  assert_int_equal(o.keep_hex, 0);
  assert_int_equal(o.prec, 256);
}

static void test_backend_diff(void **state) {
  const double a[5] = {1, NAN, 0.0, 1, 65504}, b[5] = {1, NAN, -0.0, 1 + 0x1p-10, INFINITY};
  size_t eq;
  int64_t mu;
  pf_backend_diff(PF_FP16, NULL, a, b, 5, &eq, &mu);
  assert_int_equal(eq, 2);
  assert_int_equal(mu, 1);
  const unsigned char dt[5] = {PF_NDTYPES, PF_NDTYPES, PF_NDTYPES, PF_FP32, PF_FP16};
  pf_backend_diff(PF_FP16, dt, a, b, 5, &eq, &mu);
  assert_int_equal(mu, 8192);
  const double c[1] = {2}, d[1] = {NAN};
  pf_backend_diff(PF_FP32, NULL, c, d, 1, &eq, &mu);
  assert_int_equal(eq, 0);
  assert_true(mu == INT64_MAX);
}

static void test_no_device_is_a_clear_error(void **state) {
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* before the first CUDA call of this process */
  char d[256];
  assert_int_equal(pf_cuda_describe(d, sizeof d), PF_ERR_NODEVICE);
  assert_non_null(strstr(pf_error_message(), "--backend cuda:"));
  assert_non_null(strstr(pf_error_message(), "no CUDA"));
  assert_null(strchr(pf_error_message(), '\n'));
  pf_case c;
  assert_int_equal(pf_case_init(&c, "softmax", "safe", 1), PF_OK);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  o.backend = PF_BACKEND_CUDA;
  pf_run r;
  const pf_status st = pf_run_case(&c, &o, &r);
#ifdef PF_HAVE_CUDA
  assert_int_equal(st, PF_ERR_NODEVICE); /* softmax.cu's first CUDA call fails cleanly */
#else
  assert_int_equal(st, PF_ERR_UNSUPPORTED); /* no run_cuda in this build */
#endif
  pf_run_free(&r);
  pf_case_free(&c);
}

/* Every kernel with a CUDA implementation finds its entry point in the module: without a
 * device its run fails at its first CUDA call (no device), not for want of the entry (a
 * host side asking for a name its .cu does not add). */
static void test_cuda_module_entries(void **state) {
#ifdef PF_HAVE_CUDA
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  void *fn = NULL;
  assert_int_equal(pf_cuda_entry("pf_no_such_entry", &fn), PF_ERR_NODEVICE);
  assert_non_null(strstr(pf_error_message(), "the CUDA module has no pf_no_such_entry"));
  size_t checked = 0;
  for (size_t i = 0; i < pf_kernel_count(); i++) {
    const pf_kernel *k = pf_kernel_at(i);
    if (!k->run_cuda) continue;
    pf_case c;
    assert_int_equal(pf_case_init(&c, k->op->name, k->variant, 1), PF_OK);
    pf_oracle_opts o;
    pf_oracle_opts_default(&o);
    o.backend = PF_BACKEND_CUDA;
    pf_run r;
    assert_int_equal(pf_run_case(&c, &o, &r), PF_ERR_NODEVICE);
    if (strstr(pf_error_message(), "has no")) fail_msg("%s/%s: %s", k->op->name, k->variant, pf_error_message());
    pf_run_free(&r);
    pf_case_free(&c);
    checked++;
  }
  assert_true(checked >= 5);
#else
  skip();
#endif
}

static void test_kernel_without_cuda(void **state) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "tp_diff", "megatron", 1), PF_OK);
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  o.backend = PF_BACKEND_CUDA;
  pf_run r;
  assert_int_equal(pf_run_case(&c, &o, &r), PF_ERR_UNSUPPORTED);
  assert_non_null(strstr(pf_error_message(), "tp_diff/megatron has no CUDA implementation"));
  pf_run_free(&r);
  pf_case_free(&c);
}

/* naive, fp16 storage and accumulation, alpha 0.1, causal mask holding the lowest value:
 * fl16(0.1) = 0x1.998p-4 (1.1001100110|011... rounds down), fl32(0.1) = 0x1.99999ap-4, the
 * lowest fp16 is -65504; the fault switches no_max on. */
static void test_softmax_launch_translation(void **state) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "softmax", "naive", 1), PF_OK);
  c.dtype = c.accum = PF_FP16;
  c.shape[0] = 3, c.shape[1] = 7;
  assert_int_equal(pf_case_set_param(&c, "alpha", 0.1), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "mask", 1), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "mask_value", 2), PF_OK);
  unsigned fe = 0;
  pf_softmax_launch L = pf_softmax_launch_of(&c, &fe);
  assert_int_equal(L.rows, 3);
  assert_int_equal(L.cols, 7);
  assert_int_equal(L.algo, PF_SOFTMAX_NAIVE);
  assert_int_equal(L.no_max, 0);
  assert_int_equal(L.mask, 1);
  assert_int_equal(L.acc, PF_FP16);
  assert_int_equal(L.out_t, PF_FP16);
  assert_true(L.alpha_acc == 0x1.998p-4);
  assert_true(L.maskval == -65504);
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "softmax", "online", 1), PF_OK);
  c.dtype = PF_BF16;
  c.accum = PF_FP32;
  assert_int_equal(pf_case_set_param(&c, "alpha", 0.1), PF_OK);
  strcpy(c.fault, "softmax-no-max");
  L = pf_softmax_launch_of(&c, &fe);
  assert_int_equal(L.algo, PF_SOFTMAX_ONLINE);
  assert_int_equal(L.no_max, 1);
  assert_true(L.alpha_acc == 0x1.99999ap-4);
  assert_true(isinf(L.maskval) && L.maskval < 0); /* the default mask value, -inf */
  pf_case_free(&c);
}

/* clip: the launch carries the case as the emulation reads it; loss_scale: the scalers'
 * starting states are the frameworks' defaults (DeepSpeed 2^32, minimum 1, window
 * 1000, hysteresis 2; PyTorch 2^16, no minimum, window 2000, hysteresis 1), and the shared
 * element steps give hand-derived values: fl16(1 * 65520) = inf (an overflow), fl16(0.5 *
 * 1024) = 512, unscaled by fl32(1/1024) = 2^-10 back to 0.5; a skipped step gives 0. */
static void test_clip_and_loss_scale_launch_translation(void **state) {
  pf_case c;
  assert_int_equal(pf_case_init(&c, "clip", "torch", 1), PF_OK);
  c.dtype = PF_FP16;
  c.shape[0] = 3, c.shape[1] = 5;
  assert_int_equal(pf_case_set_param(&c, "max_norm", 0.5), PF_OK);
  const pf_clip_launch L = pf_clip_launch_of(&c);
  assert_int_equal(L.tensors, 3);
  assert_int_equal(L.n, 5);
  assert_int_equal(L.variant, PF_CLIP_TORCH);
  assert_int_equal(L.dtype, PF_FP16);
  assert_int_equal(L.accum, PF_FP32);
  assert_true(L.max_norm == 0.5);
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "loss_scale", "deepspeed", 1), PF_OK);
  c.shape[0] = 9, c.shape[1] = 4;
  pf_ls_launch S = pf_loss_scale_launch_of(&c);
  assert_int_equal(S.steps, 9);
  assert_int_equal(S.n, 4);
  assert_int_equal(S.variant, PF_LS_DEEPSPEED);
  assert_int_equal(S.no_skip, 0);
  assert_true(S.start.scale == 0x1p32 && S.start.min_scale == 1 && S.start.window == 1000 && S.start.hysteresis == 2);
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "loss_scale", "pytorch", 1), PF_OK);
  strcpy(c.fault, "loss-scale-no-skip");
  S = pf_loss_scale_launch_of(&c);
  assert_int_equal(S.no_skip, 1);
  assert_true(S.start.scale == 0x1p16 && S.start.min_scale == 0 && S.start.window == 2000 && S.start.hysteresis == 1);
  pf_case_free(&c);
  unsigned fe = 0;
  int of = 0;
  assert_true(isinf(pf_ls_scale_elem(PF_FP16, 1.0, 65520, &of, &fe)) && of == 1 && (fe & PF_FE_OVERFLOW));
  of = 0;
  const double h = pf_ls_scale_elem(PF_FP16, 0.5, 1024, &of, &fe);
  assert_true(h == 512 && of == 0);
  assert_true(pf_ls_unscale_elem(h, pf_round(PF_FP32, 1.0 / 1024), 1, &fe) == 0.5);
  assert_true(pf_ls_unscale_elem(h, pf_round(PF_FP32, 1.0 / 1024), 0, &fe) == 0);
}

/* attention: alpha = 1/sqrt(d) in the accumulation dtype (d = 16: 0.25; d = 3: 0.57735...
 * = 1.1547 2^-1, 0.1547 * 1024 = 158.4 -> fl16 = (1 + 158/1024) 2^-1 = 0x1.278p-1);
 * layer-scaled stores scores L = 8 times smaller (alpha 1/(4 * 8) = 2^-5) and the softmax
 * multiplies by 8; inward scales Q and K by fl32(16^-1/4) = 0.5 and has alpha 1. */
static void test_attention_launch_translation(void **state) {
  pf_case c;
  unsigned fe = 0;
  assert_int_equal(pf_case_init(&c, "attention", "post-scale", 1), PF_OK);
  c.dtype = c.accum = PF_FP16;
  c.shape[0] = 2, c.shape[1] = 3, c.shape[2] = 5, c.shape[3] = 7, c.shape[4] = 16;
  assert_int_equal(pf_case_set_param(&c, "softmax_accum", 1), PF_OK);
  pf_attn_launch L = pf_attention_launch_of(&c, &fe);
  assert_int_equal(L.heads, 6);
  assert_int_equal(L.lq, 5);
  assert_int_equal(L.lk, 7);
  assert_int_equal(L.d, 16);
  assert_int_equal(L.algo, PF_ATTN_POST_SCALE);
  assert_true(L.alpha_acc == 0.25 && L.sigma_acc == 1);
  assert_int_equal(L.smacc, PF_FP16);
  c.shape[4] = 3;
  L = pf_attention_launch_of(&c, &fe);
  assert_true(L.alpha_acc == 0x1.278p-1);
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "attention", "layer-scaled", 1), PF_OK);
  c.dtype = PF_FP16;
  assert_int_equal(pf_case_set_param(&c, "layer", 8), PF_OK);
  L = pf_attention_launch_of(&c, &fe); /* default head_dim 16 */
  assert_true(L.alpha_acc == 0x1p-5 && L.sigma_acc == 8);
  assert_int_equal(L.smacc, PF_FP32);
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "attention", "inward", 1), PF_OK);
  L = pf_attention_launch_of(&c, &fe);
  assert_true(L.qscale == 0.5 && L.alpha_acc == 1);
  pf_case_free(&c);
  assert_int_equal(pf_case_init(&c, "attention", "flash", 1), PF_OK);
  assert_int_equal(pf_case_set_param(&c, "block", 4), PF_OK);
  strcpy(c.fault, "flash-no-rescale");
  L = pf_attention_launch_of(&c, &fe);
  assert_int_equal(L.block, 4);
  assert_int_equal(L.no_rescale, 1);
  assert_int_equal(L.no_max, 0);
  pf_case_free(&c);
}

/* Many cases as one kernel run (pf_run_cases, what a GPU run uses to stay out of launch
 * overhead) gives each case exactly what it gets alone: outputs bit for bit, events, verdicts;
 * on the CPU emulation here, whose slices are independent. Cases with events (fp16 naive
 * softmax at scale 64 overflows) take the one-by-one path for their events; cases that
 * differ in a parameter are not merged. */
static void batch_matches(const char *kernel, const char *variant, pf_dtype t, pf_dtype a, const size_t *shape,
                          int ndims, double scale, const char *param, double value) {
  enum { N = 5 };
  pf_case cs[N];
  pf_run one[N], many[N];
  pf_oracle_opts o;
  pf_oracle_opts_default(&o);
  for (int i = 0; i < N; i++) {
    assert_int_equal(pf_case_init(&cs[i], kernel, variant, 300 + (uint64_t)i), PF_OK);
    cs[i].dtype = t, cs[i].accum = a;
    for (int d = 0; d < ndims; d++) cs[i].shape[d] = shape[d];
    cs[i].shape[0] = shape[0] + (size_t)(i % 3); /* slices of different counts */
    for (int k = 0; k < cs[i].ninputs; k++) cs[i].inputs[k].scale = scale;
    if (param && i == N - 1) assert_int_equal(pf_case_set_param(&cs[i], param, value), PF_OK);
    assert_int_equal(pf_run_case(&cs[i], &o, &one[i]), PF_OK);
  }
  assert_int_equal(pf_run_cases(cs, N, &o, many), PF_OK);
  for (int i = 0; i < N; i++) {
    assert_int_equal(many[i].nout, one[i].nout);
    assert_memory_equal(many[i].out, one[i].out, one[i].nout * sizeof(double));
    assert_int_equal(many[i].fe, one[i].fe);
    assert_int_equal(many[i].cmp.verdict, one[i].cmp.verdict);
    assert_int_equal(many[i].in_domain, one[i].in_domain);
    assert_true(many[i].cmp.max_ulps == one[i].cmp.max_ulps);
    pf_run_free(&one[i]);
    pf_run_free(&many[i]);
    pf_case_free(&cs[i]);
  }
}

/* Adam's one launch over many tensors: sizes 0, 1, 2^16, 2^16 + 1 and 3 * 2^16 + 5 in chunks of
 * 2^16 are none; [0,1); [0,65536); [0,65536) [65536,65537); [0,65536) [65536,131072)
 * [131072,196608) [196608,196613): 8 chunks. A smaller cap gets the first ones and the count. */
static void test_adam_multi_tensor_chunks(void **state) {
  const size_t sizes[5] = {0, 1, 65536, 65537, 3 * 65536 + 5};
  const pf_adam_chunk want[8] = {{1, 0, 1},     {2, 0, 65536},      {3, 0, 65536},       {3, 65536, 1},
                                 {4, 0, 65536}, {4, 65536, 65536}, {4, 131072, 65536}, {4, 196608, 5}};
  pf_adam_chunk got[9];
  memset(got, 0xab, sizeof got);
  assert_int_equal(pf_adam_chunks(sizes, 5, PF_ADAM_CHUNK, NULL, 0), 8);
  assert_int_equal(pf_adam_chunks(sizes, 5, PF_ADAM_CHUNK, got, 9), 8);
  for (int k = 0; k < 8; k++) {
    assert_int_equal(got[k].tensor, want[k].tensor);
    assert_int_equal(got[k].start, want[k].start);
    assert_int_equal(got[k].count, want[k].count);
  }
  assert_int_equal(got[8].tensor, (size_t)0xabababababababab); /* nothing written past the count */
  pf_adam_chunk few[3];
  assert_int_equal(pf_adam_chunks(sizes, 5, PF_ADAM_CHUNK, few, 3), 8);
  assert_int_equal(few[2].tensor, 3);
  assert_int_equal(few[2].count, 65536);
  /* chunks of 3: 7 elements are 3 + 3 + 1 */
  const size_t seven = 7;
  assert_int_equal(pf_adam_chunks(&seven, 1, 3, got, 9), 3);
  assert_int_equal(got[2].start, 6);
  assert_int_equal(got[2].count, 1);
  assert_int_equal(pf_adam_chunks(sizes, 0, PF_ADAM_CHUNK, got, 9), 0);
}

static void test_batched_runs_match_single_runs(void **state) {
  const size_t sm[2] = {2, 17}, ad[1] = {33}, at[5] = {1, 2, 5, 7, 8};
  batch_matches("softmax", "naive", PF_FP16, PF_FP16, sm, 2, 4, NULL, 0);
  batch_matches("softmax", "naive", PF_FP16, PF_FP16, sm, 2, 64, NULL, 0); /* overflow events */
  batch_matches("softmax", "online", PF_BF16, PF_FP32, sm, 2, 8, "alpha", 0.5); /* not mergeable */
  batch_matches("adam", "fused", PF_FP16, PF_FP32, ad, 1, 1, NULL, 0);
  batch_matches("adam", "torch", PF_BF16, PF_FP32, ad, 1, 0x1p-10, NULL, 0);
  batch_matches("attention", "post-scale", PF_FP16, PF_FP32, at, 5, 2, NULL, 0);
  batch_matches("attention", "flash", PF_FP16, PF_FP16, at, 5, 2, NULL, 0);
  batch_matches("clip", "megatron", PF_FP16, PF_FP32, sm, 2, 1, NULL, 0); /* a global norm: one by one */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backend_names),
      cmocka_unit_test(test_default_options_are_the_cpu),
      cmocka_unit_test(test_backend_diff),
      cmocka_unit_test(test_no_device_is_a_clear_error),
      cmocka_unit_test(test_cuda_module_entries),
      cmocka_unit_test(test_kernel_without_cuda),
      cmocka_unit_test(test_softmax_launch_translation),
      cmocka_unit_test(test_clip_and_loss_scale_launch_translation),
      cmocka_unit_test(test_attention_launch_translation),
      cmocka_unit_test(test_adam_multi_tensor_chunks),
      cmocka_unit_test(test_batched_runs_match_single_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
