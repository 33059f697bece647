/* POSIX port for native builds and tests: console on stdin/stdout.
 *
 * Environment:
 *   EDP_STORE_FILE      persistent store file (default: in memory only)
 *   EDP_STORE_CUT_AFTER cut power (exit 99) after this many 4-byte store writes
 *   EDP_HOST_TIME       fixed unix seconds for the clock; "unset" = no trusted time
 *   EDP_HOST_ENTROPY    "fail" makes the entropy source fail
 *   EDP_HOST_KEY        "none" = no device key provisioned
 * Test builds only: the DRBG is keyed with the documented test seed. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "board.h"
#include "edgedp/error.h"
#include "edgedp/store.h"
#include "test_keys.h"

#if !EDP_TEST_BUILD
#error "the host port is a test port: build it with EDP_TEST_BUILD=1"
#endif

static uint8_t store[2 * EDP_STORE_SLOT_SIZE];
static const char *store_path;
static long cut_after = -1;
static int clock_state;          /* 0 real time, 1 fixed, 2 unset */
static int64_t clock_base;       /* fixed seconds, or offset added to time() */

static int entropy(void *ctx, uint8_t key[32])
{
    const char *e = getenv("EDP_HOST_ENTROPY");
    (void)ctx;
    if (e && strcmp(e, "fail") == 0) return EDP_ERR_ENTROPY;
    memcpy(key, edp_test_seed, 32);
    return EDP_OK;
}

static uint32_t ticks(void *ctx)
{
    struct timespec ts;
    (void)ctx;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

static int day(void *ctx, uint32_t *d)
{
    int64_t now;
    (void)ctx;
    if (clock_state == 2) return EDP_ERR_TIME;
    now = clock_state == 1 ? clock_base : (int64_t)time(NULL) + clock_base;
    if (now < 0) return EDP_ERR_TIME;
    *d = (uint32_t)(now / 86400);
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
    FILE *f;
    if (!store_path) return;
    f = fopen(store_path, "wb");
    if (!f) return;
    fwrite(store, 1, sizeof store, f);
    fclose(f);
}

/* One "write step" per 4-byte word, so power can be cut between any two. */
static int store_write(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    const uint8_t *p = buf;
    (void)ctx;
    if (off + n > sizeof store) return EDP_ERR_STORE;
    while (n) {
        uint32_t w = n < 4 ? n : 4;
        if (cut_after == 0) _exit(99);
        memcpy(store + off, p, w);
        store_flush();
        if (cut_after > 0) cut_after--;
        off += w;
        p += w;
        n -= w;
    }
    return EDP_OK;
}

static int device_key(void *ctx, const uint8_t **key)
{
    const char *e = getenv("EDP_HOST_KEY");
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
    *kind = EDP_TICK_HOST;
}

static const edp_port_t port = {
    .entropy = entropy,
    .ticks = ticks,
    .tick_unit = tick_unit,
    .day = day,
    .set_time = set_time,
    .store_read = store_read,
    .store_write = store_write,
    .device_key = device_key,
    .uart_write = uart_write,
    .board = "host",
};

const edp_port_t *edp_board_init(void)
{
    const char *t = getenv("EDP_HOST_TIME"), *c = getenv("EDP_STORE_CUT_AFTER");
    store_path = getenv("EDP_STORE_FILE");
    if (store_path) {
        FILE *f = fopen(store_path, "rb");
        if (f) {
            if (fread(store, 1, sizeof store, f) != sizeof store) memset(store, 0, sizeof store);
            fclose(f);
        }
    }
    if (c) cut_after = atol(c);
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
