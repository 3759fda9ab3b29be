/* Storage formats and their rounding, as scalar code shared by the C emulation and CUDA.
 *
 * Every format precfuzz handles (fp32, fp16, bf16) is a subset of binary64, so a value of
 * any format is carried as a double and converted to bits only at the edges. Rounding
 * from a double to a format is done here with integer operations alone, so it is exact
 * and identical on every machine and on the device. Arithmetic "in" a format is done in
 * binary64 and rounded once: for +, -, *, / and sqrt that equals the correctly rounded
 * operation in the format, since 53 >= 2p + 2 for p = 24, 11 and 8. */
#ifndef PF_DTYPE_MATH_H
#define PF_DTYPE_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "pf_hd.h"

typedef enum { PF_FP32 = 0, PF_FP16 = 1, PF_BF16 = 2, PF_NDTYPES = 3 } pf_dtype;

typedef enum {
  PF_RN = 0, /* to nearest, ties to even */
  PF_RZ = 1, /* toward zero */
  PF_RS = 2, /* stochastic: up with probability floor(frac * 2^32) / 2^32, given a random word */
} pf_rounding;

/* Floating-point events raised by emulated operations (like IEEE exception flags). */
enum {
  PF_FE_OVERFLOW = 1u,  /* a finite result rounded to +-inf */
  PF_FE_UNDERFLOW = 2u, /* a nonzero result rounded to zero */
  PF_FE_INVALID = 4u,   /* a NaN from operands that were not NaN (inf - inf, 0/0, inf/inf) */
};

typedef struct {
  int bits;  /* storage width */
  int prec;  /* significand bits p, with the hidden bit */
  int emin;  /* exponent of the smallest normal: 2^emin */
  int emax;  /* exponent of the largest finite: < 2^(emax+1) */
} pf_format;

PF_HD pf_format pf_format_of(pf_dtype t) {
  pf_format f;
  switch (t) {
  case PF_FP16: f.bits = 16; f.prec = 11; f.emin = -14; f.emax = 15; break;
  case PF_BF16: f.bits = 16; f.prec = 8; f.emin = -126; f.emax = 127; break;
  default: f.bits = 32; f.prec = 24; f.emin = -126; f.emax = 127; break;
  }
  return f;
}

PF_HD int pf_clz64(uint64_t v) {
#ifdef __CUDA_ARCH__
  return __clzll((long long)v);
#else
  return __builtin_clzll(v);
#endif
}

PF_HD uint64_t pf_bits_of_double(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
PF_HD double pf_double_of_bits(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* Round x to format t and return the bit pattern. NaN keeps its sign and top payload bits
 * and becomes quiet. Overflow: inf for PF_RN and PF_RS, the largest finite for PF_RZ. */
PF_HD uint32_t pf_encode(pf_dtype t, double x, pf_rounding mode, uint32_t rbits) {
  const pf_format f = pf_format_of(t);
  const int mbits = f.prec - 1;                 /* stored significand bits */
  const int ebits = f.bits - 1 - mbits;
  const uint32_t sign = (uint32_t)(pf_bits_of_double(x) >> 63) << (f.bits - 1);
  const uint32_t expall = ((1u << ebits) - 1u) << mbits;
  const uint64_t u = pf_bits_of_double(x) & 0x7fffffffffffffffull;
  const int dexp = (int)(u >> 52);
  uint64_t sig = u & 0xfffffffffffffull;

  if (dexp == 0x7ff) {
    if (sig == 0) return sign | expall;                                  /* inf */
    return sign | expall | (1u << (mbits - 1)) | (uint32_t)(sig >> (52 - mbits)); /* quiet NaN */
  }
  if (u == 0) return sign;
  int e; /* x = sig * 2^(e - 52) with sig < 2^53 */
  if (dexp == 0) { e = -1022; } else { e = dexp - 1023; sig |= 1ull << 52; }

  /* Number of low bits of sig to drop: the quantum is 2^(max(E, emin) - mbits). */
  const int q = (e < f.emin ? f.emin : e) - mbits;
  const int shift = q - (e - 52); /* >= 52 - mbits > 0 */
  uint64_t kept, rem_above_half, rem_is_half, frac32;
  if (shift >= 64) {
    kept = 0; rem_above_half = 0; rem_is_half = 0;
    frac32 = shift >= 96 ? 0 : (sig >> (shift - 32));
  } else {
    const uint64_t rem = sig & ((1ull << shift) - 1);
    const uint64_t halfway = 1ull << (shift - 1);
    kept = sig >> shift;
    rem_above_half = rem > halfway;
    rem_is_half = rem == halfway;
    frac32 = shift > 32 ? rem >> (shift - 32) : rem << (32 - shift);
  }
  int up;
  if (mode == PF_RN) up = rem_above_half || (rem_is_half && (kept & 1));
  else if (mode == PF_RZ) up = 0;
  else up = (uint64_t)rbits < frac32;
  kept += (uint64_t)up;

  /* kept carries the hidden bit at position mbits for normal numbers; adding the biased
   * exponent minus one lets a carry out of the significand bump the exponent. */
  uint64_t mag;
  if (e < f.emin) mag = kept; /* subnormal (or rounds up to the smallest normal) */
  else mag = ((uint64_t)(e - f.emin) << mbits) + kept; /* (e + bias - 1) << mbits + kept */
  if (mag >= expall) { /* overflow */
    if (mode == PF_RZ) return sign | (expall - 1u);
    return sign | expall;
  }
  return sign | (uint32_t)mag;
}

PF_HD double pf_decode(pf_dtype t, uint32_t b) {
  const pf_format f = pf_format_of(t);
  const int mbits = f.prec - 1;
  const int ebits = f.bits - 1 - mbits;
  const uint64_t sign = (uint64_t)((b >> (f.bits - 1)) & 1u) << 63;
  const uint32_t ef = (b >> mbits) & ((1u << ebits) - 1u);
  const uint64_t m = b & ((1u << mbits) - 1u);
  if (ef == (1u << ebits) - 1u) {
    if (m == 0) return pf_double_of_bits(sign | 0x7ff0000000000000ull);
    return pf_double_of_bits(sign | 0x7ff8000000000000ull | (m << (52 - mbits)));
  }
  if (ef == 0) {
    if (m == 0) return pf_double_of_bits(sign);
    /* subnormal: m * 2^(emin - mbits); normalise into a double (always normal in binary64) */
    int lead = 63 - pf_clz64(m);
    int e = f.emin - mbits + lead;
    uint64_t frac = (m << (52 - lead)) & 0xfffffffffffffull;
    return pf_double_of_bits(sign | ((uint64_t)(e + 1023) << 52) | frac);
  }
  int e = (int)ef - (1 - f.emin); /* unbias: bias = 1 - emin */
  return pf_double_of_bits(sign | ((uint64_t)(e + 1023) << 52) | (m << (52 - mbits)));
}

/* The spacing of t at |x| (dtype.h's pf_ulp, inline for the oracles' fast paths, which ask it per
 * output): |x| in [2^e, 2^(e+1)), e clamped to t's exponents (0 and binary64's subnormals to emin,
 * inf and NaN to emax). */
PF_HD double pf_quantum(pf_dtype t, double x) {
  const pf_format f = pf_format_of(t);
  const uint64_t b = pf_bits_of_double(x);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  if (e == 1024 || e > f.emax) e = f.emax; /* inf, NaN, beyond the top binade */
  if (e < f.emin) e = f.emin;
  return pf_double_of_bits((uint64_t)(e - f.prec + 1 + 1023) << 52); /* >= 2^-149: normal in binary64 */
}

/* Round x to nearest-even in format t, as a double. */
/* The same as pf_decode(t, pf_encode(t, x, PF_RN, 0)), cheaper (every emulated operation rounds
 * through it): x + C - C with C = 1.5 2^(52 + q) leaves x rounded to a multiple of the quantum
 * 2^q of t at x's exponent, by binary64's own round-to-nearest-even (C / 2^q is even, so the
 * tie goes to the even multiple); beyond the overflow threshold inf; NaN by the encoding. */
PF_HD double pf_round(pf_dtype t, double x) {
  const uint64_t u = pf_bits_of_double(x), mag = u & 0x7fffffffffffffffull;
  if (mag >= 0x7ff0000000000000ull) return pf_decode(t, pf_encode(t, x, PF_RN, 0)); /* inf, NaN */
  const pf_format f = pf_format_of(t);
  /* (2 - 2^-p) 2^emax: from here on (a tie included, the largest finite being odd) inf */
  const uint64_t thr = ((uint64_t)(f.emax + 1023) << 52) | ((((uint64_t)1 << f.prec) - 1) << (52 - f.prec));
  if (mag >= thr) return pf_double_of_bits((u & 0x8000000000000000ull) | 0x7ff0000000000000ull);
  const int e = (int)(mag >> 52) - 1023, q = (e < f.emin ? f.emin : e) - (f.prec - 1);
  const double a = pf_double_of_bits(mag), C = pf_double_of_bits(((uint64_t)(1023 + 52 + q) << 52) | (1ull << 51));
  const double r = (a + C) - C;
  return pf_double_of_bits((u & 0x8000000000000000ull) | pf_bits_of_double(r));
}

/* The same, recording overflow (finite -> inf) and total underflow (nonzero -> 0). */
PF_HD double pf_round_fe(pf_dtype t, double x, unsigned *fe) {
  double r = pf_round(t, x);
  if (r - r != 0 && x - x == 0) *fe |= PF_FE_OVERFLOW;     /* r is inf, x finite */
  else if (r == 0 && x != 0) *fe |= PF_FE_UNDERFLOW;
  return r;
}

/* Emulated arithmetic in format t (operands are values of t). */
PF_HD double pf_nan_check(double r, double a, double b, unsigned *fe) {
  if (r != r && a == a && b == b) *fe |= PF_FE_INVALID;
  return r;
}
PF_HD double pf_add(pf_dtype t, double a, double b, unsigned *fe) {
  return pf_round_fe(t, pf_nan_check(a + b, a, b, fe), fe);
}
PF_HD double pf_sub(pf_dtype t, double a, double b, unsigned *fe) {
  return pf_round_fe(t, pf_nan_check(a - b, a, b, fe), fe);
}
PF_HD double pf_mul(pf_dtype t, double a, double b, unsigned *fe) {
  return pf_round_fe(t, pf_nan_check(a * b, a, b, fe), fe);
}
PF_HD double pf_div(pf_dtype t, double a, double b, unsigned *fe) {
  return pf_round_fe(t, pf_nan_check(a / b, a, b, fe), fe);
}
/* fl32(a b + c) rounded once: a fused multiply-add in fp32, as vectorized CPU code (and CUDA)
 * computes it; a, b, c are fp32 values. fmaf is correctly rounded (C99, CUDA). */
PF_HD double pf_fma32(double a, double b, double c, unsigned *fe) {
  const double r = (double)fmaf((float)a, (float)b, (float)c);
  const double approx = a * b + c; /* only to tell the events */
  if (r != r && approx == approx && a == a && b == b && c == c) *fe |= PF_FE_INVALID;
  if (r - r != 0 && approx - approx == 0) *fe |= PF_FE_OVERFLOW;
  else if (r == 0 && approx != 0) *fe |= PF_FE_UNDERFLOW;
  return r;
}

#endif
