/* int8 inference (edgedp/model.h, docs/model.md "int8 models"): integer
 * arithmetic only up to the logits, so any order of the sums gives the same
 * bits; the dequantisation is float32. model.c runs these kernels and the
 * head; nothing here calls into model.c. */
#include "fp_contract.h"  /* first: no fused multiply-add in this file */

#include "edgedp/model.h"

#include <string.h>  /* memcpy, memset */

/* Two outputs' sums over n4 >= 1 words of weights each: a0 += row w0 . x,
 * a1 += row w1 . x, x widened as in dense_s8 (xp[2i] = lanes x_4i, x_4i+2 and
 * xp[2i+1] = x_4i+1, x_4i+3 as int16 pairs). With the DSP extension: per word
 * SXTB16, SXTB16 ROR #8 and two SMLAD per row, one LDRD of the input shared. */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
static inline uint32_t lo16(uint32_t v) { return (uint32_t)__sxtb16((int32_t)v); }
static inline uint32_t hi16(uint32_t v)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
static inline void dot2(const int8_t *w0, const int8_t *w1, const uint32_t *xi, uint32_t n4,
                        int32_t *a0, int32_t *a1)
{
    int32_t s0 = *a0, s1 = *a1;
    uint32_t v0, v1, x02, x13, t;
    __asm__ volatile(
        "1:\n\t"
        "ldr    %[v0], [%[w0]], #4\n\t"
        "ldr    %[v1], [%[w1]], #4\n\t"
        "ldrd   %[x02], %[x13], [%[xi]], #8\n\t"
        "sxtb16 %[t], %[v0]\n\t"
        "smlad  %[s0], %[t], %[x02], %[s0]\n\t"
        "sxtb16 %[t], %[v0], ror #8\n\t"
        "smlad  %[s0], %[t], %[x13], %[s0]\n\t"
        "sxtb16 %[t], %[v1]\n\t"
        "smlad  %[s1], %[t], %[x02], %[s1]\n\t"
        "sxtb16 %[t], %[v1], ror #8\n\t"
        "smlad  %[s1], %[t], %[x13], %[s1]\n\t"
        "subs   %[n], %[n], #1\n\t"
        "bne    1b"
        : [s0] "+r"(s0), [s1] "+r"(s1), [w0] "+r"(w0), [w1] "+r"(w1), [xi] "+r"(xi), [n] "+r"(n4),
          [v0] "=&r"(v0), [v1] "=&r"(v1), [x02] "=&r"(x02), [x13] "=&r"(x13), [t] "=&r"(t)
        :
        : "cc", "memory");
    *a0 = s0;
    *a1 = s1;
}
/* One output's sum, as one row of dot2 (an odd last output). */
static inline void dot1(const int8_t *w0, const uint32_t *xi, uint32_t n4, int32_t *a0)
{
    int32_t s0 = *a0;
    uint32_t v0, x02, x13, t;
    __asm__ volatile(
        "1:\n\t"
        "ldr    %[v0], [%[w0]], #4\n\t"
        "ldrd   %[x02], %[x13], [%[xi]], #8\n\t"
        "sxtb16 %[t], %[v0]\n\t"
        "smlad  %[s0], %[t], %[x02], %[s0]\n\t"
        "sxtb16 %[t], %[v0], ror #8\n\t"
        "smlad  %[s0], %[t], %[x13], %[s0]\n\t"
        "subs   %[n], %[n], #1\n\t"
        "bne    1b"
        : [s0] "+r"(s0), [w0] "+r"(w0), [xi] "+r"(xi), [n] "+r"(n4), [v0] "=&r"(v0), [x02] "=&r"(x02),
          [x13] "=&r"(x13), [t] "=&r"(t)
        :
        : "cc", "memory");
    *a0 = s0;
}
#else
static inline uint32_t pack(uint32_t l, uint32_t h) { return (uint32_t)(uint16_t)(int16_t)(int8_t)l | ((uint32_t)(int16_t)(int8_t)h << 16); }
static inline uint32_t lo16(uint32_t v) { return pack(v, v >> 16); }
static inline uint32_t hi16(uint32_t v) { return pack(v >> 8, v >> 24); }
static inline int32_t dual(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + (int32_t)(int16_t)a * (int16_t)b + (int32_t)(int16_t)(a >> 16) * (int16_t)(b >> 16);
}
static inline void dot2(const int8_t *w0, const int8_t *w1, const uint32_t *xi, uint32_t n4,
                        int32_t *a0, int32_t *a1)
{
    int32_t s0 = *a0, s1 = *a1;
    uint32_t v0, v1;
    for (; n4; n4--, w0 += 4, w1 += 4, xi += 2) {
        memcpy(&v0, w0, 4);
        memcpy(&v1, w1, 4);
        s0 = dual(lo16(v0), xi[0], dual(hi16(v0), xi[1], s0));
        s1 = dual(lo16(v1), xi[0], dual(hi16(v1), xi[1], s1));
    }
    *a0 = s0;
    *a1 = s1;
}
static inline void dot1(const int8_t *w0, const uint32_t *xi, uint32_t n4, int32_t *a0)
{
    int32_t s0 = *a0;
    uint32_t v0;
    for (; n4; n4--, w0 += 4, xi += 2) {
        memcpy(&v0, w0, 4);
        s0 = dual(lo16(v0), xi[0], dual(hi16(v0), xi[1], s0));
    }
    *a0 = s0;
}
#endif

static uint32_t row4(uint32_t n) { return (n + 3u) & ~3u; }

static uint32_t load32(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* y = requantised acc (hidden layer): ((acc mult + 2^(S-1)) >> S) - 128, saturated
 * to int8. With S >= 33 the rounding term only reaches the high word h of the
 * product, and floor((h 2^32 + l + 2^(S-1)) / 2^S) = (h + 2^(S-33)) >> (S-32)
 * for any low word l; |h| < 2^30, so nothing overflows. */
static int8_t requant(int32_t acc, int32_t mult, uint32_t s)
{
    const int32_t h = (int32_t)(((int64_t)acc * mult) >> 32);
    const int32_t y = ((h + (1 << (s - 33u))) >> (s - 32u)) - 128;
    return (int8_t)(y < -128 ? -128 : (y > 127 ? 127 : y));
}

/* Output j of layer l from its sum: requantised into y (a hidden layer) or
 * dequantised into z (the last, y NULL). Exactly one of y and z is non-NULL
 * (edp_model_run_s8), which cppcheck does not follow (nullPointer). */
static inline void put_s8(const edp_dense_s8_t *l, uint32_t j, int32_t acc, int8_t *y, float *z)
{
    if (y) y[j] = requant(acc, l->mult[j], l->shift[j]);
    else z[j] = (float)acc * l->scale[j];  /* cppcheck-suppress nullPointer */
}

/* One layer on x (row(in) int8 values): hidden layers write int8 y, the last
 * float z. The input is widened into xp (unless `widened`: xp holds x widened
 * already); each pass over it feeds two outputs' accumulators (two weight rows),
 * an odd last output one pass of its own (its row once). */
static void dense_s8(const edp_dense_s8_t *l, const int8_t *x, uint32_t widened, uint32_t *xp, int8_t *y, float *z)
{
    const uint32_t n4 = row4(l->in) / 4u, row = 4u * n4, out = l->out;
    const int8_t *w = l->wt;
    uint32_t i, j;
    for (i = 0; !widened && i < n4; i++) {
        const uint32_t v = load32(x + 4u * i);
        xp[2u * i] = lo16(v);
        xp[2u * i + 1u] = hi16(v);
    }
    for (j = 0; j + 1u < out; j += 2u, w += 2u * row) {
        int32_t a0 = l->b[j], a1 = l->b[j + 1u];
        dot2(w, w + row, xp, n4, &a0, &a1);
        put_s8(l, j, a0, y, z);
        put_s8(l, j + 1u, a1, y, z);
    }
    if (j < out) {  /* an odd last output: its row alone */
        int32_t a0 = l->b[j];
        dot1(w, xp, n4, &a0);
        put_s8(l, j, a0, y, z);
    }
}

void edp_model_s8_input(const edp_model_t *m, const float *x)
{
    const edp_model_s8_t *q = m->s8;
    int8_t *xq = q->act;
    const float in_mul = q->in_mul, in_add = q->in_add;  /* locals: the int8 stores may alias them */
    const uint32_t n = m->n_features;
    uint32_t i;
    for (i = 0; i < n; i++) {
        const float v = x[i] * in_mul + in_add;
        const int32_t u = !(v >= 0.0f) ? 0 : (v >= 255.0f ? 255 : (int32_t)v);  /* floor: v >= 0 */
        xq[i] = (int8_t)(u - 128);
    }
}

void edp_model_s8_net(const edp_model_t *m, uint32_t t, uint32_t *widened, float *z)
{
    const edp_model_s8_t *q = m->s8;
    const edp_net_s8_t *net = &q->nets[t];
    int8_t *xq = q->act, *ping = xq + row4(m->n_features), *pong = ping + q->hidden_row;
    const int8_t *in = xq;
    int8_t *a = ping, *b = pong;
    uint32_t l, xq_widened = *widened;  /* xp holds xq widened: the last layer run was a first one */
    for (l = 0; l + 1u < net->n_layers; l++) {
        dense_s8(&net->layers[l], in, l == 0 && xq_widened, q->xp, a, NULL);
        xq_widened = l == 0;
        in = a;
        a = b;
        b = (int8_t *)in;
    }
    dense_s8(&net->layers[l], in, l == 0 && xq_widened, q->xp, NULL, z);
    *widened = l == 0;
}

/* act and xp: row(n_features) + 2 hidden_row bytes and xp_words words; a
 * graph: its arena. */
uint32_t edp_model_wipe_bytes_s8(const edp_model_t *m)
{
    if (m->s8->graph) return m->s8->graph->arena_bytes;
    return row4(m->n_features) + 2u * m->s8->hidden_row + m->s8->xp_words * (uint32_t)sizeof *m->s8->xp;
}

void edp_model_wipe_s8(const edp_model_t *m)
{
    if (m->s8->graph) {
        edp_model_zero(m->s8->graph->arena, m->s8->graph->arena_bytes);
        return;
    }
    edp_model_zero(m->s8->act, row4(m->n_features) + 2u * m->s8->hidden_row);
    edp_model_zero(m->s8->xp, m->s8->xp_words * (uint32_t)sizeof *m->s8->xp);
}
