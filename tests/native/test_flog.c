/* Power-loss tests of the flash high-water log (flog.c) on the RAM NOR model.
 *
 * Built natively under ASan/UBSan by tests/native/test_flog.py. A scripted run
 * of writes (marks rising in every field, several sector switches) is repeated
 * with power cut at every flash operation (word program or sector erase, the
 * cut one torn); after each cut the log is reopened on the same array and must
 * hold a mark >= every mark a write acknowledged and <= the mark being written,
 * and the rate limit acknowledged last or the one being written, then take the
 * rest of the script. Two scripts: marks only (the log as firmware before rate
 * records wrote it) and marks with a RATE every fourth step (non-monotone
 * limits, rising counters). After every acknowledged write, and at every reboot, the run calls
 * edp_flog_prepare, as the device does once the answer has left: the spare
 * sector is erased there, ahead of need, and a write never erases (its erase
 * would fall inside a release window). A second pass cuts again at every
 * operation of the recovery. A log written in the old layout (packed here, not
 * by flog.c) opens to its mark and takes rate records. Output: one "ok"/"not ok"
 * line per group, "stats ..." lines, "# checked N cut points"; exit status 0 iff
 * every check passed. */
#include <stdio.h>
#include <string.h>

#include "crc32.h"
#include "edgedp/error.h"
#include "flog.h"
#include "ramflash.h"

#define SLOTS 8u
#define SECTOR (SLOTS * EDP_FLOG_RECORD + 8u)  /* a tail too short for a slot */
#define STEPS 40u

typedef struct {
    edp_flog_mark_t mark;
    edp_flog_rate_t rate;
} state_t;

static uint8_t mem[2 * SECTOR];
static int failures;
static long checked;
static int mixed;                      /* the script sets a rate limit every fourth step */
static edp_ramflash_t *model_of_run;  /* the flash of the current run */
static uint32_t write_erases;          /* erases done inside edp_flog_raise / edp_flog_set_rate */

static int rate_step(uint32_t i)
{
    return mixed && i % 11u == 1u;  /* rarer than a sector fills: a switch must copy the limit */
}

static edp_flog_mark_t script(uint32_t i)
{
    edp_flog_mark_t m;
    m.day = 20000u + i / 7u;
    m.daily = (uint64_t)(i % 7u + 1u) * 250000u;
    m.lifetime = (uint64_t)(i + 1u) * 1000000u + (uint64_t)i * i;
    m.counter = i / 3u + 1u;
    return m;
}

/* Step i's limit: the counter rises, the fields go up and down. */
static edp_flog_rate_t rate_script(uint32_t i)
{
    edp_flog_rate_t r;
    r.counter = i / 3u + 1u;
    r.limit.burst = (i * 7u) % 5u;  /* 0 (no limit) now and then */
    r.limit.per_minute = 60u - (i * 13u) % 50u;
    r.limit.tarpit_ms = (i * 300u) % 2001u;
    return r;
}

static void apply(state_t *s, uint32_t i)
{
    if (rate_step(i)) {
        s->rate = rate_script(i);
        if (s->rate.counter > s->mark.counter) s->mark.counter = s->rate.counter;
    } else {
        edp_flog_mark_t m = script(i);
        if (m.lifetime > s->mark.lifetime) s->mark.lifetime = m.lifetime;
        if (m.counter > s->mark.counter) s->mark.counter = m.counter;
        if (m.day > s->mark.day || (m.day == s->mark.day && m.daily > s->mark.daily)) {
            s->mark.day = m.day;
            s->mark.daily = m.daily;
        }
    }
}

/* The log's state after steps [0, n). */
static state_t after(uint32_t n)
{
    state_t s;
    uint32_t i;
    memset(&s, 0, sizeof s);
    for (i = 0; i < n; i++) apply(&s, i);
    return s;
}

static int ge(const edp_flog_mark_t *a, const edp_flog_mark_t *b)
{
    return a->lifetime >= b->lifetime && a->counter >= b->counter &&
           (a->day > b->day || (a->day == b->day && a->daily >= b->daily));
}

static int eq(const edp_flog_mark_t *a, const edp_flog_mark_t *b)
{
    return ge(a, b) && ge(b, a);
}

static int rate_eq(const edp_flog_rate_t *a, const edp_flog_rate_t *b)
{
    return a->counter == b->counter && a->limit.burst == b->limit.burst &&
           a->limit.per_minute == b->limit.per_minute && a->limit.tarpit_ms == b->limit.tarpit_ms;
}

static void fail(const char *what, long cut1, long cut2)
{
    if (failures < 20) printf("not ok %s (mixed=%d cut1=%ld cut2=%ld)\n", what, mixed, cut1, cut2);
    failures++;
}

/* Write steps [from, STEPS) until one fails. Returns the index of the first
 * step not acknowledged. */
static uint32_t run(edp_flog_t *log, uint32_t from)
{
    uint32_t i;
    for (i = from; i < STEPS; i++) {
        edp_flog_mark_t m = script(i);
        edp_flog_rate_t r = rate_script(i);
        uint32_t erases = model_of_run->erases;
        int err = rate_step(i) ? edp_flog_set_rate(log, &r) : edp_flog_raise(log, &m);
        write_erases += model_of_run->erases - erases;
        if (err != EDP_OK) return i;
        (void)edp_flog_prepare(log);  /* a cut here shows at the next write */
    }
    return STEPS;
}

/* Reboot on the same array and check the invariants; returns the next step to run. */
static uint32_t reboot(edp_flash_t *flash, edp_ramflash_t *model, edp_flog_t *log, uint32_t stopped,
                       long cut1, long cut2)
{
    state_t acked = after(stopped), attempted = after(stopped < STEPS ? stopped + 1 : STEPS);
    model->dead = 0;
    model->cut_after = -1;
    /* as the device boots: open, then prepare the spare, which must not take
     * anything the active sector lacks */
    if (edp_flog_open(log, flash) < 0 || edp_flog_prepare(log) != EDP_OK || edp_flog_open(log, flash) < 0)
        fail("reopen", cut1, cut2);
    if (!ge(&log->mark, &acked.mark)) fail("an acknowledged mark was lost", cut1, cut2);
    if (!ge(&attempted.mark, &log->mark)) fail("the mark rose above what was written", cut1, cut2);
    if (!rate_eq(&log->rate, &acked.rate) && !rate_eq(&log->rate, &attempted.rate))
        fail("the rate limit is neither the acknowledged one nor the one written", cut1, cut2);
    checked++;
    return stopped;
}

static void finish(edp_flash_t *flash, edp_flog_t *log, uint32_t from, long cut1, long cut2)
{
    state_t last = after(STEPS);
    if (run(log, from) != STEPS) fail("writes after recovery", cut1, cut2);
    if (edp_flog_open(log, flash) < 0 || !eq(&log->mark, &last.mark) || !rate_eq(&log->rate, &last.rate))
        fail("final mark and rate limit", cut1, cut2);
}

/* A fresh log, the script cut after cut1 operations, and the reboot (whose
 * recovery cut2 names in failures): the steps the log then holds. */
static uint32_t cut_run(edp_flash_t *flash, edp_ramflash_t *model, edp_flog_t *log, long cut1, long cut2)
{
    edp_ramflash_format(flash);
    edp_ramflash_bind(flash, model, mem, SECTOR);
    model->cut_after = cut1;
    edp_flog_open(log, flash);
    return reboot(flash, model, log, run(log, 0), cut1, cut2);
}

static uint32_t rate_steps(void)
{
    uint32_t i, n = 0;
    for (i = 0; i < STEPS; i++) n += (uint32_t)rate_step(i);
    return n;
}

/* The uncut run, then every single cut point and a second cut during the
 * recovery, on the current script. */
static void cuts(edp_flash_t *flash, edp_ramflash_t *model, edp_flog_t *log, const char *name)
{
    edp_flog_mark_t low;
    state_t last = after(STEPS);
    long ops, cut1, cut2;
    uint32_t stopped, again, programs, slots_used;
    int bad = failures;

    edp_ramflash_format(flash);
    edp_ramflash_bind(flash, model, mem, SECTOR);
    write_erases = 0;
    memset(&low, 0, sizeof low);
    if (edp_flog_open(log, flash) != 0 || !eq(&log->mark, &low) || log->rate.counter != 0)
        fail("blank part opens empty", -1, -1);
    stopped = run(log, 0);
    ops = (long)(model->programs + model->erases);
    programs = model->programs;
    slots_used = programs / (EDP_FLOG_RECORD / 4u);
    printf("stats %s writes %u rate_writes %u word_programs %u erases %u slots_per_sector %u "
           "erases_in_write %u\n", name, STEPS, rate_steps(), programs, model->erases, SLOTS, write_erases);
    if (stopped != STEPS) fail("uncut run", -1, -1);
    /* Marks only: one record per write, one erase per full sector (nothing is
     * copied). Mixed: at most one copied record per switch. */
    if (!mixed && (model->erases != (STEPS - 1u) / SLOTS || slots_used != STEPS))
        fail("uncut run: one record per write, one erase per full sector", -1, -1);
    if (mixed && (slots_used < STEPS || slots_used > STEPS + model->erases + 1u ||
                  model->erases > (STEPS - 1u) / (SLOTS - 1u)))
        fail("uncut run: at most one copied record per sector switch", -1, -1);
    if (write_erases != 0) fail("uncut run: every erase ahead of need, none inside a write", -1, -1);
    low = script(3);
    if (edp_flog_raise(log, &low) != EDP_OK || (mixed && edp_flog_set_rate(log, &last.rate) != EDP_OK) ||
        model->programs != programs)
        fail("a mark below the current one, or the current limit again, programs nothing", -1, -1);
    if (mixed) {
        edp_flog_rate_t older = rate_script(1);
        if (edp_flog_set_rate(log, &older) != EDP_ERR_BAD_VALUE || model->programs != programs)
            fail("a limit of an older counter is refused and programs nothing", -1, -1);
    }
    if (edp_flog_open(log, flash) <= 0 || !eq(&log->mark, &last.mark) || !rate_eq(&log->rate, &last.rate))
        fail("reopen after the uncut run", -1, -1);
    if (mixed) {  /* the same counter again (the device's boot, writing the limit it runs): the later wins */
        edp_flog_rate_t again = last.rate;
        again.limit.burst -= again.limit.burst ? 1u : 0u;  /* lower in every field: seq decides */
        again.limit.per_minute -= 1u;
        if (edp_flog_set_rate(log, &again) != EDP_OK || model->programs != programs + EDP_FLOG_RECORD / 4u ||
            edp_flog_open(log, flash) <= 0 || !rate_eq(&log->rate, &again) || !eq(&log->mark, &last.mark))
            fail("a limit written again at the same counter replaces the one before", -1, -1);
    }
    if (failures == bad) printf("ok %s: uncut run and no-op writes\n", name);

    bad = failures;
    for (cut1 = 0; cut1 <= ops; cut1++) {
        edp_ramflash_format(flash);
        edp_ramflash_bind(flash, model, mem, SECTOR);
        model->cut_after = cut1;
        edp_flog_open(log, flash);
        stopped = run(log, 0);
        stopped = reboot(flash, model, log, stopped, cut1, -1);
        finish(flash, log, stopped, cut1, -1);
    }
    if (failures == bad) printf("ok %s: power cut at each of %ld operations\n", name, ops + 1);

    /* A second cut at every point of the recovery (the next three writes). */
    bad = failures;
    for (cut1 = 0; cut1 <= ops; cut1 += 3) {
        for (cut2 = 0; cut2 < 3 * 10; cut2++) {
            stopped = cut_run(flash, model, log, cut1, cut2);
            model->cut_after = cut2;
            again = run(log, stopped);
            again = reboot(flash, model, log, again, cut1, cut2);
            finish(flash, log, again, cut1, cut2);
        }
    }
    if (failures == bad) printf("ok %s: a second power cut during recovery\n", name);

    /* Repeated tears: after a cut at every point of the run, the next writes
     * are each cut inside their first record (tear at word 1..8), one reboot
     * per write, more times than a sector has slots: each burns a slot, the
     * active sector fills (a switch whose copy landed and whose new record did
     * not leaves it incomplete), and no mark or limit reported written is lost. */
    bad = failures;
    for (cut1 = 0; cut1 <= ops; cut1++) {
        for (cut2 = 1; cut2 < (long)(EDP_FLOG_RECORD / 4u); cut2 += 3) {
            uint32_t round;
            stopped = cut_run(flash, model, log, cut1, cut2);
            for (round = 0; round < 2u * SLOTS + 2u && stopped < STEPS; round++) {
                model->cut_after = cut2;
                stopped = run(log, stopped);
                stopped = reboot(flash, model, log, stopped, cut1, cut2);
            }
            finish(flash, log, stopped, cut1, cut2);
        }
    }
    if (failures == bad) printf("ok %s: repeated tears until the sector fills\n", name);
}

/* A mark record as firmware before rate records wrote it (flog.h: seq | day |
 * daily | lifetime | counter | CRC-32 of the 32 bytes before it), packed here. */
static void old_record(uint8_t *o, uint32_t seq, const edp_flog_mark_t *m)
{
    uint32_t i;
    uint64_t v[3];
    v[0] = m->daily, v[1] = m->lifetime, v[2] = m->counter;
    for (i = 0; i < 4; i++) o[i] = (uint8_t)(seq >> (8 * i)), o[4 + i] = (uint8_t)(m->day >> (8 * i));
    for (i = 0; i < 24; i++) o[8 + i] = (uint8_t)(v[i / 8] >> (8 * (i % 8)));
    i = (uint32_t)edp_crc32(0, o, 32);
    o[32] = (uint8_t)i, o[33] = (uint8_t)(i >> 8), o[34] = (uint8_t)(i >> 16), o[35] = (uint8_t)(i >> 24);
}

/* An old log, full sector 0 and one record in sector 1 (spare not yet erased
 * back: sector 0 still holds its records), read by this flog.c; then rate
 * limits and marks on top of it, across the next switch and its erase. */
static void old_layout(edp_flash_t *flash, edp_ramflash_t *model, edp_flog_t *log)
{
    edp_flog_mark_t m, top;
    edp_flog_rate_t r;
    uint32_t i;
    int bad = failures;
    edp_ramflash_format(flash);
    edp_ramflash_bind(flash, model, mem, SECTOR);
    for (i = 0; i <= SLOTS; i++) {
        m = script(i);
        old_record(mem + (i / SLOTS) * SECTOR + (i % SLOTS) * EDP_FLOG_RECORD, i + 1u, &m);
    }
    top = script(SLOTS);
    if (edp_flog_open(log, flash) != (int)SLOTS + 1 || !eq(&log->mark, &top) || log->rate.counter != 0 ||
        log->sector != 1 || log->seq != SLOTS + 1u)
        fail("an old-layout log opens to its mark, sector and seq", -1, -1);
    if (edp_flog_prepare(log) != EDP_OK || model->erases != 1) fail("an old-layout log is complete", -1, -1);
    r = rate_script(30);
    r.counter = top.counter + 1u;
    if (edp_flog_set_rate(log, &r) != EDP_OK) fail("a rate limit on an old-layout log", -1, -1);
    for (i = SLOTS + 1u; i < 3u * SLOTS; i++) {  /* two more switches: the limit is copied along */
        m = script(i);
        if (edp_flog_raise(log, &m) != EDP_OK) fail("raise after the rate limit", -1, -1);
        (void)edp_flog_prepare(log);
    }
    top = script(3u * SLOTS - 1u);
    if (edp_flog_open(log, flash) <= 0 || !eq(&log->mark, &top) || !rate_eq(&log->rate, &r))
        fail("the old log's mark and the new limit after two switches", -1, -1);
    if (failures == bad) printf("ok old-layout log read, rate limit kept across switches\n");
}

/* A rate record packed here (flog.h layout), at slot `slot` of sector 0, with
 * `reserved` in its reserved words (0 in a record flog.c writes). */
static void rate_record(uint32_t slot, uint32_t seq, const edp_flog_rate_t *r, uint64_t reserved)
{
    uint8_t *o = mem + slot * EDP_FLOG_RECORD;
    uint32_t i, w[6], crc;
    w[0] = seq, w[1] = r->limit.burst, w[2] = r->limit.per_minute, w[3] = r->limit.tarpit_ms;
    w[4] = (uint32_t)reserved, w[5] = (uint32_t)(reserved >> 32);
    for (i = 0; i < 24; i++) o[i] = (uint8_t)(w[i / 4] >> (8 * (i % 4)));
    for (i = 0; i < 8; i++) o[24 + i] = (uint8_t)(r->counter >> (8 * i));
    crc = (uint32_t)edp_crc32(0, o, 32) ^ EDP_FLOG_RATE_TAG;
    for (i = 0; i < 4; i++) o[32 + i] = (uint8_t)(crc >> (8 * i));
}

static const edp_flash_t *tie_inner;
static int lands_but_fails;  /* the next check-word program lands, then reports an error (a BSY timeout) */

static int tie_program(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    int err = tie_inner->program(ctx, off, buf, n);
    if (err == EDP_OK && lands_but_fails && n == 4) {
        lands_but_fails = 0;
        return EDP_ERR_STORE;
    }
    return err;
}

/* A rate record that landed but was reported failed, then the RATE retried at
 * the same counter with a stricter limit: the retry is the log's limit after a
 * reboot. And two rate records of one (counter, seq), in either slot order:
 * the stricter limit wins. */
static void ties(edp_flash_t *flash, edp_ramflash_t *model, edp_flog_t *log)
{
    static const edp_flog_rate_t loose = {7, {1000, 1000, 0}}, tight = {7, {2, 1, 0}}, none = {7, {0, 0, 0}};
    edp_flash_t wrapped;
    const edp_flog_rate_t *pairs[3][2] = {{&loose, &tight}, {&none, &tight}, {&none, &loose}};
    uint32_t i, order;
    int bad = failures;
    edp_ramflash_format(flash);
    edp_ramflash_bind(flash, model, mem, SECTOR);
    wrapped = *flash;
    wrapped.program = tie_program;
    tie_inner = flash;
    edp_flog_open(log, &wrapped);
    lands_but_fails = 1;
    if (edp_flog_set_rate(log, &loose) == EDP_OK || log->rate.counter != 0)
        fail("a rate record reported failed is not the log's limit", -1, -1);
    if (edp_flog_set_rate(log, &tight) != EDP_OK) fail("the retry at the same counter", -1, -1);
    if (edp_flog_open(log, flash) != 2 || !rate_eq(&log->rate, &tight))
        fail("after a reboot the retried limit, not the one reported failed", -1, -1);
    for (i = 0; i < 3; i++) {
        for (order = 0; order < 2; order++) {
            edp_ramflash_format(flash);
            rate_record(0, 1, pairs[i][order], 0);
            rate_record(1, 1, pairs[i][order ^ 1u], 0);
            if (edp_flog_open(log, flash) != 2 || !rate_eq(&log->rate, pairs[i][1]))
                fail("two rate records of one seq: the stricter limit wins", (long)i, (long)order);
        }
    }
    if (failures == bad) printf("ok seq per slot programmed, ties to the stricter limit\n");

    /* The check word of a rate record on a body whose reserved words are not
     * zero (a mark's lifetime there): no record at all. */
    bad = failures;
    for (i = 0; i < 2; i++) {
        const uint64_t reserved = i ? 1u : (uint64_t)1 << 40;
        edp_ramflash_format(flash);
        rate_record(0, 1, &tight, 0);
        rate_record(1, 2, &loose, reserved);
        if (edp_flog_open(log, flash) != 1 || !rate_eq(&log->rate, &tight) || log->mark.lifetime != 0)
            fail("a rate record with nonzero reserved words is no record", (long)i, -1);
    }
    if (failures == bad) printf("ok a rate record's reserved words must be zero\n");
}

int main(void)
{
    edp_flash_t flash;
    edp_ramflash_t model;
    edp_flog_t log;

    model_of_run = &model;
    edp_ramflash_bind(&flash, &model, mem, SECTOR);
    mixed = 0;
    cuts(&flash, &model, &log, "marks");
    mixed = 1;
    cuts(&flash, &model, &log, "mixed");
    old_layout(&flash, &model, &log);
    ties(&flash, &model, &log);
    printf("# checked %ld cut points, %d failures\n", checked, failures);
    return failures ? 1 : 0;
}
