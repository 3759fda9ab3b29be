#include "core/xml.h"

void pf_xml_escape(FILE *f, const char *s) {
  for (; *s; s++) switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default:
      if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') fputc(' ', f);
      else fputc(*s, f);
    }
}
