/* Outputs made elsewhere into a case's output layout (outputs.h). */
#include "outputs.h"

#include <stdio.h>
#include <string.h>

#include "core/kernel.h"
#include "tensorfile.h"

pf_status pf_outputs_from_tensors(const pf_case *c, const pf_tensorfile *ts, size_t nt, double *out, size_t nout,
                                  unsigned char *given, int exact_shape) {
  const pf_op *op = pf_case_op(c);
  pf_stage st[PF_MAX_STAGES];
  const int ns = pf_case_stages(c, st);
  char names[256] = "";
  for (int s = 0; s < ns; s++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s[%zu]", s ? ", " : "", st[s].name, st[s].count);
  unsigned char have[PF_MAX_STAGES] = {0};
  for (size_t k = 0; k < nt; k++) {
    const pf_tensorfile *t = &ts[k];
    /* where the tensor goes: every output (one tensor of them all), or the stage it names (one
     * unnamed tensor: the stage "output", or the operation's only stage whatever its name) */
    int s = -1;
    size_t offset = 0, count = nout;
    /* one tensor named as a stage (judge --tensor dlogits) is that stage */
    int named_stage = 0;
    for (int x = 0; x < ns && nt == 1 && t->name[0]; x++) named_stage |= strcmp(st[x].name, t->name) == 0;
    const int whole = nt == 1 && t->n == nout && ns > 1 && !named_stage;
    const char *want = named_stage ? t->name : nt == 1 || !t->name[0] ? (ns == 1 ? st[0].name : "output") : t->name;
    for (int x = 0; x < ns && !whole; x++)
      if (strcmp(st[x].name, want) == 0) s = x, offset = st[x].offset, count = st[x].count;
    if (nt == 1 && (s < 0 ? !whole : t->n != count))
      return pf_error(PF_ERR_ARG, "outputs: %zu values, the case has %zu outputs (%s)", t->n, nout, names);
    if (!whole && s < 0) return pf_error(PF_ERR_ARG, "outputs: tensor '%s' is no output of %s (%s)", t->name, c->kernel, names);
    if (t->n != count)
      return pf_error(PF_ERR_ARG, "outputs: tensor '%s' has %zu values, the stage has %zu", t->name, t->n, count);
    if (!op->stages && t->dtype != c->dtype)
      return pf_error(PF_ERR_ARG, "outputs are %s, the case's dtype is %s", pf_dtype_name(t->dtype), pf_dtype_name(c->dtype));
    if (s >= 0 && pf_stage_dtype(c, &st[s]) != PF_NDTYPES && t->dtype != pf_stage_dtype(c, &st[s]))
      return pf_error(PF_ERR_ARG, "outputs: '%s' is %s, the stage holds %s values", st[s].name, pf_dtype_name(t->dtype),
                      pf_dtype_name(pf_stage_dtype(c, &st[s])));
    if (s >= 0 && (exact_shape || t->ndims > 1)) {
      size_t want_shape[PF_MAX_DIMS];
      const int nd = pf_stage_shape(c, &st[s], want_shape);
      int same = nd == t->ndims;
      for (int d = 0; same && d < nd; d++) same = want_shape[d] == t->shape[d];
      if (!same) {
        char a[96] = "", b[96] = "";
        for (int d = 0; d < t->ndims; d++) snprintf(a + strlen(a), sizeof a - strlen(a), d ? ",%zu" : "%zu", t->shape[d]);
        for (int d = 0; d < nd; d++) snprintf(b + strlen(b), sizeof b - strlen(b), d ? ",%zu" : "%zu", want_shape[d]);
        return pf_error(PF_ERR_ARG, "outputs: '%s' has shape [%s], the stage's is [%s]", st[s].name, a, b);
      }
    }
    for (int x = 0; x < ns; x++)
      if (whole || x == s) {
        if (have[x]) return pf_error(PF_ERR_ARG, "outputs: stage '%s' given twice", st[x].name);
        have[x] = 1;
      }
    memcpy(out + offset, t->data, count * sizeof(double));
  }
  for (int s = 0; s < ns; s++) {
    if (!have[s] && !given) return pf_error(PF_ERR_ARG, "outputs: stage '%s' missing (%s)", st[s].name, names);
    if (given) memset(given + st[s].offset, have[s], st[s].count);
  }
  return PF_OK;
}
