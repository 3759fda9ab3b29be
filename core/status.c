#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char pf_errbuf[512];

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
