/* Consistent Overhead Byte Stuffing: the byte stuffing of wire frames, so that
 * 0x00 only ever ends a frame (docs/protocol.md). */
#ifndef EDGEDP_COBS_H
#define EDGEDP_COBS_H
#include <stddef.h>
#include <stdint.h>

/* Largest encoding of n bytes by edp_cobs_encode, delimiter included: one code
 * byte, one more after every run of 254 non-zero bytes, the 0x00. */
#define EDP_COBS_MAX(n) ((n) + (n) / 254u + 2u)

/* COBS-decode buf[0..n) in place. Returns the decoded length or EDP_ERR_CRC if
 * the encoding is invalid (a code byte runs past the end, or a zero inside). */
int edp_cobs_decode(uint8_t *buf, size_t n);

/* COBS-encode buf[0..n) followed by the 0x00 delimiter into out, which must
 * hold EDP_COBS_MAX(n) bytes and must not overlap buf. A run of 254 non-zero
 * bytes always closes with code 0xFF, also at the end of buf (then a final code
 * 0x01 follows). Returns the encoded length, delimiter included. */
size_t edp_cobs_encode(const uint8_t *buf, size_t n, uint8_t *out);

/* A frame's encoding in one pass: write the CRC-32 of buf[0..n) (crc32.h)
 * little-endian at buf[n..n+4) (buf must hold n + 4 bytes) and COBS-encode
 * buf[0..n+4) with the delimiter into out (EDP_COBS_MAX(n + 4) bytes, not
 * overlapping buf), the CRC computed as the bytes are encoded. The same
 * bytes as edp_wr32(buf + n, edp_crc32(0, buf, n)) then
 * edp_cobs_encode(buf, n + 4, out). Returns the encoded length. */
size_t edp_cobs_encode_crc(uint8_t *buf, size_t n, uint8_t *out);

#endif
