/* Error status returned by every precfuzz function that can fail.
 * A numerical mismatch is a result, never an error. */
#ifndef PF_STATUS_H
#define PF_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PF_OK = 0,
  PF_ERR_ARG = -1,      /* a bad argument, flag or field: the caller's input */
  PF_ERR_NOMEM = -2,
  PF_ERR_IO = -3,       /* a file could not be read or written */
  PF_ERR_PARSE = -4,    /* malformed JSON or raw input */
  PF_ERR_UNKNOWN = -5,  /* unknown kernel, variant, dtype, fault, ... */
  PF_ERR_UNSUPPORTED = -6, /* known, but not for this combination (dtype, backend) */
  PF_ERR_CUDA = -7,     /* a CUDA, cuBLAS or cuRAND call failed */
  PF_ERR_NODEVICE = -8, /* --backend cuda with no usable GPU */
  PF_ERR_ORACLE = -9,   /* the oracle could not decide within its precision limit */
  PF_ERR_KERNEL = -10,  /* a kernel process failed on a case (crashed, hung, broke the protocol, gave
                           outputs of another dtype or shape): the runner's verdict "failed" */
} pf_status;

/* The last error's detail, one line naming the offending flag, field or file.
 * Set by pf_error(); read by the CLI to print its exit-2 message. Thread-local. */
pf_status pf_error(pf_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *pf_error_message(void);
void pf_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
