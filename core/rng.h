/* Random words: the Philox4x32-10 stream of cuRAND's host generator, bit for bit.
 *
 * Word i of the stream for seed s is word (i % 4) of block b = i / 4, where block b is
 * Philox4x32-10 with key (s low 32 bits, s high 32 bits) and counter
 * (b / 65536, 0, b % 65536, 0): the order in which cuRAND's host generator
 * (curandCreateGeneratorHost, CURAND_RNG_PSEUDO_PHILOX4_32_10) hands out its words.
 * The tensors use this built-in Philox (creating a cuRAND host generator costs more than a small
 * case's whole run, and linking cuRAND would load the CUDA libraries into every CPU run);
 * tests/test_rng.c proves it identical to cuRAND's words wherever the toolkit is present.
 * The distributions (tensor.c) are precfuzz's own code on top of these words. */
#ifndef PF_RNG_H
#define PF_RNG_H

#include <stdint.h>

#include "status.h"

#define PF_RNG_BUFWORDS 4096

typedef struct {
  uint64_t seed;
  uint64_t next_block; /* built-in generator: next block to compute */
  uint32_t buf[PF_RNG_BUFWORDS];
  unsigned pos, len;
} pf_rng;

/* One Philox4x32-10 block. */
void pf_philox4x32_10(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]);

pf_status pf_rng_init(pf_rng *r, uint64_t seed);
void pf_rng_free(pf_rng *r);
uint32_t pf_rng_u32(pf_rng *r);
/* Uniform on [0, 1) with 53 random bits (two words). */
double pf_rng_uniform(pf_rng *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias (rejection). */
uint64_t pf_rng_below(pf_rng *r, uint64_t n);
/* Standard normal: Marsaglia's polar method with precfuzz's own log, so every machine
 * draws the same doubles (no libm call whose last bit may differ). */
double pf_rng_normal(pf_rng *r);
/* Natural log with only IEEE +, -, *, / (deterministic everywhere); x > 0 finite. */
double pf_det_log(double x);
/* The same stream, word for word, a block (4 words) at a time: for a few draws (run's parameter
 * draws) without pf_rng's buffer, which fills 4096 words on its first word. */
typedef struct {
  uint64_t seed, next_block;
  uint32_t buf[4];
  unsigned pos;
} pf_rng_small;
void pf_rng_small_init(pf_rng_small *r, uint64_t seed);
uint32_t pf_rng_small_u32(pf_rng_small *r);
/* As pf_rng_below: the same words, the same value. */
uint64_t pf_rng_small_below(pf_rng_small *r, uint64_t n);
/* A well-mixed 64-bit value from two (splitmix64 finaliser): derives per-tensor seeds. */
uint64_t pf_seed_mix(uint64_t a, uint64_t b);

#endif
