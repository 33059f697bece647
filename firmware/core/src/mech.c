#include "fp_contract.h"  /* first: no fused multiply-add in this file */

#include "mech.h"
#include "deadline.h"
#include "edgedp/error.h"
#include "le.h"
#include "util.h"

#include <string.h>

static int finite_f(float v)
{
    return v == v && v - v == 0.0f;
}

int edp_mech_config_check(const edp_mech_config_t *c)
{
    if (c->eps_micro == 0) return EDP_ERR_BAD_VALUE;
    if (!finite_f(c->lo) || !finite_f(c->hi) || !(c->lo < c->hi)) return EDP_ERR_BAD_VALUE;
    if (!finite_f(c->sensitivity) || !(c->sensitivity > 0.0f)) return EDP_ERR_BAD_VALUE;
    if (c->m != EDP_M_AUTO && (c->m < EDP_M_MIN || c->m > EDP_M_MAX)) return EDP_ERR_BAD_VALUE;
    return EDP_OK;
}

static double pow2d(int32_t e)
{
    double v = 1.0;
    for (; e > 0; e--) v *= 2.0;
    for (; e < 0; e++) v *= 0.5;
    return v;
}

static int32_t ceil_f(float v)
{
    int32_t i = (int32_t)v;
    return (float)i < v ? i + 1 : i;
}

static int32_t floor_f(float v)
{
    int32_t i = (int32_t)v;
    return (float)i > v ? i - 1 : i;
}

/* Round half away from zero of s, |s| < 2^24: trunc(2s) - trunc(s) (with n =
 * trunc(s) and f = s - n of the same sign, trunc(2s) = 2n + trunc(2f), and
 * trunc(2f) is 1 iff f >= 1/2, -1 iff f <= -1/2; 2s is exact). */
static int32_t round_half_away(float s)
{
    return (int32_t)(2.0f * s) - (int32_t)s;
}

/* EDP_M_AUTO: the smallest m in -30..30 with k 2^-m <= sensitivity / 256
 * (lattice.auto_exponent). */
static int32_t auto_exponent(uint32_t k, double sens)
{
    double limit = sens / EDP_M_AUTO_SLACK;
    int32_t m;
    for (m = EDP_M_MIN; m < EDP_M_MAX && (double)k * pow2d(-m) > limit; m++) {
    }
    return m;
}

int edp_mech_prepare(edp_mech_plan_t *p, const edp_mech_config_t *c, uint32_t k)
{
    double sens, shift, inv_t;
    float slo, shi;
    int32_t m;
    int err = edp_mech_config_check(c);
    if (err) return err;
    if (k < 1 || k > EDP_MAX_CLASSES) return EDP_ERR_BAD_VALUE;
    sens = (double)c->sensitivity;
    m = c->m == EDP_M_AUTO ? auto_exponent(k, sens) : c->m;
    p->scale = (float)pow2d(m);
    slo = c->lo * p->scale;
    shi = c->hi * p->scale;
    if (!(slo > -EDP_MECH_LATTICE_LIMIT && slo < EDP_MECH_LATTICE_LIMIT && shi > -EDP_MECH_LATTICE_LIMIT &&
          shi < EDP_MECH_LATTICE_LIMIT))
        return EDP_ERR_BAD_VALUE;
    p->ylo = ceil_f(slo);
    p->yhi = floor_f(shi);
    if (p->ylo > p->yhi) return EDP_ERR_BAD_VALUE;
    p->quant.scale2 = 2.0f * p->scale;
    p->quant.lo2 = 2 * round_half_away(slo);
    p->quant.hi2 = 2 * round_half_away(shi);
    shift = sens * pow2d(m) + (double)k;  /* L1 bound of neighbouring lattice vectors */
    inv_t = ((double)c->eps_micro / 1e6) / shift;
    err = edp_dlap_setup(&p->dlap, inv_t, shift);
    if (err) return err;
    p->noise_insns = edp_deadline_noise(&p->dlap, k);
    p->prepare_insns = edp_deadline_prepare(&p->dlap);
    p->cfg = *c;
    p->k = k;
    p->m = m;
    return EDP_OK;
}

int edp_mech_check_values(const float *x, uint32_t k)
{
    uint32_t i;
    for (i = 0; i < k; i++)
        if (!finite_f(x[i])) return EDP_ERR_BAD_VALUE;
    return EDP_OK;
}

void edp_mech_quantize(const edp_mech_plan_t *p, const float *x, int32_t *q)
{
    const edp_dlap_quant_t qt = p->quant;  /* a local: the stores below may alias *p */
    uint32_t i, k = p->k;
    for (i = 0; i < k; i++) q[i] = edp_dlap_quantize(&qt, x[i]);
}

static int32_t clamp(const edp_mech_plan_t *p, int32_t v)
{
    return v < p->ylo ? p->ylo : v > p->yhi ? p->yhi : v;
}

static void clamp_all(const edp_mech_plan_t *p, int32_t *y)
{
    uint32_t i;
    for (i = 0; i < p->k; i++) y[i] = clamp(p, y[i]);
}

int edp_mech_mode_check(uint32_t mode, uint32_t arg, uint32_t k)
{
    switch (mode) {
    case EDP_MODE_FULL: case EDP_MODE_LABEL: case EDP_MODE_BUCKET: case EDP_MODE_SIMPLEX:
        return arg == 0 ? EDP_OK : EDP_ERR_BAD_VALUE;
    case EDP_MODE_TOPK:
        return (arg >= 1 && arg <= EDP_MAX_TOPK) ? EDP_OK : EDP_ERR_BAD_VALUE;
    case EDP_MODE_ROUND:
        return arg <= EDP_MAX_ROUND_DIGITS ? EDP_OK : EDP_ERR_BAD_VALUE;
    default:
        (void)k;
        return EDP_ERR_BAD_VALUE;
    }
}

static int64_t pow10_i64(uint32_t digits)
{
    int64_t v = 1;
    while (digits--) v *= 10;
    return v;
}

/* 1 iff round(num 2^-m) (ROUND's value in units of 10^-D, num = y 10^D with
 * |num| < 2^44) lies in int32, decided without overflowing int64. */
static int round_fits(int32_t m, int64_t num)
{
    int64_t r;
    if (m <= 0) return num <= (INT64_C(0x7FFFFFFF) >> -m) && num >= -((int64_t)1 << (31 + m));
    r = (num + ((int64_t)1 << (m - 1))) >> m;
    return r <= INT64_C(0x7FFFFFFF) && r >= -INT64_C(0x80000000);
}

int edp_mech_mode_fits(const edp_mech_plan_t *p, uint32_t mode, uint32_t arg)
{
    if (mode == EDP_MODE_SIMPLEX && p->m < 0) return EDP_ERR_BAD_VALUE;
    if (mode == EDP_MODE_ROUND) {
        /* Monotone in y, and y is clamped to [ylo, yhi]: the two ends decide. */
        int64_t pow10 = pow10_i64(arg);
        if (!round_fits(p->m, (int64_t)p->ylo * pow10) || !round_fits(p->m, (int64_t)p->yhi * pow10))
            return EDP_ERR_BAD_VALUE;
    }
    return EDP_OK;
}

uint32_t edp_mech_argmax(const int32_t *y, uint32_t k)
{
    uint32_t i, best = 0;
    for (i = 1; i < k; i++)
        if (y[i] > y[best]) best = i;
    return best;
}

/* Largest integer theta with sum(max(y - theta, 0)) >= 2^m, then remove the
 * excess one step at a time from the lowest-index positive coordinates. */
static void simplex(const edp_mech_plan_t *p, int32_t *y)
{
    int64_t one = (int64_t)1 << p->m, lo, hi, sum;
    uint32_t i;
    lo = y[0];
    hi = y[0];
    for (i = 1; i < p->k; i++) {
        if (y[i] < lo) lo = y[i];
        if (y[i] > hi) hi = y[i];
    }
    lo -= one;
    while (lo < hi) {
        int64_t mid = lo + ((hi - lo + 1) >> 1);
        sum = 0;
        for (i = 0; i < p->k; i++)
            if (y[i] > mid) sum += y[i] - mid;
        if (sum >= one) lo = mid;
        else hi = mid - 1;
    }
    sum = 0;
    for (i = 0; i < p->k; i++) {
        y[i] = y[i] > lo ? (int32_t)(y[i] - lo) : 0;
        sum += y[i];
    }
    sum -= one;
    for (i = 0; i < p->k && sum > 0; i++)
        if (y[i] > 0) {
            y[i]--;
            sum--;
        }
}

/* Every mode but FULL (edp_mech_output's own, with the small frame it needs). */
static EDP_NOINLINE int output_other(const edp_mech_plan_t *p, uint32_t mode, uint32_t arg,
                                     int32_t *y, uint8_t *out, size_t cap)
{
    uint8_t *o = out;
    uint32_t i, j, k = p->k;
    switch (mode) {
    case EDP_MODE_SIMPLEX:
        /* Project the clamped vector; the result lies in [0, 2^m], not in
         * [ylo, yhi], so it is sent as it is. */
        if (p->m < 0) return EDP_ERR_BAD_VALUE;
        if (cap < 4u * k) return EDP_ERR_LEN;
        clamp_all(p, y);
        simplex(p, y);
        for (i = 0; i < k; i++) o = edp_wr32(o, (uint32_t)y[i]);
        break;
    case EDP_MODE_ROUND: {
        int64_t pow10 = pow10_i64(arg);
        if (edp_mech_mode_fits(p, mode, arg)) return EDP_ERR_BAD_VALUE;
        if (cap < 4u * k) return EDP_ERR_LEN;
        for (i = 0; i < k; i++) {
            int64_t num = (int64_t)clamp(p, y[i]) * pow10, r;
            if (p->m <= 0) r = num * ((int64_t)1 << -p->m);
            else r = (num + ((int64_t)1 << (p->m - 1))) >> p->m;  /* arithmetic shift: floor */
            o = edp_wr32(o, (uint32_t)(int32_t)r);
        }
        break;
    }
    case EDP_MODE_LABEL:
        if (cap < 2) return EDP_ERR_LEN;
        o = edp_wr16(o, edp_mech_argmax(y, k));
        break;
    case EDP_MODE_BUCKET: {
        uint32_t lab = edp_mech_argmax(y, k), level;
        int64_t top = (int64_t)clamp(p, y[lab]) - p->ylo, span = (int64_t)p->yhi - p->ylo;
        if (cap < 3) return EDP_ERR_LEN;
        level = 3 * top >= 2 * span ? 2u : 3 * top >= span ? 1u : 0u;
        o = edp_wr16(o, lab);
        *o++ = (uint8_t)level;
        break;
    }
    case EDP_MODE_TOPK: {
        /* Insertion into a sorted list of at most K indices: value desc, index asc. */
        uint16_t idx[EDP_MAX_TOPK];
        uint32_t n = 0, K = arg < k ? arg : k;
        if (cap < 6u * K) return EDP_ERR_LEN;
        for (i = 0; i < k; i++) {
            if (n == K && y[i] <= y[idx[n - 1]]) continue;
            j = n < K ? n++ : n - 1;
            while (j > 0 && y[i] > y[idx[j - 1]]) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = (uint16_t)i;
        }
        for (i = 0; i < n; i++) {
            o = edp_wr16(o, idx[i]);
            o = edp_wr32(o, (uint32_t)clamp(p, y[idx[i]]));
        }
        break;
    }
    default:
        return EDP_ERR_BAD_VALUE;
    }
    return (int)(o - out);
}

int edp_mech_output(const edp_mech_plan_t *p, uint32_t mode, uint32_t arg,
                    int32_t *y, uint8_t *out, size_t cap)
{
    if (mode == EDP_MODE_FULL) {
        uint8_t *o = out;
        const int32_t ylo = p->ylo, yhi = p->yhi;  /* locals: the byte stores below may alias *p */
        const int32_t *const end = y + p->k;
        if (cap < 4u * p->k) return EDP_ERR_LEN;
        do {  /* k >= 1 (edp_mech_prepare) */
            const int32_t v = *y++;
            o = edp_wr32(o, (uint32_t)(v < ylo ? ylo : v > yhi ? yhi : v));
        } while (y != end);
        return (int)(o - out);
    }
    return output_other(p, mode, arg, y, out, cap);
}
