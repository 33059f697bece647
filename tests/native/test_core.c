/* Native unit tests of the DP core: RFC vectors and a vector tool for pytest.
 *
 *   test_core rfc                 built-in known-answer tests; exit 0 iff all pass
 *   test_core chacha KEY N        the DRBG output of N batches (88 words each), hex
 *   test_core bits KEY N          N DRBG bits via edp_drbg_bits in odd-sized pulls, as 0/1 text
 *   test_core hmac KEY MSG        HMAC-SHA256 tag, hex (arguments in hex)
 *   test_core crc HEX             CRC-32 of the bytes, decimal
 *   test_core dlap INV_T SHIFT    sampler set-up: "J L K KP tail tail_rounds" or "error CODE"
 *   test_core cobs HEX            COBS round trip through edp_cobs_encode/edp_cobs_decode, hex
 *   test_core cobs-edges          edp_cobs_encode against a byte-at-a-time reference; exit 0 iff all pass
 *   test_core info                INFO version 2 through edp_device_handle on a stub port: every
 *                                 field, each randomness source failing alone; exit 0 iff all pass
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cobs.h"
#include "crc32.h"
#include "edgedp/device.h"
#include "device_state.h"
#include "dlap.h"
#include "drbg.h"
#include "edgedp/error.h"
#include "proto.h"
#include "sha256.h"

static int failures;

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s) / 2, i;
    if (n > cap) exit(2);
    for (i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) exit(2);
        out[i] = (uint8_t)v;
    }
    return n;
}

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    } else {
        printf("ok   %s\n", what);
    }
}

static void check_hex(const uint8_t *got, const char *want_hex, size_t n, const char *what)
{
    uint8_t want[256];
    check(unhex(want_hex, want, sizeof want) == n && memcmp(got, want, n) == 0, what);
}

/* ChaCha12 vectors of draft-strombergson-chacha-test-vectors-01 (256-bit keys,
 * 64-bit counter in words 12-13, 64-bit IV in words 14-15: the device's layout). */
static void chacha12_block(void)
{
    /* TC8: key c46ec1b1...a667975d, IV 1ada31d5cf688221, block 0. */
    uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574,
                       0xb1c16ec4, 0x78a8e88c, 0xe7375a72, 0x35b7df80,
                       0x2eed681f, 0xfb794c19, 0xe1beaec6, 0x5d9767a6,
                       0x00000000, 0x00000000, 0xd531da1a, 0x218268cf};
    static const uint32_t want[16] = {0x27078214, 0x066dbc84, 0xdc3be7b4, 0x10c08b11,
                                      0x7876793c, 0xe018a96c, 0x25aa8669, 0xc19c7e1f,
                                      0x0a9a74b2, 0xb483ee16, 0x992e2d24, 0x207c8db0,
                                      0xbc802b09, 0x28876c46, 0xb3b1613b, 0xabfb0f9d};
    uint32_t out[16];
    edp_chacha_block(in, out);
    check(memcmp(out, want, sizeof want) == 0, "ChaCha12 block (draft-strombergson TC8)");
}

static void chacha12_keystream(void)
{
    /* TC1: all-zero key and IV, counter 0: keystream 9b f4 9a 6a ... */
    static const uint8_t zero[32];
    edp_drbg_t d;
    uint32_t w0, w1;
    edp_drbg_seed(&d, zero);
    w0 = edp_drbg_bits(&d, 32);
    w1 = edp_drbg_bits(&d, 32);
    /* Keystream bytes 0..31 of the first batch are the next key (fast key
     * erasure); output starts at bytes 32..39: 05 64 f8 79 d2 7a e3 c0. */
    check(w0 == 0x79f86405u && w1 == 0xc0e37ad2u, "ChaCha12 TC1 keystream (bytes 32..39) through the DRBG");
    /* The key of the first batch is gone: state holds keystream words 0..7 (bytes
     * 9b f4 9a 6a ... 2e ae 15 5f) and the buffer no longer holds them. */
    check(d.state[4] == 0x6a9af49bu && d.state[11] == 0x5f15ae2eu && d.block[0] == 0 && d.block[7] == 0,
          "fast key erasure: next key from the batch, wiped from the buffer");
}

static void sha_vectors(void)
{
    uint8_t out[32];
    edp_sha256_t s;
    edp_sha256_init(&s);
    edp_sha256_update(&s, "abc", 3);
    edp_sha256_final(&s, out);
    check_hex(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 32, "SHA-256 'abc'");
    edp_sha256_init(&s);
    edp_sha256_update(&s, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56);
    edp_sha256_final(&s, out);
    check_hex(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", 32, "SHA-256 two blocks");
}

static void hmac_case(const char *key_hex, const char *msg_hex, const char *tag_hex, size_t tag_len,
                      const char *what)
{
    uint8_t key[256], msg[256], tag[32];
    size_t kn = unhex(key_hex, key, sizeof key), mn = unhex(msg_hex, msg, sizeof msg);
    edp_hmac_t h;
    edp_hmac_init(&h, key, kn);
    edp_hmac_update(&h, msg, mn);
    edp_hmac_final(&h, tag);
    check_hex(tag, tag_hex, tag_len, what);
}

static void rfc4231(void)
{
    hmac_case("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32, "RFC 4231 case 1");
    hmac_case("4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32, "RFC 4231 case 2");
    hmac_case("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
              "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
              "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32, "RFC 4231 case 3");
    hmac_case("0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", "546573742057697468205472756e636174696f6e",
              "a3b6167473100ee06e0c796c2955552b", 16, "RFC 4231 case 5 (truncated)");
    hmac_case("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
              "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32, "RFC 4231 case 6 (long key)");
}

static void crc_vector(void)
{
    check(edp_crc32(0, "123456789", 9) == 0xCBF43926u, "CRC-32/ISO-HDLC check value");
    check(edp_crc32(edp_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "CRC-32 continuation");
}

static void exp_accuracy(void)
{
    /* Horner exp(-x) vs libm on a grid: within 4 ulp-ish (relative 1e-15). */
    extern double exp(double);
    double worst = 0, x;
    for (x = 0; x <= 1.0; x += 1.0 / 4096) {
        double a = edp_exp_neg(x), b = exp(-x), r = (a - b) / b;
        if (r < 0) r = -r;
        if (r > worst) worst = r;
    }
    check(worst < 1e-15, "edp_exp_neg within 1e-15 of libm on [0, 1]");
}

/* The byte-at-a-time COBS encoder the wire format was defined with: a run of
 * 254 non-zero bytes always closes with 0xFF (a final 0x01 follows at the end). */
static size_t cobs_reference(const uint8_t *in, size_t n, uint8_t *out)
{
    uint8_t *code = out, *o = out + 1;
    size_t i;
    for (i = 0; i < n; i++) {
        if (in[i]) {
            *o++ = in[i];
            if (o - code != 255) continue;
            *code = 0xFF;
        } else {
            *code = (uint8_t)(o - code);
        }
        code = o++;
    }
    *code = (uint8_t)(o - code);
    *o++ = 0;
    return (size_t)(o - out);
}

static uint64_t edge_rng = 0x243F6A8885A308D3ull;

static uint32_t edge_rand(void)
{
    edge_rng ^= edge_rng << 13;
    edge_rng ^= edge_rng >> 7;
    edge_rng ^= edge_rng << 17;
    return (uint32_t)edge_rng;
}

/* Encode data[0..n) at every alignment into exactly EDP_COBS_MAX(n) bytes of
 * heap (ASan sees any overrun), compare with the reference, decode back, and
 * check that a zero planted inside a run is refused. */
static int cobs_case(const uint8_t *data, size_t n)
{
    size_t cap = EDP_COBS_MAX(n), want_n, got_n, off;
    uint8_t *want = malloc(cap + 1), *src = malloc(n + 3), *got;
    int ok = 1;
    want_n = cobs_reference(data, n, want);
    ok &= want_n <= cap;
    for (off = 0; off < 4 && ok; off++) {
        got = malloc(cap + off);
        memcpy(src + (off & 3 ? 3 - off : 0), data, n);
        got_n = edp_cobs_encode(src + (off & 3 ? 3 - off : 0), n, got + off);
        ok &= got_n == want_n && memcmp(got + off, want, want_n) == 0;
        ok &= edp_cobs_decode(got + off, got_n - 1) == (int)n && memcmp(got + off, data, n) == 0;
        free(got);
    }
    /* The frame encoder: the CRC appended and encoded in the same pass, the
     * same bytes as edp_crc32 then edp_cobs_encode, into exactly EDP_COBS_MAX(n + 4). */
    for (off = 0; off < 4 && ok; off++) {
        size_t fcap = EDP_COBS_MAX(n + 4), ref_n;
        uint8_t *fsrc = malloc(n + 4 + 3), *body = fsrc + (off & 3 ? 3 - off : 0);
        uint8_t *ref = malloc(fcap), *fgot = malloc(fcap + off), *with_crc = malloc(n + 4);
        const uint32_t crc = edp_crc32(0, data, n);
        memcpy(with_crc, data, n);
        with_crc[n] = (uint8_t)crc, with_crc[n + 1] = (uint8_t)(crc >> 8);
        with_crc[n + 2] = (uint8_t)(crc >> 16), with_crc[n + 3] = (uint8_t)(crc >> 24);
        ref_n = cobs_reference(with_crc, n + 4, ref);
        memcpy(body, data, n);
        got_n = edp_cobs_encode_crc(body, n, fgot + off);
        ok &= got_n == ref_n && memcmp(fgot + off, ref, ref_n) == 0 && memcmp(body, with_crc, n + 4) == 0;
        free(fsrc);
        free(ref);
        free(fgot);
        free(with_crc);
    }
    if (ok && want_n > 2) {  /* a 0x00 in place of any non-delimiter byte: invalid */
        size_t at = edge_rand() % (want_n - 1);
        want[at] = 0;
        ok &= edp_cobs_decode(want, want_n - 1) == EDP_ERR_CRC;
    }
    free(want);
    free(src);
    return ok;
}

static void cobs_edges(void)
{
    static uint8_t d[EDP_FRAME_MAX];
    static const uint32_t zero_per_256[] = {0, 1, 16, 64, 128, 192, 255, 256};
    size_t n, i, z, run;
    int ok = 1;
    /* Runs of 250..258 non-zero bytes between zeros, at every start offset:
     * the 254 boundary falls in every position of a word. */
    for (run = 250; run <= 258; run++) {
        for (n = 0; n < 8; n++) {
            size_t len = 0;
            memset(d, 0, sizeof d);
            while (len + run + 1 <= 3 * 259 + n) {
                memset(d + len + n % 4, 0x11, run);
                len += run + 1;
            }
            ok &= cobs_case(d, len);
            ok &= cobs_case(d + n % 4 + 1, run);  /* exactly run non-zero bytes, nothing else */
        }
    }
    for (n = 0; n <= 600; n++) {
        memset(d, 0, n);
        ok &= cobs_case(d, n);  /* all zeros */
        memset(d, 0xA5, n);
        ok &= cobs_case(d, n);  /* no zero */
    }
    /* Random bytes of each zero density, short and up to the largest frame. */
    for (z = 0; z < sizeof zero_per_256 / sizeof zero_per_256[0]; z++) {
        for (i = 0; i < 40; i++) {
            n = i < 32 ? edge_rand() % 600 : EDP_FRAME_MAX - (i - 32);
            for (run = 0; run < n; run++) {
                uint32_t r = edge_rand();
                d[run] = (r & 0xFF) < zero_per_256[z] ? 0 : (uint8_t)((r >> 8) % 255 + 1);
            }
            ok &= cobs_case(d, n);
        }
    }
    /* The largest frame with the most 0xFF codes: 16 runs of 254, then zeros. */
    memset(d, 0x7E, sizeof d);
    ok &= cobs_case(d, sizeof d) && EDP_COBS_MAX(sizeof d) == EDP_WIRE_MAX;
    check(ok, "COBS encoder and the frame encoder (CRC in the same pass) match the byte-at-a-time reference (254-runs, zeros, all alignments, max frame)");
}

/* ---- INFO version 2 on a stub port ---- */

static int stub_noise_fails, stub_nonce_fails;
static uint8_t stub_store[EDP_STORE_SIZE];

static int stub_entropy(void *ctx, uint8_t key[32])
{
    (void)ctx;
    memset(key, 0x5a, 32);
    return stub_noise_fails ? EDP_ERR_ENTROPY : EDP_OK;
}

static int stub_auth_entropy(void *ctx, uint8_t key[32])
{
    (void)ctx;
    memset(key, 0xa5, 32);
    return stub_nonce_fails ? EDP_ERR_ENTROPY : EDP_OK;
}

static uint32_t stub_ticks(void *ctx) { (void)ctx; return 0; }
static void stub_tick_unit(void *ctx, uint32_t *hz, uint8_t *kind) { (void)ctx; *hz = 1000000000u; *kind = EDP_TICK_HOST_NS; }
static int stub_day(void *ctx, uint32_t *day) { (void)ctx; (void)day; return EDP_ERR_TIME; }
static int stub_set_time(void *ctx, uint64_t s) { (void)ctx; (void)s; return EDP_ERR_TIME; }
static int stub_key(void *ctx, const uint8_t **key) { (void)ctx; (void)key; return EDP_ERR_AUTH; }
static void stub_write(void *ctx, const uint8_t *b, size_t n) { (void)ctx; (void)b; (void)n; }

static int stub_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    (void)ctx;
    memcpy(buf, stub_store + off, n);
    return EDP_OK;
}

static int stub_store_write(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    (void)ctx;
    memcpy(stub_store + off, buf, n);
    return EDP_OK;
}

static const edp_port_t stub_port = {
    .entropy = stub_entropy, .ticks = stub_ticks, .tick_unit = stub_tick_unit, .day = stub_day,
    .set_time = stub_set_time, .store_read = stub_read, .store_write = stub_store_write,
    .device_key = stub_key, .uart_write = stub_write, .board = "stub-board",
    .auth_entropy = stub_auth_entropy, .rx_buffer = 1234u,
};

static const edp_model_s8_t stub_s8;  /* never run: INFO only reads the model's identity */
static const edp_model_t stub_model = {
    .name = "probe-model", .head = EDP_MODEL_VOTES, .n_features = 6, .n_classes = 3, .n_nets = 1,
    .lo = 0.0f, .hi = 1.0f, .sensitivity = 2.0f, .s8 = &stub_s8,
    .in_rank = 2, .in_shape = {2, 3},
    .sha256 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
               16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31},
};

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }

/* INFO's answer body on a device booted with the sources failing as given, or NULL. */
static const uint8_t *info_body(edp_device_t *d, int noise_fails, int nonce_fails, const edp_model_t *m, size_t *n)
{
    uint8_t req[EDP_FRAME_OVERHEAD] = {EDP_PROTO_VERSION, EDP_T_INFO, 7, 0};
    uint32_t crc;
    size_t len;
    stub_noise_fails = noise_fails;
    stub_nonce_fails = nonce_fails;
    memset(stub_store, 0xff, sizeof stub_store);
    edp_device_init(d, &stub_port);
    edp_device_set_model(d, m);
    crc = edp_crc32(0, req, EDP_FRAME_HEADER);
    req[4] = (uint8_t)crc, req[5] = (uint8_t)(crc >> 8), req[6] = (uint8_t)(crc >> 16), req[7] = (uint8_t)(crc >> 24);
    len = edp_device_handle(d, req, sizeof req);  /* the response without its CRC */
    if (len < EDP_FRAME_HEADER || ((edp_dev_t *)d)->tx[1] != (EDP_T_INFO | EDP_T_RESPONSE)) return NULL;
    *n = len - EDP_FRAME_HEADER;
    return ((edp_dev_t *)d)->tx + EDP_FRAME_HEADER;
}

/* The text at *off (len u8 + ASCII) equals want; *off moves past it. */
static int text_is(const uint8_t *b, size_t n, size_t *off, const char *want)
{
    size_t len = *off < n ? b[*off] : 0;
    int ok = *off + 1 + len <= n && len == strlen(want) && memcmp(b + *off + 1, want, len) == 0;
    *off += 1 + len;
    return ok;
}

static void info_v2(void)
{
    static edp_device_t d;
    static const uint8_t zero[32];
    const uint8_t *b;
    size_t n = 0, off = EDP_INFO_HEAD;
    int i, shape_ok = 1;
    b = info_body(&d, 0, 1, &stub_model, &n);
    check(b != NULL && n == EDP_INFO_HEAD + 3 + strlen(EDP_FIRMWARE_VERSION) + strlen("stub-board") + strlen("probe-model"),
          "INFO v2: an answer of the head and three texts");
    if (!b) return;
    check(b[0] == EDP_INFO_VERSION && b[0] == 2, "INFO v2: info_version 2 first");
    check(b[1] == EDP_TEST_BUILD && b[2] == EDP_STORE_FRESH && b[4] == 0 && b[5] == EDP_TICK_HOST_NS &&
          rd16(b + 6) == EDP_MAX_CLASSES && rd32(b + 8) == 1000000000u, "INFO v2: build, store, clock, tick unit, max_classes");
    check(rd32(b + 24) == 1234u, "INFO v2: rx_buffer is the port's");
    check(b[28] == EDP_INFO_ENTROPY_OK && b[29] == EDP_INFO_ENTROPY_FAILED,
          "INFO v2: the nonce source failing alone shows as nonce_entropy failed, noise ok");
    check(b[30] == EDP_INFO_MODEL_S8 && b[31] == EDP_MODEL_VOTES && rd16(b + 32) == 3 && b[34] == 2,
          "INFO v2: model kind int8, votes head, 3 classes, rank 2");
    for (i = 0; i < 4; i++) shape_ok &= rd16(b + 35 + 2 * i) == (i == 0 ? 2u : i == 1 ? 3u : 0u);
    check(shape_ok, "INFO v2: input shape 2 x 3, unused dims 0");
    check(memcmp(b + 43, stub_model.sha256, 32) == 0, "INFO v2: the model's sha256");
    check(text_is(b, n, &off, EDP_FIRMWARE_VERSION) && text_is(b, n, &off, "stub-board") &&
          text_is(b, n, &off, "probe-model") && off == n, "INFO v2: version, board, model name texts");

    b = info_body(&d, 1, 0, NULL, &n);
    check(b != NULL && b[28] == EDP_INFO_ENTROPY_FAILED && b[29] == EDP_INFO_ENTROPY_OK,
          "INFO v2: the noise source failing alone shows as noise_entropy failed, nonce ok");
    check(b != NULL && b[30] == EDP_INFO_MODEL_NONE && b[31] == 0 && rd16(b + 32) == 0 && b[34] == 0 &&
          memcmp(b + 35, zero, 8) == 0 && memcmp(b + 43, zero, 32) == 0 && n == EDP_INFO_HEAD + 3 +
          strlen(EDP_FIRMWARE_VERSION) + strlen("stub-board") && b[n - 1] == 0,
          "INFO v2: without a model, zero model fields and an empty name");
    b = info_body(&d, 1, 1, &stub_model, &n);
    check(b != NULL && b[28] == EDP_INFO_ENTROPY_FAILED && b[29] == EDP_INFO_ENTROPY_FAILED,
          "INFO v2: both sources failing");
}

int main(int argc, char **argv)
{
    static uint8_t a[8192], b[8192];
    if (argc == 2 && strcmp(argv[1], "info") == 0) {
        info_v2();
        return failures ? 1 : 0;
    }
    if (argc >= 2 && strcmp(argv[1], "rfc") == 0) {
        chacha12_block();
        chacha12_keystream();
        sha_vectors();
        rfc4231();
        crc_vector();
        exp_accuracy();
        return failures ? 1 : 0;
    }
    if (argc == 4 && strcmp(argv[1], "chacha") == 0) {
        edp_drbg_t d;
        long n = atol(argv[3]), i;
        unhex(argv[2], a, 32);
        edp_drbg_seed(&d, a);
        for (i = 0; i < (EDP_DRBG_BATCH_WORDS - EDP_DRBG_KEY_WORDS) * n; i++) {
            uint32_t w = edp_drbg_bits(&d, 32);
            printf("%02x%02x%02x%02x", w & 0xff, (w >> 8) & 0xff, (w >> 16) & 0xff, w >> 24);
        }
        printf("\n");
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "bits") == 0) {
        static const uint32_t pulls[] = {1, 7, 32, 3, 0, 17, 31, 5, 2, 13};
        edp_drbg_t d;
        long n = atol(argv[3]), got = 0;
        uint32_t i = 0;
        unhex(argv[2], a, 32);
        edp_drbg_seed(&d, a);
        while (got < n) {
            uint32_t k = pulls[i++ % 10], v = edp_drbg_bits(&d, k), j;
            for (j = k; j > 0; j--) putchar('0' + ((v >> (j - 1)) & 1));
            got += k;
        }
        printf("\n");
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "hmac") == 0) {
        uint8_t tag[32];
        size_t kn = unhex(argv[2], a, sizeof a), mn = unhex(argv[3], b, sizeof b), i;
        edp_hmac_t h;
        edp_hmac_init(&h, a, kn);
        edp_hmac_update(&h, b, mn);
        edp_hmac_final(&h, tag);
        for (i = 0; i < 32; i++) printf("%02x", tag[i]);
        printf("\n");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "crc") == 0) {
        size_t n = unhex(argv[2], a, sizeof a);
        printf("%u\n", (unsigned)edp_crc32(0, a, n));
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "dlap") == 0) {
        static edp_dlap_t t;
        int err = edp_dlap_setup(&t, strtod(argv[2], NULL), strtod(argv[3], NULL));
        if (err) printf("error %d\n", err);
        else printf("%u %u %u %u %u %u\n", t.J, t.L, t.K, t.KP, t.tail, t.tail_rounds);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "cobs") == 0) {
        size_t n = unhex(argv[2], a, sizeof a), i, m;
        int dn;
        m = edp_cobs_encode(a, n, b);
        for (i = 0; i < m; i++) printf("%02x", b[i]);
        printf(" ");
        if (m == 0 || b[m - 1] != 0) return 3;
        dn = edp_cobs_decode(b, m - 1);
        if (dn < 0) return 4;
        for (i = 0; i < (size_t)dn; i++) printf("%02x", b[i]);
        printf("\n");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "cobs-edges") == 0) {
        cobs_edges();
        return failures ? 1 : 0;
    }
    fprintf(stderr, "usage: test_core rfc | chacha KEY N | bits KEY N | hmac KEY MSG | crc HEX | dlap INV_T SHIFT | cobs HEX | cobs-edges\n");
    return 2;
}
