/* A user's kernels from shared objects: each library defines
 *
 *   pf_status pf_plugin_init(void);
 *
 * which registers its kernel variants with pf_kernel_register (core/kernel.h): variants of
 * a built-in operation (judged by its MPFR oracle) or operations of its own. The library
 * calls back into precfuzz (the executables export their symbols), e.g. pf_kernel_find to
 * reuse a built-in variant's bound and domain. examples/ holds one (docs/own-kernels.md). */
#ifndef PF_PLUGIN_H
#define PF_PLUGIN_H

#include <stddef.h>

#include "core/status.h"

/* Loads one library and runs its pf_plugin_init; PF_ERR_ARG with one line when the file
 * cannot be loaded, has no pf_plugin_init, registers nothing or fails. A path without a '/'
 * is taken relative to the current directory (not the system's library path).
 * "exec:CMD" starts a kernel process instead (core/exec_kernel.h). */
pf_status pf_plugin_load(const char *path);

/* Loads every library named in $PRECFUZZ_KERNELS (':'-separated; an "exec:CMD" entry takes
 * the rest of the list), once per process. */
pf_status pf_plugins_load_env(void);

/* The library (as named when loaded) that registered k; NULL for a built-in kernel. */
struct pf_kernel;
const char *pf_plugin_of(const struct pf_kernel *k);

/* " --kernels PATH" for every library loaded so far ("" for none): the replay commands
 * printed with findings put it after "precfuzz". */
const char *pf_plugins_flags(void);
/* The precfuzz command a printed replay line starts with: the precfuzz beside the running
 * program by its full path (quoted for a shell where it needs to be), or "precfuzz". */
const char *pf_self(void);
/* s for a shell: as it is when every character is plain, else in single quotes. */
void pf_shell_quote(char *dst, size_t len, const char *s);
/* path as a replay line names it: absolute (a relative one joined to the working directory),
 * so that the line runs pasted into any shell in any directory; not quoted. */
void pf_path_absolute(char *dst, size_t len, const char *path);
/* The same, quoted for a shell where it needs to be. */
void pf_replay_path(char *dst, size_t len, const char *path);

#endif
