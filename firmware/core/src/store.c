#include "edgedp/store.h"
#include "edgedp/crc32.h"
#include "edgedp/error.h"

#include <string.h>

static void w32(uint8_t *o, uint32_t v)
{
    o[0] = (uint8_t)v; o[1] = (uint8_t)(v >> 8); o[2] = (uint8_t)(v >> 16); o[3] = (uint8_t)(v >> 24);
}

static void w64(uint8_t *o, uint64_t v)
{
    w32(o, (uint32_t)v);
    w32(o + 4, (uint32_t)(v >> 32));
}

static uint32_t r32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t r64(const uint8_t *p)
{
    return (uint64_t)r32(p) | (uint64_t)r32(p + 4) << 32;
}

static void wf(uint8_t *o, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    w32(o, v);
}

static float rf(const uint8_t *p)
{
    uint32_t v = r32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

void edp_store_pack(const edp_record_t *r, uint8_t out[EDP_STORE_RECORD])
{
    w32(out + 0, EDP_STORE_MAGIC);
    out[4] = (uint8_t)EDP_STORE_VERSION; out[5] = 0;
    out[6] = (uint8_t)EDP_STORE_RECORD; out[7] = 0;
    w32(out + 8, r->sequence);
    w32(out + 12, r->budget.day);
    w64(out + 16, r->budget.daily_cap);
    w64(out + 24, r->budget.lifetime_cap);
    w64(out + 32, r->budget.daily_spent);
    w64(out + 40, r->budget.lifetime_spent);
    w64(out + 48, r->auth_counter);
    w32(out + 56, r->mech.eps_micro);
    wf(out + 60, r->mech.lo);
    wf(out + 64, r->mech.hi);
    wf(out + 68, r->mech.sensitivity);
    w32(out + 72, (uint32_t)r->mech.m);
    w32(out + 76, 0);
    w32(out + 80, edp_crc32(0, out, 80));
}

int edp_store_parse(edp_record_t *r, const uint8_t in[EDP_STORE_RECORD])
{
    if (r32(in) != EDP_STORE_MAGIC || in[4] != EDP_STORE_VERSION || in[6] != EDP_STORE_RECORD)
        return EDP_ERR_STORE;
    if (r32(in + 80) != edp_crc32(0, in, 80)) return EDP_ERR_STORE;
    r->sequence = r32(in + 8);
    r->budget.day = r32(in + 12);
    r->budget.daily_cap = r64(in + 16);
    r->budget.lifetime_cap = r64(in + 24);
    r->budget.daily_spent = r64(in + 32);
    r->budget.lifetime_spent = r64(in + 40);
    r->auth_counter = r64(in + 48);
    r->mech.eps_micro = r32(in + 56);
    r->mech.lo = rf(in + 60);
    r->mech.hi = rf(in + 64);
    r->mech.sensitivity = rf(in + 68);
    r->mech.m = (int32_t)r32(in + 72);
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
    return !ok[s ^ 1u] && written[s ^ 1u] ? EDP_STORE_TORN : EDP_STORE_LOADED;
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
