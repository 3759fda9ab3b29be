/* Rotary embeddings' case-to-launch translation and row tables (rope_cpu.c), for the tests. */
#ifndef PF_ROPE_H
#define PF_ROPE_H

#include "core/case.h"
#include "kernels/rope/rope_math.h"

/* What a case computes with (faults: PF_ROPE_F_* bits, 0 for the contract's computation). */
pf_rope_launch pf_rope_launch_of(const pf_case *c, int faults);

/* Position row i's angles, cos and sin per frequency (dim/2 each) from the table inv; returns the
 * position as the table's dtype holds it. */
double pf_rope_row_tables(const pf_rope_launch *L, const double *inv, size_t i, double *theta, double *c, double *s,
                          unsigned *fe);

#endif
