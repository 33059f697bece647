#include "edgedp/cobs.h"
#include "edgedp/error.h"

int edp_cobs_decode(uint8_t *buf, size_t n)
{
    const uint8_t *in = buf, *const end = buf + n;
    uint8_t *out = buf;
    while (in != end) {
        const uint32_t code = *in++;
        const uint8_t *run_end;
        if (code == 0 || (size_t)(end - in) < code - 1) return EDP_ERR_CRC;
        run_end = in + code - 1;
        while (in != run_end) {
            const uint8_t c = *in++;
            if (c == 0) return EDP_ERR_CRC;
            *out++ = c;
        }
        if (code != 0xFF && in != end) *out++ = 0;
    }
    return (int)(out - buf);
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
            write(ctx, out, (size_t)(code - out));
            code = out;  /* the new pending code byte, its run still empty */
            o = out + 1;
        }
    }
    *code = (uint8_t)(o - code);
    *o++ = 0;
    write(ctx, out, (size_t)(o - out));
}
