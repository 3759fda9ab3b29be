/* What a case of the loss-scaling family means, for its emulation (loss_scale_math.h), its
 * reference (oracles/loss_scale_ref.c) and the families that scale their losses (schedule,
 * tp_diff) alike: the scalers (pf_kernel.algo), their state and its update after one step, as
 * DeepSpeed deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler, Megatron
 * megatron/core/optimizer/grad_scaler.py DynamicGradScaler and PyTorch torch/amp/grad_scaler.py
 * GradScaler.update (_amp_update_scale_) compute them. */
#ifndef PF_LOSS_SCALE_SPEC_H
#define PF_LOSS_SCALE_SPEC_H

#include "core/dtype_math.h"

/* PF_LS_DEEPSPEED_019: DeepSpeed 0.19.8's ZeRO stages (DynamicLossScaler.update_scale);
 * PF_LS_DEEPSPEED_019_FP16: its FP16_Optimizer and FP16_UnfusedOptimizer (ZeRO off), whose
 * own _update_scale has no hysteresis and never stops. Both unscale after the update. */
enum { PF_LS_DEEPSPEED = 0, PF_LS_MEGATRON = 1, PF_LS_PYTORCH = 2, PF_LS_STATIC = 3, PF_LS_DEEPSPEED_019 = 4,
       PF_LS_DEEPSPEED_019_FP16 = 5 };

/* DeepSpeed 0.19.8 updates the scale before it unscales (runtime/zero/stage_1_and_2.py and
 * stage3.py step, runtime/fp16/fused_optimizer.py and unfused_optimizer.py step): on a step
 * where the scale grows, the gradients made at S are divided by 2S. */
PF_HD int pf_ls_unscales_after_update(int variant) {
  return variant == PF_LS_DEEPSPEED_019 || variant == PF_LS_DEEPSPEED_019_FP16;
}
enum { PF_LS_APPLIED = 0, PF_LS_SKIPPED = 1, PF_LS_STOPPED = 2 };

typedef struct {
  double scale, min_scale;
  long window, hysteresis;
  /* state */
  long cur_iter, last_overflow_iter, cur_hysteresis, growth_tracker;
  int stopped;
} pf_ls_state;

/* The scaler's starting state from a case's constants; 0 picks the variant's default
 * (the frameworks' defaults: initial 2^32 for deepspeed and megatron, 2^16 for pytorch and
 * static; minimum 1, pytorch none; window 1000, pytorch 2000; hysteresis 2, pytorch 1). */
PF_HD pf_ls_state pf_ls_start(int variant, double scale0, double min_scale, long window, long hysteresis) {
  pf_ls_state s;
  /* deepspeed-0.19: what a DeepSpeed config gets by default (initial_scale_power 16,
   * loss_scale_window 1000, hysteresis 2, min_loss_scale 1: deepspeed/runtime/fp16/loss_scaler.py
   * CreateLossScaler with the config's dynamic_loss_args) */
  const int big = variant == PF_LS_DEEPSPEED || variant == PF_LS_MEGATRON;
  /* deepspeed-0.19-fp16 takes the same config values (engine.py _configure_fp16_optimizer
   * passes dynamic_loss_args; the profiles' own defaults apply only without them) */
  s.scale = scale0 > 0 ? scale0 : (big ? 0x1p32 : 0x1p16);
  s.min_scale = min_scale > 0 ? min_scale : (variant == PF_LS_PYTORCH ? 0 : 1);
  s.window = window > 0 ? window : (variant == PF_LS_PYTORCH ? 2000 : 1000);
  s.hysteresis = hysteresis > 0 ? hysteresis : (variant == PF_LS_PYTORCH ? 1 : 2);
  s.cur_iter = 0;
  s.last_overflow_iter = -1;
  s.cur_hysteresis = s.hysteresis;
  s.growth_tracker = 0;
  s.stopped = 0;
  return s;
}

/* After a step whose gradients did (overflow = 1) or did not overflow. Returns the step's
 * status: applied, skipped, or stopped (DeepSpeed's "Current loss scale already at minimum -
 * cannot decrease scale anymore. Exiting run."). */
PF_HD int pf_ls_update(int variant, pf_ls_state *s, int overflow) {
  if (s->stopped) return PF_LS_STOPPED;
  int status = overflow ? PF_LS_SKIPPED : PF_LS_APPLIED;
  switch (variant) {
  case PF_LS_DEEPSPEED: /* DynamicLossScaler.update_scale, consecutive_hysteresis off */
  case PF_LS_DEEPSPEED_019:
    if (overflow) {
      if (s->hysteresis == 1 || s->cur_hysteresis == 1) {
        if (s->scale == s->min_scale) {
          s->stopped = 1;
          return PF_LS_STOPPED;
        }
        s->scale = s->scale / 2 > s->min_scale ? s->scale / 2 : s->min_scale;
      } else {
        s->cur_hysteresis -= 1;
      }
      s->last_overflow_iter = s->cur_iter;
    } else if (variant == PF_LS_DEEPSPEED ? (s->cur_iter - s->last_overflow_iter) % s->window == 0
                                          : s->cur_iter - s->last_overflow_iter - 1 > 0 &&
                                                (s->cur_iter - s->last_overflow_iter - 1) % s->window == 0) {
      /* DeepSpeed 0.19: stable_interval = cur_iter - last_overflow_iter - 1, doubled when it is a
       * positive multiple of the window (window + 1 clean steps after an overflow) */
      s->cur_hysteresis = s->hysteresis;
      s->scale *= 2;
    }
    s->cur_iter += 1;
    break;
  case PF_LS_DEEPSPEED_019_FP16: /* FP16_Optimizer._update_scale: halve (not below min), no hysteresis */
    if (overflow) {
      s->scale = s->scale / 2 > s->min_scale ? s->scale / 2 : s->min_scale;
      s->last_overflow_iter = s->cur_iter;
    } else if (s->cur_iter - s->last_overflow_iter - 1 > 0 && (s->cur_iter - s->last_overflow_iter - 1) % s->window == 0) {
      s->scale *= 2;
    }
    s->cur_iter += 1;
    break;
  case PF_LS_MEGATRON: /* DynamicGradScaler.update */
    if (overflow) {
      s->growth_tracker = 0;
      s->cur_hysteresis -= 1;
      if (s->cur_hysteresis <= 0) {
        const double halved = pf_round(PF_FP32, s->scale * 0.5);
        s->scale = halved > s->min_scale ? halved : s->min_scale;
      }
    } else if (++s->growth_tracker == s->window) {
      s->growth_tracker = 0;
      s->cur_hysteresis = s->hysteresis;
      s->scale = pf_round(PF_FP32, s->scale * 2); /* an fp32 tensor: inf past 2^127, and inf stays */
    }
    break;
  case PF_LS_PYTORCH: /* GradScaler.update: the scale is an fp32 tensor */
    if (overflow) {
      s->scale = pf_round(PF_FP32, s->scale * 0.5);
      s->growth_tracker = 0;
    } else if (++s->growth_tracker == s->window) {
      /* _amp_update_scale_ never grows the scale to inf: at 2^127 it stays */
      const double grown = pf_round(PF_FP32, s->scale * 2);
      if (grown - grown == 0) s->scale = grown;
      s->growth_tracker = 0;
    }
    break;
  default: /* static: the scale never changes; an overflowed step is still skipped */
    break;
  }
  return status;
}

#endif
