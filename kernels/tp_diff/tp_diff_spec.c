/* What a case of the tensor-parallel differential means (tp_diff_spec.h): the parameter set's
 * layout, which rank holds which element, the copy checks, the runs' names. */
#include "kernels/tp_diff/tp_diff_spec.h"

#include <stdio.h>
#include <string.h>

#include "core/kernel.h"

/* --- the parameter set --------------------------------------------------------------- */

size_t pf_tp_nsync(const pf_case *c) {
  pf_tp_layout L;
  pf_tp_layout_make(c, &L);
  return L.nsync;
}

void pf_tp_layout_make(const pf_case *c, pf_tp_layout *L) {
  memset(L, 0, sizeof *L);
  L->steps = c->shape[0];
  L->resume = (size_t)c->params[PF_TPP_RESUME];
  L->reshard = (size_t)c->params[PF_TPP_RESHARD];
  L->h = c->shape[1];
  L->f = c->shape[2];
  L->V = c->shape[3];
  L->seq = c->shape[4];
  L->mb = (size_t)c->params[PF_TPP_MB];
  L->tied = c->params[PF_TPP_TIED] != 0;
  L->tp = (int)c->params[PF_TPP_TP];
  L->dp = (int)c->params[PF_TPP_DP];
  L->experts = (int)c->params[PF_TPP_EXPERTS];
  L->ep = L->experts == 2 && L->dp == 2 ? 2 : 1;
  L->comm = c->params[PF_TPP_COMM] != 0;
  L->dtype = c->dtype;
  L->algo = pf_case_algo(c);
  L->loss_scale = c->dtype == PF_FP16 ? (c->params[PF_TPP_LOSS_SCALE] > 0 ? c->params[PF_TPP_LOSS_SCALE] : 0x1p12) : 1;
  L->dynamic = c->dtype == PF_FP16 && c->params[PF_TPP_SCALER] != 0;
  L->growth_interval = (int)c->params[PF_TPP_GROWTH_INTERVAL];
  L->hysteresis = (int)c->params[PF_TPP_HYSTERESIS];
  L->min_scale = c->params[PF_TPP_MIN_SCALE];
  L->layers = (int)c->params[PF_TPP_LAYERS];
  const size_t h = L->h, f = L->f;
  const pf_tp_block dense[12] = {
      {"ln1.w", h, 1, PF_TP_REP, 0, 0, -1},     {"ln1.b", h, 1, PF_TP_REP, 0, 0, -1},
      {"qkv.w", 3 * h, h, PF_TP_COL, 1, 0, -1}, {"qkv.b", 3 * h, 1, PF_TP_COL, 0, 0, -1},
      {"proj.w", h, h, PF_TP_ROW, 1, 0, -1},    {"proj.b", h, 1, PF_TP_REP, 0, 0, -1},
      {"ln2.w", h, 1, PF_TP_REP, 0, 0, -1},     {"ln2.b", h, 1, PF_TP_REP, 0, 0, -1},
      {"fc1.w", f, h, PF_TP_COL, 1, 0, -1},     {"fc1.b", f, 1, PF_TP_COL, 0, 0, -1},
      {"fc2.w", h, f, PF_TP_ROW, 1, 0, -1},     {"fc2.b", h, 1, PF_TP_REP, 0, 0, -1},
  };
  /* the experts (split over TP as the dense MLP is: expert tensor parallelism = TP) */
  const pf_tp_block experts[4] = {
      {"exp0.fc1.w", f, h, PF_TP_COL, 1, 0, 0}, {"exp0.fc2.w", h, f, PF_TP_ROW, 1, 0, 0},
      {"exp1.fc1.w", f, h, PF_TP_COL, 1, 0, 1}, {"exp1.fc2.w", h, f, PF_TP_ROW, 1, 0, 1},
  };
  const pf_tp_block tail[2] = {{"pos.w", L->seq, h, PF_TP_REP, 1, 0, -1}, {"embed.w", L->V, h, PF_TP_VOCAB, 1, 0, -1}};
  for (int l = 0; l < L->layers; l++)
    for (int k = 0; k < 12; k++) {
      pf_tp_block *b = &L->b[L->nblocks++];
      *b = dense[k];
      if (L->layers > 1) snprintf(b->name, sizeof b->name, "l%c.%.8s", (char)('0' + l), dense[k].name); /* l < 10 */
    }
  for (int k = 0; k < 2 * L->experts; k++) L->b[L->nblocks++] = experts[k];
  for (int k = 0; k < 2; k++) L->b[L->nblocks++] = tail[k];
  size_t off = 0;
  for (int k = 0; k < L->nblocks; k++) {
    L->b[k].offset = off;
    const size_t sz = L->b[k].rows * L->b[k].cols;
    if (L->b[k].expert == 0 && !L->nexp) L->exp0 = off;
    if (L->b[k].expert >= 0) L->nexp += sz;
    off += sz;
    if (L->b[k].kind == PF_TP_REP) L->nrep += sz;
  }
  L->n = off;
  L->head = L->tied ? L->V * h : 0;
  L->nsync = (size_t)L->dp * ((L->tp == 2 ? L->nrep : 0) + L->head) + (size_t)(L->dp - 1) * (L->n - (L->ep == 2 ? L->nexp : 0));
}

int pf_tp_block_of(const pf_tp_layout *L, size_t e, size_t *row, size_t *col) {
  int k = L->nblocks - 1;
  while (k > 0 && L->b[k].offset > e) k--;
  const size_t local = e - L->b[k].offset;
  *row = local / L->b[k].cols;
  *col = local % L->b[k].cols;
  return k;
}

int pf_tp_owner(const pf_tp_layout *L, size_t e) {
  size_t i, j;
  const pf_tp_block *b = &L->b[pf_tp_block_of(L, e, &i, &j)];
  if (L->tp == 1) return -1;
  switch (b->kind) {
  case PF_TP_COL: return i >= b->rows / 2;
  case PF_TP_ROW: return j >= b->cols / 2;
  case PF_TP_VOCAB: return i >= (b->rows + 1) / 2;
  default: return -1;
  }
}

void pf_tp_elem_name(const pf_tp_layout *L, size_t e, char *buf, size_t len) {
  size_t i, j;
  const int k = pf_tp_block_of(L, e, &i, &j);
  if (L->b[k].cols == 1) snprintf(buf, len, "%s[%zu]", L->b[k].name, i);
  else snprintf(buf, len, "%s[%zu,%zu]", L->b[k].name, i, j);
}

size_t pf_tp_sync_elem(const pf_tp_layout *L, size_t j, int *kind, int *replica) {
  const size_t rep = L->tp == 2 ? L->nrep : 0, per = rep + L->head;
  if (j >= (size_t)L->dp * per) { /* a replica's copy of every element (but the experts under EP) */
    j -= (size_t)L->dp * per;
    const size_t skip = L->ep == 2 ? L->nexp : 0, m = L->n - skip;
    *kind = PF_TP_COPY_DP;
    *replica = 1 + (int)(j / m);
    j %= m;
    return skip && j >= L->exp0 ? j + skip : j;
  }
  *replica = (int)(j / per);
  j %= per;
  if (j >= rep) {
    *kind = PF_TP_COPY_TIED;
    return L->b[pf_tp_embed(L)].offset + (j - rep);
  }
  *kind = PF_TP_COPY_TP;
  size_t r = 0;
  for (int k = 0;; k++) {
    if (L->b[k].kind != PF_TP_REP) continue;
    const size_t sz = L->b[k].rows * L->b[k].cols;
    if (j < r + sz) return L->b[k].offset + (j - r);
    r += sz;
  }
}

void pf_tp_run_name(const pf_tp_layout *L, int run, char *buf, size_t len) {
  if (run == 0 || L->dp == 1) snprintf(buf, len, "TP=%d", run ? L->tp : 1);
  else snprintf(buf, len, "TP=%d x DP=%d", L->tp, L->dp);
}
