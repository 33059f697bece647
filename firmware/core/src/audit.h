/* The audit log's events (core-internal): when the device logs an event in
 * the store's audit ring (store.h holds the ring and its entries), and the
 * AUDIT_LOG command that reads it back, signed.
 *
 * Owns: audit_seq (the seq of the last entry written), audit_exhausted_day,
 * audit_rate_tripped, and this frame's pending event (audit_event, audit_arg).
 * Needs: the port's store (the ring), its day() for the entry's day, and for
 * AUDIT_LOG the device key and the nonce (auth.h).
 * Invariants: an event of a frame is written only after that frame's answer
 * has left (edp_audit_flush), so that the write never delays an answer or a
 * refusal and a power cut during it loses only the entry; at most one event
 * per frame; a failed write loses the entry, nothing else; seq grows by one
 * per entry written. */
#ifndef EDGEDP_AUDIT_H
#define EDGEDP_AUDIT_H
#include <stddef.h>
#include <stdint.h>

#include "device_state.h"

/* Append an audit entry (store.h) now, with today's day (EDP_NO_DAY without a
 * clock) and the record's counter. Boot and edp_audit_flush only. */
void edp_audit_write(edp_dev_t *d, uint32_t event, uint32_t arg);

/* Log an event of this frame once its answer has left (edp_audit_flush); a
 * later call in the same frame replaces it. */
static inline void edp_audit_defer(edp_dev_t *d, uint32_t event, uint32_t arg)
{
    d->audit_event = (uint8_t)event;
    d->audit_arg = (uint8_t)arg;
}

/* A refusal by the rate limit: EDP_AUDIT_RATE_TRIP, once until an answer is
 * charged (edp_audit_answered). */
static inline void edp_audit_rate_trip(edp_dev_t *d)
{
    if (!d->audit_rate_tripped) {
        d->audit_rate_tripped = 1;
        edp_audit_defer(d, EDP_AUDIT_RATE_TRIP, 0);
    }
}

/* A refusal by the budget on `day`: EDP_AUDIT_EXHAUSTED, once a day since boot. */
static inline void edp_audit_exhausted(edp_dev_t *d, uint32_t day)
{
    if (d->audit_exhausted_day != day) {
        d->audit_exhausted_day = day;
        edp_audit_defer(d, EDP_AUDIT_EXHAUSTED, 0);
    }
}

/* An external answer was charged: the next rate refusal is logged again. */
static inline void edp_audit_answered(edp_dev_t *d)
{
    d->audit_rate_tripped = 0;
}

/* Write this frame's pending event, if any (the answer has left). */
void edp_audit_flush(edp_dev_t *d);

/* AUDIT_LOG: challenge[16] in (b[0..n)); nonce (fresh) | total u32 | count u8
 * | count entries (seq u32 | day u32 | counter u64 | event u8 | arg u8, oldest
 * first) | HMAC(key, "EDPL" | challenge | everything before the tag) out at
 * *o, which it advances. total is the number of events ever logged: total -
 * count were overwritten (or torn). Returns EDP_OK, EDP_ERR_LEN, or
 * edp_auth_ready's error. */
int edp_cmd_audit_log(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);

#endif
