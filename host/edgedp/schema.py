"""The wire schema, GENERATED from the headers of firmware/core (include/edgedp, src) by `python -m edgedp.schema_gen`:
do not edit (change the header and regenerate; tests/python/test_schema.py fails on any drift).

Sizes are in bytes; ``*_FMT`` is the little-endian struct of the layout of the same name.
"""
from __future__ import annotations

import struct
from enum import IntEnum


# ---- options.h
MAX_CLASSES = 1024
MAX_TOPK = 32
MAX_ROUND_DIGITS = 6
FIRMWARE_VERSION = '0.4.0'

# ---- proto.h
PROTO_VERSION = 1
# version u8 | type u8 | seq u16
FRAME_HEADER = 4
FRAME_HEADER_FMT = struct.Struct('<BBH')
# crc32 u32
FRAME_CRC = 4
FRAME_CRC_FMT = struct.Struct('<I')
FRAME_OVERHEAD = 8
# remaining u64 | ticks u32 | m i8 | mode u8 | k u16
QUERY_HEAD = 16
QUERY_HEAD_FMT = struct.Struct('<QIbBH')
BODY_MAX = 4112
FRAME_MAX = 4120
WIRE_MAX = 4138
# code u8 | type u8
ERROR_BODY = 2
ERROR_BODY_FMT = struct.Struct('<BB')
# code u8 | type u8 | wait_s u32
RATE_ERROR_BODY = 6
RATE_ERROR_BODY_FMT = struct.Struct('<BBI')
# PING echoes up to this many bytes
PING_MAX = 64
# mode u8 | arg u8 | k u16
VECTOR_HEAD = 4
VECTOR_HEAD_FMT = struct.Struct('<BBH')
# one f32 input or i32 released value
VALUE_BYTES = 4
# index u16 | value i32
TOPK_ITEM = 6
TOPK_ITEM_FMT = struct.Struct('<Hi')
# label u16
LABEL_BODY = 2
LABEL_BODY_FMT = struct.Struct('<H')
# label u16 | level u8
BUCKET_BODY = 3
BUCKET_BODY_FMT = struct.Struct('<HB')
# infer_ticks u32
INFER_TICKS = 4
INFER_TICKS_FMT = struct.Struct('<I')
# BUDGET's today without a trusted clock
NO_DAY = 0xFFFFFFFF
INFO_VERSION = 2
# info_version u8 | build u8 | store u8 | store_ok u8 | time_ok u8 | tick_kind u8 | max_classes
#   u16 | tick_hz u32 | rate_burst u32 | rate_per_minute u32 | rate_tarpit_ms u32 | rx_buffer
#   u32 | noise_entropy u8 | nonce_entropy u8 | model_kind u8 | model_head u8 | model_classes
#   u16 | model_rank u8 | model_dim0 u16 | model_dim1 u16 | model_dim2 u16 | model_dim3 u16 |
#   model_sha256 u8[32]
INFO_HEAD = 75
INFO_HEAD_FMT = struct.Struct('<BBBBBBHIIIIIBBBBHBHHHH32s')
# each INFO text (version, board, model name): len u8 + at most this many ASCII bytes
INFO_TEXT_MAX = 32
# the model_dim fields
INFO_MAX_RANK = 4
# recorded_day u32 | today u32 | daily_cap u64 | daily_spent u64 | lifetime_cap u64 |
#   lifetime_spent u64 | remaining u64 | auth_counter u64 | store u8 | store_ok u8 | eps_micro
#   u32 | lo f32 | hi f32 | sensitivity f32 | m i32
BUDGET_BODY = 78
BUDGET_BODY_FMT = struct.Struct('<IIQQQQQQBBIfffi')
# label u16 | crc32 u32
LOCAL_BODY = 6
LOCAL_BODY_FMT = struct.Struct('<HI')
# k u16 | label u16 | crc32 u32
INFER_LOCAL_BODY = 8
INFER_LOCAL_BODY_FMT = struct.Struct('<HHI')
# eps_micro u32 | sensitivity f32 | k u16 | count u16 | m i8
SAMPLE_REQUEST = 13
SAMPLE_REQUEST_FMT = struct.Struct('<IfHHb')
# most samples one SAMPLE request may ask for
SAMPLE_MAX = 1024
# m i8 | J u8 | count u16
SAMPLE_HEAD = 4
SAMPLE_HEAD_FMT = struct.Struct('<bBH')
# scale f32
NAIVE_SCALE = 4
NAIVE_SCALE_FMT = struct.Struct('<f')
# ticks u32 | k u16
NAIVE_HEAD = 6
NAIVE_HEAD_FMT = struct.Struct('<IH')
AUTH_TAG = 32
# counter u64
AUTH_COUNTER = 8
AUTH_COUNTER_FMT = struct.Struct('<Q')
AUTH_NONCE = 16
AUTH_DOMAIN_LEN = 4
# first bytes an admin tag covers
AUTH_DOMAIN_ADMIN = b'EDP2'
# first bytes a CHALLENGE tag covers
AUTH_DOMAIN_CHALLENGE = b'EDPC'
# first bytes a STATE tag covers
AUTH_DOMAIN_STATE = b'EDPS'
# first bytes an admin answer's tag covers
AUTH_DOMAIN_ANSWER = b'EDPA'
# first bytes an AUDIT_LOG tag covers
AUTH_DOMAIN_AUDIT = b'EDPL'
# nonce u8[16] | counter u64 | tag u8[32]
CHALLENGE_BODY = 56
CHALLENGE_BODY_FMT = struct.Struct('<16sQ32s')
# challenge u8[16]
STATE_REQUEST = 16
STATE_REQUEST_FMT = struct.Struct('<16s')
# nonce u8[16] | recorded_day u32 | today u32 | daily_cap u64 | daily_spent u64 | lifetime_cap
#   u64 | lifetime_spent u64 | remaining u64 | auth_counter u64 | store u8 | store_ok u8 |
#   eps_micro u32 | lo f32 | hi f32 | sensitivity f32 | m i32 | rate_burst u32 | rate_per_minute
#   u32 | rate_tarpit_ms u32
STATE_BODY = 106
STATE_BODY_FMT = struct.Struct('<16sIIQQQQQQBBIfffiIII')
# result u8 | counter u64 | tag u8[32]
ADMIN_ANSWER = 41
ADMIN_ANSWER_FMT = struct.Struct('<BQ32s')
# eps_micro u32 | daily_cap u64 | lifetime_cap u64 | lo f32 | hi f32 | sensitivity f32 | m i32
CONFIG_PAYLOAD = 36
CONFIG_PAYLOAD_FMT = struct.Struct('<IQQfffi')
# unix_seconds u64
SET_TIME_PAYLOAD = 8
SET_TIME_PAYLOAD_FMT = struct.Struct('<Q')
# TEST_SEED payload: a ChaCha12 key
SEED_BYTES = 32
# challenge u8[16]
AUDIT_REQUEST = 16
AUDIT_REQUEST_FMT = struct.Struct('<16s')
# nonce u8[16] | total u32 | count u8
AUDIT_HEAD = 21
AUDIT_HEAD_FMT = struct.Struct('<16sIB')
# seq u32 | day u32 | counter u64 | event u8 | arg u8
AUDIT_ENTRY = 18
AUDIT_ENTRY_FMT = struct.Struct('<IIQBB')
# burst u32 | per_minute u32 | tarpit_ms u32
RATE_PAYLOAD = 12
RATE_PAYLOAD_FMT = struct.Struct('<III')

# ---- budget.h
# micro-epsilon per epsilon: every amount of epsilon is an integer of these
MICRO = 1000000
# ms
RATE_TARPIT_MAX = 2000
# the wait when nothing refills the bucket
RATE_NEVER = 0xFFFFFFFF

# ---- model.h
# choose m: smallest with k 2^-m <= sensitivity / EDP_M_AUTO_SLACK (src/mech.h)
M_AUTO = -128
# most dims of a model's input shape (edp_model_t.in_shape)
MODEL_MAX_RANK = 4

# ---- mech.h
# lattice exponents m run EDP_M_MIN..EDP_M_MAX
M_MIN = -30
M_MAX = 30
# the automatic m keeps the rounding slack k g below sensitivity / 256
M_AUTO_SLACK = 256.0
# 2^24: |lo| / g and |hi| / g below it keep y * g exact in float32
MECH_LATTICE_LIMIT = 16777216.0

# ---- dlap.h
# Horner terms of edp_exp_neg: 1/25! < 2^-83
DLAP_EXP_TERMS = 24
# stop adding alias values once q^w < 2^-20
DLAP_MIN_TAIL = 9.5367431640625e-07
DLAP_CHUNK_BITS = 4
# t < 2^25 keeps |z| < 2^31 - 2^24
DLAP_MAX_J = 24
# L = J - 3: 2^L / t in (1/16, 1/8]
DLAP_LOW_SHIFT = 3
DLAP_MAX_L = 21
DLAP_MAX_CHUNKS = 6
DLAP_ALIAS_BITS = 6
DLAP_ALIAS_N = 64
DLAP_MAX_ACCEPT_BITS = 4
DLAP_MAX_KEEP_BITS = 4
DLAP_FIXED_BITS = 32
# tail_rounds: p^(rounds past the shift) <= 2^-69
DLAP_CAP_BITS = 69
# |q + z| < 2^31 with |q| < 2^24
DLAP_Z_LIMIT = 2130706431.0

# ---- store.h
# "EDDP"
STORE_MAGIC = 0x50444445
# 2 adds the rate limit
STORE_VERSION = 2
# serialized bytes including CRC
STORE_RECORD = 112
# version 1 (no rate limit): still loaded, as "no limit"
STORE_RECORD_V1 = 84
STORE_SLOT_SIZE = 128
AUDIT_ENTRIES = 32
AUDIT_ENTRY_SIZE = 20
AUDIT_OFFSET = 256

# ---- port.h
# bytes every port's store holds
STORE_SIZE = 896


class FrameType(IntEnum):
    """Frame types (proto.h)."""

    PING = 0x01  # body: up to 64 bytes, echoed
    INFO = 0x02
    BUDGET = 0x03
    QUERY = 0x10  # external query: noised, charged
    LOCAL = 0x11  # test builds: run the local (un-noised) path on device
    SAMPLE = 0x12  # test builds: raw noise samples
    NAIVE = 0x13  # test builds: the naive rand()+logf baseline, timed
    INFER = 0x14  # external inference: model inputs in, private release out, charged
    INFER_LOCAL = 0x15  # test builds: the model's local path (checksum of the raw output)
    CONFIG = 0x20  # authenticated
    SET_TIME = 0x21  # authenticated
    RESET_BUDGET = 0x22  # authenticated
    TEST_SEED = 0x23  # authenticated, test builds
    # a fresh nonce (the previous one dies) and the counter the next admin command must sign
    CHALLENGE = 0x24
    STATE = 0x25  # authenticated read of the device state, with a fresh nonce
    RATE = 0x26  # authenticated: the rate limit of external answers
    AUDIT_LOG = 0x27  # authenticated read of the audit log (store.h), with a fresh nonce
    ERROR = 0x7F
    RESPONSE = 0x80  # OR-ed into the request type


class EntropyHealth(IntEnum):
    """Health of a randomness source in INFO (proto.h)."""

    OK = 0  # the source's last draw succeeded
    FAILED = 1  # its last draw failed: what depends on it is refused (EDP_ERR_ENTROPY)


class ModelKind(IntEnum):
    """Kind of the model in INFO (proto.h)."""

    NONE = 0  # no model: INFER answers EDP_ERR_NO_MODEL
    F32 = 1  # float32 kernels
    S8 = 2  # int8 kernels (edp_model_t.s8)


class ErrorCode(IntEnum):
    """Error codes as carried on the wire: the positive value of EDP_ERR_* (error.h)."""

    ERR_CRC = 1  # frame CRC mismatch or undecodable COBS
    ERR_LEN = 2  # frame too short, too long, or body size wrong
    ERR_VERSION = 3  # protocol version not supported
    ERR_UNKNOWN = 4  # unknown frame type (or not in this build)
    ERR_BAD_VALUE = 5  # NaN/Inf input, or a parameter out of range
    ERR_BUDGET = 6  # daily or lifetime privacy budget exhausted
    ERR_ENTROPY = 7  # entropy source failed: no external output
    ERR_TIME = 8  # no trusted clock: no external output
    ERR_AUTH = 9  # missing/invalid HMAC tag or no device key
    ERR_REPLAY = 10  # authentication counter not increasing
    ERR_STORE = 11  # persistent store unreadable or write failed
    ERR_NO_MODEL = 12  # INFER on an image built without a model
    ERR_TIMING = 13  # the board cannot release answers at a deadline
    ERR_RATE = 14  # rate limit: no token for an external answer yet (the error carries the wait)


class ModelHead(IntEnum):
    """Model heads (model.h)."""

    SOFTMAX = 0  # one net; output = softmax of its logits, range [0, 1]
    VOTES = 1  # T nets; output c = number of nets whose argmax is class c, range [0, T]


class OutputMode(IntEnum):
    """Output modes (mech.h)."""

    FULL = 0  # k x i32 lattice values clamped to [ylo, yhi]
    TOPK = 1  # arg = K: K x (u16 index, i32 clamped value), by noisy value desc, index asc
    LABEL = 2  # u16 noisy argmax (lowest index on ties)
    BUCKET = 3  # u16 label, u8 level: 2 top third of range, 1 middle, 0 low
    ROUND = 4  # arg = D: k x i32 round(y g, D) in units of 10^-D (edp_mech_mode_fits)
    SIMPLEX = 5  # k x i32 lattice values >= 0 summing to 2^m (1.0)


class AuditEvent(IntEnum):
    """Audit log events (store.h)."""

    CONFIG = 1  # an admin frame with a valid tag; arg: the result (0 or -EDP_ERR_*)
    SET_TIME = 2  # likewise
    RESET_BUDGET = 3
    RATE = 4
    TEST_SEED = 5
    EXHAUSTED = 6  # the first EDP_ERR_BUDGET refusal of a day (since boot)
    STORE = 7  # boot found the store not loaded; arg: enum edp_store_state
    ENTROPY = 8  # entropy failed (at boot or a reseed that had worked before)
    RATE_TRIP = 9  # the first EDP_ERR_RATE refusal after an answer


class StoreState(IntEnum):
    """Store state found at boot (store.h)."""

    LOADED = 0  # a valid record was found
    FRESH = 1  # both slots blank: first boot or lost backup domain
    CORRUPT = 2  # a slot looked written but no slot is valid
    FAILED = 3  # the port reported a read or write error
    # a valid record was found, but the other slot holds a damaged write that may have been
    # newer (power cut or bit flip)
    RECOVERED = 4


class TickKind(IntEnum):
    """Tick unit of the answers' ticks (port.h)."""

    # SysTick on the core clock (QEMU: 1.344 ticks per instruction under -icount shift=3)
    SYSTICK = 0
    DWT = 1  # DWT CYCCNT: real core cycles
    HOST_NS = 2  # host monotonic clock, nanoseconds
