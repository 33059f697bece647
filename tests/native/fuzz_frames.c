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
 *   4. the flash high-water mark (a RAM NOR model, with reservations) always
 *      covers the committed lifetime spend, and a reboot -- half of them with
 *      the store lost -- never lowers it;
 *   5. nothing crashes, reads out of bounds or overflows (sanitizers);
 *   6. an admin frame (some signed for the device's current nonce, then
 *      mutated) whose tag is not valid for the nonce changes nothing: neither
 *      the nonce nor the record;
 *   7. every admin answer carries the device's tag over (type, the nonce the
 *      frame was checked against, the frame's tag, result, counter), and every
 *      STATE answer its tag over the request's challenge and its body;
 *   7. an ERR_RATE refusal (signed RATE frames set small buckets) carries its wait;
 *   8. the flash log's rate limit is the one the device runs (RATE writes it
 *      before its commit; one whose commit fails writes the running limit back),
 *      and a reboot, with the store kept or lost, keeps it; now and then a store
 *      write fails (nothing written), so some commits fail.
 * Prints a summary line; exits non-zero on the first violated invariant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cobs.h"
#include "crc32.h"
#include "device_state.h"
#include "edgedp/error.h"
#include "proto.h"
#include "sha256.h"
#include "ramflash.h"

#define FLASH_SECTOR (28u * EDP_FLOG_RECORD)

static uint8_t store[EDP_STORE_SIZE];
static uint8_t flash_mem[2 * FLASH_SECTOR];
static edp_flash_t flash;
static edp_ramflash_t flash_model;
static const uint8_t key[32] = {1, 2, 3};
static int entropy_fails;
static int store_write_fails;  /* the next store write call fails, writing nothing */
static uint8_t out[2 * EDP_WIRE_MAX];
static size_t out_len;
static uint64_t rng_state = 88172645463325252ull;
static edp_device_t device;  /* the application's storage */
#define dev (*edp_dev(&device))  /* the core's state in it, which the invariants read */

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
static uint64_t fuzz_seconds;
static int p_seconds(void *c, uint64_t *s) { (void)c; *s = 20000u * 86400u + fuzz_seconds; return EDP_OK; }
static int p_set_time(void *c, uint64_t s) { (void)c; (void)s; return EDP_OK; }
static int p_read(void *c, uint32_t off, void *b, uint32_t n) { (void)c; if (off + n > sizeof store) return EDP_ERR_STORE; memcpy(b, store + off, n); return EDP_OK; }
static int p_write(void *c, uint32_t off, const void *b, uint32_t n)
{
    (void)c;
    if (off + n > sizeof store || store_write_fails) {
        store_write_fails = 0;
        return EDP_ERR_STORE;
    }
    memcpy(store + off, b, n);
    return EDP_OK;
}
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
    .seconds = p_seconds,
    .set_time = p_set_time,
    .store_read = p_read,
    .store_write = p_write,
    .device_key = p_key,
    .uart_write = p_uart,
    .flash = &flash,
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

static void mac(uint8_t tag[EDP_AUTH_TAG], const uint8_t domain[EDP_AUTH_DOMAIN_LEN], const uint8_t *a, size_t na,
                const uint8_t *b, size_t nb, const uint8_t *c, size_t nc)
{
    edp_hmac_t h;
    edp_hmac_init(&h, key, sizeof key);
    edp_hmac_update(&h, domain, EDP_AUTH_DOMAIN_LEN);
    edp_hmac_update(&h, a, na);
    edp_hmac_update(&h, b, nb);
    edp_hmac_update(&h, c, nc);
    edp_hmac_final(&h, tag);
}

static int is_admin(uint32_t type)
{
    return type == EDP_T_CONFIG || type == EDP_T_SET_TIME || type == EDP_T_RESET_BUDGET || type == EDP_T_TEST_SEED ||
           type == EDP_T_RATE;
}

/* An admin frame signed with the device's key for its current nonce: counter
 * u64 (usually the next one) | payload | tag. */
static void signed_frame(uint8_t *raw, size_t *n)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ADMIN;
    static const uint8_t types[5] = {EDP_T_CONFIG, EDP_T_SET_TIME, EDP_T_RESET_BUDGET, EDP_T_TEST_SEED, EDP_T_RATE};
    static const uint8_t plen[5] = {EDP_CONFIG_PAYLOAD, EDP_SET_TIME_PAYLOAD, 0, EDP_SEED_BYTES, EDP_RATE_PAYLOAD};
    uint8_t body[EDP_AUTH_COUNTER + EDP_CONFIG_PAYLOAD + EDP_AUTH_TAG] = {0}, t;
    uint64_t counter = dev.rec.auth_counter + (rnd() % 4 ? 1 : 0);
    uint32_t i = rnd() % 5, len = EDP_AUTH_COUNTER + plen[i];
    float f[3] = {0.0f, 1.0f, 2.0f};
    t = types[i];
    memcpy(body, &counter, 8);
    if (t == EDP_T_CONFIG) {
        uint32_t eps = 1 + rnd() % 2000000;
        uint64_t cap = 900000000000ull;
        int32_t m = -128;
        memcpy(body + 8, &eps, 4);
        memcpy(body + 12, &cap, 8);
        memset(body + 20, 0, 8);
        memcpy(body + 28, f, 12);
        memcpy(body + 40, &m, 4);
    } else if (t == EDP_T_RATE) {  /* a small bucket, no tarpit (the fuzz port's ticks stand still) */
        uint32_t rate[3] = {rnd() % 3 ? 0 : 1 + rnd() % 8, rnd() % 600, 0};
        memcpy(body + 8, rate, sizeof rate);
    } else {
        for (uint32_t j = 8; j < len; j++) body[j] = (uint8_t)rnd();
    }
    mac(body + len, domain, &t, 1, dev.nonce, EDP_AUTH_NONCE, body, len);
    put_frame(raw, n, t, body, len + EDP_AUTH_TAG);
}

/* A valid frame of a random type, with plausible bodies. */
static void seed_frame(uint8_t *raw, size_t *n)
{
    uint8_t body[4 + 4 * 64] = {0};
    uint32_t k = 1 + rnd() % 64, i;
    float v;
    switch (rnd() % 10) {
    case 0: put_frame(raw, n, EDP_T_PING, (const uint8_t *)"hello", 5); return;
    case 4: put_frame(raw, n, EDP_T_CHALLENGE, body, 0); return;
    case 1: put_frame(raw, n, EDP_T_INFO, body, 0); return;
    case 2: put_frame(raw, n, EDP_T_BUDGET, body, 0); return;
    case 3: put_frame(raw, n, EDP_T_RESET_BUDGET, body, 40); return;
    case 7: for (i = 0; i < EDP_STATE_REQUEST; i++) body[i] = (uint8_t)rnd();
            put_frame(raw, n, rnd() % 2 ? EDP_T_STATE : EDP_T_AUDIT_LOG, body, EDP_STATE_REQUEST); return;
    case 8: case 9: signed_frame(raw, n); return;
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

/* The request as the device decoded it (valid CRC and version), if it was not damaged on the wire. */
static const uint8_t *req;
static size_t req_len;
static uint8_t nonce_before[EDP_AUTH_NONCE];

/* Invariant 6 for one response frame buf[0..n) (CRC checked). */
static void check_tags(const uint8_t *buf, int n)
{
    static const uint8_t dom_a[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ANSWER, dom_s[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_STATE;
    static const uint8_t dom_l[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_AUDIT;
    static const uint8_t no_tag[EDP_AUTH_TAG];
    uint8_t tag[EDP_AUTH_TAG], type = buf[1] & (uint8_t)~EDP_T_RESPONSE;
    size_t blen = (size_t)n - EDP_FRAME_OVERHEAD;
    const uint8_t *body = buf + EDP_FRAME_HEADER;
    if (buf[1] == EDP_T_ERROR || !(buf[1] & EDP_T_RESPONSE) || !req) return;
    if (is_admin(type)) {
        size_t rb = req_len - EDP_FRAME_OVERHEAD;
        const uint8_t *ftag = rb >= EDP_AUTH_COUNTER + EDP_AUTH_TAG ? req + req_len - EDP_FRAME_CRC - EDP_AUTH_TAG : no_tag;
        if (blen != EDP_ADMIN_ANSWER) { printf("FAIL admin answer of %zu bytes\n", blen); exit(1); }
        {
            edp_hmac_t h;
            edp_hmac_init(&h, key, sizeof key);
            edp_hmac_update(&h, dom_a, EDP_AUTH_DOMAIN_LEN);
            edp_hmac_update(&h, &type, 1);
            edp_hmac_update(&h, nonce_before, EDP_AUTH_NONCE);
            edp_hmac_update(&h, ftag, EDP_AUTH_TAG);
            edp_hmac_update(&h, body, 1 + EDP_AUTH_COUNTER);
            edp_hmac_final(&h, tag);
        }
        if (memcmp(tag, body + 1 + EDP_AUTH_COUNTER, EDP_AUTH_TAG)) { printf("FAIL admin answer without its tag\n"); exit(1); }
    } else if (type == EDP_T_STATE) {
        if (blen != EDP_STATE_BODY + EDP_AUTH_TAG) { printf("FAIL STATE answer of %zu bytes\n", blen); exit(1); }
        mac(tag, dom_s, req + EDP_FRAME_HEADER, EDP_STATE_REQUEST, body, EDP_STATE_BODY, body, 0);
        if (memcmp(tag, body + EDP_STATE_BODY, EDP_AUTH_TAG)) { printf("FAIL STATE answer without its tag\n"); exit(1); }
    } else if (type == EDP_T_AUDIT_LOG) {
        size_t lb = blen < EDP_AUDIT_HEAD + EDP_AUTH_TAG ? 0 : EDP_AUDIT_HEAD + (size_t)body[EDP_AUDIT_HEAD - 1] * EDP_AUDIT_ENTRY;
        if (!lb || blen != lb + EDP_AUTH_TAG || body[EDP_AUDIT_HEAD - 1] > EDP_AUDIT_ENTRIES) {
            printf("FAIL AUDIT_LOG answer of %zu bytes\n", blen); exit(1);
        }
        mac(tag, dom_l, req + EDP_FRAME_HEADER, EDP_AUDIT_REQUEST, body, lb, body, 0);
        if (memcmp(tag, body + lb, EDP_AUTH_TAG)) { printf("FAIL AUDIT_LOG answer without its tag\n"); exit(1); }
    }
}

/* Whether the request is an admin frame whose tag is valid for nonce_before. */
static int admin_tag_ok(void)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ADMIN;
    uint8_t tag[EDP_AUTH_TAG];
    size_t rb;
    if (!req) return 0;
    rb = req_len - EDP_FRAME_OVERHEAD;
    if (rb < EDP_AUTH_COUNTER + EDP_AUTH_TAG) return 0;
    mac(tag, domain, req + 1, 1, nonce_before, EDP_AUTH_NONCE, req + EDP_FRAME_HEADER, rb - EDP_AUTH_TAG);
    return memcmp(tag, req + EDP_FRAME_HEADER + rb - EDP_AUTH_TAG, EDP_AUTH_TAG) == 0;
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
            if (buf[1] == EDP_T_ERROR && n >= (int)EDP_FRAME_OVERHEAD + 1 && buf[4] == (uint8_t)-EDP_ERR_RATE &&
                n != (int)(EDP_FRAME_OVERHEAD + EDP_RATE_ERROR_BODY)) { printf("FAIL ERR_RATE without its wait\n"); exit(1); }
            check_tags(buf, n);
            frames++;
        }
        start = i + 1;
    }
    if (start != out_len) { printf("FAIL response not terminated\n"); exit(1); }
    return frames;
}

int main(int argc, char **argv)
{
    static uint8_t raw[EDP_FRAME_MAX + 64], wire[2 * EDP_WIRE_MAX];
    static edp_record_t rec_before;
    uint32_t audit_before;
    long iters, it, chunks = 0, answered = 0, admin_ok = 0, admin_bad = 0;
    if (argc != 3) { fprintf(stderr, "usage: fuzz_frames SEED ITERATIONS\n"); return 2; }
    rng_state ^= (uint64_t)atoll(argv[1]) * 0x9E3779B97F4A7C15ull;
    iters = atol(argv[2]);
    edp_ramflash_bind(&flash, &flash_model, flash_mem, FLASH_SECTOR);
    edp_ramflash_format(&flash);
    edp_device_init(&device, &port);
    for (it = 0; it < iters; it++) {
        size_t n, w;
        int aq = 0, got, damaged = 0, auth_before = dev.auth_ok;
        uint64_t before = dev.rec.budget.lifetime_spent;
        if (it % 5000 == 0) {  /* reboot, sometimes with a dead RNG, half of them losing the store */
            const edp_rate_config_t rate = dev.rec.rate;
            entropy_fails = (int)(rnd() % 3 == 0);
            if (rnd() % 2) memset(store, 0, sizeof store);
            edp_device_init(&device, &port);
            if (dev.rec.budget.lifetime_spent < before) { printf("FAIL a reboot lowered the spend\n"); return 1; }
            if (memcmp(&rate, &dev.rec.rate, sizeof rate)) { printf("FAIL a reboot changed the rate limit\n"); return 1; }
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
            if (rnd() % 16 == 0 && w > 1) { wire[rnd() % (w - 1)] = (uint8_t)rnd(); damaged = 1; }  /* damage the encoding itself */
        }
        req = NULL;
        if (!damaged && w <= EDP_WIRE_MAX && n >= EDP_FRAME_OVERHEAD && raw[0] == EDP_PROTO_VERSION) {
            uint32_t crc = edp_crc32(0, raw, n - EDP_FRAME_CRC), got_crc;
            memcpy(&got_crc, raw + n - EDP_FRAME_CRC, 4);
            if (crc == got_crc) { req = raw; req_len = n; }
        }
        memcpy(nonce_before, dev.nonce, EDP_AUTH_NONCE);
        memcpy(&rec_before, &dev.rec, sizeof rec_before);
        audit_before = dev.audit_seq;
        out_len = 0;
        fuzz_seconds += rnd() % 3;  /* the clock moves on a little between frames */
        store_write_fails = (int)(rnd() % 16 == 0);
        edp_device_rx(&device, wire, w);
        /* chunks actually delimited in what we sent */
        {
            size_t s = 0, i;
            long expect = 0;
            for (i = 0; i < w; i++) { if (wire[i] == 0) { if (i > s) expect++; s = i + 1; } }
            got = check_output(&aq);
            if (got != expect) { printf("FAIL %d responses for %ld chunks at iteration %ld\n", got, expect, it); return 1; }
            chunks += expect;
        }
        if (req && is_admin(req[1]) && auth_before) {
            if (admin_tag_ok()) {
                admin_ok++;
            } else {
                admin_bad++;
                if (memcmp(nonce_before, dev.nonce, EDP_AUTH_NONCE) || memcmp(&rec_before, &dev.rec, sizeof rec_before) ||
                    dev.audit_seq != audit_before) {
                    printf("FAIL an admin frame without a valid tag changed the device at iteration %ld\n", it);
                    return 1;
                }
            }
        }
        if (aq) {
            answered++;
            if (entropy_fails) { printf("FAIL a QUERY was answered with a failed entropy source\n"); return 1; }
            if (dev.rec.budget.lifetime_spent <= before) { printf("FAIL an answer without a committed spend\n"); return 1; }
        }
        if (dev.flog.mark.lifetime < dev.rec.budget.lifetime_spent) {
            printf("FAIL the flash mark is below the committed spend at iteration %ld\n", it);
            return 1;
        }
        if (dev.flog.rate.limit.burst != dev.rec.rate.burst || dev.flog.rate.limit.per_minute != dev.rec.rate.per_minute ||
            dev.flog.rate.limit.tarpit_ms != dev.rec.rate.tarpit_ms ||
            dev.flog.rate.counter > dev.rec.auth_counter + 1u) {  /* + 1: a RATE refused on a failed commit */
            printf("FAIL the flash log's rate limit is not the device's at iteration %ld\n", it);
            return 1;
        }
        if (dev.rec.budget.daily_spent > 900000000u) dev.rec.budget.daily_spent = 0;  /* keep answering */
    }
    printf("ok %ld iterations, %ld chunks, %ld answered queries, %ld validly signed and %ld other admin frames\n",
           iters, chunks, answered, admin_ok, admin_bad);
    return 0;
}
