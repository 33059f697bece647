/* The device's rate limit of external answers (rate.h). */
#include "rate.h"

#include "edgedp/error.h"
#include "frame.h"
#include "le.h"
#include "util.h"

EDP_STATIC_ASSERT(rate_error_body, EDP_RATE_ERROR_BODY == EDP_ERROR_BODY + 4u);

/* bucket.last of a rate limit restored from the flash log (store.h): the
 * bucket is empty and refills from the first clock read that follows. */
#define BUCKET_UNSET UINT64_MAX

void edp_rate_restore(edp_dev_t *d, uint64_t record_counter)
{
    const edp_flog_rate_t *have = &d->flog.rate;
    edp_flog_rate_t run;
    if (d->store_state != EDP_STORE_LOADED && have->counter > record_counter) {
        d->rec.rate = have->limit;
        d->rec.bucket.tokens = 0;
        d->rec.bucket.last = BUCKET_UNSET;
    }
    run.counter = d->rec.auth_counter;  /* lifted by edp_mark_restore: >= every counter in the log */
    run.limit = d->rec.rate;
    if (!edp_rate_config_same(&run.limit, &have->limit))
        (void)edp_flog_set_rate(&d->flog, &run);  /* a failure leaves the log's older limit */
}

int edp_rate_raise(edp_dev_t *d, const edp_record_t *r)
{
    edp_flog_rate_t fr;
    if (!d->port->flash) return EDP_OK;
    if (!d->flog_ok) return EDP_ERR_STORE;
    fr.counter = r->auth_counter;
    fr.limit = r->rate;
    return edp_flog_set_rate(&d->flog, &fr);
}

void edp_rate_unwind(edp_dev_t *d, uint64_t counter)
{
    edp_flog_rate_t run;
    if (!d->port->flash || !d->flog_ok) return;
    run.counter = counter;
    run.limit = d->rec.rate;
    if (edp_flog_set_rate(&d->flog, &run) != EDP_OK) d->flog_ok = 0;
}

int edp_rate_and_day(edp_dev_t *d, edp_rate_t *bucket, uint32_t *day)
{
    uint64_t now;
    int err;
    if (!d->rec.rate.burst) return edp_dev_today(d, day);
    if (!d->port->seconds || d->port->seconds(d->port->ctx, &now) < 0) return EDP_ERR_TIME;
    if (bucket->last == BUCKET_UNSET) d->rec.bucket.last = bucket->last = now;  /* restored: refill from now */
    if ((err = edp_rate_check(bucket, &d->rec.rate, now, &d->rate_wait))) return err;
    *day = (uint32_t)(now / 86400u);
    return EDP_OK;
}

size_t edp_rate_refusal(edp_dev_t *d, uint32_t type, uint32_t seq)
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

uint8_t *edp_rate_write(const edp_dev_t *d, uint8_t *o)
{
    o = edp_wr32(o, d->rec.rate.burst);
    o = edp_wr32(o, d->rec.rate.per_minute);
    return edp_wr32(o, d->rec.rate.tarpit_ms);
}
