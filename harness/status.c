#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
  case PF_ERR_KERNEL: return "kernel failed";
  }
  return "unknown status";
}

pf_status pf_error(pf_status s, const char *fmt, ...) {
  /* through a copy: the message may quote the previous one (pf_error_message()) */
  char buf[sizeof pf_errbuf];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  /* one line whatever it quotes (a file's key, a tensor's name): control characters as '?' */
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  memcpy(pf_errbuf, buf, sizeof buf);
  return s;
}

const char *pf_error_message(void) { return pf_errbuf[0] ? pf_errbuf : "unspecified error"; }
void pf_error_clear(void) { pf_errbuf[0] = 0; }
