/* precision-report: a sweep's results (precfuzz-results/2) as one self-contained HTML page
 * (inline CSS and SVG, no script, no external asset), a Markdown summary, or a JSON summary. */
#ifndef PF_REPORT_H
#define PF_REPORT_H

#include <stddef.h>
#include <stdio.h>

struct cJSON;

/* Checks every field the report reads; 0, or -1 with one line in err naming the field by its
 * path (kernels[2].configs[5].scan.points[3].fails: ...). */
int pf_results_check(const struct cJSON *root, char *err, size_t len);

int pf_report_html(const struct cJSON *root, FILE *out);
int pf_report_md(const struct cJSON *root, FILE *out);
int pf_report_json(const struct cJSON *root, FILE *out);

#endif
