/* What a case of the schedule family means (schedule_spec.h). */
#include "kernels/schedule/schedule_spec.h"

#include <math.h>

#include "core/kernel.h"

pf_status pf_lr_schedule_check(const pf_lr_schedule *s) {
  if (!(s->peak >= 0 && isfinite(s->peak))) return pf_error(PF_ERR_ARG, "schedule: peak must be finite and >= 0");
  if (!(s->final_value >= 0 && s->final_value <= s->peak))
    return pf_error(PF_ERR_ARG, "schedule: final value must lie in [0, peak]");
  if (s->warmup_steps < 0 || s->decay_steps < 0) return pf_error(PF_ERR_ARG, "schedule: step counts must be >= 0");
  if ((unsigned)s->kind > PF_DECAY_COSINE) return pf_error(PF_ERR_ARG, "schedule: unknown decay kind");
  return PF_OK;
}

double pf_lr_at(const pf_lr_schedule *s, long t) {
  if (s->warmup_steps > 0 && t <= s->warmup_steps) return s->peak * (double)t / (double)s->warmup_steps;
  if (s->kind == PF_DECAY_CONSTANT || s->decay_steps == 0) return s->kind == PF_DECAY_CONSTANT ? s->peak : s->final_value;
  const long into = t - s->warmup_steps;
  if (into >= s->decay_steps) return s->final_value;
  const double ratio = (double)into / (double)s->decay_steps;
  const double coeff = s->kind == PF_DECAY_LINEAR ? 1.0 - ratio : 0.5 * (cos(3.14159265358979323846 * ratio) + 1.0);
  return s->final_value + coeff * (s->peak - s->final_value);
}

pf_dtype pf_schedule_master_dtype(const pf_case *c) { return pf_case_algo(c) == PF_SCHED_LOWP_STATE ? c->dtype : PF_FP32; }

size_t pf_schedule_tensor_of(const pf_case *c, size_t i) {
  const size_t n = c->shape[1], k = (size_t)c->params[PF_SP_TENSORS], q = n / k, r = n % k;
  /* the first r tensors have q + 1 parameters */
  return i < r * (q + 1) ? i / (q + 1) : r + (i - r * (q + 1)) / q;
}

int pf_schedule_scaler(const pf_case *c) { return (int)c->params[PF_SP_SCALER] - 1; } /* PF_LS_*, -1 none */


pf_ls_state pf_schedule_scaler_start(const pf_case *c) {
  return pf_ls_start(pf_schedule_scaler(c), c->params[PF_SP_SCALE0], c->params[PF_SP_MINSCALE],
                     (long)c->params[PF_SP_WINDOW], (long)c->params[PF_SP_HYST]);
}

pf_lr_schedule pf_schedule_lr(const pf_case *c) {
  const pf_lr_schedule s = {c->params[PF_SP_LR], c->params[PF_SP_LR_FINAL], (long)c->params[PF_SP_WARMUP],
                            (long)c->shape[0] - (long)c->params[PF_SP_WARMUP], (pf_decay_kind)(int)c->params[PF_SP_DECAY]};
  return s;
}
