/* Wire protocol constants: version, frame types and every body size (docs/protocol.md
 * is the reference; frame.h the frame layout, cobs.h its byte
 * stuffing).
 *
 * This header is the wire schema: host/edgedp/schema.py is generated from it (and
 * from error.h, mech.h, store.h, port.h, dlap.h, budget.h, options.h) by
 * `python -m edgedp.schema_gen`, and a test fails when the two drift. A size whose
 * comment starts with "layout:" lists its fields, `name type` separated by '|'
 * (types u8 u16 u32 u64 i8 i16 i32 f32, u8[N] for N bytes); the generator checks
 * that they add up to the size and writes the host's struct for it. */
#ifndef EDGEDP_PROTO_H
#define EDGEDP_PROTO_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/options.h"

#define EDP_PROTO_VERSION 1u
#define EDP_FRAME_HEADER 4u    /* layout: version u8 | type u8 | seq u16 */
#define EDP_FRAME_CRC 4u       /* layout: crc32 u32 */
#define EDP_FRAME_OVERHEAD (EDP_FRAME_HEADER + EDP_FRAME_CRC)
#define EDP_QUERY_HEAD 16u     /* layout: remaining u64 | ticks u32 | m i8 | mode u8 | k u16 */
#define EDP_BODY_MAX (EDP_QUERY_HEAD + 4u * EDP_MAX_CLASSES)
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
    EDP_T_INFER = 0x14,        /* external inference: model inputs in, private release out, charged */
    EDP_T_INFER_LOCAL = 0x15,  /* test builds: the model's local path (checksum of the raw output) */
    EDP_T_CONFIG = 0x20,       /* authenticated */
    EDP_T_SET_TIME = 0x21,     /* authenticated */
    EDP_T_RESET_BUDGET = 0x22, /* authenticated */
    EDP_T_TEST_SEED = 0x23,    /* authenticated, test builds */
    EDP_T_CHALLENGE = 0x24,    /* a fresh nonce (the previous one dies) and the counter the next admin command must sign */
    EDP_T_STATE = 0x25,        /* authenticated read of the device state, with a fresh nonce */
    EDP_T_RATE = 0x26,         /* authenticated: the rate limit of external answers */
    EDP_T_AUDIT_LOG = 0x27,    /* authenticated read of the audit log (store.h), with a fresh nonce */
    EDP_T_ERROR = 0x7F,
    EDP_T_RESPONSE = 0x80,     /* OR-ed into the request type */
};

/* ---- bodies (docs/protocol.md) ---- */
#define EDP_ERROR_BODY 2u      /* layout: code u8 | type u8 */
#define EDP_RATE_ERROR_BODY 6u /* layout: code u8 | type u8 | wait_s u32 */
#define EDP_PING_MAX 64u       /* PING echoes up to this many bytes */
#define EDP_VECTOR_HEAD 4u     /* layout: mode u8 | arg u8 | k u16 */
#define EDP_VALUE_BYTES 4u     /* one f32 input or i32 released value */
#define EDP_TOPK_ITEM 6u       /* layout: index u16 | value i32 */
#define EDP_LABEL_BODY 2u      /* layout: label u16 */
#define EDP_BUCKET_BODY 3u     /* layout: label u16 | level u8 */
#define EDP_INFER_TICKS 4u     /* layout: infer_ticks u32 */
#define EDP_NO_DAY 0xFFFFFFFFu /* BUDGET's today without a trusted clock */
/* INFO answer, version 2 (docs/protocol.md "INFO answer"): the head, then three
 * texts (firmware version, board, model name), each len u8 + at most
 * EDP_INFO_TEXT_MAX ASCII bytes. Its first byte is EDP_INFO_VERSION; version 1
 * (firmware 0.3.0 and older) began with build (0 or 1) and had none of rx_buffer,
 * the per-source entropy health or the model fields.
 *   rx_buffer: bytes of requests the port holds while the core computes an
 *     answer (edp_port_t.rx_buffer); 0: one request at a time.
 *   noise_entropy, nonce_entropy: enum edp_info_entropy of each randomness
 *     source as of its last draw: the DRBG behind every noised answer (port
 *     entropy, drawn at boot and at each reseed) and the admin nonce generator
 *     (port auth_entropy, or entropy when NULL; drawn at boot and retried by
 *     CHALLENGE, STATE, AUDIT_LOG and admin commands while it fails).
 *   model_*: the model INFER runs (zero, with model_kind NONE, without one):
 *     enum edp_info_model, its head (enum edp_model_head), its output length,
 *     its input's shape (model_rank dims, the rest 0; their product is its
 *     input length) and the sha256 of its data as deployed (edp_model_t.sha256). */
#define EDP_INFO_VERSION 2u
#define EDP_INFO_HEAD 75u      /* layout: info_version u8 | build u8 | store u8 | store_ok u8 | time_ok u8 | tick_kind u8 | max_classes u16 | tick_hz u32 | rate_burst u32 | rate_per_minute u32 | rate_tarpit_ms u32 | rx_buffer u32 | noise_entropy u8 | nonce_entropy u8 | model_kind u8 | model_head u8 | model_classes u16 | model_rank u8 | model_dim0 u16 | model_dim1 u16 | model_dim2 u16 | model_dim3 u16 | model_sha256 u8[32] */
#define EDP_INFO_TEXT_MAX 32u  /* each INFO text (version, board, model name): len u8 + at most this many ASCII bytes */
#define EDP_INFO_MAX_RANK 4u   /* the model_dim fields */

enum edp_info_entropy {
    EDP_INFO_ENTROPY_OK = 0,      /* the source's last draw succeeded */
    EDP_INFO_ENTROPY_FAILED = 1,  /* its last draw failed: what depends on it is refused (EDP_ERR_ENTROPY) */
};

enum edp_info_model {
    EDP_INFO_MODEL_NONE = 0,  /* no model: INFER answers EDP_ERR_NO_MODEL */
    EDP_INFO_MODEL_F32 = 1,   /* float32 kernels */
    EDP_INFO_MODEL_S8 = 2,    /* int8 kernels (edp_model_t.s8) */
};
#define EDP_BUDGET_BODY 78u    /* layout: recorded_day u32 | today u32 | daily_cap u64 | daily_spent u64 | lifetime_cap u64 | lifetime_spent u64 | remaining u64 | auth_counter u64 | store u8 | store_ok u8 | eps_micro u32 | lo f32 | hi f32 | sensitivity f32 | m i32 */
#define EDP_LOCAL_BODY 6u      /* layout: label u16 | crc32 u32 */
#define EDP_INFER_LOCAL_BODY 8u  /* layout: k u16 | label u16 | crc32 u32 */
#define EDP_SAMPLE_REQUEST 13u /* layout: eps_micro u32 | sensitivity f32 | k u16 | count u16 | m i8 */
#define EDP_SAMPLE_MAX EDP_MAX_CLASSES  /* most samples one SAMPLE request may ask for */
#define EDP_SAMPLE_HEAD 4u     /* layout: m i8 | J u8 | count u16 */
#define EDP_NAIVE_SCALE 4u     /* layout: scale f32 */
#define EDP_NAIVE_HEAD 6u      /* layout: ticks u32 | k u16 */

/* ---- authenticated administration ---- */
#define EDP_AUTH_TAG 32u
#define EDP_AUTH_COUNTER 8u    /* layout: counter u64 */
#define EDP_AUTH_NONCE 16u
#define EDP_AUTH_DOMAIN_LEN 4u
#define EDP_AUTH_DOMAIN_ADMIN {'E', 'D', 'P', '2'}      /* first bytes an admin tag covers */
#define EDP_AUTH_DOMAIN_CHALLENGE {'E', 'D', 'P', 'C'}  /* first bytes a CHALLENGE tag covers */
#define EDP_AUTH_DOMAIN_STATE {'E', 'D', 'P', 'S'}      /* first bytes a STATE tag covers */
#define EDP_AUTH_DOMAIN_ANSWER {'E', 'D', 'P', 'A'}     /* first bytes an admin answer's tag covers */
#define EDP_AUTH_DOMAIN_AUDIT {'E', 'D', 'P', 'L'}      /* first bytes an AUDIT_LOG tag covers */
#define EDP_CHALLENGE_BODY 56u /* layout: nonce u8[EDP_AUTH_NONCE] | counter u64 | tag u8[EDP_AUTH_TAG] */
#define EDP_STATE_REQUEST 16u  /* layout: challenge u8[EDP_AUTH_NONCE] */
#define EDP_STATE_BODY 106u    /* layout: nonce u8[EDP_AUTH_NONCE] | recorded_day u32 | today u32 | daily_cap u64 | daily_spent u64 | lifetime_cap u64 | lifetime_spent u64 | remaining u64 | auth_counter u64 | store u8 | store_ok u8 | eps_micro u32 | lo f32 | hi f32 | sensitivity f32 | m i32 | rate_burst u32 | rate_per_minute u32 | rate_tarpit_ms u32 */
#define EDP_ADMIN_ANSWER 41u   /* layout: result u8 | counter u64 | tag u8[EDP_AUTH_TAG] */
#define EDP_CONFIG_PAYLOAD 36u /* layout: eps_micro u32 | daily_cap u64 | lifetime_cap u64 | lo f32 | hi f32 | sensitivity f32 | m i32 */
#define EDP_SET_TIME_PAYLOAD 8u  /* layout: unix_seconds u64 */
#define EDP_SEED_BYTES 32u     /* TEST_SEED payload: a ChaCha12 key */
#define EDP_AUDIT_REQUEST 16u  /* layout: challenge u8[EDP_AUTH_NONCE] */
#define EDP_AUDIT_HEAD 21u     /* layout: nonce u8[EDP_AUTH_NONCE] | total u32 | count u8 */
#define EDP_AUDIT_ENTRY 18u    /* layout: seq u32 | day u32 | counter u64 | event u8 | arg u8 */
#define EDP_RATE_PAYLOAD 12u   /* layout: burst u32 | per_minute u32 | tarpit_ms u32 */

#endif
