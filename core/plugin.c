/* Loading a user's kernels (plugin.h). */
#include "core/plugin.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec_kernel.h"
#include "core/kernel.h"

static char pf_flags[32768]; /* " --kernels PATH" per library loaded */

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

/* s for a shell: as it is when every character is plain, else in single quotes */
void pf_shell_quote(char *dst, size_t len, const char *s) {
  int plain = *s != 0;
  for (const char *c = s; *c; c++)
    plain &= (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("_./:=+-,@%", *c);
  if (plain) {
    snprintf(dst, len, "%s", s);
    return;
  }
  size_t at = 0;
  if (len < 3) return;
  dst[at++] = '\'';
  for (const char *c = s; *c && at + 6 < len; c++) {
    if (*c == '\'') memcpy(dst + at, "'\\''", 4), at += 4;
    else dst[at++] = *c;
  }
  dst[at++] = '\'';
  dst[at] = 0;
}

/* The precfuzz beside the running program (precfuzz itself, precision-report and the fuzz
 * drivers are built into one directory), by its full path, else "precfuzz" (on PATH). */
static char pf_self_text[4200] = "precfuzz";
static void pf_self_find(void) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 16);
  if (n <= 0) return;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  strcpy(slash + 1, "precfuzz");
  if (access(exe, X_OK) == 0) pf_shell_quote(pf_self_text, sizeof pf_self_text, exe);
}

const char *pf_self(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, pf_self_find);
  return pf_self_text;
}

void pf_path_absolute(char *dst, size_t len, const char *path) {
  char cwd[4096];
  if (path[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(dst, len, "%s", path);
  else snprintf(dst, len, "%s/%s", strcmp(cwd, "/") ? cwd : "", path);
}

void pf_replay_path(char *dst, size_t len, const char *path) {
  char abs[4200];
  pf_path_absolute(abs, sizeof abs, path);
  pf_shell_quote(dst, len, abs);
}

/* spec as a replay line gives it, to run from any directory: a library by its absolute path;
 * a kernel process's or rank group's command run in the directory it was started from
 * (exec:cd DIR && CMD), where its relative paths and modules are found. */
static void pf_spec_replayable(char *dst, size_t len, const char *spec) {
  const char *cmd = NULL;
  if (strncmp(spec, "exec:", 5) == 0) cmd = spec + 5;
  else if (strncmp(spec, "ranks:", 6) == 0 && strchr(spec + 6, ':')) cmd = strchr(spec + 6, ':') + 1;
  char cwd[4096], q[8300];
  if (!cmd) {
    pf_path_absolute(dst, len, spec);
  } else if (strncmp(cmd, "cd ", 3) == 0 || !getcwd(cwd, sizeof cwd)) {
    snprintf(dst, len, "%s", spec);
  } else {
    pf_shell_quote(q, sizeof q, cwd);
    snprintf(dst, len, "%.*scd %s && %s", (int)(cmd - spec), spec, q, cmd);
  }
}

/* The kernels registered since `before` came from spec; " --kernels SPEC" joins the flags,
 * as it runs from any directory (pf_spec_replayable), quoted for the shell where it needs to be
 * (exec:"python3 k.py"). */
static void pf_plugin_record(const char *spec, size_t before) {
  char *kept = strdup(spec);
  for (size_t i = before; i < pf_kernel_count() && pf_norigin < PF_MAX_PLUGIN_KERNELS && kept; i++)
    pf_origin[pf_norigin].k = pf_kernel_at(i), pf_origin[pf_norigin++].path = kept;
  char r[8600], q[17400];
  pf_spec_replayable(r, sizeof r, spec);
  pf_shell_quote(q, sizeof q, r);
  const size_t at = strlen(pf_flags);
  snprintf(pf_flags + at, sizeof pf_flags - at, " --kernels %s", q);
}

pf_status pf_plugin_load(const char *path) {
  if (!path || !*path) return pf_error(PF_ERR_ARG, "an empty library path");
  if (strncmp(path, "exec:", 5) == 0) { /* a kernel process */
    const size_t before = pf_kernel_count();
    pf_status st = pf_exec_load(path + 5);
    if (!st) pf_plugin_record(path, before);
    return st;
  }
  if (strncmp(path, "ranks:", 6) == 0) { /* a rank group: ranks:N:CMD */
    const char *n = path + 6, *colon = strchr(n, ':');
    int ranks = 0;
    for (const char *q = n; colon && q < colon && ranks <= 64; q++)
      ranks = isdigit((unsigned char)*q) ? ranks * 10 + (*q - '0') : 1000;
    if (!colon || colon == n || ranks < 2 || ranks > 8)
      return pf_error(PF_ERR_ARG, "'%.80s': a rank group is ranks:N:CMD with N from 2 to 8", path);
    const size_t before = pf_kernel_count();
    pf_status st = pf_exec_load_ranks(colon + 1, ranks);
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
    return pf_error(PF_ERR_ARG, "%s has no pf_plugin_init (see core/plugin.h)", path);
  }
  const size_t before = pf_kernel_count();
  pf_kernel_register_copies(1); /* a kernel registered from the plugin's stack outlives its frame */
  pf_status st = init();
  pf_kernel_register_copies(0);
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
    if ((end = strncmp(p, "exec:", 5) && strncmp(p, "ranks:", 6) ? strchr(p, ':') : NULL)) *end = 0;
    st = *p ? pf_plugin_load(p) : pf_error(PF_ERR_ARG, "an empty entry in '%s' (libraries are ':'-separated)", e);
  }
  free(list);
  return st;
}
