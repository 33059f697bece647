#include "frame.h"
#include "cobs.h"
#include "crc32.h"
#include "edgedp/error.h"
#include "le.h"

int edp_frame_parse(uint8_t *f, size_t n, edp_frame_t *out)
{
    out->type = 0;
    out->seq = 0;
    out->body = f;
    out->len = 0;
    if (n < EDP_FRAME_HEADER) return EDP_ERR_LEN;
    out->type = f[1];
    out->seq = edp_rd16(f + 2);
    if (n < EDP_FRAME_OVERHEAD) return EDP_ERR_LEN;
    if (edp_rd32(f + n - EDP_FRAME_CRC) != edp_crc32(0, f, n - EDP_FRAME_CRC)) return EDP_ERR_CRC;
    if (f[0] != EDP_PROTO_VERSION) return EDP_ERR_VERSION;
    out->body = f + EDP_FRAME_HEADER;
    out->len = n - EDP_FRAME_OVERHEAD;
    return EDP_OK;
}

uint8_t *edp_frame_response(uint8_t *tx, uint32_t type, uint32_t seq)
{
    tx = edp_wr8(tx, EDP_PROTO_VERSION);
    tx = edp_wr8(tx, type | EDP_T_RESPONSE);
    return edp_wr16(tx, seq);
}

size_t edp_frame_error(uint8_t *tx, uint32_t type, uint32_t seq, int err)
{
    uint8_t *o = tx;
    o = edp_wr8(o, EDP_PROTO_VERSION);
    o = edp_wr8(o, EDP_T_ERROR);
    o = edp_wr16(o, seq);
    o = edp_wr8(o, (uint32_t)(-err));
    o = edp_wr8(o, type);
    return (size_t)(o - tx);
}

void edp_frame_send(uint8_t *tx, size_t len, uint8_t *wire,
                    void (*write)(void *ctx, const uint8_t *p, size_t n), void *ctx)
{
    write(ctx, wire, edp_cobs_encode_crc(tx, len, wire));
}
