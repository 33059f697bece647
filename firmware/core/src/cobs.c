#include "cobs.h"
#include "crc32.h"
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

/* The encoder's position: the pending code byte, where the next input byte
 * goes, and the last o at which a whole word still fits the code's run. */
typedef struct {
    uint8_t *code, *o, *lim;
} encoder_t;

/* Encode p[0..n) from e on; with reg (not NULL) fold the same bytes into the
 * CRC register *reg (crc32.h) in the same pass. The encoding is the input
 * shifted by one byte with every zero replaced by the distance to the next
 * zero (or to the end), plus a code 0xFF after every 254 non-zero bytes in a
 * row. A whole word goes while o <= lim, so its run stays under 254 bytes
 * (o - code - 1 + 4 <= 253); a word with a zero starts a new run that the next
 * word fits, so only a zero-free word checks the limit. */
static inline void encode(encoder_t *e, const uint8_t *p, size_t n, uint32_t *reg)
{
    const uint8_t *const end = p + n, *const words_end = n >= 4 ? end - 3 : p;
    uint8_t *code = e->code, *o = e->o, *lim = e->lim;
    uint32_t r = reg ? *reg : 0u;
    for (;;) {
        uint8_t c;
        if (o <= lim) {
            while (p < words_end) {
                const uint32_t w = edp_rd32(p), z = zero_bytes(w), x = word_codes[z];
                if (reg) r = edp_crc32_word(r, w);
                edp_wr32(o, w | (x & INNER_CODES));
                p += 4;
                if (z) {
                    *code = (uint8_t)(o + (x >> 24 & 3u) - code);
                    code = o + (x >> 28);
                    lim = code + 250;
                    o += 4;
                } else if ((o += 4) > lim) {
                    break;
                }
            }
        }
        if (p == end) break;
        c = *p++;
        if (reg) r = edp_crc32_byte(r, c);
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
    e->code = code;
    e->o = o;
    e->lim = lim;
    if (reg) *reg = r;
}

static size_t encoded(const encoder_t *e, uint8_t *out)
{
    uint8_t *o = e->o;
    *e->code = (uint8_t)(o - e->code);
    *o++ = 0;
    return (size_t)(o - out);
}

size_t edp_cobs_encode(const uint8_t *buf, size_t n, uint8_t *out)
{
    encoder_t e = {out, out + 1, out + 250};
    encode(&e, buf, n, NULL);
    return encoded(&e, out);
}

size_t edp_cobs_encode_crc(uint8_t *buf, size_t n, uint8_t *out)
{
    encoder_t e = {out, out + 1, out + 250};
    uint32_t reg = 0xFFFFFFFFu;  /* ~0: edp_crc32's start */
    encode(&e, buf, n, &reg);
    (void)edp_wr32(buf + n, ~reg);
    encode(&e, buf + n, 4, NULL);
    return encoded(&e, out);
}
