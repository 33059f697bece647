/* Exact discrete Laplace sampler on the integers.
 *
 * Samples z with P(z) = (1-r)/(1+r) r^|z|, r = exp(-1/t), up to the stated
 * table precision (docs/privacy.md):
 *   sign s: 1 bit; magnitude G = H * 2^J + V with J = floor(log2 t);
 *   V: J uniform bits, accepted with probability exp(-V/t) as a product of
 *      Bernoulli(exp(-u * 2^(4c) / t)) over the 4-bit chunks u of V, redrawn
 *      on rejection (exact rejection sampling);
 *   H: unary count of successes of Bernoulli(q), q = exp(-2^J/t), capped at
 *      EDP_DLAP_HMAX;
 *   (s = 1, G = 0) is rejected and the whole sample redrawn.
 * A Bernoulli(p) reads random bits MSB first and compares them with the 64-bit
 * threshold floor(p * 2^64); the first differing bit decides (about 2 bits).
 * Set-up uses double arithmetic (no libm); sampling uses integers only. */
#ifndef EDGEDP_DLAP_H
#define EDGEDP_DLAP_H
#include <stdint.h>

#include "edgedp/drbg.h"

#define EDP_DLAP_CHUNK_BITS 4
#define EDP_DLAP_MAX_J      24   /* t < 2^25 keeps |z| < 2^31 */
#define EDP_DLAP_MAX_CHUNKS ((EDP_DLAP_MAX_J + EDP_DLAP_CHUNK_BITS - 1) / EDP_DLAP_CHUNK_BITS)
#define EDP_DLAP_HMAX       96   /* q <= e^-1/2, so P(H >= 96) < 2^-69 */

typedef struct {
    uint32_t hi, lo;  /* floor(p * 2^64) as two words */
} edp_threshold_t;

typedef struct {
    uint32_t J;                                          /* uniform low bits, 0..24 */
    uint32_t nchunks;                                    /* ceil(J / 4) */
    edp_threshold_t chunk[EDP_DLAP_MAX_CHUNKS][15];      /* exp(-u 2^(4c) / t), u = 1..15 */
    edp_threshold_t q;                                   /* exp(-2^J / t) */
} edp_dlap_t;

/* exp(-x) for 0 <= x <= 1 by 24 Horner terms in double (bit-reproducible). */
double edp_exp_neg(double x);

/* Build tables for 1/t = inv_t. Requires 2^-25 < inv_t <= 1, else
 * EDP_ERR_BAD_VALUE. */
int edp_dlap_setup(edp_dlap_t *d, double inv_t);

/* One sample. Constant memory, bounded by the rejection loops' randomness. */
int32_t edp_dlap_sample(const edp_dlap_t *d, edp_drbg_t *rng);

/* Bernoulli(th / 2^64) from the lazy bit buffer: returns 1 with that probability. */
static inline int edp_bernoulli(edp_drbg_t *r, edp_threshold_t th)
{
    uint32_t w, c;
    if (r->nbits < 32) edp_drbg_refill(r);
    w = (uint32_t)(r->acc >> 32) ^ th.hi;
    if (w) {
        c = (uint32_t)__builtin_clz(w) + 1;
        r->acc <<= c;
        r->nbits -= c;
        return (int)((th.hi >> (32 - c)) & 1u);
    }
    r->acc <<= 32;
    r->nbits -= 32;
    edp_drbg_refill(r);
    w = (uint32_t)(r->acc >> 32) ^ th.lo;
    if (w) {
        c = (uint32_t)__builtin_clz(w) + 1;
        r->acc <<= c;
        r->nbits -= c;
        return (int)((th.lo >> (32 - c)) & 1u);
    }
    r->acc <<= 32;
    r->nbits -= 32;
    return 0;
}

#endif
