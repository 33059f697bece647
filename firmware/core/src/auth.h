/* Admin authentication (core-internal): the nonce, CHALLENGE and the admin
 * commands (CONFIG, SET_TIME, RESET_BUDGET, RATE, TEST_SEED), each signed
 * with HMAC-SHA256 under the device key (docs/protocol.md).
 *
 * Owns: auth_ok, auth_drbg (the nonce generator, separate from the noise
 * stream) and nonce; an accepted admin command commits rec (with its
 * counter, rec.auth_counter) and acts on it.
 * Needs: the port's device_key() and auth_entropy() (or entropy()), the flash
 * log's mark and rate entry (mark.h, rate.h), the store, and for SET_TIME and
 * RATE the clock. An accepted CONFIG drops QUERY's plan (plan_valid) and
 * opens the store (store_ok); TEST_SEED seeds the noise stream (answer.h).
 * Invariants: a counter is accepted once, above the stored one, and is durable
 * in flash and in the store before its command takes effect; a frame without
 * a valid tag changes nothing (not even the nonce); a frame with one uses the
 * nonce up, whatever its outcome; every answer that depends on the key draws
 * a fresh nonce first. */
#ifndef EDGEDP_AUTH_H
#define EDGEDP_AUTH_H
#include <stddef.h>
#include <stdint.h>

#include "device_state.h"
#include "sha256.h"

/* Key the nonce generator from the port's auth_entropy (else entropy) and draw
 * a nonce; auth_ok says whether it could. */
void edp_auth_seed(edp_dev_t *d);

/* A fresh nonce from the keyed nonce generator (auth_ok). */
void edp_auth_new_nonce(edp_dev_t *d);

/* The device key in *key and a keyed nonce generator (retried here if boot
 * could not key it): EDP_OK, the port's error, or EDP_ERR_ENTROPY. */
int edp_auth_ready(edp_dev_t *d, const uint8_t **key);

/* Start h = HMAC-SHA256(key, domain | ...) (EDP_AUTH_DOMAIN_*, proto.h). */
void edp_auth_begin(edp_hmac_t *h, const uint8_t *key, const uint8_t domain[EDP_AUTH_DOMAIN_LEN]);

/* An admin command of `type` with body b[0..n) (counter u64 | payload | tag),
 * accepted or refused: writes its answer, result u8 (0 or the error) |
 * counter u64 (the stored counter now) | HMAC(key, "EDPA" | type | nonce |
 * the frame's tag | result | counter) at *o, which it advances. It binds the
 * outcome to the one frame signed for this nonce: a man in the middle can
 * neither forge it nor move it to another frame. Returns EDP_OK (the answer
 * carries the command's result), or edp_auth_ready's error (no answer). */
int edp_cmd_admin(edp_dev_t *d, uint32_t type, const uint8_t *b, size_t n, uint8_t **o);

/* CHALLENGE (an empty body, n = 0): nonce 16 | counter u64 |
 * HMAC-SHA256(key, "EDPC" | nonce | counter) at *o, with a fresh nonce (the
 * previous one can no longer sign anything): the tag lets the host trust the
 * counter it will sign (a man in the middle cannot make it sign a future one). */
int edp_cmd_challenge(edp_dev_t *d, size_t n, uint8_t **o);

#endif
