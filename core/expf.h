/* binary32 exp with the same bits on the CPU and the GPU.
 *
 * The emulations call exp on binary32 operands. The C library's expf and CUDA's differ (glibc's
 * is within 0.502 ulp, CUDA's within 2): with either one the emulation run on the GPU would
 * not reproduce the CPU's bits, and a finding's bits would depend on the machine's libc. This
 * one uses only binary64 +, -, * and a power of two built from its bits, each correctly
 * rounded or exact on both, in a fixed order (the project compiles with -ffp-contract=off and
 * nvcc --fmad=false: a fused multiply-add would change the bits), so it is the same function
 * everywhere. 9.5 ns an operand on the CPU against glibc's 3.3 (throughput, one core).
 *
 * Accuracy: x = k ln2 + r with |r| <= ln2/2 (k ln2_hi exact: ln2_hi has 32 significant bits,
 * |k| <= 150, and x - k ln2_hi is a multiple of 2^-32 below 1, so exact); exp(r) by its Taylor
 * polynomial to degree 14 (remainder below 0.35^15/15! < 2^-60) in Horner's form; the binary64
 * result is within 2^-49 of exp(x), relatively, and rounds to the correctly rounded binary32
 * value unless exp(x) lies that close to a midpoint between two binary32 numbers (tests/
 * test_expf.c: against MPFR on a million operands and every special case, none misrounded). */
#ifndef PF_EXPF_H
#define PF_EXPF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "pf_hd.h"

PF_HD float pf_expf(float x) {
  if (x != x) return x;
  if (x > 89.0f) return INFINITY; /* exp(89) > 2^128 */
  if (x < -104.0f) return 0.0f;   /* exp(-104) < 2^-150: rounds to 0 */
  const double xd = x;
  /* x / ln2 to the nearest integer: adding and subtracting 1.5 2^52 rounds it (|x / ln2| < 151) */
  const double k = (xd * 0x1.71547652b82fep+0 + 0x1.8p52) - 0x1.8p52;
  const double hi = xd - k * 0x1.62e42feep-1;       /* ln2_hi (32 bits): exact */
  const double r = hi - k * 0x1.a39ef35793c76p-33;   /* ln2_lo = ln2 - ln2_hi */
  /* Horner: sum r^n / n!, n = 14 .. 0, each 1/n! the nearest binary64; one rounding per operation */
  double p = 0x1.93974a8c07c9dp-37; /* 1/14! */
  p = p * r + 0x1.6124613a86d09p-33;
  p = p * r + 0x1.1eed8eff8d898p-29;
  p = p * r + 0x1.ae64567f544e4p-26;
  p = p * r + 0x1.27e4fb7789f5cp-22;
  p = p * r + 0x1.71de3a556c734p-19;
  p = p * r + 0x1.a01a01a01a01ap-16;
  p = p * r + 0x1.a01a01a01a01ap-13;
  p = p * r + 0x1.6c16c16c16c17p-10;
  p = p * r + 0x1.1111111111111p-7;
  p = p * r + 0x1.5555555555555p-5;
  p = p * r + 0x1.5555555555555p-3;
  p = p * r + 0x1p-1;
  p = p * r + 0x1p+0;
  p = p * r + 0x1p+0;
  /* times 2^k, built from its bits (-150 <= k <= 129: a normal binary64), exact */
  const uint64_t two_k = (uint64_t)((int64_t)k + 1023) << 52;
  double scale;
  memcpy(&scale, &two_k, 8);
  return (float)(p * scale);
}

#endif
