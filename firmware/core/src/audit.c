/* The audit log's events (audit.h). */
#include "audit.h"

#include "auth.h"
#include "edgedp/error.h"
#include "le.h"
#include "sha256.h"
#include "util.h"

#include <string.h>

EDP_STATIC_ASSERT(audit_fits, EDP_AUDIT_HEAD + EDP_AUDIT_ENTRIES * EDP_AUDIT_ENTRY + EDP_AUTH_TAG <= EDP_BODY_MAX);
EDP_STATIC_ASSERT(audit_entry_is_stored_entry, EDP_AUDIT_ENTRY + 2u == EDP_AUDIT_ENTRY_SIZE);  /* edp_audit_pack */

void edp_audit_write(edp_dev_t *d, uint32_t event, uint32_t arg)
{
    edp_audit_entry_t e;
    if (edp_dev_today(d, &e.day) != 0) e.day = EDP_NO_DAY;
    e.seq = d->audit_seq + 1u;
    e.counter = d->rec.auth_counter;
    e.event = (uint8_t)event;
    e.arg = (uint8_t)arg;
    if (edp_audit_append(d->port, &e) == EDP_OK) d->audit_seq = e.seq;
}

void edp_audit_flush(edp_dev_t *d)
{
    if (d->audit_event) edp_audit_write(d, d->audit_event, d->audit_arg);
    d->audit_event = 0;
}

int edp_cmd_audit_log(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_AUDIT;
    const uint8_t *key;
    edp_audit_entry_t e;
    edp_hmac_t h;
    uint8_t *start = *o, *count;
    uint32_t s, first;
    int err;
    if (n != EDP_AUDIT_REQUEST) return EDP_ERR_LEN;
    if ((err = edp_auth_ready(d, &key))) return err;
    edp_auth_new_nonce(d);
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
    edp_auth_begin(&h, key, domain);
    edp_hmac_update(&h, b, EDP_AUDIT_REQUEST);
    edp_hmac_update(&h, start, (size_t)(*o - start));
    edp_hmac_final(&h, *o);
    *o += EDP_AUTH_TAG;
    return EDP_OK;
}
