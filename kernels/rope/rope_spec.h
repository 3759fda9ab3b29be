/* What a case of the rotary-embedding family means, for its emulation (rope_math.h) and its
 * oracle alike: the variants' algorithm numbers (pf_kernel.algo), the parameters' indices and
 * choices in the order of their table (rope_cpu.c), and the exact angle.
 *
 * Input t: positions x heads x dim (q or k of one sequence), row i at position p = offset + i.
 * Output y, laid out as t: each pair (j, j') of a head's vector rotated by theta_{p,k}:
 *   y_j  = t_j  cos(theta) - t_j' sin(theta),   y_j' = t_j' cos(theta) + t_j sin(theta),
 * the pairs (j, j + dim/2) with k = j (layout half: GPT-NeoX, Llama, Megatron's default) or
 * (2k, 2k + 1) (layout interleaved: GPT-J, Megatron's rotary_interleaved). The exact angle:
 *   theta_{p,k} = P omega_k,   omega_k = B^(-2k/dim),
 *   none:   P = p,      B = base
 *   linear: P = p / f,  B = base                      (position interpolation: Megatron's
 *                                                      seq_len_interpolation_factor, HF's linear)
 *   ntk:    P = p,      B = base f^(dim / (dim - 2))   (NTK-aware scaling: HF's dynamic NTK at
 *                                                      its full factor, Code Llama's base)
 * with f the parameter factor, every quantity real: the rotation the model means, not any
 * framework's rounding of it. */
#ifndef PF_ROPE_SPEC_H
#define PF_ROPE_SPEC_H

#include <math.h>

#include "core/case.h"
#include "core/dtype.h"
#include "core/pf_hd.h"

enum { PF_ROPE_TORCH = 0, PF_ROPE_FUSED = 1 };
enum {
  PF_ROPE_P_BASE = 0,
  PF_ROPE_P_SCALING = 1,
  PF_ROPE_P_FACTOR = 2,
  PF_ROPE_P_OFFSET = 3,
  PF_ROPE_P_LAYOUT = 4,
  PF_ROPE_NPARAMS = 5
};
enum { PF_ROPE_SCALE_NONE = 0, PF_ROPE_SCALE_LINEAR = 1, PF_ROPE_SCALE_NTK = 2 };
enum { PF_ROPE_LAYOUT_HALF = 0, PF_ROPE_LAYOUT_INTERLEAVED = 1 };
enum { PF_ROPE_D_POS = 0, PF_ROPE_D_HEADS = 1, PF_ROPE_D_DIM = 2 };

/* element j of a head's vector: its frequency index k, its partner j' and the sign its partner
 * enters y_j with (-1: y_j = t_j cos - t_j' sin; +1: y_j = t_j cos + t_j' sin) */
PF_HD void pf_rope_pair(int layout, size_t dim, size_t j, size_t *k, size_t *partner, int *sign) {
  const size_t h = dim / 2;
  if (layout == PF_ROPE_LAYOUT_INTERLEAVED) {
    *k = j / 2;
    *partner = j ^ 1;
    *sign = (j & 1) ? 1 : -1;
  } else {
    *k = j % h;
    *partner = j < h ? j + h : j - h;
    *sign = j < h ? -1 : 1;
  }
}

/* The exact angle's parts in binary64, for the contracts' bounds: P (the position as scaled)
 * and omega_k, each within 2^-50 of itself relative (a few roundings and glibc's pow, whose
 * error grows with |x ln B| <= 28 for the bases and factors the parameters allow). */
PF_HD double pf_rope_position(int scaling, double factor, double p) {
  return scaling == PF_ROPE_SCALE_LINEAR ? p / factor : p;
}
PF_HD double pf_rope_base(int scaling, double base, double factor, size_t dim) {
  return scaling == PF_ROPE_SCALE_NTK ? base * pow(factor, (double)dim / (double)(dim - 2)) : base;
}
#define PF_ROPE_ANGLE_REL 0x1p-46 /* |theta - P omega| / theta, both computed in binary64 */

#endif
