/* The vector mechanism: clamp, round onto the lattice, add discrete Laplace
 * noise, clamp the output in integers, then an output mode (post-processing).
 *
 * A prepared plan fixes the lattice step g = 2^-m, the integer output range
 * [ylo, yhi] = [ceil(lo/g), floor(hi/g)] and the noise scale
 * t = (sensitivity/g + k) / epsilon lattice steps: the L1 distance of two
 * rounded, clamped inputs is at most sensitivity/g + k, so the noisy lattice
 * vector is epsilon-DP (docs/privacy.md states the exact (epsilon, delta)). */
#ifndef EDGEDP_MECH_H
#define EDGEDP_MECH_H
#include <stddef.h>
#include <stdint.h>

#include "dlap.h"
#include "edgedp/model.h"  /* EDP_M_AUTO */
#include "edgedp/options.h"

/* EDP_M_AUTO (edgedp/model.h): choose m, the smallest with k 2^-m <= sensitivity / EDP_M_AUTO_SLACK */
#define EDP_M_MIN (-30)     /* lattice exponents m run EDP_M_MIN..EDP_M_MAX */
#define EDP_M_MAX 30
#define EDP_M_AUTO_SLACK 256.0  /* the automatic m keeps the rounding slack k g below sensitivity / 256 */
#define EDP_MECH_LATTICE_LIMIT 16777216.0f  /* 2^24: |lo| / g and |hi| / g below it keep y * g exact in float32 */

enum edp_mode {
    EDP_MODE_FULL = 0,    /* k x i32 lattice values clamped to [ylo, yhi] */
    EDP_MODE_TOPK = 1,    /* arg = K: K x (u16 index, i32 clamped value), by noisy value desc, index asc */
    EDP_MODE_LABEL = 2,   /* u16 noisy argmax (lowest index on ties) */
    EDP_MODE_BUCKET = 3,  /* u16 label, u8 level: 2 top third of range, 1 middle, 0 low */
    EDP_MODE_ROUND = 4,   /* arg = D: k x i32 round(y g, D) in units of 10^-D (edp_mech_mode_fits) */
    EDP_MODE_SIMPLEX = 5, /* k x i32 lattice values >= 0 summing to 2^m (1.0) */
};

typedef struct {
    uint32_t eps_micro;   /* per-query epsilon, micro-epsilon, >= 1 */
    float lo, hi;         /* input and output range, finite, lo < hi */
    float sensitivity;    /* L1 sensitivity of the clamped input vector, > 0 */
    int32_t m;            /* lattice exponent -30..30, or EDP_M_AUTO */
} edp_mech_config_t;

typedef struct {
    edp_mech_config_t cfg;  /* configuration the plan was made from */
    uint32_t k;
    int32_t m;
    float scale;            /* 2^m */
    int32_t ylo, yhi;
    edp_dlap_quant_t quant; /* 2^(m+1) and twice the rounded ends of the range (dlap.h) */
    uint32_t noise_insns;   /* edp_deadline_noise(&dlap, k): the release deadline's noise part */
    uint32_t prepare_insns; /* edp_deadline_prepare(&dlap): its set-up part, for the preparing request */
    edp_dlap_t dlap;
} edp_mech_plan_t;

/* Check a configuration independently of k. Returns EDP_OK or EDP_ERR_BAD_VALUE. */
int edp_mech_config_check(const edp_mech_config_t *c);

/* Prepare a plan for k classes (1..EDP_MAX_CLASSES). Returns EDP_OK or
 * EDP_ERR_BAD_VALUE. Costs one table build (double arithmetic, no libm). */
int edp_mech_prepare(edp_mech_plan_t *p, const edp_mech_config_t *c, uint32_t k);

/* EDP_ERR_BAD_VALUE if any of x[0..k) is NaN or +-Inf, else EDP_OK. */
int edp_mech_check_values(const float *x, uint32_t k);

/* Clamp x to [lo, hi] and round half away from zero onto the lattice (x finite). */
void edp_mech_quantize(const edp_mech_plan_t *p, const float *x, int32_t *q);

/* y[i] = q_i + z_i: q_i the quantised x[i] (edp_mech_quantize), z_i discrete
 * Laplace(t), in one pass (edp_dlap_noisy); x finite, y distinct from x. The
 * result is not clamped: |y| < 2^31 because |q| <= 2^24 and
 * |z| < 2^31 - 2^24 (EDP_DLAP_Z_LIMIT). */
static inline void edp_mech_noisy(const edp_mech_plan_t *p, edp_drbg_t *rng, const float *x, int32_t *y)
{
    edp_dlap_noisy(&p->dlap, rng, &p->quant, x, y, p->k);
}

/* Validate a mode and its argument for k. Returns EDP_OK or EDP_ERR_BAD_VALUE. */
int edp_mech_mode_check(uint32_t mode, uint32_t arg, uint32_t k);

/* Encode the noisy vector y (modified in place) in the given mode into out.
 * Values sent are clamped to [ylo, yhi]; rankings (LABEL, TOPK, BUCKET's
 * label) use the unclamped noisy values, so that clamping creates no ties.
 * Both are post-processing of the same noisy vector. Returns bytes written,
 * EDP_ERR_LEN if cap is short, or EDP_ERR_BAD_VALUE where edp_mech_mode_fits
 * refuses the mode. */
int edp_mech_output(const edp_mech_plan_t *p, uint32_t mode, uint32_t arg,
                    int32_t *y, uint8_t *out, size_t cap);

/* Whether the plan can answer in this mode: EDP_ERR_BAD_VALUE for SIMPLEX with
 * a lattice step above 1 (m < 0) and for ROUND:D when round(y g, D) of some y
 * in [ylo, yhi] does not fit the wire's int32 (refused, never wrapped or
 * saturated); else EDP_OK. Depends only on the configuration, k and the mode:
 * QUERY checks it before charging or drawing noise. */
int edp_mech_mode_fits(const edp_mech_plan_t *p, uint32_t mode, uint32_t arg);

/* Noisy argmax helper shared by LABEL, BUCKET and local consumers. */
uint32_t edp_mech_argmax(const int32_t *y, uint32_t k);

#endif
