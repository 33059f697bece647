#include "edgedp/deadline.h"
#include "edgedp/mech.h"

/* Instruction constants (deadline.h). The draw and refill ones are at least
 * twice the longest paths that host/edgedp/bench/deadline.py measures on the
 * compiled image (at the time of writing: a draw 467 + product + less_than, 2,235 with 6
 * chunks; a refill 3,191), checked by tests/firmware/test_deadline.py; the
 * request's parts are checked there against whole windows. */
#define DL_DRAW_BASE 1000u      /* sampler loop pass, tier-1 acceptance, tie, tail round */
#define DL_DRAW_PER_CHUNK 240u  /* exact acceptance: less_than over 2 limbs per chunk */
#define DL_DRAW_PER_CHUNK2 60u  /* exact acceptance: product, quadratic in the chunks */
#define DL_REFILL 6400u         /* edp_drbg_next_block: 4 ChaCha20 blocks, key erasure */
#define DL_REFILL_WORDS 56u     /* keystream words a refill makes available */
#define DL_FIXED 40000u         /* charge (reseed, store commit, flash mark), header, window */
#define DL_PER_INPUT 60u        /* COBS decoding, CRC and checks of 4 request bytes */
#define DL_PER_CLASS 60u        /* quantize, clamp, CRC and encoding of 4 response bytes */
#define DL_TOPK_PER_K 16u       /* TOPK insertion: per class and per K */
#define DL_SIMPLEX 500u         /* SIMPLEX: 33 bisection passes, per class */
#define DL_MODEL_NET 400u       /* per net of the model */
#define DL_MODEL_MAC 12u        /* per multiply-add of a dense layer */
#define DL_MODEL_UNIT 40u       /* per output of a dense layer (bias, ReLU, store) */
#define DL_MODEL_CLASS 300u     /* per class and net: softmax exp and division, or the vote */

/* 40 ln 2 and its square, for the Chernoff bound. */
#define DL_LAMBDA 27.725887222397812
#define DL_LAMBDA2 768.72482

static uint32_t sat32(uint64_t v)
{
    return v > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)v;
}

/* ceil(sqrt(v)) for v < 2^52, by bisection on integers (no libm). */
static uint32_t sqrt_ceil(uint64_t v)
{
    uint32_t lo = 0, hi = 1u << 26;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)mid * mid >= v) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* A lower bound on the probability that one draw ends its coordinate, given
 * anything drawn before: V is accepted with probability a_V >= exp(-(2^L - 1)/t)
 * > exp(-1/8) > 0.8824 (2^(L+3) <= t when L > 0; a_V = 1 when L = 0); the
 * redraw of (negative, 0) takes at most 2^-(L+1); a tail outcome (mass q^tail
 * with q = exp(-2^L/t) < exp(-1/16), tail = 63, or < 2^-20: at most 0.021;
 * at most 4.4e-4 when L = 0, t < 8) draws again. A tail round ends the
 * coordinate unless it is a tail outcome again. */
static double finish_probability(uint32_t L)
{
    double half = 0.5;
    uint32_t i;
    for (i = 0; i < L; i++) half *= 0.5;
    return (L ? 0.8824 - 0.021 : 1.0 - 4.4e-4) - half;
}

uint32_t edp_deadline_noise(const edp_dlap_t *d, uint32_t k)
{
    double mu = (double)k + DL_LAMBDA + (double)sqrt_ceil((uint64_t)(DL_LAMBDA2 + 2.0 * DL_LAMBDA * (double)k) + 1u);
    uint64_t draws = (uint64_t)(mu / finish_probability(d->L)) + 1u;
    uint64_t nc = d->nchunks;
    uint64_t per_draw = DL_DRAW_BASE + DL_DRAW_PER_CHUNK * nc + DL_DRAW_PER_CHUNK2 * nc * nc;
    uint64_t refills = (draws * (4u + 2u * nc) + DL_REFILL_WORDS - 1u) / DL_REFILL_WORDS + 1u;
    return sat32(draws * per_draw + refills * DL_REFILL);
}

static uint64_t model_insns(const edp_model_t *m)
{
    uint64_t n = 0;
    uint32_t i, l;
    for (i = 0; i < m->n_nets; i++) {
        const edp_net_t *net = &m->nets[i];
        n += DL_MODEL_NET + (uint64_t)DL_MODEL_CLASS * m->n_classes;
        for (l = 0; l < net->n_layers; l++) {
            const edp_dense_t *layer = &net->layers[l];
            n += (uint64_t)layer->out * (DL_MODEL_UNIT + (uint64_t)DL_MODEL_MAC * layer->in);
        }
    }
    return n;
}

uint32_t edp_deadline_answer(uint32_t noise, uint32_t n_in, uint32_t k, uint32_t mode, uint32_t arg,
                             const edp_model_t *model, int prepared)
{
    uint64_t per_class = DL_PER_CLASS;
    if (mode == EDP_MODE_TOPK) per_class += (uint64_t)DL_TOPK_PER_K * arg;
    if (mode == EDP_MODE_SIMPLEX) per_class += DL_SIMPLEX;
    return sat32((uint64_t)noise + DL_FIXED + (uint64_t)DL_PER_INPUT * n_in + per_class * k +
                 (model ? model_insns(model) : 0u) + (prepared ? EDP_DEADLINE_PREPARE : 0u));
}
