/* Imported graphs (edgedp/model.h edp_graph_s8_t, docs/model.md "Imported
 * graphs"): int8 operators with TFLite's reference-kernel arithmetic, so the
 * int8 output equals the TFLite reference interpreter's bit for bit; the input's
 * quantisation and the output's dequantisation are float32. Integer sums are
 * exact in any order. Portable C (no DSP extension needed). */
#include "fp_contract.h"  /* first: no fused multiply-add in this file */

#include "edgedp/model.h"

#include <string.h>  /* memcpy, memset */

/* SaturatingRoundingDoublingHighMul: (a b + nudge) / 2^31 truncated toward
 * zero (nudge 2^30, or 1 - 2^30 for a negative product); INT32_MAX for
 * INT32_MIN * INT32_MIN. The division by a power of two is written as shifts
 * of the magnitude (no 64-bit division call). */
static int32_t srdhm(int32_t a, int32_t b)
{
    const int64_t ab = (int64_t)a * b;
    const int64_t v = ab + (ab >= 0 ? (int64_t)1 << 30 : 1 - ((int64_t)1 << 30));
    if (a == b && a == INT32_MIN) return INT32_MAX;
    return (int32_t)(v >= 0 ? v >> 31 : -((-v) >> 31));
}

/* RoundingDivideByPOT: x / 2^e rounded to nearest, halves away from zero (e 0..31). */
static int32_t rdbpot(int32_t x, uint32_t e)
{
    const int32_t mask = (int32_t)((((uint32_t)1 << e) - 1u) & 0x7FFFFFFFu);
    const int32_t rem = x & mask, thr = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (rem > thr ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier: TFLite's double rounding. The left shift
 * wraps as TFLite's int32 product does (shift > 0 occurs with real multipliers
 * >= 1 only). */
static int32_t requant2(int32_t acc, int32_t mult, int32_t shift)
{
    const uint32_t left = shift > 0 ? (uint32_t)shift : 0u, right = shift > 0 ? 0u : (uint32_t)-shift;
    return rdbpot(srdhm((int32_t)((uint32_t)acc << left), mult), right);
}

/* The single rounding: (acc mult + 2^(30 - shift)) >> (31 - shift) in int64. */
static int32_t requant1(int32_t acc, int32_t mult, int32_t shift)
{
    const uint32_t r = (uint32_t)(31 - shift);
    return (int32_t)(((int64_t)acc * mult + ((int64_t)1 << (r - 1u))) >> r);
}

static int8_t clamp8(const edp_op_s8_t *o, int32_t v)
{
    return (int8_t)(v < o->act_min ? o->act_min : (v > o->act_max ? o->act_max : v));
}

/* Output channel c's value from its sum. */
static int8_t out8(const edp_op_s8_t *o, uint32_t c, int32_t acc)
{
    const uint32_t q = o->n_q == 1u ? 0u : c;
    const int32_t v = o->single_round ? requant1(acc, o->mult[q], o->shift[q]) : requant2(acc, o->mult[q], o->shift[q]);
    return clamp8(o, v + o->y_zp);
}

/* The rows [*y0, *y1) of a kernel window at origin `org` inside [0, n) (taps
 * spaced by d). */
static void taps(int32_t org, uint32_t k, uint32_t d, uint32_t n, uint32_t *t0, uint32_t *t1)
{
    uint32_t t = 0;
    while (t < k && org + (int32_t)(t * d) < 0) t++;
    *t0 = t;
    while (t < k && org + (int32_t)(t * d) < (int32_t)n) t++;
    *t1 = t;
}

/* Conv2D and DepthwiseConv2D. The operator's fields are copied to locals
 * first: the int8 stores may alias them. */
static void conv(const edp_op_s8_t *o, const int8_t *x, int8_t *y, uint32_t depthwise)
{
    const int32_t off = -o->a_zp;
    const uint32_t ic = o->ic, oc = o->oc, mul = depthwise ? oc / ic : 1u;
    const uint32_t kh = o->kh, kw = o->kw, sh = o->sh, sw = o->sw, dh = o->dh, dw = o->dw;
    const uint32_t ih = o->ih, iw = o->iw, oh = o->oh, ow = o->ow;
    const int32_t pt = o->pt, pl = o->pl;
    const int8_t *const w = o->w;
    const int32_t *const bias = o->bias;
    uint32_t oy, ox, c, ky, kx, i, y0, y1, x0, x1;
    for (oy = 0; oy < oh; oy++) {
        const int32_t iy0 = (int32_t)(oy * sh) - pt;
        taps(iy0, kh, dh, ih, &y0, &y1);
        for (ox = 0; ox < ow; ox++, y += oc) {
            const int32_t ix0 = (int32_t)(ox * sw) - pl;
            taps(ix0, kw, dw, iw, &x0, &x1);
            for (c = 0; c < oc; c++) {
                int32_t acc = bias[c];
                for (ky = y0; ky < y1; ky++) {
                    const size_t row = (size_t)(uint32_t)(iy0 + (int32_t)(ky * dh)) * iw;
                    for (kx = x0; kx < x1; kx++) {
                        const int8_t *px = x + (row + (uint32_t)(ix0 + (int32_t)(kx * dw))) * ic;  /* inside: >= 0 */
                        if (depthwise) {
                            acc += (px[c / mul] + off) * w[((size_t)ky * kw + kx) * oc + c];
                        } else {
                            const int8_t *pw = w + (((size_t)c * kh + ky) * kw + kx) * ic;
                            int32_t s = 0;
                            for (i = 0; i < ic; i++) s += (px[i] + off) * pw[i];
                            acc += s;
                        }
                    }
                }
                y[c] = out8(o, c, acc);
            }
        }
    }
}

static void fc(const edp_op_s8_t *o, const int8_t *x, int8_t *y)
{
    const int32_t off = -o->a_zp;
    const uint32_t n = (uint32_t)o->ih * o->iw * o->ic;
    uint32_t c, i;
    for (c = 0; c < o->oc; c++) {
        const int8_t *pw = o->w + (size_t)c * n;
        int32_t acc = o->bias[c];
        for (i = 0; i < n; i++) acc += (x[i] + off) * pw[i];
        y[c] = out8(o, c, acc);
    }
}

/* TFLite's rounded division of a pool sum by its tap count. */
static int32_t div_round(int32_t s, int32_t n)
{
    return s > 0 ? (s + n / 2) / n : (s - n / 2) / n;
}

static void pool(const edp_op_s8_t *o, const int8_t *x, int8_t *y, uint32_t avg)
{
    const uint32_t ch = o->ic;
    uint32_t oy, ox, c, ky, kx, y0, y1, x0, x1;
    for (oy = 0; oy < o->oh; oy++) {
        const int32_t iy0 = (int32_t)(oy * o->sh) - o->pt;
        taps(iy0, o->kh, 1u, o->ih, &y0, &y1);
        for (ox = 0; ox < o->ow; ox++, y += ch) {
            const int32_t ix0 = (int32_t)(ox * o->sw) - o->pl;
            taps(ix0, o->kw, 1u, o->iw, &x0, &x1);
            for (c = 0; c < ch; c++) {
                int32_t acc = avg ? 0 : -128;
                for (ky = y0; ky < y1; ky++)
                    for (kx = x0; kx < x1; kx++) {
                        const int32_t v = x[((size_t)(iy0 + (int32_t)ky) * o->iw + (uint32_t)(ix0 + (int32_t)kx)) * ch + c];
                        acc = avg ? acc + v : (v > acc ? v : acc);
                    }
                if (avg) acc = div_round(acc, (int32_t)((y1 - y0) * (x1 - x0)));
                y[c] = clamp8(o, acc);
            }
        }
    }
}

static void mean(const edp_op_s8_t *o, const int8_t *x, int8_t *y)
{
    const uint32_t n = (uint32_t)o->ih * o->iw, ch = o->ic;
    uint32_t c, i;
    for (c = 0; c < ch; c++) {
        int32_t acc = 0;
        for (i = 0; i < n; i++) acc += x[(size_t)i * ch + c] - o->a_zp;
        y[c] = out8(o, 0u, acc);
    }
}

static void pad(const edp_op_s8_t *o, const int8_t *x, int8_t *y)
{
    const size_t row = (size_t)o->iw * o->ic;
    uint32_t r;
    memset(y, (int)(int8_t)o->y_zp, (size_t)o->oh * o->ow * o->oc);
    for (r = 0; r < o->ih; r++)
        memcpy(y + (((size_t)r + o->pt) * o->ow + o->pl) * o->oc, x + r * row, row);
}

static void add(const edp_op_s8_t *o, const int8_t *a, const int8_t *b, int8_t *y)
{
    const uint32_t n = (uint32_t)o->oh * o->ow * o->oc;
    uint32_t i;
    for (i = 0; i < n; i++) {
        const int32_t u = requant2((a[i] - o->a_zp) * (1 << 20), o->mult[0], o->shift[0]);
        const int32_t v = requant2((b[i] - o->b_zp) * (1 << 20), o->mult[1], o->shift[1]);
        y[i] = clamp8(o, requant2(u + v, o->mult[2], o->shift[2]) + o->y_zp);
    }
}

/* x / s rounded to nearest, halves away from zero (std::round), plus zp, clamped
 * to int8; v is clamped first so that the conversion is defined. */
static int8_t quantize(float x, float s, int32_t zp)
{
    float v = x / s, f;
    int32_t r;
    v = v < -256.0f ? -256.0f : (v > 256.0f ? 256.0f : v);
    r = (int32_t)v;              /* toward zero */
    f = v - (float)r;            /* exact */
    r += f >= 0.5f ? 1 : (f <= -0.5f ? -1 : 0);
    r += zp;
    return (int8_t)(r < -128 ? -128 : (r > 127 ? 127 : r));
}

void edp_model_graph_run(const edp_model_t *m, const float *x, float *z)
{
    const edp_graph_s8_t *g = m->s8->graph;
    const uint32_t n_in = m->n_features, n_out = m->n_classes;
    int8_t *arena = g->arena;
    const float in_scale = g->in_scale, out_scale = g->out_scale;  /* locals: the int8 stores may alias them */
    const int32_t in_zp = g->in_zp, out_zp = g->out_zp;
    const int8_t *q;
    uint32_t i;
    for (i = 0; i < n_in; i++) arena[g->in + i] = quantize(x[i], in_scale, in_zp);
    for (i = 0; i < g->n_ops; i++) {
        const edp_op_s8_t *o = &g->ops[i];
        const int8_t *a = arena + o->a;
        int8_t *y = arena + o->y;
        switch (o->op) {
        case EDP_OP_CONV: conv(o, a, y, 0u); break;
        case EDP_OP_DWCONV: conv(o, a, y, 1u); break;
        case EDP_OP_FC: fc(o, a, y); break;
        case EDP_OP_AVGPOOL: pool(o, a, y, 1u); break;
        case EDP_OP_MAXPOOL: pool(o, a, y, 0u); break;
        case EDP_OP_MEAN: mean(o, a, y); break;
        case EDP_OP_PAD: pad(o, a, y); break;
        case EDP_OP_ADD: add(o, a, arena + o->b, y); break;
        default: break;  /* the generator writes only the kinds above */
        }
    }
    q = arena + g->out;
    for (i = 0; i < n_out; i++) z[i] = (float)(q[i] - out_zp) * out_scale;
}
