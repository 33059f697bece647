#include "edgedp/flog.h"
#include "edgedp/crc32.h"
#include "edgedp/error.h"
#include "le.h"

#include <string.h>

static void pack(uint8_t out[EDP_FLOG_RECORD], uint32_t seq, const edp_flog_mark_t *m)
{
    uint8_t *o = out;
    o = edp_wr32(o, seq);
    o = edp_wr32(o, m->day);
    o = edp_wr64(o, m->daily);
    o = edp_wr64(o, m->lifetime);
    o = edp_wr64(o, m->counter);
    (void)edp_wr32(o, edp_crc32(0, out, EDP_FLOG_RECORD - 4));
}

static int parse(const uint8_t in[EDP_FLOG_RECORD], uint32_t *seq, edp_flog_mark_t *m)
{
    if (edp_rd32(in + EDP_FLOG_RECORD - 4) != edp_crc32(0, in, EDP_FLOG_RECORD - 4)) return 0;
    *seq = edp_rd32(in);
    m->day = edp_rd32(in + 4);
    m->daily = edp_rd64(in + 8);
    m->lifetime = edp_rd64(in + 16);
    m->counter = edp_rd64(in + 24);
    return 1;
}

static int erased(const uint8_t *p)
{
    uint32_t i;
    for (i = 0; i < EDP_FLOG_RECORD; i++)
        if (p[i] != 0xFF) return 0;
    return 1;
}

/* a := max(a, b): lifetime and counter each, (day, daily) as a pair. Returns 1 if a rose. */
static int merge(edp_flog_mark_t *a, const edp_flog_mark_t *b)
{
    int up = 0;
    if (b->lifetime > a->lifetime) a->lifetime = b->lifetime, up = 1;
    if (b->counter > a->counter) a->counter = b->counter, up = 1;
    if (b->day > a->day || (b->day == a->day && b->daily > a->daily)) {
        a->day = b->day;
        a->daily = b->daily;
        up = 1;
    }
    return up;
}

static uint32_t slots(const edp_flash_t *f)
{
    return f->sector_size / EDP_FLOG_RECORD;
}

int edp_flog_open(edp_flog_t *log, const edp_flash_t *flash)
{
    uint8_t buf[EDP_FLOG_RECORD];
    edp_flog_mark_t m;
    uint32_t s, i, seq, used[2] = {0, 0};
    int found = 0, have[2] = {0, 0}, err;
    uint32_t top[2] = {0, 0};
    memset(log, 0, sizeof *log);
    log->flash = flash;
    for (s = 0; s < 2; s++) {
        for (i = 0; i < slots(flash); i++) {
            err = flash->read(flash->ctx, s * flash->sector_size + i * EDP_FLOG_RECORD, buf, EDP_FLOG_RECORD);
            if (err < 0) {
                memset(&log->mark, 0, sizeof log->mark);
                log->flash = 0;
                return err;
            }
            if (erased(buf)) continue;
            used[s] = (i + 1) * EDP_FLOG_RECORD;
            if (!parse(buf, &seq, &m)) continue;
            merge(&log->mark, &m);
            if (!have[s] || seq > top[s]) top[s] = seq;
            have[s] = 1;
            found++;
        }
    }
    log->sector = have[1] && (!have[0] || top[1] > top[0]) ? 1 : 0;
    log->seq = have[log->sector] ? top[log->sector] : 0;
    log->next = used[log->sector];
    log->active_valid = (uint8_t)have[log->sector];
    log->spare_erased = used[log->sector ^ 1u] == 0;
    return found;
}

int edp_flog_raise(edp_flog_t *log, const edp_flog_mark_t *m)
{
    const edp_flash_t *f = log->flash;
    edp_flog_mark_t next = log->mark;
    uint8_t rec[EDP_FLOG_RECORD], check[EDP_FLOG_RECORD];
    uint32_t tries, off;
    int err;
    if (!f) return EDP_ERR_STORE;
    if (!merge(&next, m) && log->seq) return EDP_OK;
    pack(rec, log->seq + 1, &next);
    /* At most one pass over a sector: a slot that does not read back intact
     * (not really erased) is skipped. */
    for (tries = 0; tries <= slots(f); tries++) {
        if (log->next + EDP_FLOG_RECORD > slots(f) * EDP_FLOG_RECORD) {
            if (!log->spare_erased && (err = f->erase(f->ctx, log->sector ^ 1u)) < 0) return err;
            log->sector ^= 1u;
            log->next = 0;
            log->active_valid = 0;
            log->spare_erased = 0;  /* the old sector, now the spare, holds the previous mark */
        }
        off = log->sector * f->sector_size + log->next;
        log->next += EDP_FLOG_RECORD;
        /* Body first, CRC last: the record is valid only with its final word. */
        if ((err = f->program(f->ctx, off, rec, EDP_FLOG_RECORD - 4)) < 0) return err;
        if ((err = f->program(f->ctx, off + EDP_FLOG_RECORD - 4, rec + EDP_FLOG_RECORD - 4, 4)) < 0) return err;
        if ((err = f->read(f->ctx, off, check, EDP_FLOG_RECORD)) < 0) return err;
        if (memcmp(check, rec, EDP_FLOG_RECORD) == 0) {
            log->mark = next;
            log->seq++;
            log->active_valid = 1;
            return EDP_OK;
        }
    }
    return EDP_ERR_STORE;
}

int edp_flog_prepare(edp_flog_t *log)
{
    const edp_flash_t *f = log->flash;
    int err;
    if (!f || log->spare_erased || (log->seq && !log->active_valid)) return EDP_OK;
    if ((err = f->erase(f->ctx, log->sector ^ 1u)) < 0) return err;
    log->spare_erased = 1;
    return EDP_OK;
}
