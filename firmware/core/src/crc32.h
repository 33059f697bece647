/* CRC-32/ISO-HDLC (the zlib.crc32 polynomial, reflected 0xEDB88320). */
#ifndef EDGEDP_CRC32_H
#define EDGEDP_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: pass crc = 0 for the first chunk. Returns the new CRC. */
uint32_t edp_crc32(uint32_t crc, const void *data, size_t len);

#endif
