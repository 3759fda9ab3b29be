#define _XOPEN_SOURCE 700 /* realpath, strndup */
/* Tensor files (tensorfile.h): .npy and safetensors. */
#include "tensorfile.h"

#include "interrupt.h"
#include "jsonfile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PF_NPY_MAX_HEADER 65536          /* numpy itself refuses more than 10000 by default */
#define PF_ST_MAX_HEADER 100000000ull    /* safetensors' own limit */

void pf_sha256_hex(const unsigned char *buf, size_t len, char hex[65]) {
  struct sha256_ctx ctx;
  uint8_t d[SHA256_DIGEST_SIZE];
  sha256_init(&ctx);
  sha256_update(&ctx, len, buf);
  sha256_digest(&ctx, sizeof d, d);
  for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

void pf_tensorfile_free(pf_tensorfile *t) {
  free(t->data);
  memset(t, 0, sizeof *t);
}

static size_t pf_itemsize(pf_dtype t) { return t == PF_FP32 ? 4 : 2; }

/* n = product of shape, with overflow and a sanity cap (the bytes must exist in the file). */
static int pf_shape_count(const size_t *shape, int ndims, size_t *n) {
  size_t m = 1;
  for (int d = 0; d < ndims; d++) {
    if (shape[d] && m > SIZE_MAX / 8 / shape[d]) return -1;
    m *= shape[d];
  }
  *n = m;
  return 0;
}

/* Little- or big-endian words of 2 or 4 bytes -> doubles of t. */
static void pf_decode_words(pf_dtype t, const unsigned char *p, size_t n, int big, double *out) {
  const size_t w = pf_itemsize(t);
  for (size_t i = 0; i < n; i++, p += w) {
    uint32_t b = 0;
    for (size_t k = 0; k < w; k++) b |= (uint32_t)p[big ? w - 1 - k : k] << (8 * k);
    out[i] = pf_decode(t, b);
  }
}

/* ---- .npy ---------------------------------------------------------------------------- */

typedef struct {
  const char *p, *end;
} pf_lit;

static void pf_lit_ws(pf_lit *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t')) l->p++;
}
static int pf_lit_eat(pf_lit *l, char ch) {
  pf_lit_ws(l);
  if (l->p < l->end && *l->p == ch) { l->p++; return 1; }
  return 0;
}
/* A quoted Python string without escapes. */
static int pf_lit_str(pf_lit *l, char *out, size_t cap) {
  pf_lit_ws(l);
  if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return -1;
  const char q = *l->p++;
  size_t n = 0;
  while (l->p < l->end && *l->p != q) {
    if (*l->p == '\\' || n + 1 >= cap) return -1;
    out[n++] = *l->p++;
  }
  if (l->p >= l->end) return -1;
  l->p++;
  out[n] = 0;
  return 0;
}

static pf_status pf_npy_parse(const unsigned char *buf, size_t len, const char *what, pf_tensorfile *out) {
  if (len < 10) return pf_error(PF_ERR_PARSE, "%s: truncated .npy file (%zu bytes)", what, len);
  const int major = buf[6];
  if (major < 1 || major > 3 || buf[7] != 0)
    return pf_error(PF_ERR_PARSE, "%s: .npy format version %d.%d is not 1.0, 2.0 or 3.0", what, buf[6], buf[7]);
  size_t hlen, hstart;
  if (major == 1) hlen = (size_t)buf[8] | (size_t)buf[9] << 8, hstart = 10;
  else {
    if (len < 12) return pf_error(PF_ERR_PARSE, "%s: truncated .npy file (%zu bytes)", what, len);
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24, hstart = 12;
  }
  if (hlen > PF_NPY_MAX_HEADER)
    return pf_error(PF_ERR_PARSE, "%s: .npy header of %zu bytes is larger than %d", what, hlen, PF_NPY_MAX_HEADER);
  if (hlen > len - hstart) return pf_error(PF_ERR_PARSE, "%s: truncated .npy header", what);
  pf_lit l = {(const char *)buf + hstart, (const char *)buf + hstart + hlen};
  for (const char *c = l.p; c < l.end; c++)
    if (*c == 0) return pf_error(PF_ERR_PARSE, "%s: a NUL byte in the .npy header", what);
  char descr[16] = "";
  int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
  if (!pf_lit_eat(&l, '{')) return pf_error(PF_ERR_PARSE, "%s: the .npy header is not a dictionary", what);
  while (!pf_lit_eat(&l, '}')) {
    char key[32];
    if (pf_lit_str(&l, key, sizeof key) || !pf_lit_eat(&l, ':'))
      return pf_error(PF_ERR_PARSE, "%s: malformed .npy header", what);
    if (strcmp(key, "descr") == 0 && !have_descr) {
      if (pf_lit_str(&l, descr, sizeof descr)) return pf_error(PF_ERR_PARSE, "%s: .npy 'descr' is not a simple type", what);
      have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
      pf_lit_ws(&l);
      if ((size_t)(l.end - l.p) >= 4 && memcmp(l.p, "True", 4) == 0) fortran = 1, l.p += 4;
      else if ((size_t)(l.end - l.p) >= 5 && memcmp(l.p, "False", 5) == 0) l.p += 5;
      else return pf_error(PF_ERR_PARSE, "%s: .npy 'fortran_order' is not True or False", what);
      have_fortran = 1;
    } else if (strcmp(key, "shape") == 0 && !have_shape) {
      if (!pf_lit_eat(&l, '(')) return pf_error(PF_ERR_PARSE, "%s: .npy 'shape' is not a tuple", what);
      out->ndims = 0;
      while (!pf_lit_eat(&l, ')')) {
        pf_lit_ws(&l);
        if (l.p >= l.end || *l.p < '0' || *l.p > '9' || out->ndims == PF_TF_MAX_DIMS)
          return pf_error(PF_ERR_PARSE, "%s: .npy 'shape' is not a tuple of at most %d sizes", what, PF_TF_MAX_DIMS);
        size_t v = 0;
        while (l.p < l.end && *l.p >= '0' && *l.p <= '9') {
          if (v > (SIZE_MAX - 9) / 10) return pf_error(PF_ERR_PARSE, "%s: .npy shape too large", what);
          v = v * 10 + (size_t)(*l.p++ - '0');
        }
        out->shape[out->ndims++] = v;
        if (!pf_lit_eat(&l, ',')) {
          if (!pf_lit_eat(&l, ')')) return pf_error(PF_ERR_PARSE, "%s: malformed .npy 'shape'", what);
          break;
        }
      }
      have_shape = 1;
    } else {
      return pf_error(PF_ERR_PARSE, "%s: .npy header: unexpected or repeated key '%s'", what, key);
    }
    if (!pf_lit_eat(&l, ',')) {
      if (!pf_lit_eat(&l, '}')) return pf_error(PF_ERR_PARSE, "%s: malformed .npy header", what);
      break;
    }
  }
  pf_lit_ws(&l);
  if (l.p < l.end && *l.p == '\n') l.p++;
  if (l.p != l.end) return pf_error(PF_ERR_PARSE, "%s: trailing text in the .npy header", what);
  if (!have_descr || !have_fortran || !have_shape)
    return pf_error(PF_ERR_PARSE, "%s: the .npy header lacks '%s'", what,
                    !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
  int big = 0;
  if (strcmp(descr, "<f4") == 0 || strcmp(descr, ">f4") == 0) out->dtype = PF_FP32, big = descr[0] == '>';
  else if (strcmp(descr, "<f2") == 0 || strcmp(descr, ">f2") == 0) out->dtype = PF_FP16, big = descr[0] == '>';
  else if (strcmp(descr, "|V2") == 0 || strcmp(descr, "<V2") == 0) out->dtype = PF_BF16; /* ml_dtypes.bfloat16 */
  else
    return pf_error(PF_ERR_PARSE, "%s: .npy dtype '%s' is not float32 ('<f4'), float16 ('<f2') or bfloat16 ('|V2')",
                    what, descr);
  if (pf_shape_count(out->shape, out->ndims, &out->n))
    return pf_error(PF_ERR_PARSE, "%s: .npy shape too large", what);
  const size_t have = len - hstart - hlen, need = out->n * pf_itemsize(out->dtype);
  if (have < need) return pf_error(PF_ERR_PARSE, "%s: truncated .npy data (%zu of %zu bytes)", what, have, need);
  if (have > need) return pf_error(PF_ERR_PARSE, "%s: %zu bytes after the .npy data", what, have - need);
  out->data = malloc((out->n ? out->n : 1) * sizeof(double));
  if (!out->data) return pf_error(PF_ERR_NOMEM, "%s: cannot hold %zu values", what, out->n);
  const unsigned char *p = buf + hstart + hlen;
  if (!fortran || out->ndims < 2) {
    pf_decode_words(out->dtype, p, out->n, big, out->data);
    return PF_OK;
  }
  /* Fortran order: the first index varies fastest in the file */
  double *tmp = malloc((out->n ? out->n : 1) * sizeof(double));
  if (!tmp) return pf_error(PF_ERR_NOMEM, "%s: cannot hold %zu values", what, out->n);
  pf_decode_words(out->dtype, p, out->n, big, tmp);
  size_t idx[PF_TF_MAX_DIMS] = {0};
  for (size_t f = 0; f < out->n; f++) {
    size_t r = 0;
    for (int d = 0; d < out->ndims; d++) r = r * out->shape[d] + idx[d];
    out->data[r] = tmp[f];
    for (int d = 0; d < out->ndims && ++idx[d] == out->shape[d]; d++) idx[d] = 0;
  }
  free(tmp);
  return PF_OK;
}

/* ---- safetensors ------------------------------------------------------------------- */

static int pf_st_dtype(const char *s, pf_dtype *t) {
  if (strcmp(s, "F32") == 0) *t = PF_FP32;
  else if (strcmp(s, "F16") == 0) *t = PF_FP16;
  else if (strcmp(s, "BF16") == 0) *t = PF_BF16;
  else return -1;
  return 0;
}

static int pf_json_size(const cJSON *v, size_t *out) {
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
      v->valuedouble != (double)(uint64_t)v->valuedouble)
    return -1;
  *out = (size_t)v->valuedouble;
  return 0;
}

typedef struct {
  size_t begin, end;
} pf_span;
static int pf_span_cmp(const void *a, const void *b) {
  const pf_span *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static pf_status pf_st_parse(const unsigned char *buf, size_t len, const char *name, const char *what,
                             pf_tensorfile *out) {
  if (len < 8) return pf_error(PF_ERR_PARSE, "%s: truncated safetensors file (%zu bytes)", what, len);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
  if (n > PF_ST_MAX_HEADER) return pf_error(PF_ERR_PARSE, "%s: safetensors header of %llu bytes is larger than %llu", what, (unsigned long long)n, PF_ST_MAX_HEADER);
  if (n > len - 8) return pf_error(PF_ERR_PARSE, "%s: truncated safetensors header (%llu bytes announced, %zu in the file)", what, (unsigned long long)n, len - 8);
  if (n < 2 || buf[8] != '{') return pf_error(PF_ERR_PARSE, "%s: the safetensors header is not a JSON object", what);
  const char *h = (const char *)buf + 8;
  if (memchr(h, 0, (size_t)n)) return pf_error(PF_ERR_PARSE, "%s: a NUL byte in the safetensors header", what);
  /* read as strictly as a case file: no key twice at any depth, no \u0000 in a name, nothing
   * after the object but whitespace (safetensors pads with spaces) */
  char *text = malloc((size_t)n + 1), hw[600];
  if (!text) return PF_ERR_NOMEM;
  memcpy(text, h, (size_t)n);
  text[n] = 0;
  snprintf(hw, sizeof hw, "%s: the safetensors header", what);
  cJSON *j = NULL;
  const pf_status pst = pf_json_parse_strict(text, hw, &j);
  free(text);
  if (pst) return pst;
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return pf_error(PF_ERR_PARSE, "%s: the safetensors header is not a JSON object", what);
  }
  const size_t data_len = len - 8 - (size_t)n;
  const unsigned char *data = buf + 8 + n;
  pf_status st = PF_OK;
  size_t count = 0, spans_n = 0;
  char names[256] = "";
  const cJSON *chosen = NULL;
  pf_span *spans = calloc((size_t)cJSON_GetArraySize(j) + 1, sizeof *spans);
  if (!spans) { cJSON_Delete(j); return PF_ERR_NOMEM; }
  for (const cJSON *e = j->child; e && !st; e = e->next) {
    for (const cJSON *f = j->child; f != e; f = f->next)
      if (strcmp(f->string, e->string) == 0) st = pf_error(PF_ERR_PARSE, "%s: safetensors header: key '%s' twice", what, e->string);
    if (st) break;
    if (strcmp(e->string, "__metadata__") == 0) {
      for (const cJSON *m = cJSON_IsObject(e) ? e->child : NULL; m; m = m->next)
        if (!cJSON_IsString(m)) st = pf_error(PF_ERR_PARSE, "%s: safetensors __metadata__ values must be strings", what);
      if (!cJSON_IsObject(e)) st = pf_error(PF_ERR_PARSE, "%s: safetensors __metadata__ must be an object", what);
      continue;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"),
                *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || cJSON_GetArraySize(e) != 3 || !cJSON_IsString(dt) || !cJSON_IsArray(sh) ||
        !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
      st = pf_error(PF_ERR_PARSE, "%s: safetensors tensor '%s' needs exactly dtype, shape and data_offsets", what, e->string);
      break;
    }
    pf_dtype t;
    const int dt_ok = pf_st_dtype(dt->valuestring, &t) == 0;
    size_t shape[PF_TF_MAX_DIMS], nd = 0, elems = 1, b, en;
    for (const cJSON *s = sh->child; s && !st; s = s->next, nd++)
      if (nd == PF_TF_MAX_DIMS || pf_json_size(s, &shape[nd]))
        st = pf_error(PF_ERR_PARSE, "%s: safetensors tensor '%s': shape is not at most %d sizes", what, e->string, PF_TF_MAX_DIMS);
    if (st) break;
    if (pf_shape_count(shape, (int)nd, &elems)) { st = pf_error(PF_ERR_PARSE, "%s: tensor '%s': shape too large", what, e->string); break; }
    if (pf_json_size(off->child, &b) || pf_json_size(off->child->next, &en) || b > en || en > data_len) {
      st = pf_error(PF_ERR_PARSE, "%s: safetensors tensor '%s': data_offsets outside the %zu data bytes (truncated?)", what,
                    e->string, data_len);
      break;
    }
    /* sizes of other dtypes are checked only where they are known */
    if (dt_ok && en - b != elems * pf_itemsize(t)) {
      st = pf_error(PF_ERR_PARSE, "%s: safetensors tensor '%s': %zu bytes for %zu %s values", what, e->string, en - b, elems,
                    dt->valuestring);
      break;
    }
    spans[spans_n++] = (pf_span){b, en};
    if (count++ < 6) {
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", count == 6 ? "..." : e->string);
    }
    if ((name && strcmp(name, e->string) == 0) || (!name && count == 1)) chosen = e;
  }
  if (!st) {
    /* the tensors cover the data bytes, without gaps or overlaps (as safetensors requires) */
    qsort(spans, spans_n, sizeof *spans, pf_span_cmp);
    size_t at = 0;
    for (size_t i = 0; i < spans_n && !st; i++) {
      if (spans[i].begin != at) st = pf_error(PF_ERR_PARSE, "%s: safetensors data has a gap or overlap at byte %zu", what, at);
      at = spans[i].end;
    }
    if (!st && at != data_len) st = pf_error(PF_ERR_PARSE, "%s: %zu safetensors data bytes, tensors cover %zu", what, data_len, at);
  }
  free(spans);
  if (!st && count == 0) st = pf_error(PF_ERR_PARSE, "%s: the safetensors file holds no tensor", what);
  if (!st && name && !chosen) st = pf_error(PF_ERR_ARG, "%s: no tensor '%s' (it holds %s)", what, name, names);
  if (!st && !name && count > 1)
    st = pf_error(PF_ERR_ARG, "%s: holds %zu tensors (%s): name one with tensor=NAME", what, count, names);
  if (!st) {
    const char *dts = cJSON_GetObjectItemCaseSensitive(chosen, "dtype")->valuestring;
    if (pf_st_dtype(dts, &out->dtype))
      st = pf_error(PF_ERR_PARSE, "%s: tensor '%s' is %s, not F32, F16 or BF16", what, chosen->string, dts);
  }
  if (!st) {
    snprintf(out->name, sizeof out->name, "%s", chosen->string);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(chosen, "shape");
    out->ndims = 0;
    for (const cJSON *s = sh->child; s; s = s->next) pf_json_size(s, &out->shape[out->ndims++]);
    pf_shape_count(out->shape, out->ndims, &out->n);
    size_t b = 0;
    pf_json_size(cJSON_GetObjectItemCaseSensitive(chosen, "data_offsets")->child, &b);
    out->data = malloc((out->n ? out->n : 1) * sizeof(double));
    if (!out->data) st = pf_error(PF_ERR_NOMEM, "%s: cannot hold %zu values", what, out->n);
    else pf_decode_words(out->dtype, data + b, out->n, 0, out->data);
  }
  cJSON_Delete(j);
  return st;
}

size_t pf_safetensors_names(const unsigned char *buf, size_t len, char (*names)[PF_TF_NAME_LEN], size_t max) {
  if (len < 8) return 0;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
  if (n > PF_ST_MAX_HEADER || n > len - 8 || n < 2) return 0;
  char *text = malloc((size_t)n + 1);
  if (!text) return 0;
  memcpy(text, buf + 8, (size_t)n);
  text[n] = 0;
  cJSON *j = cJSON_Parse(text);
  free(text);
  size_t count = 0;
  for (const cJSON *e = cJSON_IsObject(j) ? j->child : NULL; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) continue;
    if (count < max) snprintf(names[count], PF_TF_NAME_LEN, "%s", e->string);
    count++;
  }
  cJSON_Delete(j);
  return count;
}

pf_status pf_tensorfile_parse(const unsigned char *buf, size_t len, const char *name, const char *what,
                              pf_tensorfile *out) {
  memset(out, 0, sizeof *out);
  pf_status st;
  if (len >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0) {
    if (name && *name) return pf_error(PF_ERR_ARG, "%s: a .npy file holds one tensor (no tensor=%s)", what, name);
    st = pf_npy_parse(buf, len, what, out);
  } else if (len >= 9 && buf[8] == '{') {
    st = pf_st_parse(buf, len, name, what, out);
  } else {
    return pf_error(PF_ERR_PARSE, "%s: not a .npy or safetensors file", what);
  }
  if (st) {
    pf_tensorfile_free(out);
    return st;
  }
  pf_sha256_hex(buf, len, out->sha256);
  return PF_OK;
}

pf_status pf_tensorfile_read(const char *path, const char *name, pf_tensorfile *out) {
  char *buf = NULL;
  size_t len = 0;
  memset(out, 0, sizeof *out);
  pf_status st = pf_read_file(path, &buf, &len);
  if (st) return st;
  st = pf_tensorfile_parse((const unsigned char *)buf, len, name, path, out);
  free(buf);
  return st;
}

/* ---- writing ------------------------------------------------------------------------- */

static pf_status pf_check_view(const pf_tensor_view *t, size_t *n) {
  *n = 0;
  if (t->ndims < 0 || t->ndims > PF_TF_MAX_DIMS || pf_shape_count(t->shape, t->ndims, n))
    return pf_error(PF_ERR_ARG, "tensor '%s': bad shape", t->name ? t->name : "");
  return PF_OK;
}

static void pf_encode_words(pf_dtype t, const double *x, size_t n, unsigned char *p) {
  const size_t w = pf_itemsize(t);
  for (size_t i = 0; i < n; i++, p += w) {
    const uint32_t b = pf_encode(t, x[i], PF_RN, 0);
    for (size_t k = 0; k < w; k++) p[k] = (unsigned char)(b >> (8 * k));
  }
}

pf_status pf_npy_encode(const pf_tensor_view *t, unsigned char **out, size_t *len) {
  size_t n;
  pf_status st = pf_check_view(t, &n);
  if (st) return st;
  char dict[256];
  int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   t->dtype == PF_FP32 ? "<f4" : t->dtype == PF_FP16 ? "<f2" : "|V2");
  for (int d = 0; d < t->ndims; d++) k += snprintf(dict + k, sizeof dict - (size_t)k, "%zu,%s", t->shape[d], d + 1 < t->ndims ? " " : "");
  if (t->ndims > 1) k--; /* numpy writes (3,) but (2, 3) */
  k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
  size_t hlen = (size_t)k + 1; /* and '\n' */
  const size_t total_h = (10 + hlen + 63) / 64 * 64;
  hlen = total_h - 10;
  const size_t bytes = n * pf_itemsize(t->dtype);
  unsigned char *buf = malloc(total_h + bytes);
  if (!buf) return pf_error(PF_ERR_NOMEM, "cannot encode %zu values", n);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(hlen & 0xff);
  buf[9] = (unsigned char)(hlen >> 8);
  memset(buf + 10, ' ', hlen);
  memcpy(buf + 10, dict, (size_t)k);
  buf[total_h - 1] = '\n';
  pf_encode_words(t->dtype, t->data, n, buf + total_h);
  *out = buf;
  *len = total_h + bytes;
  return PF_OK;
}

pf_status pf_write_file_atomic(const char *path, const void *buf, size_t len) {
  const size_t pl = strlen(path);
  char *tmp = malloc(pl + 16);
  if (!tmp) return PF_ERR_NOMEM;
  snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
  /* made and registered with the signals held: removed if one ends the process before the rename */
  sigset_t hold, was;
  sigemptyset(&hold);
  sigaddset(&hold, SIGINT);
  sigaddset(&hold, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &hold, &was);
  const int fd = mkstemp(tmp);
  const int mk_errno = errno;
  if (fd >= 0) pf_interrupt_tmp(tmp);
  pthread_sigmask(SIG_SETMASK, &was, NULL);
  if (fd < 0) {
    pf_status st = pf_error(PF_ERR_IO, "%s: cannot write (%s)", path, strerror(mk_errno));
    free(tmp);
    return st;
  }
  /* mkstemp's 0600, widened to what the umask allows, as fopen would have made it */
  const mode_t mask = umask(0);
  umask(mask);
  FILE *f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "wb") : NULL;
  int ok = f && fwrite(buf, 1, len, f) == len;
  int err = errno;
  if (f) {
    if (fclose(f) != 0 && ok) ok = 0, err = errno;
  } else {
    close(fd);
  }
  if (ok && rename(tmp, path) != 0) ok = 0, err = errno;
  if (!ok) unlink(tmp);
  pf_interrupt_tmp(NULL);
  free(tmp);
  return ok ? PF_OK : pf_error(PF_ERR_IO, "%s: write failed (%s)", path, strerror(err));
}

pf_status pf_write_file_atomic_probe(const char *path) {
  struct stat sb;
  if (!*path) return pf_error(PF_ERR_IO, "no file name given");
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return pf_error(PF_ERR_IO, "%s: is a directory", path);
  const size_t pl = strlen(path);
  char *tmp = malloc(pl + 16);
  if (!tmp) return PF_ERR_NOMEM;
  snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
  const int fd = mkstemp(tmp);
  pf_status st = PF_OK;
  if (fd < 0) st = pf_error(PF_ERR_IO, "%s: cannot write (%s)", path, strerror(errno));
  else pf_interrupt_tmp(tmp), close(fd), unlink(tmp), pf_interrupt_tmp(NULL);
  free(tmp);
  return st;
}

/* path with its directory resolved (realpath), or a copy of it when that cannot be: malloc'd */
static char *pf_resolved(const char *path) {
  char *full = realpath(path, NULL);
  if (full) return full;
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
  char *rdir = dir ? realpath(dir, NULL) : NULL;
  free(dir);
  const char *base = slash ? slash + 1 : path;
  if (!rdir) return strdup(path);
  const size_t n = strlen(rdir) + strlen(base) + 2;
  char *out = malloc(n);
  if (out) snprintf(out, n, "%s/%s", rdir, base);
  free(rdir);
  return out;
}

int pf_same_file(const char *a, const char *b) {
  if (!a || !b || strcmp(a, "-") == 0 || strcmp(b, "-") == 0) return 0; /* standard output is no file */
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char *ra = pf_resolved(a), *rb = pf_resolved(b);
  const int same = ra && rb ? strcmp(ra, rb) == 0 : strcmp(a, b) == 0;
  free(ra), free(rb);
  return same;
}

pf_status pf_npy_write(const char *path, const pf_tensor_view *t) {
  unsigned char *buf;
  size_t len;
  pf_status st = pf_npy_encode(t, &buf, &len);
  if (st) return st;
  st = pf_write_file_atomic(path, buf, len);
  free(buf);
  return st;
}

pf_status pf_safetensors_write(const char *path, const pf_tensor_view *ts, size_t count) {
  cJSON *h = cJSON_CreateObject();
  size_t off = 0;
  pf_status st = PF_OK;
  for (size_t i = 0; i < count && !st; i++) {
    size_t n;
    if ((st = pf_check_view(&ts[i], &n))) break;
    if (!ts[i].name || !*ts[i].name || cJSON_GetObjectItemCaseSensitive(h, ts[i].name)) {
      st = pf_error(PF_ERR_ARG, "safetensors: tensor names must be unique and non-empty");
      break;
    }
    cJSON *e = cJSON_AddObjectToObject(h, ts[i].name);
    cJSON_AddStringToObject(e, "dtype", ts[i].dtype == PF_FP32 ? "F32" : ts[i].dtype == PF_FP16 ? "F16" : "BF16");
    cJSON *sh = cJSON_AddArrayToObject(e, "shape");
    for (int d = 0; d < ts[i].ndims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)ts[i].shape[d]));
    cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
    off += n * pf_itemsize(ts[i].dtype);
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
  }
  char *text = st ? NULL : cJSON_PrintUnformatted(h);
  cJSON_Delete(h);
  if (st) return st;
  if (!text) return PF_ERR_NOMEM;
  const size_t tl = strlen(text), hl = (tl + 7) / 8 * 8;
  unsigned char *buf = malloc(8 + hl + off);
  if (!buf) { free(text); return PF_ERR_NOMEM; }
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memset(buf + 8, ' ', hl);
  memcpy(buf + 8, text, tl);
  free(text);
  unsigned char *p = buf + 8 + hl;
  for (size_t i = 0; i < count; i++) {
    size_t n = 0;
    pf_shape_count(ts[i].shape, ts[i].ndims, &n);
    pf_encode_words(ts[i].dtype, ts[i].data, n, p);
    p += n * pf_itemsize(ts[i].dtype);
  }
  st = pf_write_file_atomic(path, buf, 8 + hl + off);
  free(buf);
  return st;
}
