/* Checkpoints as precfuzz writes and reads them: checkpoint.h. */
#include "core/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/case.h"
#include "core/tensorfile.h"

#define PF_CKPT_FORMAT "precfuzz-checkpoint/1"

pf_status pf_ckpt_put_tensor(pf_checkpoint *ck, int r, const char *name, pf_dtype t, const double *v, size_t n) {
  if (r < 0 || r >= PF_CKPT_MAX_RANKS) return pf_error(PF_ERR_ARG, "checkpoint: rank %d beyond %d ranks", r, PF_CKPT_MAX_RANKS);
  pf_ckpt_rank *k = &ck->rank[r];
  if (strlen(name) >= PF_CKPT_NAME)
    return pf_error(PF_ERR_ARG, "checkpoint: rank %d: tensor name '%.60s' longer than %d characters", r, name, PF_CKPT_NAME - 1);
  if (k->ntensors == PF_CKPT_MAX_TENSORS)
    return pf_error(PF_ERR_ARG, "checkpoint: rank %d: more than %d tensors ('%s')", r, PF_CKPT_MAX_TENSORS, name);
  for (size_t i = 0; i < n; i++)
    if (!isnan(v[i]) && !pf_dtype_holds(t, v[i]))
      return pf_error(PF_ERR_ARG, "checkpoint: rank %d: %s[%zu] = %.17g is not a %s value", r, name, i, v[i], pf_dtype_name(t));
  pf_ckpt_tensor *x = &k->tensors[k->ntensors];
  if (!(x->data = malloc((n ? n : 1) * sizeof(double)))) return pf_error(PF_ERR_NOMEM, "checkpoint: out of memory");
  memcpy(x->data, v, n * sizeof(double));
  snprintf(x->name, sizeof x->name, "%s", name);
  x->dtype = t;
  x->n = n;
  k->ntensors++;
  if (r >= ck->nranks) ck->nranks = r + 1;
  return PF_OK;
}

pf_status pf_ckpt_put_number(pf_checkpoint *ck, int r, const char *name, double v) {
  if (r < 0 || r >= PF_CKPT_MAX_RANKS) return pf_error(PF_ERR_ARG, "checkpoint: rank %d beyond %d ranks", r, PF_CKPT_MAX_RANKS);
  pf_ckpt_rank *k = &ck->rank[r];
  if (strlen(name) >= PF_CKPT_NAME)
    return pf_error(PF_ERR_ARG, "checkpoint: rank %d: number name '%.60s' longer than %d characters", r, name, PF_CKPT_NAME - 1);
  if (k->nnumbers == PF_CKPT_MAX_NUMBERS)
    return pf_error(PF_ERR_ARG, "checkpoint: rank %d: more than %d numbers ('%s')", r, PF_CKPT_MAX_NUMBERS, name);
  snprintf(k->numbers[k->nnumbers].name, PF_CKPT_NAME, "%s", name);
  k->numbers[k->nnumbers++].value = v;
  if (r >= ck->nranks) ck->nranks = r + 1;
  return PF_OK;
}

const pf_ckpt_tensor *pf_ckpt_tensor_of(const pf_checkpoint *ck, int r, const char *name) {
  if (r < 0 || r >= ck->nranks) return NULL;
  for (int i = 0; i < ck->rank[r].ntensors; i++)
    if (strcmp(ck->rank[r].tensors[i].name, name) == 0) return &ck->rank[r].tensors[i];
  return NULL;
}

const pf_ckpt_number *pf_ckpt_number_of(const pf_checkpoint *ck, int r, const char *name) {
  if (r < 0 || r >= ck->nranks) return NULL;
  for (int i = 0; i < ck->rank[r].nnumbers; i++)
    if (strcmp(ck->rank[r].numbers[i].name, name) == 0) return &ck->rank[r].numbers[i];
  return NULL;
}

void pf_checkpoint_free(pf_checkpoint *ck) {
  for (int r = 0; r < PF_CKPT_MAX_RANKS; r++)
    for (int i = 0; i < ck->rank[r].ntensors; i++) free(ck->rank[r].tensors[i].data);
  memset(ck, 0, sizeof *ck);
}

void pf_checkpoint_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static const char *pf_ckpt_keep;
static int pf_ckpt_kept;

void pf_checkpoint_keep(const char *dir) {
  pf_ckpt_keep = dir;
  pf_ckpt_kept = 0;
}

int pf_checkpoint_keep_path(const char *layout, char *out, size_t len) {
  if (!pf_ckpt_keep) return 0;
  mkdir(pf_ckpt_keep, 0777); /* the first save makes it (the command refused one that existed) */
  return snprintf(out, len, "%s/%s", pf_ckpt_keep, layout) < (int)len;
}

int pf_checkpoint_kept(void) { return pf_ckpt_kept; }

int pf_checkpoint_keeping(void) { return pf_ckpt_keep != NULL; }

pf_status pf_checkpoint_write(const char *dir, const pf_checkpoint *ck) {
  struct stat sb;
  if (stat(dir, &sb) == 0) return pf_error(PF_ERR_ARG, "checkpoint %s: already exists (a checkpoint is never written over)", dir);
  char tmp[4096], path[4200];
  if (snprintf(tmp, sizeof tmp, "%s.partial", dir) >= (int)sizeof tmp) return pf_error(PF_ERR_ARG, "checkpoint: path too long");
  pf_checkpoint_remove(tmp); /* what an interrupted write left */
  if (mkdir(tmp, 0777) != 0) return pf_error(PF_ERR_IO, "checkpoint %s: cannot create %s (%s)", dir, tmp, strerror(errno));
  pf_status st = PF_OK;
  cJSON *root = cJSON_CreateObject(), *ranks = cJSON_AddArrayToObject(root, "ranks");
  cJSON_AddStringToObject(root, "format", PF_CKPT_FORMAT);
  cJSON_AddStringToObject(root, "writer", ck->writer);
  cJSON_AddNumberToObject(root, "step", (double)ck->step);
  for (int r = 0; r < ck->nranks && !st; r++) {
    const pf_ckpt_rank *k = &ck->rank[r];
    cJSON *jr = cJSON_CreateObject(), *nums = cJSON_CreateObject(), *ts = cJSON_CreateObject();
    cJSON_AddItemToArray(ranks, jr);
    char file[64];
    snprintf(file, sizeof file, "rank-%d.safetensors", r);
    cJSON_AddStringToObject(jr, "file", file);
    cJSON_AddItemToObject(jr, "numbers", nums);
    cJSON_AddItemToObject(jr, "tensors", ts);
    for (int i = 0; i < k->nnumbers; i++) {
      char hx[40];
      pf_hexfloat(hx, k->numbers[i].value);
      cJSON_AddStringToObject(nums, k->numbers[i].name, hx);
    }
    pf_tensor_view v[PF_CKPT_MAX_TENSORS];
    size_t shape[PF_CKPT_MAX_TENSORS];
    for (int i = 0; i < k->ntensors; i++) {
      const pf_ckpt_tensor *x = &k->tensors[i];
      cJSON *jt = cJSON_CreateObject();
      cJSON_AddStringToObject(jt, "dtype", pf_dtype_name(x->dtype));
      cJSON_AddNumberToObject(jt, "n", (double)x->n);
      cJSON_AddItemToObject(ts, x->name, jt);
      shape[i] = x->n;
      v[i] = (pf_tensor_view){x->name, x->dtype, 1, &shape[i], x->data};
    }
    snprintf(path, sizeof path, "%s/%s", tmp, file);
    if (k->ntensors) st = pf_safetensors_write(path, v, (size_t)k->ntensors);
  }
  char *text = st ? NULL : cJSON_Print(root);
  cJSON_Delete(root);
  if (!st && !text) st = pf_error(PF_ERR_NOMEM, "checkpoint: out of memory");
  if (!st) {
    snprintf(path, sizeof path, "%s/checkpoint.json", tmp);
    st = pf_write_file_atomic(path, text, strlen(text));
  }
  free(text);
  if (!st && rename(tmp, dir) != 0) st = pf_error(PF_ERR_IO, "checkpoint %s: cannot rename %s into place (%s)", dir, tmp, strerror(errno));
  if (!st && pf_ckpt_keep && strncmp(dir, pf_ckpt_keep, strlen(pf_ckpt_keep)) == 0) pf_ckpt_kept = 1; /* one kept, whole */
  if (st) pf_checkpoint_remove(tmp);
  return st;
}

pf_status pf_checkpoint_read(const char *dir, pf_checkpoint *out) {
  memset(out, 0, sizeof *out);
  char path[4200];
  snprintf(path, sizeof path, "%s/checkpoint.json", dir);
  char *text = NULL;
  size_t len = 0;
  pf_status st = pf_read_file(path, &text, &len);
  if (st) return st;
  cJSON *root = NULL;
  st = pf_json_parse_strict(text, path, &root);
  free(text);
  if (st) return st;
#define BAD(...) (st = pf_error(PF_ERR_PARSE, __VA_ARGS__))
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format"), *wr = cJSON_GetObjectItemCaseSensitive(root, "writer");
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step"), *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
  if (!cJSON_IsObject(root)) BAD("%s: not a JSON object", path);
  else if (cJSON_GetArraySize(root) != 4 || !cJSON_IsString(fmt) || !cJSON_IsString(wr) || !cJSON_IsNumber(step) ||
           !cJSON_IsArray(ranks))
    BAD("%s: it holds exactly format, writer, step and ranks", path);
  else if (strcmp(fmt->valuestring, PF_CKPT_FORMAT) != 0)
    BAD("%s: format '%s' is not %s", path, fmt->valuestring, PF_CKPT_FORMAT);
  else if (!(step->valuedouble >= 0 && step->valuedouble <= 0x1p53 && step->valuedouble == floor(step->valuedouble)))
    BAD("%s: step %.17g is not a count of steps", path, step->valuedouble);
  else if (cJSON_GetArraySize(ranks) < 1 || cJSON_GetArraySize(ranks) > PF_CKPT_MAX_RANKS)
    BAD("%s: %d ranks (1 to %d)", path, cJSON_GetArraySize(ranks), PF_CKPT_MAX_RANKS);
  if (!st) {
    snprintf(out->writer, sizeof out->writer, "%s", wr->valuestring);
    out->step = (uint64_t)step->valuedouble;
    out->nranks = cJSON_GetArraySize(ranks);
  }
  int r = 0;
  for (const cJSON *jr = st ? NULL : ranks->child; jr && !st; jr = jr->next, r++) {
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(jr, "file"), *nums = cJSON_GetObjectItemCaseSensitive(jr, "numbers");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(jr, "tensors");
    char want[64];
    snprintf(want, sizeof want, "rank-%d.safetensors", r);
    if (!cJSON_IsObject(jr) || cJSON_GetArraySize(jr) != 3 || !cJSON_IsString(file) || !cJSON_IsObject(nums) ||
        !cJSON_IsObject(ts)) {
      BAD("%s: rank %d holds exactly file, numbers and tensors", path, r);
      break;
    }
    if (strcmp(file->valuestring, want) != 0) {
      BAD("%s: rank %d's file is '%s', not %s", path, r, file->valuestring, want);
      break;
    }
    for (const cJSON *n = nums->child; n && !st; n = n->next) {
      double v;
      if (!cJSON_IsString(n) || pf_parse_double(n->valuestring, &v)) BAD("%s: rank %d: number '%s' is not a number", path, r, n->string);
      else st = pf_ckpt_put_number(out, r, n->string, v);
    }
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s/%s", dir, want);
    for (const cJSON *t = ts->child; t && !st; t = t->next) {
      const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype"), *nn = cJSON_GetObjectItemCaseSensitive(t, "n");
      pf_dtype d;
      if (!cJSON_IsObject(t) || cJSON_GetArraySize(t) != 2 || !cJSON_IsString(dt) || pf_dtype_parse(dt->valuestring, &d) ||
          !cJSON_IsNumber(nn) || !(nn->valuedouble >= 0 && nn->valuedouble <= 0x1p40 && nn->valuedouble == floor(nn->valuedouble))) {
        BAD("%s: rank %d: tensor '%s' needs a dtype (fp32, fp16, bf16) and a length n", path, r, t->string);
        break;
      }
      pf_tensorfile tf;
      if ((st = pf_tensorfile_read(tpath, t->string, &tf))) break;
      if (tf.dtype != d || tf.ndims != 1 || tf.n != (size_t)nn->valuedouble)
        BAD("%s: rank %d: tensor '%s' is %s of %zu values in %d dimensions, declared %s of %.0f in 1", tpath, r, t->string,
            pf_dtype_name(tf.dtype), tf.n, tf.ndims, dt->valuestring, nn->valuedouble);
      else st = pf_ckpt_put_tensor(out, r, t->string, d, tf.data, tf.n);
      pf_tensorfile_free(&tf);
    }
  }
#undef BAD
  cJSON_Delete(root);
  if (!st) out->nranks = r;
  if (st) pf_checkpoint_free(out);
  return st;
}
