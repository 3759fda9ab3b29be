/* What precfuzz's commands share beyond the case options (cli/caseopts.h): the getopt
 * table of the options that build a case, --threads and --backend. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/caseopts.h"

/* Options of the commands that build cases (getopt_long values). */
enum { O_SHAPE = 256, O_SCALE, O_DIST, O_SEED, O_CASES, O_FAULT, O_BACKEND, O_JSON, O_SAVE, O_PARAM,
       O_OUTLIERS, O_OUTMAG, O_SPECIAL, O_EXPRANGE, O_PREC, O_MAXPRINT, O_INPUT,
       O_ALONG, O_FROM, O_TO, O_FAIL, O_POINTS, O_FORMAT, O_REFINE, O_TENSORS, O_IMPRECISE, O_ORACLE, O_THREADS, O_MAXSECS, O_SARIF, O_JUNIT, O_EVERY, O_ATDEFAULTS, O_STEPS, O_CHECKPOINT, O_SAVECKPT, O_SAVECASE };
#define PF_CASE_LONGOPTS                                                                                 \
  {"kernel", required_argument, 0, 'k'}, {"variant", required_argument, 0, 'v'},                          \
      {"dtype", required_argument, 0, 't'}, {"accum", required_argument, 0, 'a'},                         \
      {"shape", required_argument, 0, O_SHAPE}, {"scale", required_argument, 0, O_SCALE},                 \
      {"dist", required_argument, 0, O_DIST}, {"seed", required_argument, 0, O_SEED},                     \
      {"cases", required_argument, 0, O_CASES}, {"fault", required_argument, 0, O_FAULT},                 \
      {"backend", required_argument, 0, O_BACKEND}, {"json", no_argument, 0, O_JSON},                     \
      {"param", required_argument, 0, O_PARAM}, {"outliers", required_argument, 0, O_OUTLIERS},           \
      {"outlier-magnitude", required_argument, 0, O_OUTMAG}, {"special-rate", required_argument, 0, O_SPECIAL}, \
      {"exp-range", required_argument, 0, O_EXPRANGE}, {"oracle-prec", required_argument, 0, O_PREC},     \
      {"input", required_argument, 0, O_INPUT}, {"imprecise", required_argument, 0, O_IMPRECISE},           \
      {"oracle", required_argument, 0, O_ORACLE}, {"threads", required_argument, 0, O_THREADS},            \
      {"max-case-seconds", required_argument, 0, O_MAXSECS}, {"checkpoint", required_argument, 0, O_CHECKPOINT}, \
      {"help", no_argument, 0, 'h'}

/* Each flag at most once: 0 the first time ch (a getopt_long value) is seen, else 2 after one
 * line naming the flag (the last of two values silently kept would be a silent default).
 * --param and --input may repeat with different names (pf_case_option checks the names); -h,
 * ':' and '?' are not counted. seen: zeroed by the caller, PF_OPT_CODES entries. */
#define PF_OPT_CODES 1100
int pf_option_once(const struct option *longopts, int ch, unsigned char *seen);

/* --threads N: threads judging one large case (0: one per processor); 0, or pf_usage_error's 2 */
int pf_parse_threads(const char *arg);
/* Returns 0 when handled, an exit status on a bad value, -1 when ch is not a shared option. */
int pf_case_option(int ch, char *arg, run_opts *o, const char **shape_arg, const char **backend);

/* --backend: parses it into *out; for cuda checks that kernel (and variant, when given) has a
 * CUDA implementation, then that a device can be used, writing its description to device.
 * 0, or an exit status after one line on stderr. */
int pf_backend_setup(const char *backend, const char *kernel, const char *variant, int *out, char *device, size_t len);

#endif
