/* Exact discrete Laplace sampler on the integers.
 *
 * Samples z with P(z) = (1-r)/(1+r) r^|z|, r = exp(-1/t), up to the stated
 * table precision (docs/privacy.md §2). With
 * J = floor(log2 t) and L = max(J - 3, 0), the magnitude is G = W 2^L + V where
 *   V (L bits) is uniform, accepted with probability a_V ~ exp(-V/t) (>= e^-1/8),
 *     a_V = prod_c chunk[c][u_c] / 2^(64 nc) over the 4-bit chunks u_c of V,
 *     redrawn (together with everything else) on rejection: exact rejection sampling;
 *   W is geometric with q = exp(-2^L/t), drawn from a 64-column alias table whose
 *     integer masses (1-q) q^w (0 < w < tail), q^tail and the rest for w = 0 sum
 *     to exactly 2^64; the tail outcome adds `tail` to W and draws again (at most
 *     tail_rounds times; then it counts as the value `tail`). tail_rounds grows
 *     with the largest shift between neighbouring inputs so that the cap costs
 *     at most 2^-66 of delta per coordinate (docs/privacy.md section 2).
 * One fixed draw of n1 = L + K + 1 + 6 + KP <= 32 bits gives, MSB first: V,
 * the K-bit prefix of the acceptance comparison (all ones: compare further),
 * the sign, the alias column and the KP-bit prefix of its keep comparison
 * (equal: compare further). Comparisons read random bits MSB first as a binary
 * fraction and stop at the first bit that differs from the threshold.
 * (sign = 1, G = 0) is rejected and the whole sample redrawn.
 * Guarantee: docs/privacy.md section 2 states what one query of the mechanism of
 * mech.h guarantees with these tables, its assumptions and the argument.
 * host/edgedp/mech/reference.py (dlap_sample) is the bit-exact executable
 * specification. Set-up uses double arithmetic (no libm); sampling uses
 * integers only. On ARMv7-M the ChaCha12 block and the sampling loop are in
 * Thumb-2 assembly (core/src/arch/armv7m/), elsewhere portable C
 * (core/src/arch/portable/); both give the same bits. */
#ifndef EDGEDP_DLAP_H
#define EDGEDP_DLAP_H
#include <stdint.h>

#include "drbg.h"

#define EDP_DLAP_EXP_TERMS        24   /* Horner terms of edp_exp_neg: 1/25! < 2^-83 */
#define EDP_DLAP_MIN_TAIL         (1.0 / 1048576.0)  /* stop adding alias values once q^w < 2^-20 */
#define EDP_DLAP_CHUNK_BITS       4
#define EDP_DLAP_MAX_J            24   /* t < 2^25 keeps |z| < 2^31 - 2^24 */
#define EDP_DLAP_LOW_SHIFT        3    /* L = J - 3: 2^L / t in (1/16, 1/8] */
#define EDP_DLAP_MAX_L            (EDP_DLAP_MAX_J - EDP_DLAP_LOW_SHIFT)
#define EDP_DLAP_MAX_CHUNKS       ((EDP_DLAP_MAX_L + EDP_DLAP_CHUNK_BITS - 1) / EDP_DLAP_CHUNK_BITS)
#define EDP_DLAP_ALIAS_BITS       6
#define EDP_DLAP_ALIAS_N          (1 << EDP_DLAP_ALIAS_BITS)
#define EDP_DLAP_MAX_ACCEPT_BITS  4
#define EDP_DLAP_MAX_KEEP_BITS    4
#define EDP_DLAP_FIXED_BITS       32
#define EDP_DLAP_CAP_BITS         69   /* tail_rounds: p^(rounds past the shift) <= 2^-69 */
#define EDP_DLAP_Z_LIMIT          (2147483647.0 - 16777216.0)  /* |q + z| < 2^31 with |q| < 2^24 */

typedef struct {
    uint32_t hi, lo;  /* floor(p * 2^64) as two words */
} edp_threshold_t;

typedef struct {
    /* used per sample (the loop in arch/armv7m/dlap_armv7m.c relies on these offsets) */
    uint32_t n1;       /*  0: fixed draw, L + K + 1 + 6 + KP <= 32 bits */
    uint32_t s1;       /*  4: 32 - n1 */
    uint32_t mk;       /*  8: acceptance bits of the draw; 2^31 (never all ones) if L = 0 */
    uint32_t imask;    /* 12: (64 << KP) - 1: alias column and keep prefix */
    uint32_t sbit;     /* 16: sign bit of the draw, 64 << KP */
    uint32_t vsh;      /* 20: n1 - L: shift to V */
    uint32_t L;        /* 24: uniform low bits, 0..21 */
    uint32_t tail;     /* 28: tail outcome = number of plain values, 1..63 */
    uint32_t vthr;     /* 32: a_V has K + 1 leading ones iff V < vthr (L > 0) */
    uint32_t pad[7];   /* 36: the fast table starts at offset 64 */
    uint8_t fast[EDP_DLAP_ALIAS_N << EDP_DLAP_MAX_KEEP_BITS];  /* 64: W by (column, keep prefix); 0xFF: tie, 0x80|tail: tail */
    /* set-up and slow paths */
    uint32_t J;        /* floor(log2 t), 0..24 (reported by SAMPLE) */
    uint32_t K;        /* fixed acceptance bits, 1..4 (0 iff L = 0) */
    uint32_t KP;       /* fixed keep bits, 0..4 */
    uint32_t nchunks;  /* ceil(L / 4) */
    uint32_t c1;       /* floor(2^32 / t) if L > 0: bounds of a_V for the slow path */
    uint32_t tail_rounds;  /* tail outcomes before the tail counts as the value `tail` */
    uint8_t alias[EDP_DLAP_ALIAS_N];  /* == i: full column, no test */
    edp_threshold_t keep[EDP_DLAP_ALIAS_N];
    edp_threshold_t chunk[EDP_DLAP_MAX_CHUNKS][16];  /* exp(-u 2^(4c) / t); u = 0: 2^64 - 1 */
} edp_dlap_t;

/* exp(-x) for 0 <= x <= 1 by 24 Horner terms in double (bit-reproducible). */
double edp_exp_neg(double x);

/* Build tables for 1/t = inv_t, for inputs of neighbours at most `shift`
 * lattice steps apart in one coordinate (the L1 bound sensitivity/g + k).
 * Requires 2^-25 < inv_t <= 1 and a tail cap below EDP_DLAP_Z_LIMIT (that is,
 * roughly (epsilon + 30) t < 2^31 - 2^24), else EDP_ERR_BAD_VALUE. */
int edp_dlap_setup(edp_dlap_t *d, double inv_t, double shift);

/* Tier 1 of the slow acceptance path (L > 0): 32-bit fixed-point bounds of
 * the threshold a_V = exp(-x), x = v / t (its top 32 bits lie in [lo32, hi32]),
 * from
 * 1 - x + x^2/2 - x^3/4 <= exp(-x) <= 1 - x + x^2/2 (x <= 1/8) with margins of 3
 * units for the roundings and the tables' 2^-47; hi32 saturates at 2^32 - 1.
 * A stream whose top bits agree with lo32 up to the first bit where lo32 and
 * hi32 differ goes on to the exact product (deadline.c bounds how often). */
void edp_dlap_band(const edp_dlap_t *d, uint32_t v, uint32_t *lo32, uint32_t *hi32);

/* Quantisation for edp_dlap_noisy: x maps to the lattice point
 * R(clamp(trunc(x scale2), lo2, hi2)), R(u) = u - u / 2 (C's truncating
 * division), which is round half away from zero of x scale2 / 2. With scale2 = 2^(m+1) and lo2, hi2 twice the rounded lattice
 * points of the range's ends this equals mech.h's quantisation (clamp in
 * float, scale by 2^m, round half away from zero), because R, the truncation
 * and the scaling are monotone and R(lo2) = lo2 / 2. lo2 <= hi2, both even
 * with |.| <= 2^25. scale2 = lo2 = hi2 = 0 maps every finite x to 0. */
typedef struct {
    float scale2;
    int32_t lo2, hi2;
} edp_dlap_quant_t;

/* The quantisation above for one finite value (mech.c's and the portable loop's). */
static inline int32_t edp_dlap_quantize(const edp_dlap_quant_t *q, float x)
{
    const float s = x * q->scale2;
    const int32_t u = s <= (float)q->lo2 ? q->lo2 : s >= (float)q->hi2 ? q->hi2 : (int32_t)s;
    return u - u / 2;
}

/* One sample. Constant memory, bounded by the rejection loops' randomness. */
int32_t edp_dlap_sample(const edp_dlap_t *d, edp_drbg_t *rng);

/* y[i] = edp_dlap_quantize(q, x[i]) + one sample, for i = 0..k-1 in order
 * (the same stream use as k calls of edp_dlap_sample); k >= 1 (the Thumb-2
 * loop tests at its end), x finite (+-inf allowed), y and x distinct. Every keystream word it reads is zeroed in
 * rng's buffer as it is read (drbg.h), so a later RAM read cannot replay the
 * noise. */
void edp_dlap_noisy(const edp_dlap_t *d, edp_drbg_t *rng, const edp_dlap_quant_t *q,
                    const float *x, int32_t *y, uint32_t k);

#endif
