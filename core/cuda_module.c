/* Loads the CUDA kernels' module (cuda_module.h) on first use and finds the entry points the
 * operations call in it. Where it is looked for: $PRECFUZZ_CUDA_MODULE (a path), else
 * ../lib/precfuzz-cuda.so beside the running executable (the build tree's and an installed
 * tree's layout). A build without CUDA has only pf_cuda_describe (backend.c), which says so. */
#ifdef PF_HAVE_CUDA
#include "core/cuda_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"

static const pf_cuda_module *pf_cuda_mod;
static char pf_cuda_why[PATH_MAX + 256];
static pthread_once_t pf_cuda_once = PTHREAD_ONCE_INIT;

/* What the module calls back: named here so that every executable holding the loader links
 * it in (and exports it); an operation's own callbacks are in its object file, linked with its
 * registration. */
void *const pf_cuda_module_needs[] = {(void *)pf_error};

static void pf_cuda_load(void) {
  char path[PATH_MAX];
  const char *env = getenv("PRECFUZZ_CUDA_MODULE");
  if (env && *env) {
    snprintf(path, sizeof path, "%s", env);
  } else {
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    char *slash = n > 0 ? (path[n] = 0, strrchr(path, '/')) : NULL;
    if (!slash || (size_t)(slash - path) + sizeof "/../lib/precfuzz-cuda.so" > sizeof path) {
      snprintf(pf_cuda_why, sizeof pf_cuda_why, "cannot find the running executable to find precfuzz-cuda.so beside "
                                                "it (set PRECFUZZ_CUDA_MODULE)");
      return;
    }
    strcpy(slash, "/../lib/precfuzz-cuda.so");
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(pf_cuda_why, sizeof pf_cuda_why, "cannot load the CUDA kernels: %s", dlerror());
    return;
  }
  const pf_cuda_module *(*get)(void);
  *(void **)&get = dlsym(h, "pf_cuda_module_get");
  const pf_cuda_module *m = get ? get() : NULL;
  if (!m || m->abi != PF_CUDA_MODULE_ABI) {
    snprintf(pf_cuda_why, sizeof pf_cuda_why, "%s is not this build's CUDA module (no table, or ABI %d, not %d)", path,
             m ? m->abi : -1, PF_CUDA_MODULE_ABI);
    dlclose(h);
    return;
  }
  pf_cuda_mod = m; /* kept loaded for the process's life */
}

static pf_status pf_cuda_get(const pf_cuda_module **m) {
  pthread_once(&pf_cuda_once, pf_cuda_load);
  if (!pf_cuda_mod) return pf_error(PF_ERR_NODEVICE, "--backend cuda: %s", pf_cuda_why);
  *m = pf_cuda_mod;
  return PF_OK;
}

pf_status pf_cuda_describe(char *buf, size_t len) {
  const pf_cuda_module *m = NULL;
  if (len) buf[0] = 0;
  const pf_status st = pf_cuda_get(&m);
  return st ? st : m->describe(buf, len);
}
pf_status pf_cuda_entry(const char *name, void **fn) {
  const pf_cuda_module *m = NULL;
  const pf_status st = pf_cuda_get(&m);
  if (st) return st;
  if (!(*fn = m->entry(name)))
    return pf_error(PF_ERR_NODEVICE, "--backend cuda: the CUDA module has no %s (a module of another build?)", name);
  return PF_OK;
}
#endif
