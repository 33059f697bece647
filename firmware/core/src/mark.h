/* The flash log's mark (core-internal): the spend and the admin counter made
 * durable in flash (flog.h) before a record that raises them is committed to
 * the store and acted on, and lifted back into the record at boot.
 *
 * Owns: nothing of its own in edp_dev_t; it reads rec, store_state, flog_ok
 * and flog.mark, and raises flog.mark through edp_flog_raise.
 * Needs: the port's flash (port->flash; without one every call succeeds and
 * does nothing) and an open flash log (flog_ok).
 * Invariant: once edp_mark_raise(r) has returned EDP_OK, the mark covers r's
 * daily and lifetime spend and r's counter, so that a store lost after r's
 * commit restores at least that much (edp_mark_restore): a loss never
 * under-counts a spend or lets a counter be replayed. */
#ifndef EDGEDP_MARK_H
#define EDGEDP_MARK_H
#include <stdint.h>

#include "device_state.h"

/* Raise the flash mark to cover r before r is committed and acted on. A charge
 * the mark does not cover yet raises it `reserve` micro-epsilon above r's spend
 * (within the caps): the next answers up to the mark write no flash. Returns
 * EDP_OK (also when the port has no flash), EDP_ERR_STORE if the flash log is
 * not open, or edp_flog_raise's error. */
int edp_mark_raise(edp_dev_t *d, const edp_record_t *r, uint64_t reserve);

/* Lift the counter of the record to at least the flash mark, and its spend
 * too when the store did not load (lost, torn or corrupt): the mark holds
 * reservations, which a loaded store has no need of. Boot only, with the
 * flash log open. */
void edp_mark_restore(edp_dev_t *d);

#endif
