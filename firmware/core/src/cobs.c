#include "edgedp/cobs.h"
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
    static const uint8_t zero = 0;
    size_t start = 0, i;
    for (i = 0; i <= n; i++) {
        size_t len = i - start;
        uint8_t code;
        if (i == n || buf[i] == 0) {
            code = (uint8_t)(len + 1);
        } else if (len + 1 == 254) {
            code = 0xFF;
            len = 254;
        } else {
            continue;
        }
        write(ctx, &code, 1);
        if (len) write(ctx, buf + start, len);
        start = i + 1;
    }
    write(ctx, &zero, 1);
}
