#include "flog.h"
#include "crc32.h"
#include "edgedp/error.h"
#include "le.h"

#include <string.h>

enum { KIND_MARK = 1, KIND_RATE = 2 };  /* bits of log->kinds and log->covered */

#define BODY (EDP_FLOG_RECORD - 4u)

static void seal(uint8_t out[EDP_FLOG_RECORD], uint32_t tag)
{
    (void)edp_wr32(out + BODY, edp_crc32(0, out, BODY) ^ tag);
}

static void pack_mark(uint8_t out[EDP_FLOG_RECORD], uint32_t seq, const edp_flog_mark_t *m)
{
    uint8_t *o = out;
    o = edp_wr32(o, seq);
    o = edp_wr32(o, m->day);
    o = edp_wr64(o, m->daily);
    o = edp_wr64(o, m->lifetime);
    (void)edp_wr64(o, m->counter);
    seal(out, 0);
}

static void pack_rate(uint8_t out[EDP_FLOG_RECORD], uint32_t seq, const edp_flog_rate_t *r)
{
    uint8_t *o = out;
    o = edp_wr32(o, seq);
    o = edp_wr32(o, r->limit.burst);
    o = edp_wr32(o, r->limit.per_minute);
    o = edp_wr32(o, r->limit.tarpit_ms);
    o = edp_wr32(o, 0);
    o = edp_wr32(o, 0);
    (void)edp_wr64(o, r->counter);  /* at the offset of a mark's counter */
    seal(out, EDP_FLOG_RATE_TAG);
}

/* The kind of the record in `in` (0: it passes neither check) and its fields. */
static unsigned parse(const uint8_t in[EDP_FLOG_RECORD], uint32_t *seq, edp_flog_mark_t *m, edp_flog_rate_t *r)
{
    const uint32_t tag = edp_rd32(in + BODY) ^ edp_crc32(0, in, BODY);
    *seq = edp_rd32(in);
    if (tag == 0) {
        m->day = edp_rd32(in + 4);
        m->daily = edp_rd64(in + 8);
        m->lifetime = edp_rd64(in + 16);
        m->counter = edp_rd64(in + 24);
        return KIND_MARK;
    }
    /* A rate record's reserved words (a mark's lifetime) are zero: no mark that
     * spent anything reads as a rate record, whatever its check word. */
    if (tag == EDP_FLOG_RATE_TAG && edp_rd64(in + 16) == 0) {
        r->limit.burst = edp_rd32(in + 4);
        r->limit.per_minute = edp_rd32(in + 8);
        r->limit.tarpit_ms = edp_rd32(in + 12);
        r->counter = edp_rd64(in + 24);
        return KIND_RATE;
    }
    return 0;
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

/* Whether rate record (b, bseq) wins over (a, aseq): the higher counter, then
 * the higher seq, then (two records of one seq: only a flash that misreads
 * could write them) the stricter limit: a burst (0, no limit, is the loosest),
 * then per_minute, the lower the stricter, then the longer tarpit_ms. A total
 * order, so the newest limit does not depend on the order in which the records
 * are read. */
static int newer(const edp_flog_rate_t *b, uint32_t bseq, const edp_flog_rate_t *a, uint32_t aseq)
{
    const uint32_t bb = b->limit.burst - 1u, ab = a->limit.burst - 1u;  /* burst 0 wraps to the top */
    if (b->counter != a->counter) return b->counter > a->counter;
    if (bseq != aseq) return bseq > aseq;
    if (bb != ab) return bb < ab;
    if (b->limit.per_minute != a->limit.per_minute) return b->limit.per_minute < a->limit.per_minute;
    return b->limit.tarpit_ms > a->limit.tarpit_ms;
}

static int same_rate(const edp_flog_rate_t *a, const edp_flog_rate_t *b)
{
    return a->counter == b->counter && edp_rate_config_same(&a->limit, &b->limit);
}

static uint32_t slots(const edp_flash_t *f)
{
    return f->sector_size / EDP_FLOG_RECORD;
}

int edp_flog_open(edp_flog_t *log, const edp_flash_t *flash)
{
    uint8_t buf[EDP_FLOG_RECORD];
    edp_flog_mark_t m;
    edp_flog_rate_t r;
    uint32_t s, i, seq, rate_seq = 0, used[2] = {0, 0}, top[2] = {0, 0};
    unsigned kind, kinds[2] = {0, 0};  /* the kinds each sector holds */
    int found = 0, err;
    memset(log, 0, sizeof *log);
    log->flash = flash;
    for (s = 0; s < 2; s++) {
        for (i = 0; i < slots(flash); i++) {
            err = flash->read(flash->ctx, s * flash->sector_size + i * EDP_FLOG_RECORD, buf, EDP_FLOG_RECORD);
            if (err < 0) {
                memset(log, 0, sizeof *log);
                return err;
            }
            if (erased(buf)) continue;
            used[s] = (i + 1) * EDP_FLOG_RECORD;
            kind = parse(buf, &seq, &m, &r);
            if (!kind) continue;
            if (kind == KIND_MARK) {
                merge(&log->mark, &m);
            } else if (!(log->kinds & KIND_RATE) || newer(&r, seq, &log->rate, rate_seq)) {
                log->rate = r;
                rate_seq = seq;
            }
            if (!kinds[s] || seq > top[s]) top[s] = seq;
            kinds[s] |= kind;
            log->kinds |= (uint8_t)kind;
            found++;
        }
    }
    log->sector = kinds[1] && (!kinds[0] || top[1] > top[0]) ? 1 : 0;
    s = log->sector;
    log->seq = kinds[s] ? top[s] : 0;
    log->next = used[s];
    log->spare_erased = used[s ^ 1u] == 0;
    /* Every record of the active sector is newer than the spare's and carries
     * the log's state when it was written (a mark the merge of all marks, a
     * rate record the newest limit): a kind it holds is covered. */
    log->covered = (uint8_t)kinds[s];
    if (log->rate.counter > log->mark.counter) log->mark.counter = log->rate.counter;
    return found;
}

/* A full active sector that is not complete (a switch whose new record never
 * landed, then torn writes until the sector filled) holds, besides torn slots,
 * only copies of records of the other sector, which alone holds the newest
 * record of some kind: erase the active sector, never the other, and start it
 * again (next 0). A cut during the erase leaves that other sector the active
 * one. Nothing otherwise. */
static int restart(edp_flog_t *log)
{
    const edp_flash_t *f = log->flash;
    int err;
    if (log->covered == log->kinds || log->next + EDP_FLOG_RECORD <= slots(f) * EDP_FLOG_RECORD) return EDP_OK;
    if ((err = f->erase(f->ctx, log->sector)) < 0) return err;
    log->next = 0;
    log->covered = 0;
    return EDP_OK;
}

/* Append the record of `kind` holding m (a mark) or r (a rate limit). Before it,
 * the newest record of the other kind, if the log holds one and the active
 * sector does not, is copied there: the active sector then holds the whole log
 * and the spare may be erased. A slot that does not read back intact (not
 * really erased) is skipped, at most one sector's worth of them. */
static int append(edp_flog_t *log, unsigned kind, const edp_flog_mark_t *m, const edp_flog_rate_t *r)
{
    const edp_flash_t *f = log->flash;
    uint8_t rec[EDP_FLOG_RECORD], check[EDP_FLOG_RECORD];
    uint32_t fails = 0, off;
    unsigned k;
    int err;
    while (fails <= slots(f)) {
        if (log->next + EDP_FLOG_RECORD > slots(f) * EDP_FLOG_RECORD) {
            if ((err = restart(log)) < 0) return err;
            if (log->next) {  /* complete: start the spare */
                if (!log->spare_erased && (err = f->erase(f->ctx, log->sector ^ 1u)) < 0) return err;
                log->sector ^= 1u;
                log->next = 0;
                log->covered = 0;
                log->spare_erased = 0;  /* the old sector, now the spare, holds the previous log */
            }
        }
        k = (log->kinds & ~log->covered & ~kind) ? kind ^ (KIND_MARK | KIND_RATE) : kind;
        /* Every slot programmed takes a seq of its own, whatever its program or
         * readback reports: a record reported failed may still read valid later,
         * and the retry must not tie with it. */
        log->seq++;
        if (k == KIND_MARK) pack_mark(rec, log->seq, k == kind ? m : &log->mark);
        else pack_rate(rec, log->seq, k == kind ? r : &log->rate);
        off = log->sector * f->sector_size + log->next;
        log->next += EDP_FLOG_RECORD;
        /* Body first, check word last: the record is valid only with its final word. */
        if ((err = f->program(f->ctx, off, rec, BODY)) < 0) return err;
        if ((err = f->program(f->ctx, off + BODY, rec + BODY, 4)) < 0) return err;
        if ((err = f->read(f->ctx, off, check, EDP_FLOG_RECORD)) < 0) return err;
        if (memcmp(check, rec, EDP_FLOG_RECORD) != 0) {
            fails++;
            continue;
        }
        log->covered |= (uint8_t)k;
        log->kinds |= (uint8_t)k;
        if (k == kind) return EDP_OK;
    }
    return EDP_ERR_STORE;
}

int edp_flog_raise(edp_flog_t *log, const edp_flog_mark_t *m)
{
    edp_flog_mark_t next;
    int err;
    if (!log->flash) return EDP_ERR_STORE;
    next = log->mark;
    if (!merge(&next, m) && log->kinds) return EDP_OK;
    if ((err = append(log, KIND_MARK, &next, 0)) < 0) return err;
    log->mark = next;
    return EDP_OK;
}

int edp_flog_set_rate(edp_flog_t *log, const edp_flog_rate_t *r)
{
    int err;
    if (!log->flash) return EDP_ERR_STORE;
    if (r->counter < log->rate.counter) return EDP_ERR_BAD_VALUE;
    if ((log->kinds & KIND_RATE) && same_rate(r, &log->rate)) return EDP_OK;
    if ((err = append(log, KIND_RATE, 0, r)) < 0) return err;
    log->rate = *r;
    if (r->counter > log->mark.counter) log->mark.counter = r->counter;
    return EDP_OK;
}

int edp_flog_prepare(edp_flog_t *log)
{
    const edp_flash_t *f = log->flash;
    int err;
    if (!f) return EDP_OK;
    if ((err = restart(log)) < 0) return err;
    if (log->spare_erased || log->covered != log->kinds) return EDP_OK;
    if ((err = f->erase(f->ctx, log->sector ^ 1u)) < 0) return err;
    log->spare_erased = 1;
    return EDP_OK;
}
