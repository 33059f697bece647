/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), constant-time compare. */
#ifndef EDGEDP_SHA256_H
#define EDGEDP_SHA256_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/device.h"  /* edp_wipe */

typedef struct {
    uint32_t h[8];
    uint64_t len;       /* bytes absorbed */
    uint8_t  buf[64];
    uint32_t fill;      /* bytes in buf */
} edp_sha256_t;

void edp_sha256_init(edp_sha256_t *s);
void edp_sha256_update(edp_sha256_t *s, const void *data, size_t len);
void edp_sha256_final(edp_sha256_t *s, uint8_t out[32]);

typedef struct {
    edp_sha256_t inner;
    uint8_t      okey[64];  /* key XOR opad; wiped by final */
} edp_hmac_t;

/* key may be any length; keys over 64 bytes are hashed first. */
void edp_hmac_init(edp_hmac_t *h, const uint8_t *key, size_t key_len);
void edp_hmac_update(edp_hmac_t *h, const void *data, size_t len);
/* Writes the 32-byte tag and wipes the key material in h. */
void edp_hmac_final(edp_hmac_t *h, uint8_t tag[32]);

/* Returns 0 iff a and b are equal; time independent of the contents. */
int edp_verify32(const uint8_t a[32], const uint8_t b[32]);

#endif
