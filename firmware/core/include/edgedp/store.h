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

#include "edgedp/budget.h"
#include "edgedp/mech.h"
#include "edgedp/port.h"

#define EDP_STORE_MAGIC     0x50444445u  /* "EDDP" */
#define EDP_STORE_VERSION   2u           /* 2 adds the rate limit */
#define EDP_STORE_RECORD    112u         /* serialized bytes including CRC */
#define EDP_STORE_RECORD_V1 84u          /* version 1 (no rate limit): still loaded, as "no limit" */
#define EDP_STORE_SLOT_SIZE 128u

typedef struct {
    uint32_t sequence;        /* increases by one per commit */
    edp_budget_t budget;
    edp_mech_config_t mech;
    uint64_t auth_counter;    /* last accepted admin counter */
    edp_rate_config_t rate;   /* rate limit of external answers (burst 0: none) */
    edp_rate_t bucket;        /* its token bucket, committed with every charge (a reset refills nothing) */
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

/* Serialize / parse one record (exposed for tests). parse returns EDP_OK or
 * EDP_ERR_STORE (bad magic, version or CRC). */
void edp_store_pack(const edp_record_t *r, uint8_t out[EDP_STORE_RECORD]);
int edp_store_parse(edp_record_t *r, const uint8_t in[EDP_STORE_RECORD]);

#endif
