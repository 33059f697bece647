/* The frame layer: header and CRC of a decoded (un-stuffed) wire frame.
 *
 * A frame is version u8 | type u8 | seq u16 | body | crc32, integers
 * little-endian, crc32 = CRC-32/ISO-HDLC over everything before it; on the wire
 * it is COBS-encoded and ends with 0x00 (cobs.h). A response carries the
 * request's seq and type | EDP_T_RESPONSE, or type EDP_T_ERROR with body
 * {code u8 (positive EDP_ERR_*), request type u8}. docs/protocol.md is the
 * reference. */
#ifndef EDGEDP_FRAME_H
#define EDGEDP_FRAME_H
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef struct {
    uint32_t type;   /* request type; 0 if the frame is shorter than its header */
    uint32_t seq;    /* request seq; 0 likewise */
    uint8_t *body;   /* the body, inside the frame */
    size_t len;      /* body length */
} edp_frame_t;

/* Check the decoded frame f[0..n) and locate its body. Returns EDP_OK, or
 * EDP_ERR_LEN (shorter than header + CRC), EDP_ERR_CRC or EDP_ERR_VERSION; type
 * and seq are filled in as far as the frame holds them, also on error. */
int edp_frame_parse(uint8_t *f, size_t n, edp_frame_t *out);

/* Write the header of the response to (type, seq) at tx. Returns where the
 * body starts (tx + 4). */
uint8_t *edp_frame_response(uint8_t *tx, uint32_t type, uint32_t seq);

/* Write the error response to (type, seq) with code err (a negative
 * EDP_ERR_*) at tx. Returns its length without the CRC. */
size_t edp_frame_error(uint8_t *tx, uint32_t type, uint32_t seq, int err);

/* Append the CRC to the response tx[0..len) (tx must hold len + 4 bytes),
 * COBS-encode it with its 0x00 delimiter into wire (EDP_COBS_MAX(len + 4)
 * bytes, cobs.h, not overlapping tx) and hand that to write in one call. */
void edp_frame_send(uint8_t *tx, size_t len, uint8_t *wire,
                    void (*write)(void *ctx, const uint8_t *p, size_t n), void *ctx);

#endif
