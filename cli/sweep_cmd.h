/* precfuzz sweep, the command (the sweep itself: cli/sweep.h). */
#ifndef PF_CLI_SWEEP_CMD_H
#define PF_CLI_SWEEP_CMD_H

#include "cli/sweep.h"

/* --backend for the sweep: parsed, and for cuda the device checked; 0 or an exit status. */
int pf_sweep_backend(pf_sweep_opts *o, const char *backend);
/* precfuzz sweep [-o results.json] [...] */
int pf_cmd_sweep(int argc, char **argv);

#endif
