#include "sha256.h"

#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

#define ROTR(v, n) (((v) >> (n)) | ((v) << (32 - (n))))

static void compress(uint32_t h[8], const uint8_t blk[64])
{
    uint32_t w[64], a, b, c, d, e, f, g, hh, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 |
               (uint32_t)blk[4 * i + 2] << 8 | blk[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (i = 0; i < 64; i++) {
        t1 = hh + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    edp_wipe(w, sizeof w);
}

void edp_sha256_init(edp_sha256_t *s)
{
    static const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->fill = 0;
}

void edp_sha256_update(edp_sha256_t *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->len += len;
    while (len--) {
        s->buf[s->fill++] = *p++;
        if (s->fill == 64) {
            compress(s->h, s->buf);
            s->fill = 0;
        }
    }
}

void edp_sha256_final(edp_sha256_t *s, uint8_t out[32])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80;
    int i;
    edp_sha256_update(s, &pad, 1);
    pad = 0;
    while (s->fill != 56) edp_sha256_update(s, &pad, 1);
    for (i = 7; i >= 0; i--) {
        uint8_t b = (uint8_t)(bits >> (8 * i));
        edp_sha256_update(s, &b, 1);
    }
    for (i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
    edp_wipe(s, sizeof *s);
}

void edp_hmac_init(edp_hmac_t *h, const uint8_t *key, size_t key_len)
{
    uint8_t k[64], ipad[64];
    int i;
    memset(k, 0, sizeof k);
    if (key_len > 64) {
        edp_sha256_init(&h->inner);
        edp_sha256_update(&h->inner, key, key_len);
        edp_sha256_final(&h->inner, k);
    } else {
        memcpy(k, key, key_len);
    }
    for (i = 0; i < 64; i++) {
        ipad[i] = k[i] ^ 0x36u;
        h->okey[i] = k[i] ^ 0x5cu;
    }
    edp_sha256_init(&h->inner);
    edp_sha256_update(&h->inner, ipad, 64);
    edp_wipe(k, sizeof k);
    edp_wipe(ipad, sizeof ipad);
}

void edp_hmac_update(edp_hmac_t *h, const void *data, size_t len)
{
    edp_sha256_update(&h->inner, data, len);
}

void edp_hmac_final(edp_hmac_t *h, uint8_t tag[32])
{
    uint8_t ih[32];
    edp_sha256_final(&h->inner, ih);
    edp_sha256_init(&h->inner);
    edp_sha256_update(&h->inner, h->okey, 64);
    edp_sha256_update(&h->inner, ih, 32);
    edp_sha256_final(&h->inner, tag);
    edp_wipe(ih, sizeof ih);
    edp_wipe(h, sizeof *h);
}

int edp_verify32(const uint8_t a[32], const uint8_t b[32])
{
    uint32_t diff = 0;
    int i;
    for (i = 0; i < 32; i++) diff |= (uint32_t)(a[i] ^ b[i]);
    return (int)((diff + 0xFFu) >> 8) ? -1 : 0;
}

void edp_wipe(void *p, size_t n)
{
    volatile uint8_t *v = p;
    while (n--) *v++ = 0;
}
