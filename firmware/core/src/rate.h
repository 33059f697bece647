/* The device's rate limit of external answers (core-internal): the token
 * bucket of budget.h applied to QUERY and INFER, its refusal on the wire, and
 * its limit kept in the flash log (flog.h) so that a store loss restores it.
 *
 * Owns: rate_wait (the wait an EDP_ERR_RATE answer states); with the record
 * it reads and writes rec.rate and rec.bucket, and writes the flash log's rate
 * entry (clearing flog_ok when that entry cannot be kept right).
 * Needs: the port's seconds() for a limit (a RATE with burst > 0 is refused
 * without it), ticks() and tick_unit() for the tarpit, and the flash log when
 * the port has flash.
 * Invariants: a refusal depends on the configuration and the clock only (one
 * read); the limit in the flash log is the one the device runs, at a counter
 * no lower than any before it, except for the moment between a RATE's flash
 * record and its commit (a refused RATE is written back, or the log closed
 * until the next boot); a bucket restored from the log starts empty and
 * refills from the first clock read after boot. */
#ifndef EDGEDP_RATE_H
#define EDGEDP_RATE_H
#include <stddef.h>
#include <stdint.h>

#include "device_state.h"

/* The rate limit at boot (with the flash log open), after edp_mark_restore
 * lifted the counter; record_counter is the counter the store's record held
 * before that. A store that did not load cleanly (lost, torn, corrupt) takes
 * the flash log's limit when a RATE newer than the record's counter set it
 * (after a loss: any), with an empty bucket that refills from the first clock
 * read after boot: no burst right after a loss. Then the log is made to hold
 * the limit the device runs, at the lifted counter (a store written before
 * the log kept limits, or a RATE cut between its flash record and its commit,
 * whose answer never left): a later loss restores that one. */
void edp_rate_restore(edp_dev_t *d, uint64_t record_counter);

/* Record the rate limit of r, set by the RATE of counter r->auth_counter, in
 * the flash log before r is committed and acted on (the counter mark rises
 * with it). Returns EDP_OK (also without flash), EDP_ERR_STORE if the log is
 * not open, or the log's error. */
int edp_rate_raise(edp_dev_t *d, const edp_record_t *r);

/* A refused RATE of counter `counter` whose flash record may be in the log
 * (its commit failed, or its write reported an error after the record
 * landed): the device keeps the limit before it, and a later command may
 * commit the same counter. The log takes that limit again at this counter (a
 * later seq wins), so that a store loss restores the limit the device runs,
 * not the refused one. If that write fails too, the flash log is closed until
 * the next boot (every answer and admin command then fails), whose
 * edp_rate_restore writes the running limit at the lifted counter. */
void edp_rate_unwind(edp_dev_t *d, uint64_t counter);

/* Today in *day, and with a rate limit: EDP_ERR_RATE (and d->rate_wait) if
 * *bucket, refilled to now, holds no token for one more external answer;
 * EDP_ERR_TIME without a clock. Decided from the configuration and the clock
 * only, read once (port.h: day() is seconds() / 86400). A bucket restored
 * after a store loss (edp_rate_restore) starts refilling at the first clock
 * read, also when it refuses. *bucket is the caller's copy of rec.bucket. */
int edp_rate_and_day(edp_dev_t *d, edp_rate_t *bucket, uint32_t *day);

/* The EDP_ERR_RATE error frame for (type, seq) in d->tx with the wait in
 * seconds, sent after the tarpit delay (a fixed configuration value: it tells
 * nothing about the noise or the model). Returns the frame's length. */
size_t edp_rate_refusal(edp_dev_t *d, uint32_t type, uint32_t seq);

/* Write the limit (burst u32 | per_minute u32 | tarpit_ms u32, as INFO and
 * STATE carry it) at o; returns the end. */
uint8_t *edp_rate_write(const edp_dev_t *d, uint8_t *o);

#endif
