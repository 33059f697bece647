/* Consistent Overhead Byte Stuffing: the byte stuffing of wire frames, so that
 * 0x00 only ever ends a frame (docs/protocol.md). */
#ifndef EDGEDP_COBS_H
#define EDGEDP_COBS_H
#include <stddef.h>
#include <stdint.h>

/* COBS-decode buf[0..n) in place. Returns the decoded length or EDP_ERR_CRC if
 * the encoding is invalid (a code byte runs past the end, or a zero inside). */
int edp_cobs_decode(uint8_t *buf, size_t n);

/* Stream the COBS encoding of buf[0..n) followed by the 0x00 delimiter through
 * write (called with ctx, any number of times). */
void edp_cobs_write(const uint8_t *buf, size_t n,
                    void (*write)(void *ctx, const uint8_t *p, size_t n), void *ctx);

#endif
