/* Little-endian field access for wire frames and store records (core-internal).
 * Readers take any alignment; writers return the advanced pointer. */
#ifndef EDGEDP_LE_H
#define EDGEDP_LE_H
#include <stdint.h>
#include <string.h>

static inline uint32_t edp_rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t edp_rd32(const uint8_t *p) { return edp_rd16(p) | edp_rd16(p + 2) << 16; }
static inline uint64_t edp_rd64(const uint8_t *p) { return (uint64_t)edp_rd32(p) | (uint64_t)edp_rd32(p + 4) << 32; }
static inline float edp_rdf(const uint8_t *p) { uint32_t v = edp_rd32(p); float f; memcpy(&f, &v, 4); return f; }

static inline uint8_t *edp_wr8(uint8_t *o, uint32_t v) { *o = (uint8_t)v; return o + 1; }
static inline uint8_t *edp_wr16(uint8_t *o, uint32_t v) { o[0] = (uint8_t)v; o[1] = (uint8_t)(v >> 8); return o + 2; }
static inline uint8_t *edp_wr32(uint8_t *o, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(o, &v, 4);  /* one (unaligned) word store */
    return o + 4;
#else
    return edp_wr16(edp_wr16(o, v), v >> 16);
#endif
}
static inline uint8_t *edp_wr64(uint8_t *o, uint64_t v) { return edp_wr32(edp_wr32(o, (uint32_t)v), (uint32_t)(v >> 32)); }
static inline uint8_t *edp_wrf(uint8_t *o, float f) { uint32_t v; memcpy(&v, &f, 4); return edp_wr32(o, v); }

#endif
