#include "fp_contract.h"  /* first: no fused multiply-add in this file */

#include "device_state.h"
#include "cobs.h"
#include "crc32.h"
#include "deadline.h"
#include "edgedp/error.h"
#include "frame.h"
#include "sha256.h"
#include "le.h"
#include "util.h"

#include <stddef.h>
#include <string.h>

/* edp_device_t (edgedp/device.h) is the application's storage of the state:
 * it must hold it, without wasting much, at its alignment. A change to the
 * state that fails these updates EDP_DEVICE_FIXED (the fixed part's bytes
 * besides its five pointers) in edgedp/device.h. */
struct edp_dev_align { char c; edp_dev_t s; };
struct edp_device_align { char c; edp_device_t s; };
EDP_STATIC_ASSERT(device_frame, EDP_DEVICE_FRAME == EDP_FRAME_MAX);
EDP_STATIC_ASSERT(device_fits, sizeof(edp_dev_t) <= EDP_DEVICE_SIZE);
EDP_STATIC_ASSERT(device_tight, EDP_DEVICE_SIZE - sizeof(edp_dev_t) < 32u);
EDP_STATIC_ASSERT(device_aligned, offsetof(struct edp_dev_align, s) <= offsetof(struct edp_device_align, s));
EDP_STATIC_ASSERT(rx_holds_response, EDP_WIRE_MAX >= EDP_COBS_MAX(EDP_FRAME_MAX));
EDP_STATIC_ASSERT(audit_fits, EDP_AUDIT_HEAD + EDP_AUDIT_ENTRIES * EDP_AUDIT_ENTRY + EDP_AUTH_TAG <= EDP_BODY_MAX);
EDP_STATIC_ASSERT(audit_entry_is_stored_entry, EDP_AUDIT_ENTRY + 2u == EDP_AUDIT_ENTRY_SIZE);  /* edp_audit_pack */
EDP_STATIC_ASSERT(rate_error_body, EDP_RATE_ERROR_BODY == EDP_ERROR_BODY + 4u);
EDP_STATIC_ASSERT(info_shape_is_the_models, EDP_INFO_MAX_RANK == EDP_MODEL_MAX_RANK);
EDP_STATIC_ASSERT(info_fits, EDP_INFO_HEAD + 3u * (1u + EDP_INFO_TEXT_MAX) <= EDP_BODY_MAX);

static uint8_t *wrs(uint8_t *o, const char *s)
{
    size_t n = strlen(s);
    if (n > EDP_INFO_TEXT_MAX) n = EDP_INFO_TEXT_MAX;
    *o++ = (uint8_t)n;
    memcpy(o, s, n);
    return o + n;
}

/* ---- state ---- */

static void default_record(edp_record_t *r)
{
    memset(r, 0, sizeof *r);
    r->budget.daily_cap = EDP_TEST_BUILD ? EDP_TEST_DEFAULT_DAILY_CAP : 0;
    r->mech.eps_micro = EDP_TEST_DEFAULT_EPS_MICRO;
    r->mech.lo = 0.0f;
    r->mech.hi = 1.0f;
    r->mech.sensitivity = 2.0f;
    r->mech.m = EDP_M_AUTO;
}

static void reseed(edp_dev_t *d)
{
    uint8_t key[32];
    d->entropy_ok = d->port->entropy(d->port->ctx, key) >= 0;
    if (d->entropy_ok) edp_drbg_seed(&d->drbg, key);
    else edp_drbg_wipe(&d->drbg);
    edp_wipe(key, sizeof key);
}

static void new_nonce(edp_dev_t *d)
{
    uint32_t i;
    for (i = 0; i < EDP_AUTH_NONCE; i += 4) (void)edp_wr32(d->nonce + i, edp_drbg_word(&d->auth_drbg));
}

static void auth_seed(edp_dev_t *d)
{
    uint8_t key[32];
    int (*src)(void *, uint8_t *) = d->port->auth_entropy ? d->port->auth_entropy : d->port->entropy;
    d->auth_ok = src(d->port->ctx, key) >= 0;
    if (d->auth_ok) {
        edp_drbg_seed(&d->auth_drbg, key);
        new_nonce(d);
    }
    edp_wipe(key, sizeof key);
}

static edp_flog_mark_t mark_of(const edp_record_t *r)
{
    edp_flog_mark_t m;
    m.day = r->budget.day;
    m.daily = r->budget.daily_spent;
    m.lifetime = r->budget.lifetime_spent;
    m.counter = r->auth_counter;
    return m;
}

/* v + reserve, saturating, but not above cap unless v already is. */
static uint64_t reserved(uint64_t v, uint64_t reserve, uint64_t cap)
{
    uint64_t r = v + reserve < v ? UINT64_MAX : v + reserve;
    return v >= cap ? v : (r > cap ? cap : r);
}

/* Raise the flash mark to cover r before r is committed and acted on. A charge
 * the mark does not cover yet raises it `reserve` micro-epsilon above r's spend
 * (within the caps): the next answers up to the mark write no flash. */
static int mark_raise(edp_dev_t *d, const edp_record_t *r, uint64_t reserve)
{
    edp_flog_mark_t m = mark_of(r);
    const edp_flog_mark_t *have = &d->flog.mark;
    if (!d->port->flash) return EDP_OK;
    if (!d->flog_ok) return EDP_ERR_STORE;
    if (reserve && (m.lifetime > have->lifetime || m.day > have->day ||
                    (m.day == have->day && m.daily > have->daily))) {
        m.daily = reserved(m.daily, reserve, r->budget.daily_cap);
        m.lifetime = reserved(m.lifetime, reserve, r->budget.lifetime_cap ? r->budget.lifetime_cap : UINT64_MAX);
    }
    return edp_flog_raise(&d->flog, &m);
}

/* Lift the counter of the record to at least the flash mark, and its spend
 * too when the store did not load (lost, torn or corrupt): the mark holds
 * reservations, which a loaded store has no need of. */
static void mark_restore(edp_dev_t *d)
{
    const edp_flog_mark_t *m = &d->flog.mark;
    edp_budget_t *b = &d->rec.budget;
    if (m->counter > d->rec.auth_counter) d->rec.auth_counter = m->counter;
    if (d->store_state == EDP_STORE_LOADED) return;
    if (m->lifetime > b->lifetime_spent) b->lifetime_spent = m->lifetime;
    if (m->day > b->day) {
        b->day = m->day;
        b->daily_spent = m->daily;
    } else if (m->day == b->day && m->daily > b->daily_spent) {
        b->daily_spent = m->daily;
    }
}

/* bucket.last of a rate limit restored from the flash log (store.h): the
 * bucket is empty and refills from the first clock read that follows. */
#define BUCKET_UNSET UINT64_MAX

/* The rate limit at boot. A store that did not load cleanly (lost, torn,
 * corrupt) takes the flash log's limit when a RATE newer than the record's
 * counter set it (after a loss: any), with an empty bucket that refills from
 * the first clock read after boot: no burst right after a loss. Then the log
 * is made to hold the limit the device runs, at the lifted counter (a store
 * written before the log kept limits, or a RATE cut between its flash record
 * and its commit, whose answer never left): a later loss restores that one. */
static void rate_restore(edp_dev_t *d, uint64_t record_counter)
{
    const edp_flog_rate_t *have = &d->flog.rate;
    edp_flog_rate_t run;
    if (d->store_state != EDP_STORE_LOADED && have->counter > record_counter) {
        d->rec.rate = have->limit;
        d->rec.bucket.tokens = 0;
        d->rec.bucket.last = BUCKET_UNSET;
    }
    run.counter = d->rec.auth_counter;  /* lifted by mark_restore: >= every counter in the log */
    run.limit = d->rec.rate;
    if (!edp_rate_config_same(&run.limit, &have->limit))
        (void)edp_flog_set_rate(&d->flog, &run);  /* a failure leaves the log's older limit */
}

/* Record the rate limit of r, set by the RATE of counter r->auth_counter, in
 * the flash log before r is committed and acted on (the counter mark rises with it). */
static int rate_raise(edp_dev_t *d, const edp_record_t *r)
{
    edp_flog_rate_t fr;
    if (!d->port->flash) return EDP_OK;
    if (!d->flog_ok) return EDP_ERR_STORE;
    fr.counter = r->auth_counter;
    fr.limit = r->rate;
    return edp_flog_set_rate(&d->flog, &fr);
}

/* A refused RATE whose flash record may be in the log (its commit failed, or
 * its write reported an error after the record landed): the device keeps the
 * limit before it, and a later command may commit the same counter. The log
 * takes that limit again at this counter (a later seq wins), so that a store
 * loss restores the limit the device runs, not the refused one. If that
 * write fails too, the flash log is closed until the next boot (every answer
 * and admin command then fails), whose rate_restore writes the running limit
 * at the lifted counter. */
static void rate_unwind(edp_dev_t *d, uint64_t counter)
{
    edp_flog_rate_t run;
    if (!d->port->flash || !d->flog_ok) return;
    run.counter = counter;
    run.limit = d->rec.rate;
    if (edp_flog_set_rate(&d->flog, &run) != EDP_OK) d->flog_ok = 0;
}

static int today(edp_dev_t *d, uint32_t *day);

/* Append an audit entry (store.h) now. A failed write loses the entry, nothing else. */
static void audit_write(edp_dev_t *d, uint32_t event, uint32_t arg)
{
    edp_audit_entry_t e;
    if (today(d, &e.day) != 0) e.day = EDP_NO_DAY;
    e.seq = d->audit_seq + 1u;
    e.counter = d->rec.auth_counter;
    e.event = (uint8_t)event;
    e.arg = (uint8_t)arg;
    if (edp_audit_append(d->port, &e) == EDP_OK) d->audit_seq = e.seq;
}

/* Log an event of this frame once its answer has left (audit_flush): the write
 * never delays an answer or a refusal, and a power cut during it loses only
 * the entry. At most one event per frame. */
static void audit(edp_dev_t *d, uint32_t event, uint32_t arg)
{
    d->audit_event = (uint8_t)event;
    d->audit_arg = (uint8_t)arg;
}

static void audit_flush(edp_dev_t *d)
{
    if (d->audit_event) audit_write(d, d->audit_event, d->audit_arg);
    d->audit_event = 0;
}

void edp_device_init(edp_device_t *dev, const edp_port_t *port)
{
    edp_dev_t *const d = edp_dev(dev);
    memset(d, 0, sizeof *d);
    d->port = port;
    d->flog_ok = !port->flash || edp_flog_open(&d->flog, port->flash) >= 0;
    d->store_state = (uint8_t)edp_store_load(port, &d->rec, &d->slot);
    d->store_ok = d->store_state == EDP_STORE_LOADED;
    if (d->store_state != EDP_STORE_LOADED && d->store_state != EDP_STORE_RECOVERED) default_record(&d->rec);
    if (port->flash && d->flog_ok) {
        const uint64_t record_counter = d->rec.auth_counter;
        mark_restore(d);
        rate_restore(d, record_counter);
    }
    if (d->store_state == EDP_STORE_RECOVERED) {
        /* The damaged slot may hold a newer commit whose answer was sent: count
         * one more query against both budgets and the rate bucket (over-count,
         * never under-count: a reset refills nothing). */
        edp_budget_charge(&d->rec.budget, d->rec.mech.eps_micro);
        if (d->rec.bucket.tokens >= 60u) edp_rate_take(&d->rec.bucket);  /* one token, or empty */
        else d->rec.bucket.tokens = 0;
        d->store_ok = edp_store_commit(port, &d->rec, &d->slot) == EDP_OK;
    } else if (d->store_state != EDP_STORE_LOADED) {
        /* Test builds start a blank store with the documented defaults; production
         * builds stay closed until an authenticated CONFIG writes a record. */
        if (EDP_TEST_BUILD && d->store_state == EDP_STORE_FRESH)
            d->store_ok = edp_store_commit(port, &d->rec, &d->slot) == EDP_OK;
    }
    if (port->flash && d->flog_ok) (void)edp_flog_prepare(&d->flog);
    reseed(d);
    auth_seed(d);
    d->audit_seq = edp_audit_last(port);
    d->audit_exhausted_day = EDP_NO_DAY;
    if (d->store_state != EDP_STORE_LOADED) audit_write(d, EDP_AUDIT_STORE, d->store_state);
    if (!d->entropy_ok || !d->auth_ok) audit_write(d, EDP_AUDIT_ENTROPY, 0);
}

/* ---- commands ---- */

static int today(edp_dev_t *d, uint32_t *day)
{
    int err = d->port->day(d->port->ctx, day);
    return err < 0 ? err : EDP_OK;
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

/* Today, and with a rate limit: EDP_ERR_RATE (and d->rate_wait) if *bucket,
 * refilled to now, holds no token for one more external answer. Decided from
 * the configuration and the clock only, read once (port.h: day() is
 * seconds() / 86400). A bucket restored after a store loss (rate_restore)
 * starts refilling at the first clock read, also when it refuses. */
static int rate_and_day(edp_dev_t *d, edp_rate_t *bucket, uint32_t *day)
{
    uint64_t now;
    int err;
    if (!d->rec.rate.burst) return today(d, day);
    if (!d->port->seconds || d->port->seconds(d->port->ctx, &now) < 0) return EDP_ERR_TIME;
    if (bucket->last == BUCKET_UNSET) d->rec.bucket.last = bucket->last = now;  /* restored: refill from now */
    if ((err = edp_rate_check(bucket, &d->rec.rate, now, &d->rate_wait))) return err;
    *day = (uint32_t)(now / 86400u);
    return EDP_OK;
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
    if ((err = rate_and_day(d, &next.bucket, &day))) {
        if (err == EDP_ERR_RATE && !d->audit_rate_tripped) {
            d->audit_rate_tripped = 1;
            audit(d, EDP_AUDIT_RATE_TRIP, 0);
        }
        return err;
    }
    if (!d->store_ok) return EDP_ERR_STORE;
    edp_budget_roll(&next.budget, day);
    if ((err = edp_budget_check(&next.budget, d->rec.mech.eps_micro))) {
        if (err == EDP_ERR_BUDGET && d->audit_exhausted_day != day) {
            d->audit_exhausted_day = day;
            audit(d, EDP_AUDIT_EXHAUSTED, 0);
        }
        return err;
    }
    /* A failed (re)seed is retried at every query; no answer while it fails. */
    if (!d->entropy_ok || (!EDP_TEST_BUILD && d->drbg.blocks_since_seed >= EDP_RESEED_BLOCKS)) {
        const uint8_t was_ok = d->entropy_ok;
        reseed(d);
        if (!d->entropy_ok) {
            if (was_ok) audit(d, EDP_AUDIT_ENTROPY, 1);
            return EDP_ERR_ENTROPY;
        }
    }
    /* Charge before release: commit the spend, then compute and send. */
    edp_budget_charge(&next.budget, d->rec.mech.eps_micro);
    if (next.rate.burst) edp_rate_take(&next.bucket);  /* rate_and_day found the token */
    if ((err = mark_raise(d, &next, (uint64_t)(EDP_FLOG_RESERVE - 1u) * d->rec.mech.eps_micro)) ||
        (err = edp_store_commit(d->port, &next, &d->slot))) {
        d->store_ok = 0;
        return err;
    }
    d->rec = next;
    d->audit_rate_tripped = 0;
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

/* Arm the release of an external answer (EDP_RELEASE_DEADLINE): its first
 * byte leaves when the window that finish_frame opened reaches the bound for
 * this request (n_in values in, k out), whatever follows (send_part). */
static int arm_release(edp_dev_t *d, const edp_mech_plan_t *plan, uint32_t n_in, uint32_t mode,
                       uint32_t arg, uint32_t model_insns)
{
    if (!EDP_RELEASE_DEADLINE) return EDP_OK;
    if (!d->port->window_open || !d->port->window_close) return EDP_ERR_TIMING;
    d->window_insns = edp_deadline_answer(plan->noise_insns, n_in, plan->k, mode, arg, model_insns,
                                          d->prepared ? plan->prepare_insns : 0u,
                                          d->port->window_fixed ? d->port->window_fixed : EDP_DEADLINE_FIXED_DEFAULT);
    d->window_pending = 1;
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
    if ((err = arm_release(d, &d->plan, *k, mode, arg, 0u))) return err;
    if ((err = charge(d, &d->plan, mode, arg))) {
        d->window_pending = 0;  /* nothing secret ran yet: refuse at once */
        return err;
    }
    return release(d, &d->plan, d->xin, mode, arg, 0, o);
}

static int cmd_query(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
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
        (err = arm_release(d, &d->infer_plan, *k, mode, arg, d->infer_model_insns)))
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

static int cmd_infer(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
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

void edp_device_set_model(edp_device_t *dev, const edp_model_t *model)
{
    edp_dev(dev)->model = model;
}

#if EDP_TEST_BUILD
void edp_device_set_naive(edp_device_t *dev, edp_naive_fn naive)
{
    edp_dev(dev)->naive = naive;
}
#endif

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
static int cmd_infer_local(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
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

static int cmd_local(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    uint32_t mode, arg, k;
    int err = parse_vector(d, b, n, &mode, &arg, &k);
    if (err || (err = edp_mech_mode_check(mode, arg, k))) return err;
    if ((err = edp_device_local(edp_device_of(d), d->xin, k, d->work))) return err;
    *o = edp_wr16(*o, edp_mech_argmax(d->work, k));
    *o = edp_wr32(*o, edp_crc32(0, d->work, 4 * (size_t)k));
    return EDP_OK;
}

static int cmd_sample(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
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

static int cmd_naive(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
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

static uint8_t *write_rate(const edp_dev_t *d, uint8_t *o)
{
    o = edp_wr32(o, d->rec.rate.burst);
    o = edp_wr32(o, d->rec.rate.per_minute);
    return edp_wr32(o, d->rec.rate.tarpit_ms);
}

/* INFO, version 2 (proto.h EDP_INFO_HEAD, docs/protocol.md): never depends on
 * entropy, clock or budget, and draws nothing. */
static int cmd_info(edp_dev_t *d, uint8_t **o)
{
    const edp_model_t *m = d->model;
    uint32_t day, tick_hz, i;
    uint8_t tick_kind;
    d->port->tick_unit(d->port->ctx, &tick_hz, &tick_kind);
    *o = edp_wr8(*o, EDP_INFO_VERSION);
    *o = edp_wr8(*o, EDP_TEST_BUILD ? 1 : 0);
    *o = edp_wr8(*o, d->store_state);
    *o = edp_wr8(*o, d->store_ok);
    *o = edp_wr8(*o, today(d, &day) == EDP_OK ? 1 : 0);
    *o = edp_wr8(*o, tick_kind);
    *o = edp_wr16(*o, EDP_MAX_CLASSES);
    *o = edp_wr32(*o, tick_hz);
    *o = write_rate(d, *o);
    *o = edp_wr32(*o, d->port->rx_buffer);
    *o = edp_wr8(*o, d->entropy_ok ? EDP_INFO_ENTROPY_OK : EDP_INFO_ENTROPY_FAILED);
    *o = edp_wr8(*o, d->auth_ok ? EDP_INFO_ENTROPY_OK : EDP_INFO_ENTROPY_FAILED);
    *o = edp_wr8(*o, !m ? EDP_INFO_MODEL_NONE : (m->s8 ? EDP_INFO_MODEL_S8 : EDP_INFO_MODEL_F32));
    *o = edp_wr8(*o, m ? m->head : 0);
    *o = edp_wr16(*o, m ? m->n_classes : 0);
    *o = edp_wr8(*o, m ? m->in_rank : 0);
    for (i = 0; i < EDP_INFO_MAX_RANK; i++) *o = edp_wr16(*o, m && i < m->in_rank ? m->in_shape[i] : 0);
    if (m) memcpy(*o, m->sha256, sizeof m->sha256);
    else memset(*o, 0, sizeof m->sha256);
    *o += sizeof m->sha256;
    *o = wrs(*o, EDP_FIRMWARE_VERSION);
    *o = wrs(*o, d->port->board);
    *o = wrs(*o, m ? m->name : "");
    return EDP_OK;
}

/* The BUDGET fields (docs/protocol.md), as of today; also the body of STATE. */
static uint8_t *write_budget(edp_dev_t *d, uint8_t *o)
{
    edp_budget_t b = d->rec.budget;
    uint32_t day;
    int have_day = today(d, &day) == EDP_OK;
    if (have_day) edp_budget_roll(&b, day);
    o = edp_wr32(o, b.day);
    o = edp_wr32(o, have_day ? day : EDP_NO_DAY);
    o = edp_wr64(o, b.daily_cap);
    o = edp_wr64(o, b.daily_spent);
    o = edp_wr64(o, b.lifetime_cap);
    o = edp_wr64(o, b.lifetime_spent);
    o = edp_wr64(o, edp_budget_remaining(&b));
    o = edp_wr64(o, d->rec.auth_counter);
    o = edp_wr8(o, d->store_state);
    o = edp_wr8(o, d->store_ok);
    o = edp_wr32(o, d->rec.mech.eps_micro);
    o = edp_wrf(o, d->rec.mech.lo);
    o = edp_wrf(o, d->rec.mech.hi);
    o = edp_wrf(o, d->rec.mech.sensitivity);
    return edp_wr32(o, (uint32_t)d->rec.mech.m);
}

static int cmd_budget(edp_dev_t *d, uint8_t **o)
{
    *o = write_budget(d, *o);
    return EDP_OK;
}

static void hmac_begin(edp_hmac_t *h, const uint8_t *key, const uint8_t domain[EDP_AUTH_DOMAIN_LEN])
{
    edp_hmac_init(h, key, 32);
    edp_hmac_update(h, domain, EDP_AUTH_DOMAIN_LEN);
}

/* The device key and a keyed nonce generator (retried here if boot could not key it). */
static int auth_ready(edp_dev_t *d, const uint8_t **key)
{
    int err;
    if ((err = d->port->device_key(d->port->ctx, key)) < 0) return err;
    if (!d->auth_ok) auth_seed(d);
    return d->auth_ok ? EDP_OK : EDP_ERR_ENTROPY;
}

/* Whether the admin body b[0..n) (counter u64 | payload | tag) carries
 * HMAC(key, "EDP2" | type | nonce | counter | payload) for the current nonce. */
static int admin_tag_valid(const edp_dev_t *d, const uint8_t *key, uint32_t type, const uint8_t *b, size_t n)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ADMIN;
    uint8_t tag[EDP_AUTH_TAG], t8 = (uint8_t)type;
    edp_hmac_t h;
    int ok;
    if (n < EDP_AUTH_COUNTER + EDP_AUTH_TAG) return 0;
    hmac_begin(&h, key, domain);
    edp_hmac_update(&h, &t8, 1);
    edp_hmac_update(&h, d->nonce, EDP_AUTH_NONCE);
    edp_hmac_update(&h, b, n - EDP_AUTH_TAG);
    edp_hmac_final(&h, tag);
    ok = edp_verify32(tag, b + n - EDP_AUTH_TAG) == 0;
    edp_wipe(tag, sizeof tag);
    return ok;
}

/* Apply an authenticated admin command (counter u64 | payload): check the counter
 * and the payload, commit the change with the counter, then act. */
static int admin_apply(edp_dev_t *d, uint32_t type, const uint8_t *b, size_t plen)
{
    const uint8_t *p = b + EDP_AUTH_COUNTER;
    uint64_t counter = edp_rd64(b), secs = 0;
    edp_record_t next;
    int err;
    if (counter <= d->rec.auth_counter) return EDP_ERR_REPLAY;
    next = d->rec;
    next.auth_counter = counter;
    switch (type) {
    case EDP_T_CONFIG:
        if (plen != EDP_CONFIG_PAYLOAD) return EDP_ERR_LEN;
        next.mech.eps_micro = edp_rd32(p);
        next.budget.daily_cap = edp_rd64(p + 4);
        next.budget.lifetime_cap = edp_rd64(p + 12);
        next.mech.lo = edp_rdf(p + 20);
        next.mech.hi = edp_rdf(p + 24);
        next.mech.sensitivity = edp_rdf(p + 28);
        next.mech.m = (int32_t)edp_rd32(p + 32);
        if ((err = edp_mech_config_check(&next.mech))) return err;
        break;
    case EDP_T_SET_TIME:
        if (plen != EDP_SET_TIME_PAYLOAD) return EDP_ERR_LEN;
        secs = edp_rd64(p);
        break;
    case EDP_T_RESET_BUDGET:
        if (plen != 0) return EDP_ERR_LEN;
        next.budget.daily_spent = 0;
        break;
    case EDP_T_RATE:
        if (plen != EDP_RATE_PAYLOAD) return EDP_ERR_LEN;
        next.rate.burst = edp_rd32(p);
        next.rate.per_minute = edp_rd32(p + 4);
        next.rate.tarpit_ms = edp_rd32(p + 8);
        if (next.rate.tarpit_ms > EDP_RATE_TARPIT_MAX || (next.rate.burst && !d->port->seconds))
            return EDP_ERR_BAD_VALUE;
        if (next.rate.burst) {  /* a new limit starts with a full bucket */
            if ((err = d->port->seconds(d->port->ctx, &secs)) < 0) return err;
            edp_rate_fill(&next.bucket, &next.rate, secs);
        }
        break;
    default:  /* EDP_T_TEST_SEED */
        if (!EDP_TEST_BUILD) return EDP_ERR_UNKNOWN;
        if (plen != EDP_SEED_BYTES) return EDP_ERR_LEN;
        break;
    }
    /* The counter (and any change) is durable, in flash and in the store,
     * before the command takes effect. */
    err = type == EDP_T_RATE ? rate_raise(d, &next) : mark_raise(d, &next, 0);
    if (!err) err = edp_store_commit(d->port, &next, &d->slot);
    if (err) {
        if (type == EDP_T_RATE) rate_unwind(d, next.auth_counter);
        return err;
    }
    d->rec = next;
    if (type == EDP_T_CONFIG) {
        d->store_ok = 1;
        d->plan_valid = 0;
    } else if (type == EDP_T_SET_TIME) {
        if ((err = d->port->set_time(d->port->ctx, secs)) < 0) return err;
    } else if (type == EDP_T_TEST_SEED) {
        edp_drbg_seed(&d->drbg, p);
        d->entropy_ok = 1;
    }
    return EDP_OK;
}

/* An admin command's answer, accepted or refused: result u8 (0 or the error) |
 * counter u64 (the stored counter now) | HMAC(key, "EDPA" | type | nonce |
 * the frame's tag | result | counter). It binds the outcome to the one frame
 * signed for this nonce: a man in the middle can neither forge it nor move it
 * to another frame. A frame without a valid tag changes nothing (not even the
 * nonce); a frame with one uses the nonce up, whatever its outcome. */
static int cmd_admin(edp_dev_t *d, uint32_t type, const uint8_t *b, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ANSWER;
    static const uint8_t no_tag[EDP_AUTH_TAG];
    const uint8_t *key, *ftag = n >= EDP_AUTH_COUNTER + EDP_AUTH_TAG ? b + n - EDP_AUTH_TAG : no_tag;
    uint8_t head[1 + EDP_AUTH_COUNTER], t8 = (uint8_t)type;
    edp_hmac_t h;
    int valid, err = auth_ready(d, &key);
    if (err) return err;
    valid = admin_tag_valid(d, key, type, b, n);
    err = valid ? admin_apply(d, type, b, n - EDP_AUTH_COUNTER - EDP_AUTH_TAG) : EDP_ERR_AUTH;
    head[0] = (uint8_t)-err;
    (void)edp_wr64(head + 1, d->rec.auth_counter);
    hmac_begin(&h, key, domain);
    edp_hmac_update(&h, &t8, 1);
    edp_hmac_update(&h, d->nonce, EDP_AUTH_NONCE);
    edp_hmac_update(&h, ftag, EDP_AUTH_TAG);
    edp_hmac_update(&h, head, sizeof head);
    memcpy(*o, head, sizeof head);
    edp_hmac_final(&h, *o + sizeof head);
    *o += EDP_ADMIN_ANSWER;
    if (valid) {
        new_nonce(d);
        audit(d, type == EDP_T_CONFIG ? EDP_AUDIT_CONFIG : type == EDP_T_SET_TIME ? EDP_AUDIT_SET_TIME :
                 type == EDP_T_RESET_BUDGET ? EDP_AUDIT_RESET_BUDGET : type == EDP_T_RATE ? EDP_AUDIT_RATE :
                 EDP_AUDIT_TEST_SEED, head[0]);
    }
    return EDP_OK;
}

/* nonce 16 | counter u64 | HMAC-SHA256(key, "EDPC" | nonce | counter), with a
 * fresh nonce (the previous one can no longer sign anything): the tag lets the
 * host trust the counter it will sign (a man in the middle cannot make it sign
 * a future one). */
static int cmd_challenge(edp_dev_t *d, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_CHALLENGE;
    const uint8_t *key;
    edp_hmac_t h;
    uint8_t *start = *o;
    int err;
    if (n) return EDP_ERR_LEN;
    if ((err = auth_ready(d, &key))) return err;
    new_nonce(d);
    memcpy(*o, d->nonce, EDP_AUTH_NONCE);
    *o = edp_wr64(*o + EDP_AUTH_NONCE, d->rec.auth_counter);
    hmac_begin(&h, key, domain);
    edp_hmac_update(&h, start, (size_t)(*o - start));
    edp_hmac_final(&h, *o);
    *o += EDP_AUTH_TAG;
    return EDP_OK;
}

/* STATE: challenge[16] in; nonce (fresh, as CHALLENGE) | the BUDGET fields |
 * HMAC(key, "EDPS" | challenge | nonce | fields) out. The host's random
 * challenge makes the answer fresh: an old one cannot be replayed. */
static int cmd_state(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_STATE;
    const uint8_t *key;
    edp_hmac_t h;
    uint8_t *start = *o;
    int err;
    if (n != EDP_STATE_REQUEST) return EDP_ERR_LEN;
    if ((err = auth_ready(d, &key))) return err;
    new_nonce(d);
    memcpy(*o, d->nonce, EDP_AUTH_NONCE);
    *o = write_rate(d, write_budget(d, *o + EDP_AUTH_NONCE));
    hmac_begin(&h, key, domain);
    edp_hmac_update(&h, b, EDP_STATE_REQUEST);
    edp_hmac_update(&h, start, (size_t)(*o - start));
    edp_hmac_final(&h, *o);
    *o += EDP_AUTH_TAG;
    return EDP_OK;
}

/* AUDIT_LOG: challenge[16] in; nonce (fresh) | total u32 | count u8 | count
 * entries (seq u32 | day u32 | counter u64 | event u8 | arg u8, oldest first) |
 * HMAC(key, "EDPL" | challenge | everything before the tag) out. total is the
 * number of events ever logged: total - count were overwritten (or torn). */
static int cmd_audit_log(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_AUDIT;
    const uint8_t *key;
    edp_audit_entry_t e;
    edp_hmac_t h;
    uint8_t *start = *o, *count;
    uint32_t s, first;
    int err;
    if (n != EDP_AUDIT_REQUEST) return EDP_ERR_LEN;
    if ((err = auth_ready(d, &key))) return err;
    new_nonce(d);
    memcpy(*o, d->nonce, EDP_AUTH_NONCE);
    *o = edp_wr32(*o + EDP_AUTH_NONCE, d->audit_seq);
    count = (*o)++;
    *count = 0;
    first = d->audit_seq > EDP_AUDIT_ENTRIES ? d->audit_seq - EDP_AUDIT_ENTRIES + 1u : 1u;
    for (s = first; s <= d->audit_seq; s++) {  /* none logged: first = 1 > 0 */
        if (!edp_audit_get(d->port, (s - 1u) % EDP_AUDIT_ENTRIES, &e) || e.seq != s) continue;
        *o = edp_audit_pack(&e, *o);
        (*count)++;
    }
    hmac_begin(&h, key, domain);
    edp_hmac_update(&h, b, EDP_AUDIT_REQUEST);
    edp_hmac_update(&h, start, (size_t)(*o - start));
    edp_hmac_final(&h, *o);
    *o += EDP_AUTH_TAG;
    return EDP_OK;
}

/* ---- dispatcher ---- */

/* The ERR_RATE error with the wait in seconds, after the tarpit delay (a fixed
 * configuration value: it tells nothing about the noise or the model). */
static size_t rate_refusal(edp_dev_t *d, uint32_t type, uint32_t seq)
{
    size_t len = edp_frame_error(d->tx, type, seq, EDP_ERR_RATE);
    uint32_t hz, t0;
    uint8_t kind;
    if (d->rec.rate.tarpit_ms) {
        d->port->tick_unit(d->port->ctx, &hz, &kind);
        t0 = d->port->ticks(d->port->ctx);
        while ((uint64_t)(uint32_t)(d->port->ticks(d->port->ctx) - t0) * 1000u < (uint64_t)d->rec.rate.tarpit_ms * hz) {
        }
    }
    (void)edp_wr32(d->tx + len, d->rate_wait);
    return len + (EDP_RATE_ERROR_BODY - EDP_ERROR_BODY);  /* the error body, then wait_s u32 */
}

size_t edp_device_handle(edp_device_t *dev, uint8_t *frame, size_t n)
{
    edp_dev_t *const d = edp_dev(dev);
    edp_frame_t fr;
    const uint8_t *f;
    uint8_t *o;
    int err = edp_frame_parse(frame, n, &fr);
    audit_flush(d);  /* the previous frame's event, when the caller is not finish_frame */
    if (err) return edp_frame_error(d->tx, fr.type, fr.seq, err);
    f = fr.body;
    n = fr.len;
    o = edp_frame_response(d->tx, fr.type, fr.seq);
    switch (fr.type) {
    case EDP_T_PING:
        if (n > EDP_PING_MAX) { err = EDP_ERR_LEN; break; }
        memcpy(o, f, n);
        o += n;
        err = EDP_OK;
        break;
    case EDP_T_INFO: err = n ? EDP_ERR_LEN : cmd_info(d, &o); break;
    case EDP_T_BUDGET: err = n ? EDP_ERR_LEN : cmd_budget(d, &o); break;
    case EDP_T_QUERY: err = cmd_query(d, f, n, &o); break;
    case EDP_T_INFER: err = cmd_infer(d, f, n, &o); break;
#if EDP_TEST_BUILD
    case EDP_T_INFER_LOCAL: err = cmd_infer_local(d, f, n, &o); break;
    case EDP_T_LOCAL: err = cmd_local(d, f, n, &o); break;
    case EDP_T_SAMPLE: err = cmd_sample(d, f, n, &o); break;
    case EDP_T_NAIVE: err = cmd_naive(d, f, n, &o); break;
#endif
    case EDP_T_CHALLENGE: err = cmd_challenge(d, n, &o); break;
    case EDP_T_STATE: err = cmd_state(d, f, n, &o); break;
    case EDP_T_AUDIT_LOG: err = cmd_audit_log(d, f, n, &o); break;
    case EDP_T_CONFIG: case EDP_T_SET_TIME: case EDP_T_RESET_BUDGET: case EDP_T_TEST_SEED: case EDP_T_RATE:
        err = cmd_admin(d, fr.type, f, n, &o);
        break;
    default: err = EDP_ERR_UNKNOWN; break;
    }
    if (err == EDP_ERR_RATE) return rate_refusal(d, fr.type, fr.seq);
    if (err) return edp_frame_error(d->tx, fr.type, fr.seq, err);
    return (size_t)(o - d->tx);
}

/* The encoded response to the UART (edp_frame_send writes it in one call);
 * a response whose window is open first waits for the window's end (port.h,
 * window_close). */
static void send_part(void *ctx, const uint8_t *p, size_t n)
{
    edp_dev_t *d = ctx;
    const edp_port_t *port = d->port;
    if (d->window_pending) {
        d->window_pending = 0;
        if (port->window_close(port->ctx, d->window_insns)) d->overruns++;
    }
    port->uart_write(port->ctx, p, n);
}

static void finish_frame(edp_dev_t *d)
{
    size_t len;
    int n;
    d->prepared = 0;
    d->window_pending = 0;
    if (EDP_RELEASE_DEADLINE && d->port->window_open) d->port->window_open(d->port->ctx);
    if (d->rx_overflow) {
        len = edp_frame_error(d->tx, 0, 0, EDP_ERR_LEN);
    } else {
        n = edp_cobs_decode(d->rx, d->rx_len);
        len = n < 0 ? edp_frame_error(d->tx, 0, 0, EDP_ERR_CRC) : edp_device_handle(edp_device_of(d), d->rx, (size_t)n);
    }
    /* The request (decoded in place) is not kept: zeroed before its answer leaves. */
    memset(d->rx, 0, d->rx_len);
    /* The request is consumed: rx takes the encoded response. */
    edp_frame_send(d->tx, len, d->rx, send_part, d);
    /* The answer has left: its audit entry and the flash log's erase ahead of
     * need run here, outside every release window. */
    audit_flush(d);
    if (d->port->flash && d->flog_ok) (void)edp_flog_prepare(&d->flog);
    d->rx_len = 0;
    d->rx_overflow = 0;
}

void edp_device_rx(edp_device_t *dev, const uint8_t *bytes, size_t n)
{
    edp_dev_t *const d = edp_dev(dev);
    /* The fill position lives in a register (byte stores may alias *d); the
     * inner loops copy one run of non-zero bytes that fits the buffer, a word
     * at a time while its four bytes are all non-zero, then byte by byte. */
    uint8_t *o = d->rx + d->rx_len, *const full = d->rx + sizeof d->rx;
    const uint8_t *end = bytes + n;
    while (bytes != end) {
        size_t room = (size_t)(full - o), left = (size_t)(end - bytes);
        const uint8_t *stop = bytes + (left < room ? left : room);
        for (; stop - bytes >= 4; bytes += 4, o += 4) {
            const uint32_t w = edp_rd32(bytes);
            if ((w - 0x01010101u) & ~w & 0x80808080u) break;  /* a zero byte in w */
            edp_wr32(o, w);
        }
        while (bytes != stop && *bytes) *o++ = *bytes++;
        if (bytes == end) break;
        if (*bytes) {  /* no room: drop the byte, remember the overflow */
            d->rx_overflow = 1;
            bytes++;
            continue;
        }
        bytes++;
        d->rx_len = (uint32_t)(o - d->rx);
        if (d->rx_len || d->rx_overflow) finish_frame(d);
        o = d->rx;
    }
    d->rx_len = (uint32_t)(o - d->rx);
}
