#include "fp_contract.h"  /* first: no fused multiply-add in this file */

/* The external answers (answer.h). */
#include "answer.h"

#include "audit.h"
#include "crc32.h"
#include "deadline.h"
#include "edgedp/error.h"
#include "le.h"
#include "mark.h"
#include "rate.h"
#include "util.h"
#include "window.h"

#include <stddef.h>
#include <string.h>

void edp_answer_reseed(edp_dev_t *d)
{
    uint8_t key[32];
    d->entropy_ok = d->port->entropy(d->port->ctx, key) >= 0;
    if (d->entropy_ok) edp_drbg_seed(&d->drbg, key);
    else edp_drbg_wipe(&d->drbg);
    edp_wipe(key, sizeof key);
}

static int ensure_plan(edp_dev_t *d, uint32_t k)
{
    int err;
    if (d->plan_valid && d->plan.k == k) return EDP_OK;
    d->plan_valid = 0;
    d->prepared = 1;
    err = edp_mech_prepare(&d->plan, &d->rec.mech, k);
    if (err) return err;
    d->plan_valid = 1;
    return EDP_OK;
}

/* Parse mode u8 | arg u8 | k u16 | k x f32 into d->xin (finite values). The mode is
 * checked by the caller against the length of the vector it releases. */
static int parse_vector(edp_dev_t *d, const uint8_t *b, size_t n, uint32_t *mode, uint32_t *arg, uint32_t *k)
{
    uint32_t i, nonfinite = 0;
    if (n < EDP_VECTOR_HEAD) return EDP_ERR_LEN;
    *mode = b[0];
    *arg = b[1];
    *k = edp_rd16(b + 2);
    if (*k < 1 || *k > EDP_MAX_CLASSES) return EDP_ERR_BAD_VALUE;
    if (n != EDP_VECTOR_HEAD + EDP_VALUE_BYTES * (size_t)*k) return EDP_ERR_LEN;
    for (i = 0; i < *k; i++) {
        const uint32_t v = edp_rd32(b + EDP_VECTOR_HEAD + EDP_VALUE_BYTES * i);
        /* NaN and Inf have an all-ones exponent: then adding 1 to it sets bit 31. */
        nonfinite |= (v & 0x7F800000u) + 0x00800000u;
        memcpy(&d->xin[i], &v, 4);
    }
    return nonfinite >> 31 ? EDP_ERR_BAD_VALUE : EDP_OK;
}

/* Everything that can refuse an external answer, then the committed charge:
 * after EDP_OK the spend is durable and the answer must be sent. The budget
 * refusal is decided first, before the reseed, whose turn depends on how much
 * keystream past answers used: a refusal's time depends on the request, the
 * clock and the record only. */
static int charge(edp_dev_t *d, const edp_mech_plan_t *plan, uint32_t mode, uint32_t arg)
{
    uint32_t day;
    edp_record_t next;
    int err;
    if ((err = edp_mech_mode_fits(plan, mode, arg))) return err;
    next = d->rec;
    if ((err = edp_rate_and_day(d, &next.bucket, &day))) {
        if (err == EDP_ERR_RATE) edp_audit_rate_trip(d);
        return err;
    }
    if (!d->store_ok) return EDP_ERR_STORE;
    edp_budget_roll(&next.budget, day);
    if ((err = edp_budget_check(&next.budget, d->rec.mech.eps_micro))) {
        if (err == EDP_ERR_BUDGET) edp_audit_exhausted(d, day);
        return err;
    }
    /* A failed (re)seed is retried at every query; no answer while it fails. */
    if (!d->entropy_ok || (!EDP_TEST_BUILD && d->drbg.blocks_since_seed >= EDP_RESEED_BLOCKS)) {
        const uint8_t was_ok = d->entropy_ok;
        edp_answer_reseed(d);
        if (!d->entropy_ok) {
            if (was_ok) edp_audit_defer(d, EDP_AUDIT_ENTROPY, 1);
            return EDP_ERR_ENTROPY;
        }
    }
    /* Charge before release: commit the spend, then compute and send. */
    edp_budget_charge(&next.budget, d->rec.mech.eps_micro);
    if (next.rate.burst) edp_rate_take(&next.bucket);  /* edp_rate_and_day found the token */
    if ((err = edp_mark_raise(d, &next, (uint64_t)(EDP_FLOG_RESERVE - 1u) * d->rec.mech.eps_micro)) ||
        (err = edp_store_commit(d->port, &next, &d->slot))) {
        d->store_ok = 0;
        return err;
    }
    d->rec = next;
    edp_audit_answered(d);
    return EDP_OK;
}

/* The DP step on x and the answer: remaining u64 | ticks u32 | m i8 | mode u8 |
 * k u16 | extra (elen bytes, already written by the caller) | mode payload. */
static int release(edp_dev_t *d, const edp_mech_plan_t *plan, const float *x,
                   uint32_t mode, uint32_t arg, size_t elen, uint8_t **o)
{
    /* The output's place and room, and the noise's arguments, in registers
     * before the first tick read (the empty asm keeps the compiler from
     * computing them again between the reads, where they would count as the
     * DP step's). */
    uint8_t *out = *o + EDP_QUERY_HEAD + elen;
    size_t cap = EDP_BODY_MAX - EDP_QUERY_HEAD - elen;
    int32_t *y = d->work;
    uint32_t t0, t1;
    int len;
    __asm__ volatile("" : "+r"(out), "+r"(cap), "+r"(y));
    t0 = d->port->ticks(d->port->ctx);
    edp_mech_noisy(plan, &d->drbg, x, y);
    len = edp_mech_output(plan, mode, arg, y, out, cap);
    t1 = d->port->ticks(d->port->ctx);
    if (len < 0) return len;
    *o = edp_wr64(*o, edp_budget_remaining(&d->rec.budget));
    *o = edp_wr32(*o, EDP_REPORT_TICKS ? t1 - t0 : 0);
    *o = edp_wr8(*o, (uint32_t)plan->m);
    *o = edp_wr8(*o, mode);
    *o = edp_wr16(*o, plan->k);
    *o += elen + (size_t)len;
    return EDP_OK;
}

/* Zero the request's values and the lattice vector (k of each, as parsed)
 * before the answer leaves: a later RAM read finds neither input nor noise. */
static void wipe_values(edp_dev_t *d, uint32_t n_in, uint32_t n_work)
{
    if (n_in > EDP_MAX_CLASSES) n_in = EDP_MAX_CLASSES;
    if (n_work > EDP_MAX_CLASSES) n_work = EDP_MAX_CLASSES;
    memset(d->xin, 0, 4 * (size_t)n_in);
    memset(d->work, 0, 4 * (size_t)n_work);
}

static int query(edp_dev_t *d, const uint8_t *b, size_t n, uint32_t *k, uint8_t **o)
{
    uint32_t mode, arg;
    int err = parse_vector(d, b, n, &mode, &arg, k);
    if (err || (err = edp_mech_mode_check(mode, arg, *k))) return err;
    if ((err = ensure_plan(d, *k))) return err;
    if ((err = edp_window_arm(d, &d->plan, *k, mode, arg, 0u))) return err;
    if ((err = charge(d, &d->plan, mode, arg))) {
        d->window_pending = 0;  /* nothing secret ran yet: refuse at once */
        return err;
    }
    return release(d, &d->plan, d->xin, mode, arg, 0, o);
}

int edp_cmd_query(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    uint32_t k = 0;
    int err = query(d, b, n, &k, o);
    wipe_values(d, k, k);
    return err;
}

/* ---- INFER: the model's output goes straight into the mechanism ---- */

static int ensure_infer_plan(edp_dev_t *d, const edp_model_t *m)
{
    edp_mech_config_t c = d->rec.mech;
    int err;
    c.lo = m->lo;
    c.hi = m->hi;
    c.sensitivity = m->sensitivity;
    c.m = m->m;
    if (d->infer_plan_valid && d->infer_plan_model == m && memcmp(&d->infer_plan.cfg, &c, sizeof c) == 0)
        return EDP_OK;
    d->infer_plan_valid = 0;
    d->prepared = 1;
    if ((err = edp_mech_prepare(&d->infer_plan, &c, m->n_classes))) return err;
    d->infer_model_insns = edp_deadline_model(m);
    d->infer_plan_model = m;
    d->infer_plan_valid = 1;
    return EDP_OK;
}

/* The model's output y if all its n_classes values are finite, else the fixed
 * vector lo + (hi - lo) / n_classes in every class (in m->scratch). Out of line
 * so that its longest path (the last value not finite) is measured on its own:
 * the INFER deadline charges it per answer (EDP_DL_NONFINITE and
 * EDP_DL_NONFINITE_CLASS, deadline.c), whichever output the model gave. */
EDP_NOINLINE static const float *finite_output(const edp_model_t *m, const float *y)
{
    float fixed;
    uint32_t i;
    if (edp_mech_check_values(y, m->n_classes) == EDP_OK) return y;
    fixed = m->lo + (m->hi - m->lo) / (float)m->n_classes;
    for (i = 0; i < m->n_classes; i++) m->scratch[i] = fixed;
    return m->scratch;
}

/* The INFER answer (edgedp/device.h): parse (mode u8 | arg u8 | n u16 | n x
 * f32, n = the model's n_features), prepare the plan and open the window (the
 * model's running time depends on its weights: it runs inside), charge, then
 * run the model on the inputs clamped to its declared range. Every refusal
 * comes before the model runs: no error depends on what it computes. A non-
 * finite output is replaced by the fixed vector lo + (hi - lo) / n_classes in
 * every class and released like any other, charged and noised. */
static int infer(edp_dev_t *d, const edp_model_t *m, const uint8_t *b, size_t n, uint32_t *k,
                 uint8_t **o)
{
    uint32_t mode, arg, t0, ticks;
    const float *y;
    int err;
    if ((err = parse_vector(d, b, n, &mode, &arg, k))) return err;
    if (*k != m->n_features) return EDP_ERR_LEN;
    if ((err = edp_mech_mode_check(mode, arg, m->n_classes)) || (err = ensure_infer_plan(d, m)) ||
        (err = edp_window_arm(d, &d->infer_plan, *k, mode, arg, d->infer_model_insns)))
        return err;
    if ((err = charge(d, &d->infer_plan, mode, arg))) {
        d->window_pending = 0;  /* the model has not run: refuse at once */
        return err;
    }
    edp_model_clamp(m, d->xin);
    t0 = d->port->ticks(d->port->ctx);
    y = edp_model_run(m, d->xin);
    ticks = d->port->ticks(d->port->ctx) - t0;
    y = finite_output(m, y);
    edp_wr32(*o + EDP_QUERY_HEAD, EDP_REPORT_TICKS ? ticks : 0);
    return release(d, &d->infer_plan, y, mode, arg, EDP_INFER_TICKS, o);
}

int edp_cmd_infer(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    const edp_model_t *m = d->model;
    uint32_t k = 0;
    int err;
    if (!m) return EDP_ERR_NO_MODEL;
    err = infer(d, m, b, n, &k, o);
    wipe_values(d, k, m->n_classes);
    edp_model_wipe(m);
    return err;
}

int edp_device_local(edp_device_t *dev, const float *x, uint32_t k, int32_t *out)
{
    edp_dev_t *const d = edp_dev(dev);
    int err = edp_mech_check_values(x, k);
    if (err) return err;
    if ((err = ensure_plan(d, k))) return err;
    edp_mech_quantize(&d->plan, x, out);
    for (uint32_t i = 0; i < k; i++) {
        if (out[i] < d->plan.ylo) out[i] = d->plan.ylo;
        if (out[i] > d->plan.yhi) out[i] = d->plan.yhi;
    }
    return EDP_OK;
}

int edp_device_infer_local(edp_device_t *dev, const float *x, uint32_t n, const float **y)
{
    edp_dev_t *const d = edp_dev(dev);
    const edp_model_t *m = d->model;
    if (!m) return EDP_ERR_NO_MODEL;
    if (n != m->n_features) return EDP_ERR_LEN;
    if (edp_mech_check_values(x, n)) return EDP_ERR_BAD_VALUE;
    if (x != d->xin) memcpy(d->xin, x, 4 * (size_t)n);
    edp_model_clamp(m, d->xin);
    *y = edp_model_run(m, d->xin);
    return edp_mech_check_values(*y, m->n_classes);
}

#if EDP_TEST_BUILD
int edp_cmd_infer_local(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    uint32_t mode, arg, k, i, best = 0;
    const float *y;
    int err = parse_vector(d, b, n, &mode, &arg, &k);
    if (err) return err;
    if ((err = edp_device_infer_local(edp_device_of(d), d->xin, k, &y)) ||
        (err = edp_mech_mode_check(mode, arg, d->model->n_classes)))
        return err;
    k = d->model->n_classes;
    for (i = 1; i < k; i++)
        if (y[i] > y[best]) best = i;
    *o = edp_wr16(*o, k);
    *o = edp_wr16(*o, best);
    *o = edp_wr32(*o, edp_crc32(0, y, 4 * (size_t)k));
    return EDP_OK;
}

int edp_cmd_local(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    uint32_t mode, arg, k;
    int err = parse_vector(d, b, n, &mode, &arg, &k);
    if (err || (err = edp_mech_mode_check(mode, arg, k))) return err;
    if ((err = edp_device_local(edp_device_of(d), d->xin, k, d->work))) return err;
    *o = edp_wr16(*o, edp_mech_argmax(d->work, k));
    *o = edp_wr32(*o, edp_crc32(0, d->work, 4 * (size_t)k));
    return EDP_OK;
}

int edp_cmd_sample(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    edp_mech_config_t c;
    uint32_t k, count, i;
    int err;
    if (n != EDP_SAMPLE_REQUEST) return EDP_ERR_LEN;
    c.eps_micro = edp_rd32(b);
    c.sensitivity = edp_rdf(b + 4);
    k = edp_rd16(b + 8);
    count = edp_rd16(b + 10);
    c.m = (int8_t)b[12];
    c.lo = 0.0f;
    c.hi = 1.0f;
    if (count > EDP_SAMPLE_MAX) return EDP_ERR_BAD_VALUE;
    if (!d->entropy_ok) return EDP_ERR_ENTROPY;
    d->plan_valid = 0;
    if ((err = edp_mech_prepare(&d->plan, &c, k))) return err;
    *o = edp_wr8(*o, (uint32_t)d->plan.m);
    *o = edp_wr8(*o, d->plan.dlap.J);
    *o = edp_wr16(*o, count);
    for (i = 0; i < count; i++) *o = edp_wr32(*o, (uint32_t)edp_dlap_sample(&d->plan.dlap, &d->drbg));
    return EDP_OK;
}

int edp_cmd_naive(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    uint32_t mode, arg, k, t0, t1, i;
    float scale;
    int err;
    if (!d->naive) return EDP_ERR_UNKNOWN;
    if (n < EDP_NAIVE_SCALE) return EDP_ERR_LEN;
    scale = edp_rdf(b);
    if (!(scale > 0.0f)) return EDP_ERR_BAD_VALUE;
    if ((err = parse_vector(d, b + EDP_NAIVE_SCALE, n - EDP_NAIVE_SCALE, &mode, &arg, &k)) || (err = edp_mech_mode_check(mode, arg, k)))
        return err;
    t0 = d->port->ticks(d->port->ctx);
    d->naive(d->xin, d->yout, k, scale);
    t1 = d->port->ticks(d->port->ctx);
    *o = edp_wr32(*o, t1 - t0);
    *o = edp_wr16(*o, k);
    for (i = 0; i < k; i++) *o = edp_wrf(*o, d->yout[i]);
    return EDP_OK;
}
#endif
