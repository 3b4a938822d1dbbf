/*
 * base/rng — a counter-based random stream: the value at (seed, stream, counter) is a pure
 * function of the three, so a path's draws never depend on how many other paths ran, in what
 * order or on which thread. (Same idea as Philox in JAX/PyTorch; here a strong 64-bit mixer.)
 */
#ifndef KR_BASE_RNG_H
#define KR_BASE_RNG_H

#include <stdint.h>

static inline uint64_t kr_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t kr_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
    return kr_mix64(kr_mix64(kr_mix64(seed) ^ stream) ^ counter);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double kr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
    return (double)(kr_rng_u64(seed, stream, counter) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
