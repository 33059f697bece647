#include "store.h"
#include "crc32.h"
#include "edgedp/error.h"
#include "le.h"
#include "util.h"

#include <string.h>

EDP_STATIC_ASSERT(store_size, EDP_AUDIT_OFFSET + EDP_AUDIT_ENTRIES * EDP_AUDIT_ENTRY_SIZE == EDP_STORE_SIZE);

void edp_store_pack(const edp_record_t *r, uint8_t out[EDP_STORE_RECORD])
{
    (void)edp_wr32(out + 0, EDP_STORE_MAGIC);
    out[4] = (uint8_t)EDP_STORE_VERSION; out[5] = 0;
    out[6] = (uint8_t)EDP_STORE_RECORD; out[7] = 0;
    (void)edp_wr32(out + 8, r->sequence);
    (void)edp_wr32(out + 12, r->budget.day);
    (void)edp_wr64(out + 16, r->budget.daily_cap);
    (void)edp_wr64(out + 24, r->budget.lifetime_cap);
    (void)edp_wr64(out + 32, r->budget.daily_spent);
    (void)edp_wr64(out + 40, r->budget.lifetime_spent);
    (void)edp_wr64(out + 48, r->auth_counter);
    (void)edp_wr32(out + 56, r->mech.eps_micro);
    (void)edp_wrf(out + 60, r->mech.lo);
    (void)edp_wrf(out + 64, r->mech.hi);
    (void)edp_wrf(out + 68, r->mech.sensitivity);
    (void)edp_wr32(out + 72, (uint32_t)r->mech.m);
    (void)edp_wr32(out + 76, r->rate.burst);
    (void)edp_wr32(out + 80, r->rate.per_minute);
    (void)edp_wr32(out + 84, r->rate.tarpit_ms);
    (void)edp_wr64(out + 88, r->bucket.tokens);
    (void)edp_wr64(out + 96, r->bucket.last);
    (void)edp_wr32(out + 104, 0);
    (void)edp_wr32(out + 108, edp_crc32(0, out, EDP_STORE_RECORD - 4));
}

int edp_store_parse(edp_record_t *r, const uint8_t in[EDP_STORE_RECORD])
{
    /* Version 1 (84 bytes, no rate limit) loads as "no limit", as it ran. */
    const uint32_t len = in[4] == 1u ? EDP_STORE_RECORD_V1 : EDP_STORE_RECORD;
    if (edp_rd32(in) != EDP_STORE_MAGIC || (in[4] != 1u && in[4] != EDP_STORE_VERSION) || in[6] != len)
        return EDP_ERR_STORE;
    if (edp_rd32(in + len - 4) != edp_crc32(0, in, len - 4)) return EDP_ERR_STORE;
    r->sequence = edp_rd32(in + 8);
    r->budget.day = edp_rd32(in + 12);
    r->budget.daily_cap = edp_rd64(in + 16);
    r->budget.lifetime_cap = edp_rd64(in + 24);
    r->budget.daily_spent = edp_rd64(in + 32);
    r->budget.lifetime_spent = edp_rd64(in + 40);
    r->auth_counter = edp_rd64(in + 48);
    r->mech.eps_micro = edp_rd32(in + 56);
    r->mech.lo = edp_rdf(in + 60);
    r->mech.hi = edp_rdf(in + 64);
    r->mech.sensitivity = edp_rdf(in + 68);
    r->mech.m = (int32_t)edp_rd32(in + 72);
    r->rate.burst = len == EDP_STORE_RECORD ? edp_rd32(in + 76) : 0;
    r->rate.per_minute = len == EDP_STORE_RECORD ? edp_rd32(in + 80) : 0;
    r->rate.tarpit_ms = len == EDP_STORE_RECORD ? edp_rd32(in + 84) : 0;
    r->bucket.tokens = len == EDP_STORE_RECORD ? edp_rd64(in + 88) : 0;
    r->bucket.last = len == EDP_STORE_RECORD ? edp_rd64(in + 96) : 0;
    return EDP_OK;
}

static int blank(const uint8_t *p, uint32_t n)
{
    uint32_t i;
    for (i = 1; i < n; i++)
        if (p[i] != p[0]) return 0;
    return p[0] == 0x00 || p[0] == 0xFF;
}

int edp_store_load(const edp_port_t *port, edp_record_t *r, uint32_t *slot)
{
    uint8_t buf[EDP_STORE_RECORD];
    edp_record_t cand[2];
    int ok[2], written[2];
    uint32_t s;
    for (s = 0; s < 2; s++) {
        if (port->store_read(port->ctx, s * EDP_STORE_SLOT_SIZE, buf, EDP_STORE_RECORD) < 0) {
            *slot = 1;
            return EDP_STORE_FAILED;
        }
        ok[s] = edp_store_parse(&cand[s], buf) == EDP_OK;
        written[s] = !blank(buf, EDP_STORE_RECORD);
    }
    if (!ok[0] && !ok[1]) {
        *slot = 1;
        return written[0] || written[1] ? EDP_STORE_CORRUPT : EDP_STORE_FRESH;
    }
    if (ok[0] && ok[1]) s = (int32_t)(cand[1].sequence - cand[0].sequence) > 0 ? 1 : 0;
    else s = ok[1] ? 1 : 0;
    *r = cand[s];
    *slot = s;
    return !ok[s ^ 1u] && written[s ^ 1u] ? EDP_STORE_RECOVERED : EDP_STORE_LOADED;
}

int edp_store_commit(const edp_port_t *port, edp_record_t *r, uint32_t *slot)
{
    uint8_t buf[EDP_STORE_RECORD];
    edp_record_t next = *r;
    uint32_t target = *slot ^ 1u, off = target * EDP_STORE_SLOT_SIZE;
    int err;
    next.sequence = r->sequence + 1;
    edp_store_pack(&next, buf);
    /* The body first, the CRC last: the slot becomes valid only with its final word. */
    err = port->store_write(port->ctx, off, buf, EDP_STORE_RECORD - 4);
    if (err >= 0) err = port->store_write(port->ctx, off + EDP_STORE_RECORD - 4, buf + EDP_STORE_RECORD - 4, 4);
    if (err >= 0) {
        uint8_t check[EDP_STORE_RECORD];
        err = port->store_read(port->ctx, off, check, EDP_STORE_RECORD);
        if (err >= 0 && memcmp(check, buf, EDP_STORE_RECORD) != 0) err = EDP_ERR_STORE;
    }
    if (err < 0) return err;
    r->sequence = next.sequence;
    *slot = target;
    return EDP_OK;
}

/* ---- audit log (store.h) ---- */

static uint16_t audit_check(const uint8_t *b)
{
    return (uint16_t)edp_crc32(0, b, EDP_AUDIT_ENTRY_SIZE - 2);
}

int edp_audit_get(const edp_port_t *port, uint32_t i, edp_audit_entry_t *e)
{
    uint8_t b[EDP_AUDIT_ENTRY_SIZE];
    if (i >= EDP_AUDIT_ENTRIES ||
        port->store_read(port->ctx, EDP_AUDIT_OFFSET + i * EDP_AUDIT_ENTRY_SIZE, b, sizeof b) < 0)
        return 0;
    e->seq = edp_rd32(b);
    e->day = edp_rd32(b + 4);
    e->counter = edp_rd64(b + 8);
    e->event = b[16];
    e->arg = b[17];
    return e->seq != 0 && (e->seq - 1u) % EDP_AUDIT_ENTRIES == i && edp_rd16(b + 18) == audit_check(b);
}

uint32_t edp_audit_last(const edp_port_t *port)
{
    edp_audit_entry_t e;
    uint32_t i, last = 0;
    for (i = 0; i < EDP_AUDIT_ENTRIES; i++)
        if (edp_audit_get(port, i, &e) && e.seq > last) last = e.seq;
    return last;
}

uint8_t *edp_audit_pack(const edp_audit_entry_t *e, uint8_t *o)
{
    o = edp_wr64(edp_wr32(edp_wr32(o, e->seq), e->day), e->counter);
    o = edp_wr8(o, e->event);
    return edp_wr8(o, e->arg);
}

int edp_audit_append(const edp_port_t *port, const edp_audit_entry_t *e)
{
    uint8_t b[EDP_AUDIT_ENTRY_SIZE];
    int err;
    uint8_t *check = edp_audit_pack(e, b);
    (void)edp_wr16(check, audit_check(b));  /* after the pack: argument order is unspecified */
    err = port->store_write(port->ctx, EDP_AUDIT_OFFSET + ((e->seq - 1u) % EDP_AUDIT_ENTRIES) * EDP_AUDIT_ENTRY_SIZE,
                            b, sizeof b);
    return err < 0 ? err : EDP_OK;
}
