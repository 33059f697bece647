/* CRC-32/ISO-HDLC (the zlib.crc32 polynomial, reflected 0xEDB88320). */
#ifndef EDGEDP_CRC32_H
#define EDGEDP_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: pass crc = 0 for the first chunk. Returns the new CRC. */
uint32_t edp_crc32(uint32_t crc, const void *data, size_t len);

/* The slicing-by-4 tables (crc32.c, 4 KiB of flash): edp_crc32_table[k][b] is
 * the register after byte b followed by k zero bytes. */
extern const uint32_t edp_crc32_table[4][256];

/* One step on the raw register (the complement of a CRC, ~crc: the state
 * between the complements edp_crc32 applies at its ends): the next four bytes
 * as a little-endian word w, or one byte b. For loops that fold the CRC into
 * another pass over the same bytes (cobs.c, edp_cobs_encode_crc). */
static inline uint32_t edp_crc32_word(uint32_t reg, uint32_t w)
{
    reg ^= w;
    return edp_crc32_table[3][reg & 0xFFu] ^ edp_crc32_table[2][(reg >> 8) & 0xFFu] ^
           edp_crc32_table[1][(reg >> 16) & 0xFFu] ^ edp_crc32_table[0][reg >> 24];
}

static inline uint32_t edp_crc32_byte(uint32_t reg, uint32_t b)
{
    return edp_crc32_table[0][(reg ^ b) & 0xFFu] ^ (reg >> 8);
}

#endif
