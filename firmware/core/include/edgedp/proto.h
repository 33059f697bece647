/* Wire protocol constants: version, frame sizes, frame types (docs/protocol.md
 * is the reference; edgedp/frame.h the frame layout, edgedp/cobs.h its byte
 * stuffing). */
#ifndef EDGEDP_PROTO_H
#define EDGEDP_PROTO_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/options.h"

#define EDP_PROTO_VERSION 1u
#define EDP_FRAME_OVERHEAD 8u  /* header 4 + crc 4 */
#define EDP_BODY_MAX (16u + 4u * EDP_MAX_CLASSES)
#define EDP_FRAME_MAX (EDP_BODY_MAX + EDP_FRAME_OVERHEAD)
/* COBS adds one byte per 254 plus one. */
#define EDP_WIRE_MAX (EDP_FRAME_MAX + EDP_FRAME_MAX / 254u + 2u)

enum edp_frame_type {
    EDP_T_PING = 0x01,         /* body: up to 64 bytes, echoed */
    EDP_T_INFO = 0x02,
    EDP_T_BUDGET = 0x03,
    EDP_T_QUERY = 0x10,        /* external query: noised, charged */
    EDP_T_LOCAL = 0x11,        /* test builds: run the local (un-noised) path on device */
    EDP_T_SAMPLE = 0x12,       /* test builds: raw noise samples */
    EDP_T_NAIVE = 0x13,        /* test builds: the naive rand()+logf baseline, timed */
    EDP_T_CONFIG = 0x20,       /* authenticated */
    EDP_T_SET_TIME = 0x21,     /* authenticated */
    EDP_T_RESET_BUDGET = 0x22, /* authenticated */
    EDP_T_TEST_SEED = 0x23,    /* authenticated, test builds */
    EDP_T_CHALLENGE = 0x24,    /* the nonce and counter the next admin command must sign */
    EDP_T_ERROR = 0x7F,
    EDP_T_RESPONSE = 0x80,     /* OR-ed into the request type */
};

#define EDP_AUTH_TAG 32u
#define EDP_AUTH_COUNTER 8u
#define EDP_AUTH_NONCE 16u

#endif
