/* The loss-scaling reference: what each scaler does on the true gradients, written from the
 * frameworks' code (DeepSpeed DynamicLossScaler.update_scale, Megatron DynamicGradScaler.update,
 * PyTorch GradScaler.update) independently of the kernels, with the overflow decided exactly:
 * the scaled gradient S g overflows the gradient dtype iff |S g| >= max + ulp(max)/2 (the
 * rounding threshold; S g is exact in binary64: a binary32 value times a scale), or g is not
 * finite. Expected outputs: the true gradient for an applied step (for DeepSpeed 0.19.8's
 * paths, which unscale by the updated scale S', g S / S'), 0 for a skipped or stopped one, the
 * status, and the scale after the step. */
#include "oracles/loss_scale_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "kernels/loss_scale/loss_scale_spec.h"
#include "oracles/oracle_util.h"

typedef struct {
  double cur_scale, min_scale;
  long scale_window, delayed_shift, cur_hysteresis, cur_iter, last_overflow_iter, growth_tracker;
  int dead;
} pf_ref_scaler;

/* 0 applied, 1 skipped, 2 stopped */
/* v019: DeepSpeed 0.19.8's growth rule (stable_interval = cur_iter - last_overflow_iter - 1 > 0) */
static int ref_deepspeed(pf_ref_scaler *r, int overflow, int v019) {
  if (r->dead) return 2;
  if (overflow) {
    if (r->delayed_shift == 1 || r->cur_hysteresis == 1) {
      if (r->cur_scale == r->min_scale) { /* raise Exception("Current loss scale already at minimum ...") */
        r->dead = 1;
        return 2;
      }
      r->cur_scale = fmax(r->cur_scale / 2, r->min_scale);
    } else {
      r->cur_hysteresis--;
    }
    r->last_overflow_iter = r->cur_iter;
  } else {
    const long stable = r->cur_iter - r->last_overflow_iter - (v019 ? 1 : 0);
    if ((!v019 || stable > 0) && stable % r->scale_window == 0) {
      r->cur_hysteresis = r->delayed_shift;
      r->cur_scale *= 2;
    }
  }
  r->cur_iter++;
  return overflow;
}

/* DeepSpeed 0.19.8's FP16_Optimizer._update_scale (runtime/fp16/fused_optimizer.py; the same
 * in unfused_optimizer.py): no hysteresis, the minimum holds and the run goes on */
static int ref_deepspeed_fp16(pf_ref_scaler *r, int overflow) {
  if (overflow) {
    r->cur_scale = fmax(r->cur_scale / 2, r->min_scale);
    r->last_overflow_iter = r->cur_iter;
  } else {
    const long stable = r->cur_iter - r->last_overflow_iter - 1;
    if (stable > 0 && stable % r->scale_window == 0) r->cur_scale *= 2;
  }
  r->cur_iter++;
  return overflow;
}

static int ref_megatron(pf_ref_scaler *r, int found_inf) {
  if (found_inf) {
    r->growth_tracker = 0;
    r->cur_hysteresis--;
    /* DynamicGradScaler keeps its scale in an fp32 tensor: torch.max(scale * backoff, min) */
    if (r->cur_hysteresis <= 0) r->cur_scale = fmax((float)(r->cur_scale * 0.5), r->min_scale);
    return 1;
  }
  r->growth_tracker++;
  if (r->growth_tracker == r->scale_window) {
    r->growth_tracker = 0;
    r->cur_hysteresis = r->delayed_shift;
    r->cur_scale = (float)(r->cur_scale * 2); /* past 2^127 the fp32 tensor is inf, and stays inf */
  }
  return 0;
}

static int ref_pytorch(pf_ref_scaler *r, int found_inf) {
  if (found_inf) {
    r->cur_scale = (double)(float)(r->cur_scale * 0.5); /* _scale is a float32 tensor */
    r->growth_tracker = 0;
    return 1;
  }
  if (++r->growth_tracker == r->scale_window) {
    /* _amp_update_scale_ (ATen, AmpKernels.cu and its CPU twin): "Do not grow the scale past
     * fp32 bounds to inf": a doubling that would overflow float leaves the scale as it is */
    const float grown = (float)(r->cur_scale * 2);
    if (isfinite(grown)) r->cur_scale = grown;
    r->growth_tracker = 0;
  }
  return 0;
}

static void set_exact(pf_oracle_result *out, size_t i, double x, pf_dtype t, int keep_hex) {
  mpfr_t v;
  mpfr_init2(v, 64);
  mpfr_set_d(v, x, MPFR_RNDN);
  pf_oracle_settle(out, i, v, v, t, 1, keep_hex);
  mpfr_clear(v);
}

pf_status pf_loss_scale_ref(const pf_case *c, const pf_tensor *in, const pf_oracle_opts *opts, pf_oracle_result *out) {
  const size_t T = c->shape[0], n = c->shape[1];
  /* the variant's algorithm (its data, not its name: a user's copy of pytorch is pytorch) */
  const int algo = pf_case_algo(c);
  const int ds019 = algo == PF_LS_DEEPSPEED_019, dsfp16 = algo == PF_LS_DEEPSPEED_019_FP16;
  const int ds = algo == PF_LS_DEEPSPEED || ds019, mg = algo == PF_LS_MEGATRON, pt = algo == PF_LS_PYTORCH;
  /* DeepSpeed 0.19.8 updates the scale before unscaling: what its optimizer receives on a step
   * where the scale moved is g S / S' (the hazard imprecise says so) */
  const int after = ds019 || dsfp16;
  const double scale0 = pf_case_param(c, "scale0"), min_scale = pf_case_param(c, "min_scale");
  const double window = pf_case_param(c, "window"), hyst = pf_case_param(c, "hysteresis");
  pf_ref_scaler r;
  memset(&r, 0, sizeof r);
  r.cur_scale = scale0 > 0 ? scale0 : ((ds && !ds019) || mg ? 4294967296.0 : 65536.0); /* dsfp16: 2^16 */
  r.min_scale = min_scale > 0 ? min_scale : (pt ? 0 : 1);
  r.scale_window = window > 0 ? (long)window : (pt ? 2000 : 1000);
  r.delayed_shift = hyst > 0 ? (long)hyst : (pt ? 1 : 2);
  r.cur_hysteresis = r.delayed_shift;
  r.last_overflow_iter = -1;
  /* the overflow threshold of the gradient dtype: max finite + half its ulp */
  const pf_format f = pf_format_of(c->dtype);
  const double thr = ldexp(2.0 - ldexp(1.0, -f.prec), f.emax);
  out->max_prec = 64;
  for (size_t t = 0; t < T; t++) {
    const double S = r.cur_scale;
    int overflow = 0;
    for (size_t i = 0; i < n; i++) {
      const double g = in[0].data[t * n + i];
      overflow |= !isfinite(g) || !(fabs(S * g) < thr); /* an inf scale times 0 is NaN: an overflow */
    }
    const int status = ds       ? ref_deepspeed(&r, overflow, ds019)
                       : dsfp16 ? ref_deepspeed_fp16(&r, overflow)
                       : mg     ? ref_megatron(&r, overflow)
                       : pt     ? ref_pytorch(&r, overflow)
                                : overflow;
    const double ratio = after ? S / r.cur_scale : 1; /* a power of two: g S / S' is exact */
    for (size_t i = 0; i < n; i++) {
      const double g = in[0].data[t * n + i];
      if (status == 0 && !isfinite(g)) pf_oracle_set_undefined(out, t * n + i, opts->keep_hex);
      else if (status == 0) set_exact(out, t * n + i, g * ratio, PF_FP32, opts->keep_hex);
      else if (isfinite(g)) set_exact(out, t * n + i, 0.0, PF_FP32, opts->keep_hex);
      else pf_oracle_set_undefined(out, t * n + i, opts->keep_hex); /* the true gradient itself is undefined */
    }
    set_exact(out, T * n + t, status, PF_FP32, opts->keep_hex);
    set_exact(out, T * n + T + t, r.cur_scale, PF_FP32, opts->keep_hex);
  }
  return PF_OK;
}
