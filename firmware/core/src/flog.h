/* Flash high-water log: what must never go back, kept in internal flash.
 *
 * The persistent store (store.h) lives in memory that a dead VBAT or a plain
 * power cycle can wipe. The log keeps a monotonic mark of the lifetime spend,
 * of the (day, daily spend) pair and of the admin counter, and the rate limit
 * of the newest RATE, in two flash sectors of the board's flash (edp_flash_t),
 * so that after a store loss the device comes back with spend and counter >=
 * the mark, never 0, and with the rate limit the admin last set, never none.
 *
 * Layout: two sectors of flash->sector_size bytes, each an array of
 * EDP_FLOG_RECORD-byte slots. Two kinds of record share the slots
 * (little-endian, 32-byte body then a check word):
 *   mark: seq u32 | day u32 | daily u64 | lifetime u64 | counter u64 | crc32
 *   rate: seq u32 | burst u32 | per_minute u32 | tarpit_ms u32 | 0 u32 | 0 u32
 *         | counter u64 | crc32 ^ EDP_FLOG_RATE_TAG
 * with crc32 the CRC-32 of the 32-byte body. seq increases by one per slot
 * programmed, whatever its kind and whether it read back intact (a record
 * reported failed may be valid: its retry gets a seq of its own). An erased
 * slot reads all 0xFF. A rate record's counter (at the offset of a mark's) is the admin counter of the RATE that set the
 * limit (burst 0: no limit); its two zero words are reserved, and a slot
 * whose check word is a rate record's but whose reserved words (at the offset
 * of a mark's lifetime) are not zero is no record: a mark that spent anything
 * never reads as a rate record.
 *
 * Old logs: firmware before rate records wrote mark records only, in this
 * same slot grid and layout, and this firmware reads them as it wrote them.
 * The kinds differ in the check word alone: a mark's is the CRC of its body,
 * a rate record's that CRC XOR EDP_FLOG_RATE_TAG (nonzero), so a slot passes
 * at most one of the two checks: no record an older firmware wrote can ever
 * read as a rate record, and a board keeps its mark across the upgrade (an
 * older firmware skips rate records as used slots: they fail its CRC).
 *
 * Append-only: a write programs the next erased slot of the active sector
 * (the one holding the highest valid seq), body first, check word last, and
 * reads it back. Before it, the newest record of every other kind the log
 * holds is copied into the active sector if that sector lacks it, so once a
 * write returns the active sector holds the whole log ("complete"). When it is
 * full, the copy and then the new record start the other sector, the spare. The spare
 * is erased ahead of need by edp_flog_prepare, which the device calls after an
 * answer has left (outside every release window: a sector erase takes 1-2 s
 * on stm32f4), and only once the active sector is complete: no erase takes
 * the newest record of any kind, so a power cut during the erase or the
 * program leaves everything readable. A write erases the spare itself only
 * when no prepare ran since the switch (the erase failed). A sector left
 * incomplete (a switch cut after the copy, before the new record) takes the
 * missing kind's record at the next write; if torn writes fill it first, it
 * holds nothing but a copy of the other sector's records, and it is that
 * sector, never the other, that is erased and started again (by prepare, or
 * by the write when prepare did not run): a complete sector is erased only
 * once the other one is complete. Wear: one erase
 * per sector_size / EDP_FLOG_RECORD records, alternating between the sectors;
 * a switch may add one copied record, so a log with both kinds erases at
 * most once per sector_size / EDP_FLOG_RECORD - 1 writes (mark raises and
 * RATE commands; a log of marks only, as before rate records, copies nothing).
 *
 * Torn-write safety: a record whose program was cut fails its check and is
 * ignored; open() takes the element-wise maximum over every valid record of
 * both sectors (lifetime, counter; (day, daily) lexicographically; a rate
 * record's counter raises the counter too), and for the rate limit the record
 * of the highest counter, then of the highest seq: the limit of the highest
 * admin counter that set one (the counter is monotone though the limit is
 * not; seq settles a counter written twice, the later record winning:
 * edp_flog_set_rate), and of two records of one seq (which only a flash that
 * misreads could leave) the stricter limit. A total order, so the result
 * does not depend on the order of the records, and no order of cuts can lower a mark, nor
 * bring back a limit older than one a write reported as written. */
#ifndef EDGEDP_FLOG_H
#define EDGEDP_FLOG_H
#include <stdint.h>

#include "budget.h"
#include "edgedp/port.h"  /* edp_flash_t */

#define EDP_FLOG_RECORD 36u         /* bytes per slot, a multiple of 4 (word programs) */
#define EDP_FLOG_RATE_TAG 0x52415445u  /* XORed into a rate record's check word ("RATE") */

typedef struct {
    uint32_t day;        /* UTC day index of `daily` */
    uint64_t daily;      /* micro-epsilon spent on `day` (upper bound) */
    uint64_t lifetime;   /* micro-epsilon ever spent (upper bound) */
    uint64_t counter;    /* highest accepted admin counter */
} edp_flog_mark_t;

typedef struct {
    uint64_t counter;          /* admin counter of the RATE that set it (0: no rate record) */
    edp_rate_config_t limit;   /* the rate limit it set (burst 0: none) */
} edp_flog_rate_t;

typedef struct {
    const edp_flash_t *flash;
    edp_flog_mark_t mark;   /* the highest mark read or written */
    edp_flog_rate_t rate;   /* the newest rate limit read or written (counter 0: none) */
    uint32_t seq;           /* seq of the last slot programmed (after open: of the newest valid record; 0: none) */
    uint32_t sector;        /* active sector (0 or 1) */
    uint32_t next;          /* offset in the active sector of the next slot to program */
    uint8_t kinds;          /* record kinds the log holds (bit 0 mark, bit 1 rate) */
    uint8_t covered;        /* kinds whose newest record the active sector holds */
    uint8_t spare_erased;   /* the other sector reads erased: the next switch needs no erase */
} edp_flog_t;

/* Scan both sectors: log->mark = maximum over all valid records (all zero if
 * none), log->rate = the newest rate record (all zero if none). Returns the number of valid records found (>= 0) or the flash's
 * negative error (log->mark is then zero and raises fail). */
int edp_flog_open(edp_flog_t *log, const edp_flash_t *flash);

/* Make the durable mark >= m (element-wise; (day, daily) lexicographically).
 * Programs a record if the mark rises, nothing otherwise: one, or two when
 * the active sector lacks the newest rate record (its copy goes first). When
 * the active sector is full it erases, unless edp_flog_prepare did since, the
 * spare (active sector complete) or the active sector (not complete: started
 * again, edp_flog_prepare). Returns EDP_OK once the record
 * reads back intact, or a negative error (the flash's, or EDP_ERR_STORE when
 * no slot takes the record); the caller must then not release what the mark
 * should have covered. */
int edp_flog_raise(edp_flog_t *log, const edp_flog_mark_t *m);

/* Make r the durable rate limit, before the RATE that carries it commits
 * (r->counter is that RATE's admin counter, >= log->rate.counter: equal only
 * to write again, at a higher seq, the limit the device runs). Programs a
 * rate record (the counter mark rises with it) unless r is log->rate already:
 * one, or two when the active sector lacks the newest mark (its copy goes
 * first); erases as edp_flog_raise when the active sector is full.
 * Returns EDP_OK once the record reads back intact, EDP_ERR_BAD_VALUE for a
 * counter below log->rate.counter (it could never win), or a negative error
 * as edp_flog_raise; after an error log->rate is the limit before, but the
 * record may be in flash all the same (a program that took and reported an
 * error): a caller that keeps the limit before writes it back at r->counter
 * (rate.c, a refused RATE). */
int edp_flog_set_rate(edp_flog_t *log, const edp_flog_rate_t *r);

/* Erase the spare sector if it is not erased and the active sector is
 * complete (holds the newest record of every kind), or the active sector
 * itself if it is full and not complete (it is started again; the other
 * sector holds the log); nothing otherwise. Call it where a 1-2 s stall
 * reveals nothing: after an answer has left, never inside a release window. Returns
 * EDP_OK or the flash's negative error (retried at the next call). */
int edp_flog_prepare(edp_flog_t *log);

#endif
