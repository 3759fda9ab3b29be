#include "status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char pf_errbuf[512];

const char *pf_status_str(pf_status s) {
  switch (s) {
  case PF_OK: return "ok";
  case PF_ERR_ARG: return "bad argument";
  case PF_ERR_NOMEM: return "out of memory";
  case PF_ERR_IO: return "i/o error";
  case PF_ERR_PARSE: return "parse error";
  case PF_ERR_UNKNOWN: return "unknown name";
  case PF_ERR_UNSUPPORTED: return "unsupported combination";
  case PF_ERR_CUDA: return "CUDA error";
  case PF_ERR_NODEVICE: return "no CUDA device";
  case PF_ERR_ORACLE: return "oracle undecided";
  }
  return "unknown status";
}

pf_status pf_error(pf_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pf_errbuf, sizeof pf_errbuf, fmt, ap);
  va_end(ap);
  return s;
}

const char *pf_error_message(void) { return pf_errbuf[0] ? pf_errbuf : "unspecified error"; }
void pf_error_clear(void) { pf_errbuf[0] = 0; }
