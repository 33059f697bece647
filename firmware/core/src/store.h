/* Persistent two-slot record of the budget, configuration and auth counter.
 *
 * Two slots of EDP_STORE_SLOT_SIZE bytes at offsets 0 and EDP_STORE_SLOT_SIZE
 * of the port's store. A commit writes the slot not holding the current
 * record, with sequence + 1; only once its CRC is written does it win. Load
 * picks the valid slot with the highest sequence (serial-number order), so a
 * power cut at any byte leaves either the old or the new record. Layout
 * (little-endian) is documented in docs/privacy.md. */
#ifndef EDGEDP_STORE_H
#define EDGEDP_STORE_H
#include <stdint.h>

#include "budget.h"
#include "mech.h"
#include "edgedp/port.h"

#define EDP_STORE_MAGIC     0x50444445u  /* "EDDP" */
#define EDP_STORE_VERSION   2u           /* 2 adds the rate limit */
#define EDP_STORE_RECORD    112u         /* serialized bytes including CRC */
#define EDP_STORE_RECORD_V1 84u          /* version 1 (no rate limit): still loaded, as "no limit" */
#define EDP_STORE_SLOT_SIZE 128u

/* ---- audit log: a ring after the two slots ----
 * EDP_AUDIT_ENTRIES entries of EDP_AUDIT_ENTRY_SIZE bytes from EDP_AUDIT_OFFSET
 * (little-endian): seq u32 | day u32 | counter u64 | event u8 | arg u8 | check u16,
 * check = the low 16 bits of the CRC-32 over the 18 bytes before it. Entry seq
 * (1, 2, ...) lives at index (seq - 1) % EDP_AUDIT_ENTRIES: an entry is never
 * rewritten except by the one EDP_AUDIT_ENTRIES later. Blank or torn entries
 * fail the check (or have seq 0) and are skipped; the highest valid seq is the
 * number of events ever logged. Nothing secret and nothing that depends on the
 * model or the noise is logged (docs/privacy.md). */
#define EDP_AUDIT_ENTRIES    32u
#define EDP_AUDIT_ENTRY_SIZE 20u
#define EDP_AUDIT_OFFSET     (2u * EDP_STORE_SLOT_SIZE)
/* EDP_STORE_SIZE (edgedp/port.h, the bytes every port's store holds) is
 * EDP_AUDIT_OFFSET + EDP_AUDIT_ENTRIES * EDP_AUDIT_ENTRY_SIZE (store.c checks it). */

enum edp_audit_event {
    EDP_AUDIT_CONFIG = 1,      /* an admin frame with a valid tag; arg: the result (0 or -EDP_ERR_*) */
    EDP_AUDIT_SET_TIME = 2,    /* likewise */
    EDP_AUDIT_RESET_BUDGET = 3,
    EDP_AUDIT_RATE = 4,
    EDP_AUDIT_TEST_SEED = 5,
    EDP_AUDIT_EXHAUSTED = 6,   /* the first EDP_ERR_BUDGET refusal of a day (since boot) */
    EDP_AUDIT_STORE = 7,       /* boot found the store not loaded; arg: enum edp_store_state */
    EDP_AUDIT_ENTROPY = 8,     /* entropy failed (at boot or a reseed that had worked before) */
    EDP_AUDIT_RATE_TRIP = 9,   /* the first EDP_ERR_RATE refusal after an answer */
};

typedef struct {
    uint32_t seq;
    uint32_t day;       /* EDP_NO_DAY without a trusted clock */
    uint64_t counter;   /* the admin counter when it was logged */
    uint8_t event;      /* enum edp_audit_event */
    uint8_t arg;
} edp_audit_entry_t;

typedef struct {
    uint32_t sequence;        /* increases by one per commit */
    edp_budget_t budget;
    edp_mech_config_t mech;
    uint64_t auth_counter;    /* last accepted admin counter */
    edp_rate_config_t rate;   /* rate limit of external answers (burst 0: none) */
    edp_rate_t bucket;        /* its token bucket, committed with every charge (a reset refills nothing);
                               * last = UINT64_MAX: restored after a store loss, empty, refills from
                               * the first clock read (rate.c) */
} edp_record_t;

enum edp_store_state {
    EDP_STORE_LOADED = 0,   /* a valid record was found */
    EDP_STORE_FRESH = 1,    /* both slots blank: first boot or lost backup domain */
    EDP_STORE_CORRUPT = 2,  /* a slot looked written but no slot is valid */
    EDP_STORE_FAILED = 3,   /* the port reported a read or write error */
    EDP_STORE_RECOVERED = 4,  /* a valid record was found, but the other slot holds a damaged
                               * write that may have been newer (power cut or bit flip) */
};

/* Load the newest valid record into r. Returns an edp_store_state (>= 0);
 * r is left untouched unless the state is EDP_STORE_LOADED or EDP_STORE_RECOVERED.
 * *slot is the slot holding it (or 1 so that the first commit writes slot 0). */
int edp_store_load(const edp_port_t *port, edp_record_t *r, uint32_t *slot);

/* Write r with sequence + 1 into the other slot. On success updates r->sequence
 * and *slot and returns EDP_OK; otherwise returns the port's error (or
 * EDP_ERR_STORE) and leaves r unchanged. */
int edp_store_commit(const edp_port_t *port, edp_record_t *r, uint32_t *slot);

/* The highest valid audit seq in the port's store (0: none, or a read error). */
uint32_t edp_audit_last(const edp_port_t *port);

/* Write entry e (e->seq must be the last seq + 1) at its ring index. Returns
 * EDP_OK or the port's error; a failed or torn write loses only that entry
 * (and the one it overwrote). */
int edp_audit_append(const edp_port_t *port, const edp_audit_entry_t *e);

/* Write e's first EDP_AUDIT_ENTRY_SIZE - 2 bytes (seq u32 | day u32 | counter
 * u64 | event u8 | arg u8, little-endian: the stored entry without its check,
 * and the AUDIT_LOG answer's entry, proto.h) at o; returns o + 18. */
uint8_t *edp_audit_pack(const edp_audit_entry_t *e, uint8_t *o);

/* Read the entry at ring index i (< EDP_AUDIT_ENTRIES): 1 if valid, else 0. */
int edp_audit_get(const edp_port_t *port, uint32_t i, edp_audit_entry_t *e);

/* Serialize / parse one record (exposed for tests). parse returns EDP_OK or
 * EDP_ERR_STORE (bad magic, version or CRC). */
void edp_store_pack(const edp_record_t *r, uint8_t out[EDP_STORE_RECORD]);
int edp_store_parse(edp_record_t *r, const uint8_t in[EDP_STORE_RECORD]);

#endif
