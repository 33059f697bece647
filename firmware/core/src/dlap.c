#include "edgedp/dlap.h"
#include "edgedp/error.h"

#define DLAP_EXP_TERMS 24

double edp_exp_neg(double x)
{
    double r = 1.0;
    int n;
    for (n = DLAP_EXP_TERMS; n > 0; n--) r = 1.0 - x * r / (double)n;
    return r;
}

static edp_threshold_t threshold(double p)
{
    edp_threshold_t th;
    uint64_t v = (uint64_t)(p * 18446744073709551616.0);
    th.hi = (uint32_t)(v >> 32);
    th.lo = (uint32_t)v;
    return th;
}

int edp_dlap_setup(edp_dlap_t *d, double inv_t)
{
    uint32_t J = 0, c, u;
    double pow2 = 1.0;
    if (!(inv_t <= 1.0 && inv_t > 0.0)) return EDP_ERR_BAD_VALUE;
    while (J < 62 && (pow2 * 2.0) * inv_t <= 1.0) {
        J++;
        pow2 *= 2.0;
    }
    if (J > EDP_DLAP_MAX_J) return EDP_ERR_BAD_VALUE;
    d->J = J;
    d->nchunks = (J + EDP_DLAP_CHUNK_BITS - 1) / EDP_DLAP_CHUNK_BITS;
    for (c = 0; c < d->nchunks; c++) {
        uint32_t width = J - EDP_DLAP_CHUNK_BITS * c;
        if (width > EDP_DLAP_CHUNK_BITS) width = EDP_DLAP_CHUNK_BITS;
        for (u = 1; u < (1u << width); u++) {
            double x = (double)(u << (EDP_DLAP_CHUNK_BITS * c)) * inv_t;
            d->chunk[c][u - 1] = threshold(edp_exp_neg(x));
        }
    }
    d->q = threshold(edp_exp_neg(pow2 * inv_t));
    return EDP_OK;
}

int32_t edp_dlap_sample(const edp_dlap_t *d, edp_drbg_t *rng)
{
    for (;;) {
        uint32_t sign = edp_drbg_bits(rng, 1), v, h, c;
        for (;;) {
            v = edp_drbg_bits(rng, d->J);
            for (c = 0; c < d->nchunks; c++) {
                uint32_t u = (v >> (EDP_DLAP_CHUNK_BITS * c)) & 15u;
                if (u && !edp_bernoulli(rng, d->chunk[c][u - 1])) break;
            }
            if (c == d->nchunks) break;
        }
        for (h = 0; h < EDP_DLAP_HMAX && edp_bernoulli(rng, d->q); h++) {
        }
        v += h << d->J;
        if (sign && v == 0) continue;
        return sign ? -(int32_t)v : (int32_t)v;
    }
}
