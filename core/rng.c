#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


void pf_philox4x32_10(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]) {
  uint32_t k0 = key[0], k1 = key[1];
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  for (int round = 0; round < 10; round++) {
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    const uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = (uint32_t)p1;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

pf_status pf_rng_init(pf_rng *r, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->seed = seed;
  return PF_OK;
}

void pf_rng_free(pf_rng *r) { (void)r; }

static void pf_rng_refill(pf_rng *r) {
  const uint32_t key[2] = {(uint32_t)r->seed, (uint32_t)(r->seed >> 32)};
  for (unsigned i = 0; i < PF_RNG_BUFWORDS; i += 4) {
    const uint64_t b = r->next_block++;
    const uint32_t ctr[4] = {(uint32_t)(b / 65536), 0, (uint32_t)(b % 65536), 0};
    pf_philox4x32_10(key, ctr, r->buf + i);
  }
  r->pos = 0;
  r->len = PF_RNG_BUFWORDS;
}

uint32_t pf_rng_u32(pf_rng *r) {
  if (r->pos == r->len) pf_rng_refill(r);
  return r->buf[r->pos++];
}

void pf_rng_small_init(pf_rng_small *r, uint64_t seed) {
  r->seed = seed;
  r->next_block = 0;
  r->pos = 4;
}

uint32_t pf_rng_small_u32(pf_rng_small *r) {
  if (r->pos == 4) {
    const uint32_t key[2] = {(uint32_t)r->seed, (uint32_t)(r->seed >> 32)};
    const uint64_t b = r->next_block++;
    const uint32_t ctr[4] = {(uint32_t)(b / 65536), 0, (uint32_t)(b % 65536), 0};
    pf_philox4x32_10(key, ctr, r->buf);
    r->pos = 0;
  }
  return r->buf[r->pos++];
}

uint64_t pf_rng_small_below(pf_rng_small *r, uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const uint64_t v = ((uint64_t)pf_rng_small_u32(r) << 32) | pf_rng_small_u32(r);
    if (v < limit) return v % n;
  }
}

double pf_rng_uniform(pf_rng *r) {
  const uint64_t hi = pf_rng_u32(r) >> 5, lo = pf_rng_u32(r) >> 6; /* 27 + 26 bits */
  return (double)((hi << 26) | lo) * 0x1p-53;
}

uint64_t pf_rng_below(pf_rng *r, uint64_t n) {
  if (n <= 1) return 0;
  /* rejection on 64 random bits: unbiased */
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const uint64_t v = ((uint64_t)pf_rng_u32(r) << 32) | pf_rng_u32(r);
    if (v < limit) return v % n;
  }
}

double pf_det_log(double x) {
  /* x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172 */
  int e;
  double m = frexp(x, &e); /* frexp and ldexp are exact */
  if (m < 0.70710678118654752440) { m *= 2; e -= 1; }
  const double s = (m - 1) / (m + 1), s2 = s * s;
  double term = s, sum = 0;
  for (int k = 1; k <= 41; k += 2) { /* s^41/41 < 2^-110: far below one ulp */
    sum += term / k;
    term *= s2;
  }
  /* ln 2 split so that e * LN2_HI is exact for |e| < 2^11 */
  const double LN2_HI = 0x1.62e42fefa3800p-1, LN2_LO = 0x1.ef35793c76730p-45;
  return (e * LN2_HI + 2 * sum) + e * LN2_LO;
}

double pf_rng_normal(pf_rng *r) {
  for (;;) {
    const double u = 2 * pf_rng_uniform(r) - 1, v = 2 * pf_rng_uniform(r) - 1;
    const double s = u * u + v * v;
    if (s >= 1 || s == 0) continue;
    return u * sqrt(-2 * pf_det_log(s) / s);
  }
}

uint64_t pf_seed_mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
