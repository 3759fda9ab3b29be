/* Hazards (hazard.h): imprecise and biased from the outputs and the exact values, the
 * operation's own, and torch.testing's default tolerance beside them. */
#include "hazard.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"

static const char *const pf_hazard_names[PF_NHAZARDS] = {"saturated", "stagnant", "biased", "imprecise"};

const char *pf_hazard_name(pf_hazard h) { return h < PF_NHAZARDS ? pf_hazard_names[h] : "?"; }

pf_status pf_hazard_parse(const char *s, pf_hazard *out) {
  for (int h = 0; h < PF_NHAZARDS; h++)
    if (!strcmp(s, pf_hazard_names[h])) {
      *out = (pf_hazard)h;
      return PF_OK;
    }
  return PF_ERR_UNKNOWN;
}

const char *pf_hazards_str(unsigned mask, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (int h = 0; h < PF_NHAZARDS; h++)
    if (mask & (1u << h)) used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s", used ? "," : "", pf_hazard_names[h]);
  if (!mask) snprintf(buf, len, "none");
  return buf;
}

void pf_hazard_limits_default(pf_hazard_limits *l) {
  for (int t = 0; t < PF_NDTYPES; t++) {
    const double u16 = 16 * pf_unit_roundoff((pf_dtype)t);
    l->imprecise[t] = u16 > 0x1p-10 ? u16 : 0x1p-10;
  }
  l->bias_z = 6;
  l->bias_ulps = 0.25;
  l->bias_min = 32;
}

pf_status pf_hazard_limits_parse(const char *s, pf_hazard_limits *l) {
  char buf[256];
  if (!*s || strlen(s) >= sizeof buf) return pf_error(PF_ERR_ARG, "--imprecise: expected DTYPE=VALUE[,DTYPE=VALUE...], got '%s'", s);
  strcpy(buf, s);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) return pf_error(PF_ERR_ARG, "--imprecise: '%s' is not DTYPE=VALUE", item);
    *eq = 0;
    pf_dtype t;
    if (pf_dtype_parse(item, &t)) return pf_error(PF_ERR_ARG, "--imprecise: '%s' is not a dtype (fp32, fp16, bf16)", item);
    char *end;
    const double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !(v > 0 && v < 1))
      return pf_error(PF_ERR_ARG, "--imprecise: %s=%s is not a relative error in (0, 1)", item, eq + 1);
    l->imprecise[t] = v;
  }
  return PF_OK;
}

void pf_torch_testing_tolerance(pf_dtype t, double *rtol, double *atol) {
  *atol = 1e-5;
  *rtol = t == PF_FP16 ? 1e-3 : t == PF_BF16 ? 1.6e-2 : 1.3e-6;
}

/* the dtype output i is stored in */

/* The measure |y - E| / |E| is computed from E rounded to binary64, which moves it by up to
 * 2^-53 (1 + 1/measure) relative: within 2^-40 of the threshold (a measure equal to it) is not
 * beyond it. */
int pf_hazard_beyond(double err, double thr) { return err > thr * (1 + 0x1p-40); }

double pf_hazard_threshold(const pf_case *c, const pf_hazard_limits *l, pf_dtype t) {
  return fmax(l->imprecise[t], l->imprecise[c->dtype]);
}

/* An element whose error means something: the exact value known and finite, the output finite. */

/* imprecise over the elements [from, from + count), one measure unit */

/* the stages of the run's operation, or the one output as a stage of its own, measured by rows */

/* biased: the signed difference between an output y and what unbiased rounding gives, the
 * correctly rounded R (either neighbour of a tie), in ulps of the stage's dtype at the exact E,
 * as it is (upward or downward) and times sign(E) (away from zero or toward it), averaged over
 * independent units and tested against 0 with a one-sample t statistic:
 *   - a stage with rows (2 or more dimensions): a unit is a row's mean. Errors the row shares
 *     (one rounded denominator, one coefficient) have a sign of their own in every row and
 *     average out; a rounding bias has the same sign in every row.
 *   - a vector: a unit is one distinct (E, y) pair, where the contract pins the value before
 *     the final rounding to within 1/8 ulp of E (bound.rel |E| + bound.abs), so that the final
 *     rounding decides y: nearest gives R but within 1/8 ulp of a midpoint, a directed rounding
 *     gives the other neighbour on about half of the elements. Elements whose error the
 *     algorithm may have made are left out; repeated pairs count once. */

static pf_hazard_limits pf_limits_set;
static int pf_limits_have;

void pf_hazard_limits_set_default(const pf_hazard_limits *l) {
  pf_limits_set = *l;
  pf_limits_have = 1;
}

const pf_hazard_limits *pf_hazard_limits_current(void) { return pf_limits_have ? &pf_limits_set : NULL; }

const pf_hazard_limits *pf_hazard_limits_or_default(const pf_hazard_limits *l, pf_hazard_limits *def) {
  if (l) return l;
  pf_hazard_limits_default(def);
  return def;
}

_Static_assert(PF_BIAS_STAGES == PF_MAX_STAGES, "a bias pool holds every stage");

void pf_bias_pool_add(pf_bias_pool *p, const pf_bias_pool *u) {
  if (!p->nstages) {
    *p = *u;
    return;
  }
  for (int k = 0; k < p->nstages && k < u->nstages; k++) {
    /* the same stage (a case of another operation's stages is not pooled with these) */
    if (!p->st[k].name || !u->st[k].name || strcmp(p->st[k].name, u->st[k].name)) continue;
    p->st[k].n += u->st[k].n;
    for (int j = 0; j < 2; j++) p->st[k].sum[j] += u->st[k].sum[j], p->st[k].sq[j] += u->st[k].sq[j];
  }
}

int pf_bias_pool_test(const pf_bias_pool *p, int k, const pf_hazard_limits *l, double mean[2], double t[2]) {
  const size_t m = p->st[k].n;
  int biased = -1;
  for (int j = 0; j < 2; j++) {
    mean[j] = m ? p->st[k].sum[j] / (double)m : 0;
    const double var = m > 1 ? (p->st[k].sq[j] - (double)m * mean[j] * mean[j]) / (double)(m - 1) : 0;
    t[j] = var > 0 ? mean[j] / sqrt(var / (double)m) : (mean[j] != 0 ? copysign(INFINITY, mean[j]) : 0);
    if (biased < 0 && m >= l->bias_min && m >= 2 && fabs(t[j]) >= l->bias_z && fabs(mean[j]) >= l->bias_ulps) biased = j;
  }
  return biased;
}

void pf_hazard_tally_merge(pf_hazard_tally *t, const pf_hazard_tally *u) {
  for (int h = 0; h < PF_NHAZARDS; h++) t->hazard[h] += u->hazard[h];
  t->any += u->any;
  t->tt_rejects += u->tt_rejects, t->tt_pass_finding += u->tt_pass_finding;
  t->tt_pass_hazard += u->tt_pass_hazard, t->tt_reject_sound += u->tt_reject_sound;
  if (u->max_err > t->max_err) t->max_err = u->max_err;
  if (u->max_use > t->max_use) t->max_use = u->max_use;
  pf_bias_pool_add(&t->bias, &u->bias);
}

