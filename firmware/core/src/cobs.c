#include "cobs.h"
#include "edgedp/error.h"
#include "le.h"

/* Word-at-a-time: the data bytes are copied four at a time (le.h: one unaligned
 * load or store on the Cortex-M4) and zero bytes are found with bit tricks. */

/* Non-zero iff some byte of w is 0 (exact as a yes/no, not per byte). */
static inline uint32_t has_zero(uint32_t w)
{
    return (w - 0x01010101u) & ~w & 0x80808080u;
}

/* Bit j set iff byte j (little-endian order) of w is 0, exact per byte: the
 * high bit of each byte of ((w & 0x7F..) + 0x7F..) | w is set iff the byte is
 * non-zero, and the multiply gathers the four zero flags (bits 7, 15, 23, 31)
 * into bits 28..31 (the other partial products land on distinct lower bits, so
 * nothing carries into them). */
static inline uint32_t zero_bytes(uint32_t w)
{
    const uint32_t z = ~(((w & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | w) & 0x80808080u;
    return (z * 0x00204081u) >> 28;
}

/* For each set of zero byte positions of a word (zero_bytes): in bytes 0..2 the
 * codes that go into all but its last zero (the distance to the next zero),
 * in bits 24..25 the first zero's position, in bits 28..29 the last one's. */
#define INNER_CODES 0x00FFFFFFu
static const uint32_t word_codes[16] = {
    0x00000000u, 0x00000000u, 0x11000000u, 0x10000001u,
    0x22000000u, 0x20000002u, 0x21000100u, 0x20000101u,
    0x33000000u, 0x30000003u, 0x31000200u, 0x30000201u,
    0x32010000u, 0x30010002u, 0x31010100u, 0x30010101u,
};

int edp_cobs_decode(uint8_t *buf, size_t n)
{
    const uint8_t *in = buf, *const end = buf + n;
    uint8_t *out = buf;
    while (in != end) {
        const uint32_t code = *in++;
        const uint8_t *run_end;
        if (code == 0 || (size_t)(end - in) < code - 1) return EDP_ERR_CRC;
        run_end = in + code - 1;
        /* out <= in: each word is loaded before its bytes can be overwritten. */
        for (; run_end - in >= 4; in += 4, out += 4) {
            const uint32_t w = edp_rd32(in);
            if (has_zero(w)) return EDP_ERR_CRC;
            edp_wr32(out, w);
        }
        while (in != run_end) {
            const uint8_t c = *in++;
            if (c == 0) return EDP_ERR_CRC;
            *out++ = c;
        }
        if (code != 0xFF && in != end) *out++ = 0;
    }
    return (int)(out - buf);
}

size_t edp_cobs_encode(const uint8_t *buf, size_t n, uint8_t *out)
{
    /* The encoding is the input shifted by one byte with every zero replaced by
     * the distance to the next zero (or to the end), plus a code 0xFF after
     * every 254 non-zero bytes in a row. code points at the pending code byte,
     * o is where the next input byte goes; a whole word goes while o <= lim,
     * so its run stays under 254 bytes (o - code - 1 + 4 <= 253). */
    const uint8_t *const end = buf + n, *const words_end = n >= 4 ? end - 3 : buf;
    uint8_t *code = out, *o = out + 1, *lim = out + 250;
    for (;;) {
        uint8_t c;
        for (; buf < words_end && o <= lim; buf += 4, o += 4) {
            const uint32_t w = edp_rd32(buf), z = zero_bytes(w), e = word_codes[z];
            edp_wr32(o, w | (e & INNER_CODES));
            if (z) {
                *code = (uint8_t)(o + (e >> 24 & 3u) - code);
                code = o + (e >> 28);
                lim = code + 250;
            }
        }
        if (buf == end) break;
        c = *buf++;
        if (c) {
            *o++ = c;
            if (o - code != 255) continue;
            *code = 0xFF;  /* full run: no implied zero */
        } else {
            *code = (uint8_t)(o - code);
        }
        code = o++;
        lim = code + 250;
    }
    *code = (uint8_t)(o - code);
    *o++ = 0;
    return (size_t)(o - out);
}
