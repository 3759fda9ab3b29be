/* Loading a user's kernels (plugin.h). */
#include "harness/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exec_kernel.h"
#include "kernels/kernel.h"

static char pf_flags[4096]; /* " --kernels PATH" per library loaded */

/* which library registered which kernel */
#define PF_MAX_PLUGIN_KERNELS 256
static struct {
  const pf_kernel *k;
  const char *path;
} pf_origin[PF_MAX_PLUGIN_KERNELS];
static size_t pf_norigin;

const char *pf_plugin_of(const pf_kernel *k) {
  for (size_t i = 0; i < pf_norigin; i++)
    if (pf_origin[i].k == k) return pf_origin[i].path;
  return NULL;
}

const char *pf_plugins_flags(void) { return pf_flags; }

/* The kernels registered since `before` came from spec; " --kernels SPEC" joins the flags,
 * quoted for the shell where it needs to be (exec:"python3 k.py"). */
static void pf_plugin_record(const char *spec, size_t before) {
  char *kept = strdup(spec);
  for (size_t i = before; i < pf_kernel_count() && pf_norigin < PF_MAX_PLUGIN_KERNELS && kept; i++)
    pf_origin[pf_norigin].k = pf_kernel_at(i), pf_origin[pf_norigin++].path = kept;
  size_t at = strlen(pf_flags);
  int plain = 1;
  for (const char *c = spec; *c; c++)
    plain &= (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("_./:=+-,@%", *c);
  at += (size_t)snprintf(pf_flags + at, sizeof pf_flags - at, plain ? " --kernels %s" : " --kernels '", spec);
  for (const char *c = spec; !plain && *c && at + 5 < sizeof pf_flags; c++) {
    if (*c == '\'') at += (size_t)snprintf(pf_flags + at, sizeof pf_flags - at, "'\\''");
    else pf_flags[at++] = *c, pf_flags[at] = 0;
  }
  if (!plain && at + 1 < sizeof pf_flags) pf_flags[at++] = '\'', pf_flags[at] = 0;
}

pf_status pf_plugin_load(const char *path) {
  if (!path || !*path) return pf_error(PF_ERR_ARG, "an empty library path");
  if (strncmp(path, "exec:", 5) == 0) { /* a kernel process */
    const size_t before = pf_kernel_count();
    pf_status st = pf_exec_load(path + 5);
    if (!st) pf_plugin_record(path, before);
    return st;
  }
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s%s", strchr(path, '/') ? "" : "./", path) >= (int)sizeof buf)
    return pf_error(PF_ERR_ARG, "library path too long");
  dlerror();
  void *h = dlopen(buf, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    /* dlerror's text can span lines; the message stays on one */
    char one[512];
    snprintf(one, sizeof one, "%s", e ? e : "unknown error");
    for (char *p = one; *p; p++)
      if (*p == '\n') *p = ' ';
    return pf_error(PF_ERR_ARG, "cannot load %s: %s", path, one);
  }
  pf_status (*init)(void);
  *(void **)&init = dlsym(h, "pf_plugin_init");
  if (!init) {
    dlclose(h);
    return pf_error(PF_ERR_ARG, "%s has no pf_plugin_init (see harness/plugin.h)", path);
  }
  const size_t before = pf_kernel_count();
  pf_status st = init();
  if (st) {
    /* registered kernels point into the library: it stays loaded */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pf_error_message());
    return pf_error(st, "%s: pf_plugin_init failed: %s", path, msg);
  }
  if (pf_kernel_count() == before) {
    dlclose(h);
    return pf_error(PF_ERR_ARG, "%s registered no kernel", path);
  }
  pf_plugin_record(path, before);
  return PF_OK; /* the library stays loaded for the process's life */
}

pf_status pf_plugins_load_env(void) {
  static int done;
  if (done) return PF_OK;
  done = 1;
  const char *e = getenv("PRECFUZZ_KERNELS");
  if (!e || !*e) return PF_OK;
  char *list = strdup(e);
  if (!list) return pf_error(PF_ERR_NOMEM, "out of memory");
  pf_status st = PF_OK;
  for (char *p = list, *end; p && !st; p = end ? end + 1 : NULL) {
    /* an exec: entry is a command, which may hold ':': it takes the rest */
    if ((end = strncmp(p, "exec:", 5) ? strchr(p, ':') : NULL)) *end = 0;
    st = *p ? pf_plugin_load(p) : pf_error(PF_ERR_ARG, "an empty entry in '%s' (libraries are ':'-separated)", e);
  }
  free(list);
  return st;
}
