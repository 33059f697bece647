/* Flash high-water log: what must never go back, kept in internal flash.
 *
 * The persistent store (store.h) lives in memory that a dead VBAT or a plain
 * power cycle can wipe. The log keeps a monotonic mark of the lifetime spend,
 * of the (day, daily spend) pair and of the admin counter in two flash sectors
 * of the board's flash (edp_flash_t), so that after a store loss the device
 * comes back with spend and counter >= the mark, never 0.
 *
 * Layout: two sectors of flash->sector_size bytes, each an array of
 * EDP_FLOG_RECORD-byte slots. A record (little-endian):
 *   seq u32 | day u32 | daily u64 | lifetime u64 | counter u64 | crc32 u32
 * with the CRC-32 over the 32 bytes before it. seq increases by one per record.
 * An erased slot reads all 0xFF.
 *
 * Append-only: a raise programs the next erased slot of the active sector
 * (the one holding the highest valid seq), body first, CRC last, and reads it
 * back. When the active sector is full, the new mark (which carries
 * everything before it) becomes the first record of the other sector, the
 * spare. The spare is erased ahead of need by edp_flog_prepare, which the
 * device calls after an answer has left (outside every release window: a
 * sector erase takes 1-2 s on stm32f4), and only once the active sector holds
 * a valid record: the sector holding the newest mark is never erased, so a
 * power cut during the erase or the program leaves it readable. A raise
 * erases the spare itself only when no prepare ran since the switch (the
 * erase failed). Wear: one erase per sector_size / EDP_FLOG_RECORD raises,
 * alternating between the sectors.
 *
 * Torn-write safety: a record whose program was cut fails its CRC and is
 * ignored; open() takes the element-wise maximum over every valid record of
 * both sectors (lifetime, counter; (day, daily) lexicographically), so no
 * order of cuts can lower a mark that a raise reported as written. */
#ifndef EDGEDP_FLOG_H
#define EDGEDP_FLOG_H
#include <stdint.h>

#define EDP_FLOG_RECORD 36u  /* bytes per slot, a multiple of 4 (word programs) */

/* NOR flash as the log sees it: two sectors at offsets 0 and sector_size. */
typedef struct edp_flash {
    void *ctx;              /* passed to every callback */
    uint32_t sector_size;   /* bytes per sector, a multiple of 4, >= 2 * EDP_FLOG_RECORD */

    /* Read n bytes at byte offset off (off + n <= 2 * sector_size). */
    int (*read)(void *ctx, uint32_t off, void *buf, uint32_t n);

    /* Program n bytes at off (off and n multiples of 4). NOR semantics: a
     * program can only clear bits; the log programs erased slots only. */
    int (*program)(void *ctx, uint32_t off, const void *buf, uint32_t n);

    /* Erase sector 0 or 1 (every byte reads 0xFF afterwards). */
    int (*erase)(void *ctx, uint32_t sector);
} edp_flash_t;

typedef struct {
    uint32_t day;        /* UTC day index of `daily` */
    uint64_t daily;      /* micro-epsilon spent on `day` (upper bound) */
    uint64_t lifetime;   /* micro-epsilon ever spent (upper bound) */
    uint64_t counter;    /* highest accepted admin counter */
} edp_flog_mark_t;

typedef struct {
    const edp_flash_t *flash;
    edp_flog_mark_t mark;   /* the highest mark read or written */
    uint32_t seq;           /* seq of the newest valid record (0: none) */
    uint32_t sector;        /* active sector (0 or 1) */
    uint32_t next;          /* offset in the active sector of the next slot to program */
    uint8_t active_valid;   /* the active sector holds a valid record */
    uint8_t spare_erased;   /* the other sector reads erased: the next switch needs no erase */
} edp_flog_t;

/* Scan both sectors: log->mark = maximum over all valid records (all zero if
 * none). Returns the number of valid records found (>= 0) or the flash's
 * negative error (log->mark is then zero and raises fail). */
int edp_flog_open(edp_flog_t *log, const edp_flash_t *flash);

/* Make the durable mark >= m (element-wise; (day, daily) lexicographically).
 * Programs one record if the mark rises, nothing otherwise; erases the other
 * sector first when the active one is full. Returns EDP_OK once the record
 * reads back intact, or a negative error (the flash's, or EDP_ERR_STORE when
 * no slot takes the record); the caller must then not release what the mark
 * should have covered. */
int edp_flog_raise(edp_flog_t *log, const edp_flog_mark_t *m);

/* Erase the spare sector if it is not erased and the active sector holds a
 * valid record (nothing otherwise). Call it where a 1-2 s stall reveals
 * nothing: after an answer has left, never inside a release window. Returns
 * EDP_OK or the flash's negative error (retried at the next call). */
int edp_flog_prepare(edp_flog_t *log);

#endif
