/* Power-loss tests of the flash high-water log (flog.c) on the RAM NOR model.
 *
 * Built natively under ASan/UBSan by tests/native/test_flog.py. A scripted run
 * of raises (marks rising in every field, several sector switches) is repeated
 * with power cut at every flash operation (word program or sector erase, the
 * cut one torn); after each cut the log is reopened on the same array and must
 * hold a mark >= every mark a raise acknowledged and <= the mark being written,
 * then take the rest of the script. After every acknowledged raise the run
 * calls edp_flog_prepare, as the device does once the answer has left: the
 * spare sector is erased there, ahead of need, and a raise never erases (its
 * erase would fall inside a release window). A second pass cuts again at
 * every operation of the recovery. Output: one "ok"/"not ok" line per group, "stats ..." lines,
 * "# checked N cut points"; exit status 0 iff every check passed. */
#include <stdio.h>
#include <string.h>

#include "edgedp/error.h"
#include "edgedp/flog.h"
#include "ramflash.h"

#define SLOTS 8u
#define SECTOR (SLOTS * EDP_FLOG_RECORD + 8u)  /* a tail too short for a slot */
#define STEPS 40u

static uint8_t mem[2 * SECTOR];
static int failures;
static long checked;
static edp_ramflash_t *model_of_run;  /* the flash of the current run */
static uint32_t raise_erases;          /* erases done inside edp_flog_raise */

static edp_flog_mark_t script(uint32_t i)
{
    edp_flog_mark_t m;
    m.day = 20000u + i / 7u;
    m.daily = (uint64_t)(i % 7u + 1u) * 250000u;
    m.lifetime = (uint64_t)(i + 1u) * 1000000u + (uint64_t)i * i;
    m.counter = i / 3u + 1u;
    return m;
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

static void fail(const char *what, long cut1, long cut2)
{
    if (failures < 20) printf("not ok %s (cut1=%ld cut2=%ld)\n", what, cut1, cut2);
    failures++;
}

/* Raise steps [from, STEPS) until one fails. Returns the index of the first
 * step not acknowledged; *acked is the last acknowledged mark. */
static uint32_t run(edp_flog_t *log, uint32_t from, edp_flog_mark_t *acked)
{
    uint32_t i;
    for (i = from; i < STEPS; i++) {
        edp_flog_mark_t m = script(i);
        uint32_t erases = model_of_run->erases;
        int err = edp_flog_raise(log, &m);
        raise_erases += model_of_run->erases - erases;
        if (err != EDP_OK) return i;
        *acked = m;
        (void)edp_flog_prepare(log);  /* a cut here shows at the next raise */
    }
    return STEPS;
}

/* Reboot on the same array and check the invariants; returns the next step to run. */
static uint32_t reboot(edp_flash_t *flash, edp_ramflash_t *model, edp_flog_t *log, uint32_t stopped,
                       const edp_flog_mark_t *acked, long cut1, long cut2)
{
    edp_flog_mark_t attempted = script(stopped < STEPS ? stopped : STEPS - 1);
    model->dead = 0;
    model->cut_after = -1;
    if (edp_flog_open(log, flash) < 0) fail("reopen", cut1, cut2);
    if (!ge(&log->mark, acked)) fail("an acknowledged mark was lost", cut1, cut2);
    if (!ge(&attempted, &log->mark)) fail("the mark rose above what was written", cut1, cut2);
    checked++;
    return stopped;
}

static void finish(edp_flash_t *flash, edp_flog_t *log, uint32_t from, long cut1, long cut2)
{
    edp_flog_mark_t acked = script(0), last = script(STEPS - 1);
    if (run(log, from, &acked) != STEPS) fail("raises after recovery", cut1, cut2);
    if (edp_flog_open(log, flash) < 0 || !eq(&log->mark, &last)) fail("final mark", cut1, cut2);
}

int main(void)
{
    edp_flash_t flash;
    edp_ramflash_t model;
    edp_flog_t log;
    edp_flog_mark_t zero, acked, low;
    long ops, cut1, cut2;
    uint32_t stopped, again;
    int bad = failures;

    /* Blank part: nothing found, zero mark; a lower mark writes nothing. */
    model_of_run = &model;
    edp_ramflash_bind(&flash, &model, mem, SECTOR);
    edp_ramflash_format(&flash);
    memset(&zero, 0, sizeof zero);
    if (edp_flog_open(&log, &flash) != 0 || !eq(&log.mark, &zero)) fail("blank part opens empty", -1, -1);
    stopped = run(&log, 0, &acked);
    ops = (long)(model.programs + model.erases);
    printf("stats raises %u word_programs %u erases %u slots_per_sector %u erases_in_raise %u\n", STEPS,
           model.programs, model.erases, SLOTS, raise_erases);
    if (stopped != STEPS || model.erases != (STEPS - 1u) / SLOTS || model.programs != STEPS * EDP_FLOG_RECORD / 4u)
        fail("uncut run: one record per raise, one erase per full sector", -1, -1);
    if (raise_erases != 0) fail("uncut run: every erase ahead of need, none inside a raise", -1, -1);
    low = script(3);
    if (edp_flog_raise(&log, &low) != EDP_OK || model.programs != STEPS * EDP_FLOG_RECORD / 4u)
        fail("a mark below the current one programs nothing", -1, -1);
    if (edp_flog_open(&log, &flash) <= 0 || !eq(&log.mark, &acked)) fail("reopen after the uncut run", -1, -1);
    if (failures == bad) printf("ok uncut run and no-op raise\n");

    /* Every single cut point. */
    bad = failures;
    for (cut1 = 0; cut1 <= ops; cut1++) {
        edp_ramflash_format(&flash);
        edp_ramflash_bind(&flash, &model, mem, SECTOR);
        model.cut_after = cut1;
        memset(&acked, 0, sizeof acked);
        edp_flog_open(&log, &flash);
        stopped = run(&log, 0, &acked);
        stopped = reboot(&flash, &model, &log, stopped, &acked, cut1, -1);
        finish(&flash, &log, stopped, cut1, -1);
    }
    if (failures == bad) printf("ok power cut at each of %ld operations\n", ops + 1);

    /* A second cut at every point of the recovery (the next three raises). */
    bad = failures;
    for (cut1 = 0; cut1 <= ops; cut1 += 3) {
        for (cut2 = 0; cut2 < 3 * 10; cut2++) {
            edp_ramflash_format(&flash);
            edp_ramflash_bind(&flash, &model, mem, SECTOR);
            model.cut_after = cut1;
            memset(&acked, 0, sizeof acked);
            edp_flog_open(&log, &flash);
            stopped = run(&log, 0, &acked);
            stopped = reboot(&flash, &model, &log, stopped, &acked, cut1, cut2);
            model.cut_after = cut2;
            again = run(&log, stopped, &acked);
            again = reboot(&flash, &model, &log, again, &acked, cut1, cut2);
            finish(&flash, &log, again, cut1, cut2);
        }
    }
    if (failures == bad) printf("ok a second power cut during recovery\n");

    printf("# checked %ld cut points, %d failures\n", checked, failures);
    return failures ? 1 : 0;
}
