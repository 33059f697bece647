/* POSIX port for native builds and tests: console on stdin/stdout.
 *
 * Environment:
 *   EDP_STORE_FILE      persistent store file (default: in memory only)
 *   EDP_STORE_CUT_AFTER cut power (exit 99) after this many 4-byte store writes
 *   EDP_STORE_FAIL_AFTER the first store write call after this many 4-byte store
 *                       writes fails once with EDP_ERR_STORE, writing nothing (a
 *                       failed backup-domain write); later calls work
 *   EDP_FLASH_FILE      the flash high-water log's two sectors (RAM NOR model,
 *                       EDP_POSIX_FLASH_SECTOR bytes each; default: in memory only)
 *   EDP_FLASH_CUT_AFTER cut power (exit 99) after this many flash word programs
 *                       and erases (the cut one torn, ramflash.h)
 *   EDP_FLASH_FAIL_AFTER once this many flash word programs are done, the next
 *                       program call lands and then reports EDP_ERR_STORE, once
 *                       (a busy-flag timeout after the write took)
 *   EDP_POSIX_TIME       fixed unix seconds for the clock; "unset" = no trusted time
 *   EDP_POSIX_ENTROPY    "fail" makes the entropy source (the noise DRBG's) fail;
 *                       "fail:N" fails its first N calls, then works
 * The admin nonce generator is keyed from /dev/urandom (fresh at every start).
 *   EDP_POSIX_AUTH_ENTROPY  the same for that source (the nonce generator's)
 *   EDP_POSIX_KEY        "none" = no device key provisioned
 * Test builds only: the DRBG is keyed with the documented test seed. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "board.h"
#include "edgedp/error.h"
#include "store.h"  /* the record layout (core/src): the project's own port */
#include "ramflash.h"
#include "test_keys.h"

#if !EDP_TEST_BUILD
#error "the posix port is a test port: build it with EDP_TEST_BUILD=1"
#endif

#define EDP_POSIX_FLASH_SECTOR 1008u  /* 28 log slots: tests cross sector switches */

static uint8_t store[EDP_STORE_SIZE];
static uint8_t flash_mem[2 * EDP_POSIX_FLASH_SECTOR];
static edp_ramflash_t flash_model;
static edp_flash_t flash_model_ops;
static const char *flash_path;
static int flash_fd = -1;
static long entropy_failures;      /* calls of entropy() still to fail; -1: all */
static long auth_entropy_failures; /* the same for auth_entropy() */

/* An EDP_POSIX_*ENTROPY value: "fail" -1 (every call fails), "fail:N" N, else 0. */
static long failures(const char *v)
{
    if (v && strcmp(v, "fail") == 0) return -1;
    if (v && strncmp(v, "fail:", 5) == 0) return atol(v + 5);
    return 0;
}
static const char *store_path;
static int store_fd = -1;
static long cut_after = -1;
static long fail_after = -1;     /* EDP_STORE_FAIL_AFTER */
static long flash_fail_after = -1;  /* EDP_FLASH_FAIL_AFTER */
static int clock_state;          /* 0 real time, 1 fixed, 2 unset */
static int64_t clock_base;       /* fixed seconds, or offset added to time() */

static int entropy(void *ctx, uint8_t key[32])
{
    (void)ctx;
    if (entropy_failures) {
        if (entropy_failures > 0) entropy_failures--;
        return EDP_ERR_ENTROPY;
    }
    memcpy(key, edp_test_seed, 32);
    return EDP_OK;
}

static int auth_entropy(void *ctx, uint8_t key[32])
{
    FILE *f;
    size_t got = 0;
    (void)ctx;
    if (auth_entropy_failures) {
        if (auth_entropy_failures > 0) auth_entropy_failures--;
        return EDP_ERR_ENTROPY;
    }
    f = fopen("/dev/urandom", "rb");
    if (f) {
        got = fread(key, 1, 32, f);
        fclose(f);
    }
    return got == 32 ? EDP_OK : EDP_ERR_ENTROPY;
}

/* Persist buf to path in place: the file is opened once (*fd, -1 until then) and rewritten
 * from offset 0 without truncation. A truncate-and-rewrite per store word made ext4 flush the
 * file at every close (auto_da_alloc): milliseconds per word. Like before, nothing is
 * fsync'ed: a power cut here is the process's exit, and the page cache keeps what was written. */
static void save(const char *path, int *fd, const void *buf, size_t n)
{
    if (!path) return;
    if (*fd < 0) *fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (*fd >= 0 && pwrite(*fd, buf, n, 0) != (ssize_t)n) {
        close(*fd);  /* reopened at the next write */
        *fd = -1;
    }
}

/* Fill buf from path: a file shorter than `need` bytes counts as lost (all zero); one of
 * need..n bytes keeps what it has (the store of an older layout, without the audit ring). */
static void load(const char *path, void *buf, size_t n, size_t need)
{
    FILE *f = path ? fopen(path, "rb") : 0;
    size_t got;
    if (!f) return;
    got = fread(buf, 1, n, f);
    if (got < need) memset(buf, 0, n);
    else memset((uint8_t *)buf + got, 0, n - got);
    fclose(f);
}

/* The flash model's operations, persisted after each, power cut on request. */
static void flash_after(void)
{
    save(flash_path, &flash_fd, flash_mem, sizeof flash_mem);
    if (flash_model.dead) _exit(99);
}

static int flash_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    (void)ctx;
    return flash_model_ops.read(flash_model_ops.ctx, off, buf, n);
}

static int flash_program(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    const int fail = flash_fail_after >= 0 && flash_model.programs >= (uint32_t)flash_fail_after;
    int err = flash_model_ops.program(flash_model_ops.ctx, off, buf, n);
    (void)ctx;
    flash_after();
    if (fail && err == EDP_OK) {
        flash_fail_after = -1;
        err = EDP_ERR_STORE;
    }
    return err;
}

static int flash_erase(void *ctx, uint32_t sector)
{
    int err = flash_model_ops.erase(flash_model_ops.ctx, sector);
    (void)ctx;
    flash_after();
    return err;
}

static uint32_t ticks(void *ctx)
{
    struct timespec ts;
    (void)ctx;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

static int seconds(void *ctx, uint64_t *s)
{
    int64_t now;
    (void)ctx;
    if (clock_state == 2) return EDP_ERR_TIME;
    now = clock_state == 1 ? clock_base : (int64_t)time(NULL) + clock_base;
    if (now < 0) return EDP_ERR_TIME;
    *s = (uint64_t)now;
    return EDP_OK;
}

static int day(void *ctx, uint32_t *d)
{
    uint64_t s;
    int err = seconds(ctx, &s);
    if (err) return err;
    *d = (uint32_t)(s / 86400u);
    return EDP_OK;
}

static int set_time(void *ctx, uint64_t secs)
{
    (void)ctx;
    if (clock_state == 0) clock_base = (int64_t)secs - (int64_t)time(NULL);
    else clock_base = (int64_t)secs, clock_state = 1;
    return EDP_OK;
}

static int store_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    (void)ctx;
    if (off + n > sizeof store) return EDP_ERR_STORE;
    memcpy(buf, store + off, n);
    return EDP_OK;
}

static void store_flush(void)
{
    save(store_path, &store_fd, store, sizeof store);
}

/* One "write step" per 4-byte word, so power can be cut between any two. */
static int store_write(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    const uint8_t *p = buf;
    (void)ctx;
    if (off + n > sizeof store) return EDP_ERR_STORE;
    if (fail_after == 0) {
        fail_after = -1;
        return EDP_ERR_STORE;
    }
    while (n) {
        uint32_t w = n < 4 ? n : 4;
        if (cut_after == 0) _exit(99);
        memcpy(store + off, p, w);
        store_flush();
        if (cut_after > 0) cut_after--;
        if (fail_after > 0) fail_after--;
        off += w;
        p += w;
        n -= w;
    }
    return EDP_OK;
}

static int device_key(void *ctx, const uint8_t **key)
{
    const char *e = getenv("EDP_POSIX_KEY");
    (void)ctx;
    if (e && strcmp(e, "none") == 0) return EDP_ERR_AUTH;
    *key = edp_test_device_key;
    return EDP_OK;
}

static void uart_write(void *ctx, const uint8_t *buf, size_t n)
{
    (void)ctx;
    fwrite(buf, 1, n, stdout);
}

static void tick_unit(void *ctx, uint32_t *hz, uint8_t *kind)
{
    (void)ctx;
    *hz = 1000000000u;
    *kind = EDP_TICK_HOST_NS;
}

static const edp_flash_t flash = {
    .sector_size = EDP_POSIX_FLASH_SECTOR,
    .read = flash_read,
    .program = flash_program,
    .erase = flash_erase,
};

static const edp_port_t port = {
    .entropy = entropy,
    .ticks = ticks,
    .tick_unit = tick_unit,
    .day = day,
    .seconds = seconds,
    .set_time = set_time,
    .store_read = store_read,
    .store_write = store_write,
    .device_key = device_key,
    .uart_write = uart_write,
    .board = "posix",
    .auth_entropy = auth_entropy,
    .flash = &flash,
};

const edp_port_t *edp_board_init(void)
{
    const char *t = getenv("EDP_POSIX_TIME"), *c = getenv("EDP_STORE_CUT_AFTER");
    const char *fc = getenv("EDP_FLASH_CUT_AFTER"), *e = getenv("EDP_POSIX_ENTROPY");
    store_path = getenv("EDP_STORE_FILE");
    load(store_path, store, sizeof store, EDP_AUDIT_OFFSET);
    if (c) cut_after = atol(c);
    if ((c = getenv("EDP_STORE_FAIL_AFTER"))) fail_after = atol(c);
    entropy_failures = failures(e);
    auth_entropy_failures = failures(getenv("EDP_POSIX_AUTH_ENTROPY"));
    flash_path = getenv("EDP_FLASH_FILE");
    edp_ramflash_bind(&flash_model_ops, &flash_model, flash_mem, EDP_POSIX_FLASH_SECTOR);
    edp_ramflash_format(&flash_model_ops);
    load(flash_path, flash_mem, sizeof flash_mem, sizeof flash_mem);
    if (fc) flash_model.cut_after = atol(fc);
    if ((fc = getenv("EDP_FLASH_FAIL_AFTER"))) flash_fail_after = atol(fc);
    if (t && strcmp(t, "unset") == 0) clock_state = 2;
    else if (t) clock_state = 1, clock_base = atoll(t);
    return &port;
}

int edp_board_uart_read(uint8_t *buf, size_t max)
{
    ssize_t n;
    fflush(stdout);
    n = read(0, buf, max);
    return n > 0 ? (int)n : -1;
}
