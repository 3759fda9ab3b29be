#include "kernels/schedule/lr_schedule.h"

#include <math.h>

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
