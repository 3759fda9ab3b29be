/* precfuzz minimize, the command (the minimizer: cli/minimize.h). */
#ifndef PF_CLI_MINIMIZE_CMD_H
#define PF_CLI_MINIMIZE_CMD_H

/* precfuzz minimize FILE [-o OUT] [--driver NAME] [--fault NAME] */
int pf_cmd_minimize(int argc, char **argv);

#endif
