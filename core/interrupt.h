/* Ctrl-C (SIGINT) and SIGTERM. A command that can stop between cases (run) polls pf_interrupted
 * and stops there, saying what it has; any other command ends at once, by the signal, after
 * removing the temporary file of a write in progress (pf_write_file_atomic): a file that
 * existed keeps its old bytes and none is left half-written. A second signal ends at once. */
#ifndef PF_INTERRUPT_H
#define PF_INTERRUPT_H

void pf_interrupt_install(void);
/* 1: the command polls pf_interrupted() and stops cleanly (the first signal only sets it). */
void pf_interrupt_polled(int on);
/* The signal received while polled (SIGINT or SIGTERM), or 0. */
int pf_interrupted(void);
/* The temporary file a write is making (NULL: none), removed if the process is ended. */
void pf_interrupt_tmp(const char *path);
/* A kernel process group (its leader's pid) started (on) or ended (off): a signal ends every
 * group at once (SIGKILL to the group), whether the command stops after its case or at once,
 * so that no kernel process outlives the run or holds it up to its timeout. */
void pf_interrupt_group(int pgid, int on);

#endif
