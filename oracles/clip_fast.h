/* The clipping oracle's fast path (clip_fast.c); clip_mpfr.c calls it first. */
#ifndef PF_CLIP_FAST_H
#define PF_CLIP_FAST_H

#include "core/kernel.h"

/* The norm (output 0) and the clipped gradients (1 + x) of the kn finite gradients g: 1 when
 * every output was settled into out, else 0 and the case is MPFR's. */
int pf_clip_fast(const double *g, size_t kn, int inf_norm, pf_dtype norm_t, pf_dtype t, double max_norm,
                 pf_oracle_result *out);

#endif
