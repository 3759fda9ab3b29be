/* Text for XML (the precision report's XHTML, JUnit reports). */
#ifndef PF_XML_H
#define PF_XML_H

#include <stdio.h>

/* s escaped for XML text and attributes; control characters XML 1.0 cannot hold (all but
 * newline and tab) become spaces. */
void pf_xml_escape(FILE *f, const char *s);

#endif
