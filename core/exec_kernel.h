/* Kernels in any language: a command that precfuzz starts once and talks to over its standard
 * input and output, case after case (the protocol: docs/kernel-protocol.md). Its variants are
 * registered like a plugin's (--kernels exec:CMD) and judged like built-in ones; a process that
 * crashes, hangs or answers with outputs of another dtype or shape gives the verdict "failed"
 * (PF_ERR_KERNEL from its run function) and is started again for the next case. */
#ifndef PF_EXEC_KERNEL_H
#define PF_EXEC_KERNEL_H

#include "core/status.h"

#define PF_EXEC_PROTOCOL 1

/* Starts cmd (with /bin/sh -c), reads its hello and registers the kernels it names, each with
 * the contract of the built-in variant it is like. PF_ERR_ARG with one line when the command
 * cannot start, says no valid hello within the timeout, or names a kernel badly. */
pf_status pf_exec_load(const char *cmd);

/* The same for a rank group (--kernels ranks:N:CMD): N copies of cmd in one process group,
 * each with torch.distributed's environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR=127.0.0.1, a free MASTER_PORT, GLOO_SOCKET_IFNAME=lo, PRECFUZZ_PID). Rank 0 speaks the protocol;
 * the others read nothing and write to precfuzz's stderr. A rank that exits or a group that
 * hangs fails the case; the whole group is killed and started again. nranks 1 is pf_exec_load. */
pf_status pf_exec_load_ranks(const char *cmd, int nranks);

struct pf_kernel;
/* Whether k is a kernel process's (or a rank group's) variant. */
int pf_exec_is_process(const struct pf_kernel *k);

/* $PRECFUZZ_KERNEL_TIMEOUT: seconds a kernel process may take to say hello and to answer one
 * case (default 60). PF_ERR_ARG when it is not a number in (0, 86400]. */
pf_status pf_exec_timeout(double *seconds);

#endif
