#include "edgedp/proto.h"
#include "edgedp/error.h"

int edp_cobs_decode(uint8_t *buf, size_t n)
{
    size_t in = 0, out = 0;
    while (in < n) {
        uint8_t code = buf[in++], i;
        if (code == 0 || in + (size_t)code - 1 > n) return EDP_ERR_CRC;
        for (i = 1; i < code; i++) {
            if (buf[in] == 0) return EDP_ERR_CRC;
            buf[out++] = buf[in++];
        }
        if (code != 0xFF && in < n) buf[out++] = 0;
    }
    return (int)out;
}

void edp_cobs_write(const uint8_t *buf, size_t n,
                    void (*write)(void *ctx, const uint8_t *p, size_t n), void *ctx)
{
    /* Encoded through a stack buffer, one write call per >= 128 bytes (not two
     * per run: the runs of a FULL answer are often 1-3 bytes long). code points
     * at the pending code byte of the current run; everything before it is final. */
    uint8_t out[128 + 256];
    uint8_t *o = out + 1, *code = out;
    const uint8_t *end = buf + n;
    while (buf != end) {
        uint8_t c = *buf++;
        if (c) {
            *o++ = c;
            if (o - code != 255) continue;
            *code = 0xFF;  /* full run: no implied zero */
        } else {
            *code = (uint8_t)(o - code);
        }
        code = o++;
        if (code - out >= 128) {
            size_t done = (size_t)(code - out);
            write(ctx, out, done);
            out[0] = 0;  /* the new pending code byte (its run is empty) */
            code = out;
            o = out + 1;
        }
    }
    *code = (uint8_t)(o - code);
    *o++ = 0;
    write(ctx, out, (size_t)(o - out));
}
