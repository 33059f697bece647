/* Fuzzing the frame parser and dispatcher (nanopb fuzztest style), under ASan/UBSan.
 *
 *   fuzz_frames SEED ITERATIONS
 *
 * Feeds the device mutated valid frames (bit flips, truncation, splices,
 * random bytes, oversize runs) through edp_device_rx and checks the
 * invariants of the frame loop after every chunk:
 *   1. every non-empty 0x00-delimited chunk gets exactly one response;
 *   2. every response is a well-formed frame (COBS, CRC, version 1);
 *   3. an answer to QUERY (type 0x90) is never sent while entropy has failed,
 *      and every answered QUERY raised the committed lifetime spend;
 *   4. nothing crashes, reads out of bounds or overflows (sanitizers).
 * Prints a summary line; exits non-zero on the first violated invariant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgedp/cobs.h"
#include "edgedp/crc32.h"
#include "edgedp/device.h"
#include "edgedp/error.h"
#include "edgedp/proto.h"

static uint8_t store[2 * EDP_STORE_SLOT_SIZE];
static const uint8_t key[32] = {1, 2, 3};
static int entropy_fails;
static uint8_t out[2 * EDP_WIRE_MAX];
static size_t out_len;
static uint64_t rng_state = 88172645463325252ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static int p_entropy(void *c, uint8_t k[32]) { (void)c; memset(k, 7, 32); return entropy_fails ? EDP_ERR_ENTROPY : EDP_OK; }
static uint32_t p_ticks(void *c) { (void)c; return 0; }
static int p_day(void *c, uint32_t *d) { (void)c; *d = 20000; return EDP_OK; }
static int p_set_time(void *c, uint64_t s) { (void)c; (void)s; return EDP_OK; }
static int p_read(void *c, uint32_t off, void *b, uint32_t n) { (void)c; if (off + n > sizeof store) return EDP_ERR_STORE; memcpy(b, store + off, n); return EDP_OK; }
static int p_write(void *c, uint32_t off, const void *b, uint32_t n) { (void)c; if (off + n > sizeof store) return EDP_ERR_STORE; memcpy(store + off, b, n); return EDP_OK; }
static int p_key(void *c, const uint8_t **k) { (void)c; *k = key; return EDP_OK; }
static void p_uart(void *c, const uint8_t *b, size_t n)
{
    (void)c;
    if (out_len + n > sizeof out) { printf("FAIL response larger than any frame\n"); exit(1); }
    memcpy(out + out_len, b, n);
    out_len += n;
}

static void p_tick_unit(void *c, uint32_t *hz, uint8_t *kind) { (void)c; *hz = 1; *kind = EDP_TICK_HOST_NS; }

static const edp_port_t port = {
    .entropy = p_entropy,
    .ticks = p_ticks,
    .tick_unit = p_tick_unit,
    .day = p_day,
    .set_time = p_set_time,
    .store_read = p_read,
    .store_write = p_write,
    .device_key = p_key,
    .uart_write = p_uart,
    .board = "fuzz",
};

static void put_frame(uint8_t *raw, size_t *n, uint8_t type, const uint8_t *body, size_t blen)
{
    uint32_t crc;
    raw[0] = 1; raw[1] = type; raw[2] = (uint8_t)rnd(); raw[3] = (uint8_t)rnd();
    memcpy(raw + 4, body, blen);
    crc = edp_crc32(0, raw, 4 + blen);
    memcpy(raw + 4 + blen, &crc, 4);
    *n = 8 + blen;
}

/* A valid frame of a random type, with plausible bodies. */
static void seed_frame(uint8_t *raw, size_t *n)
{
    uint8_t body[4 + 4 * 64] = {0};
    uint32_t k = 1 + rnd() % 64, i;
    float v;
    switch (rnd() % 7) {
    case 0: put_frame(raw, n, EDP_T_PING, (const uint8_t *)"hello", 5); return;
    case 4: put_frame(raw, n, EDP_T_CHALLENGE, body, 0); return;
    case 1: put_frame(raw, n, EDP_T_INFO, body, 0); return;
    case 2: put_frame(raw, n, EDP_T_BUDGET, body, 0); return;
    case 3: put_frame(raw, n, EDP_T_RESET_BUDGET, body, 40); return;
    default:
        body[0] = (uint8_t)(rnd() % 7); body[1] = (uint8_t)(rnd() % 8);
        body[2] = (uint8_t)k; body[3] = 0;
        for (i = 0; i < k; i++) { v = (float)(rnd() % 1000) / 500.0f - 0.5f; memcpy(body + 4 + 4 * i, &v, 4); }
        put_frame(raw, n, EDP_T_QUERY, body, 4 + 4 * k);
    }
}

static void mutate(uint8_t *raw, size_t *n)
{
    uint32_t m = rnd() % 8, i;
    if (m == 0 && *n) raw[rnd() % *n] ^= (uint8_t)(1u << (rnd() % 8));
    else if (m == 1 && *n) *n = rnd() % *n;
    else if (m == 2 && *n) for (i = 0; i < 4; i++) raw[rnd() % *n] = (uint8_t)rnd();
    else if (m == 3) { *n = rnd() % 64; for (i = 0; i < *n; i++) raw[i] = (uint8_t)rnd(); }
    else if (m == 4 && *n > 8) raw[4 + rnd() % (*n - 8)] = (uint8_t)rnd();  /* body byte, CRC now wrong */
    /* m >= 5: leave valid */
}

/* Split the device's output into frames; check each; return how many. */
static int check_output(int *answered_query)
{
    size_t start = 0, i;
    int frames = 0;
    for (i = 0; i < out_len; i++) {
        if (out[i] != 0) continue;
        if (i > start) {
            uint8_t buf[EDP_WIRE_MAX];
            int n;
            uint32_t crc;
            memcpy(buf, out + start, i - start);
            n = edp_cobs_decode(buf, i - start);
            if (n < 8) { printf("FAIL undecodable response\n"); exit(1); }
            memcpy(&crc, buf + n - 4, 4);
            if (crc != edp_crc32(0, buf, (size_t)n - 4) || buf[0] != 1) { printf("FAIL bad response frame\n"); exit(1); }
            if (buf[1] == (EDP_T_QUERY | EDP_T_RESPONSE)) *answered_query = 1;
            frames++;
        }
        start = i + 1;
    }
    if (start != out_len) { printf("FAIL response not terminated\n"); exit(1); }
    return frames;
}

int main(int argc, char **argv)
{
    static edp_device_t dev;
    static uint8_t raw[EDP_FRAME_MAX + 64], wire[2 * EDP_WIRE_MAX];
    long iters, it, chunks = 0, answered = 0;
    if (argc != 3) { fprintf(stderr, "usage: fuzz_frames SEED ITERATIONS\n"); return 2; }
    rng_state ^= (uint64_t)atoll(argv[1]) * 0x9E3779B97F4A7C15ull;
    iters = atol(argv[2]);
    edp_device_init(&dev, &port);
    for (it = 0; it < iters; it++) {
        size_t n, w;
        int aq = 0, got;
        uint64_t before = dev.rec.budget.lifetime_spent;
        if (it % 5000 == 0) {  /* reboot, sometimes with a dead RNG */
            entropy_fails = (int)(rnd() % 3 == 0);
            edp_device_init(&dev, &port);
        }
        if (rnd() % 50 == 0) {  /* an oversize run without delimiter */
            n = EDP_WIRE_MAX + rnd() % 64;
            memset(wire, 0x41, n);
            wire[n++] = 0;
            w = n;
        } else {
            seed_frame(raw, &n);
            mutate(raw, &n);
            w = edp_cobs_encode(raw, n, wire);  /* ends with the 0x00 delimiter */
            if (rnd() % 16 == 0 && w > 1) wire[rnd() % (w - 1)] = (uint8_t)rnd();  /* damage the encoding itself */
        }
        out_len = 0;
        edp_device_rx(&dev, wire, w);
        /* chunks actually delimited in what we sent */
        {
            size_t s = 0, i;
            long expect = 0;
            for (i = 0; i < w; i++) { if (wire[i] == 0) { if (i > s) expect++; s = i + 1; } }
            got = check_output(&aq);
            if (got != expect) { printf("FAIL %d responses for %ld chunks at iteration %ld\n", got, expect, it); return 1; }
            chunks += expect;
        }
        if (aq) {
            answered++;
            if (entropy_fails) { printf("FAIL a QUERY was answered with a failed entropy source\n"); return 1; }
            if (dev.rec.budget.lifetime_spent <= before) { printf("FAIL an answer without a committed spend\n"); return 1; }
        }
        if (dev.rec.budget.daily_spent > 900000000u) dev.rec.budget.daily_spent = 0;  /* keep answering */
    }
    printf("ok %ld iterations, %ld chunks, %ld answered queries\n", iters, chunks, answered);
    return 0;
}
