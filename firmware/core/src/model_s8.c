/* int8 inference (edgedp/model.h, docs/model.md "int8 models"): integer
 * arithmetic only up to the logits, so any order of the sums gives the same
 * bits; the dequantisation and the head are float32 as in model.c. */
#include "fp_contract.h"  /* first: no fused multiply-add in this file */

#include "edgedp/model.h"

#include <string.h>  /* memcpy, memset */

/* Pairs of int16 lanes: lo16 / hi16 sign-extend bytes 0, 2 / 1, 3 of a word
 * into its two halfwords; dual adds both lanes' products to acc. On cores with
 * the DSP extension these are SXTB16, SXTB16 ROR #8 and SMLAD. */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
static inline uint32_t lo16(uint32_t v) { return (uint32_t)__sxtb16((int32_t)v); }
static inline uint32_t hi16(uint32_t v) { return (uint32_t)__sxtb16((int32_t)((v >> 8) | (v << 24))); }
static inline int32_t dual(uint32_t a, uint32_t b, int32_t acc) { return __smlad((int32_t)a, (int32_t)b, acc); }
#else
static inline uint32_t pack(uint32_t l, uint32_t h) { return (uint32_t)(uint16_t)(int16_t)(int8_t)l | ((uint32_t)(int16_t)(int8_t)h << 16); }
static inline uint32_t lo16(uint32_t v) { return pack(v, v >> 16); }
static inline uint32_t hi16(uint32_t v) { return pack(v >> 8, v >> 24); }
static inline int32_t dual(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + (int32_t)(int16_t)a * (int16_t)b + (int32_t)(int16_t)(a >> 16) * (int16_t)(b >> 16);
}
#endif

static uint32_t row4(uint32_t n) { return (n + 3u) & ~3u; }

static uint32_t load32(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* y = requantised acc (hidden layer): round half up, saturate to int8. */
static int8_t requant(int32_t acc, int32_t mult, uint32_t s)
{
    int64_t y = (((int64_t)acc * mult + ((int64_t)1 << (s - 1u))) >> s) - 128;
    return (int8_t)(y < -128 ? -128 : (y > 127 ? 127 : y));
}

/* One layer on x (row(in) int8 values): hidden layers write int8 y, the last
 * float z. The input is widened once into xp; each pass over it feeds two
 * outputs' accumulators (two weight rows). */
static void dense_s8(const edp_dense_s8_t *l, const int8_t *x, uint32_t *xp, int8_t *y, float *z)
{
    const uint32_t n4 = row4(l->in) / 4u, row = 4u * n4, out = l->out;
    const int8_t *w = l->wt;
    uint32_t i, j;
    for (i = 0; i < n4; i++) {
        const uint32_t v = load32(x + 4u * i);
        xp[2u * i] = lo16(v);
        xp[2u * i + 1u] = hi16(v);
    }
    for (j = 0; j < out; j += 2u, w += 2u * row) {
        const int8_t *w1 = j + 1u < out ? w + row : w;  /* an odd last output runs twice */
        int32_t a0 = l->b[j], a1 = l->b[j + 1u < out ? j + 1u : j];
        for (i = 0; i < n4; i++) {
            const uint32_t v0 = load32(w + 4u * i), v1 = load32(w1 + 4u * i);
            const uint32_t x02 = xp[2u * i], x13 = xp[2u * i + 1u];
            a0 = dual(lo16(v0), x02, a0);
            a0 = dual(hi16(v0), x13, a0);
            a1 = dual(lo16(v1), x02, a1);
            a1 = dual(hi16(v1), x13, a1);
        }
        if (y) {
            y[j] = requant(a0, l->mult[j], l->shift[j]);
            if (j + 1u < out) y[j + 1u] = requant(a1, l->mult[j + 1u], l->shift[j + 1u]);
        } else {
            z[j] = (float)a0 * l->scale[j];
            if (j + 1u < out) z[j + 1u] = (float)a1 * l->scale[j + 1u];
        }
    }
}

const float *edp_model_run_s8(const edp_model_t *m, const float *x)
{
    const edp_model_s8_t *q = m->s8;
    float *out = m->scratch, *z = out + m->n_classes;
    int8_t *xq = q->act, *ping = xq + row4(m->n_features), *pong = ping + q->hidden_row;
    uint32_t i, t, l;
    for (i = 0; i < m->n_features; i++) {
        const float v = x[i] * q->in_mul + q->in_add;
        const int32_t u = !(v >= 0.0f) ? 0 : (v >= 255.0f ? 255 : (int32_t)v);  /* floor: v >= 0 */
        xq[i] = (int8_t)(u - 128);
    }
    memset(out, 0, m->n_classes * sizeof *out);
    for (t = 0; t < m->n_nets; t++) {
        const edp_net_s8_t *net = &q->nets[t];
        const int8_t *in = xq;
        int8_t *a = ping, *b = pong;
        for (l = 0; l + 1u < net->n_layers; l++) {
            dense_s8(&net->layers[l], in, q->xp, a, NULL);
            in = a;
            a = b;
            b = (int8_t *)in;
        }
        dense_s8(&net->layers[l], in, q->xp, NULL, z);
        edp_model_head(m, net->cls, z, net->layers[l].out, out);
    }
    return out;
}
