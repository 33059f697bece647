#include "fp_contract.h"  /* first: no fused multiply-add in this file */

#include "arch/arch.h"     /* edp_model_dense4, edp_model_dot */
#include "edgedp/model.h"

#include <string.h>  /* memset */

/* ln 2 split so that n * LN2_HI is exact for |n| < 2^9; 1/ln 2. */
#define LN2_HI 0x1.62e400p-1f
#define LN2_LO 0x1.7f7d1cp-20f
#define LOG2E 0x1.715476p+0f

float edp_model_exp(float x)
{
    union { float f; uint32_t u; } two_n;
    float r, p;
    int32_t n;
    if (!(x >= -87.0f)) return 0.0f;  /* also NaN: never converted to an integer */
    n = (int32_t)(x * LOG2E - 0.5f);  /* x <= 0: x / ln 2 rounded to nearest, halves away from 0 */
    r = (x - (float)n * LN2_HI) - (float)n * LN2_LO;
    p = 0x1.a01a02p-13f;                         /* 1/7! */
    p = p * r + 0x1.6c16c2p-10f;                 /* 1/6! */
    p = p * r + 0x1.111112p-7f;                  /* 1/5! */
    p = p * r + 0x1.555556p-5f;                  /* 1/4! */
    p = p * r + 0x1.555556p-3f;                  /* 1/3! */
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    two_n.u = (uint32_t)(n + 127) << 23;         /* n >= -126: a normal power of two */
    return p * two_n.f;
}

/* y[0..out) = b + x W, accumulated in input order (see model.h); wt is W
 * transposed (row j holds column j of W), so each sum runs over contiguous
 * weights. Four outputs per pass over x (arch/: each group of x loaded once for
 * four rows), then one at a time; each output keeps its own accumulator and order,
 * so the sums are the same as one output at a time. */
static void dense(const edp_dense_t *l, const float *x, float *y)
{
    const uint32_t in = l->in, out = l->out;
    const float *wt = l->wt, *b = l->b;
    uint32_t j = 0;
    for (; j + 4 <= out; j += 4, wt += 4 * in) edp_model_dense4(x, in, wt, b + j, y + j);
    for (; j < out; j++, wt += in) y[j] = edp_model_dot(x, in, wt, b[j]);
}

/* Logits of one net; returns where they are (in the scratch ping-pong pair). */
static const float *net_run(const edp_net_t *net, const float *x, float *a, float *b)
{
    uint32_t l, j;
    for (l = 0; l < net->n_layers; l++) {
        const edp_dense_t *layer = &net->layers[l];
        dense(layer, x, a);
        if (l + 1 < net->n_layers)
            for (j = 0; j < layer->out; j++) a[j] = a[j] > 0.0f ? a[j] : 0.0f;
        x = a;
        a = b;
        b = (float *)x;
    }
    return x;
}

static uint32_t net_width(const edp_net_t *net)
{
    uint32_t l, w = 0;
    for (l = 0; l < net->n_layers; l++)
        if (net->layers[l].out > w) w = net->layers[l].out;
    return w;
}

void edp_model_head(const edp_model_t *m, const uint16_t *cls, const float *z, uint32_t n, float *out)
{
    uint32_t j, best = 0;
    float sum = 0.0f;
    for (j = 1; j < n; j++)
        if (z[j] > z[best]) best = j;
    if (m->head == EDP_MODEL_VOTES) {
        out[cls[best]] += 1.0f;
        return;
    }
    for (j = 0; j < n; j++) {
        out[cls[j]] = edp_model_exp(z[j] - z[best]);
        sum += out[cls[j]];
    }
    for (j = 0; j < n; j++) out[cls[j]] /= sum;
}

void edp_model_clamp(const edp_model_t *m, float *x)
{
    const float lo = m->in_lo, hi = m->in_hi;
    uint32_t i;
    for (i = 0; i < m->n_features; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        x[i] = v > hi ? hi : v;
    }
}

uint32_t edp_model_wipe_bytes(const edp_model_t *m)
{
    const uint32_t floats = m->scratch_floats * (uint32_t)sizeof *m->scratch;
    return m->s8 ? floats + edp_model_wipe_bytes_s8(m) : floats;
}

void edp_model_wipe(const edp_model_t *m)
{
    edp_model_zero(m->scratch, m->scratch_floats * (uint32_t)sizeof *m->scratch);
    if (m->s8) edp_model_wipe_s8(m);
}

void edp_model_zero(void *p, uint32_t n)
{
    memset(p, 0, n);
}

const float *edp_model_run_s8(const edp_model_t *m, const float *x)
{
    float *out = m->scratch, *z = out + m->n_classes;
    const edp_graph_s8_t *g = m->s8->graph;
    uint32_t t, widened = 0;
    memset(out, 0, m->n_classes * sizeof *out);
    if (g) {
        edp_model_graph_run(m, x, z);
        edp_model_head(m, g->cls, z, m->n_classes, out);
        return out;
    }
    edp_model_s8_input(m, x);
    for (t = 0; t < m->n_nets; t++) {
        const edp_net_s8_t *net = &m->s8->nets[t];
        edp_model_s8_net(m, t, &widened, z);
        edp_model_head(m, net->cls, z, net->layers[net->n_layers - 1].out, out);
    }
    return out;
}

const float *edp_model_run(const edp_model_t *m, const float *x)
{
    float *out = m->scratch, *a = out + m->n_classes;
    uint32_t t, k = m->n_classes;
    if (m->s8) return edp_model_run_s8(m, x);
    memset(out, 0, k * sizeof *out);
    for (t = 0; t < m->n_nets; t++) {
        const edp_net_t *net = &m->nets[t];
        const uint32_t n = net->layers[net->n_layers - 1].out;
        edp_model_head(m, net->cls, net_run(net, x, a, a + net_width(net)), n, out);
    }
    return out;
}
