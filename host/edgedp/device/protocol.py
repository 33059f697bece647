"""Every request and response body, typed (docs/protocol.md).

Frame types, sizes and layouts come from ``edgedp.schema``, generated from the firmware's
headers (``python -m edgedp.schema_gen``); this module gives them types. Each body mirrors a
C struct or handler of firmware/core (``MechConfig`` is ``edp_mech_config_t``, ``Caps`` the
caps of ``edp_budget_t``). ``pack`` functions check sizes before they build a request (k,
count), and every ``parse`` checks the body's length before it reads, so a short or long
answer raises ``TransportError`` instead of decoding garbage. Amounts of epsilon are integers in micro-epsilon
(``mech.lattice.MICRO``) everywhere here; float epsilon exists only at the command line.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass

import numpy as np

from .. import schema as S
from ..mech.lattice import MAX_CLASSES
from ..mech.modes import MODE_BUCKET, MODE_FULL, MODE_LABEL, MODE_TOPK, Mode, Released
from ..schema import AuditEvent, FrameType, StoreState, TickKind
from ..mech.types import Caps, MechConfig, QueryResult, SampleAnswer, SampleRequest, m_host, m_wire
from .errors import DeviceError, ErrorCode, TransportError

T = FrameType
PING, INFO, BUDGET, QUERY, LOCAL, SAMPLE, NAIVE = T.PING, T.INFO, T.BUDGET, T.QUERY, T.LOCAL, T.SAMPLE, T.NAIVE
INFER, INFER_LOCAL, CHALLENGE, STATE, ERROR, RESPONSE = T.INFER, T.INFER_LOCAL, T.CHALLENGE, T.STATE, T.ERROR, \
    T.RESPONSE
AUDIT_LOG = T.AUDIT_LOG
CONFIG, SET_TIME, RESET_BUDGET, TEST_SEED, RATE = T.CONFIG, T.SET_TIME, T.RESET_BUDGET, T.TEST_SEED, T.RATE
ADMIN_TYPES = (CONFIG, SET_TIME, RESET_BUDGET, TEST_SEED, RATE)
M_AUTO = S.M_AUTO
MAX_SAMPLES = S.SAMPLE_MAX
"""Most raw noise samples one SAMPLE request may ask for."""
SEED_BYTES = S.SEED_BYTES


def _state_name(state: type[StoreState] | type[TickKind], v: int, what: str) -> str:
    """The host's name of a device enum value: loaded, recovered, host-ns; TransportError if unknown."""
    try:
        return state(v).name.lower().replace("_", "-")
    except ValueError:
        raise TransportError(f"malformed {what} answer: unknown {state.__name__} {v}") from None


def parse_error(b: bytes) -> DeviceError:
    """An ERROR frame's body: code u8 | request type u8, and for ERR_RATE the wait u32."""
    if len(b) == S.RATE_ERROR_BODY and b[0] == ErrorCode.ERR_RATE:
        code, type_, wait = S.RATE_ERROR_BODY_FMT.unpack(b)
        return DeviceError(ErrorCode(code), type_, wait=wait)
    try:
        code, type_ = S.ERROR_BODY_FMT.unpack(_sized(b, S.ERROR_BODY, "ERROR"))
        return DeviceError(ErrorCode(code), type_)
    except ValueError:
        raise TransportError(f"malformed ERROR answer: {b.hex()}") from None


def _sized(body: bytes, size: int, what: str, exact: bool = True) -> bytes:
    """body if it holds ``size`` bytes (exactly, or at least when not ``exact``)."""
    if len(body) < size or (exact and len(body) != size):
        raise TransportError(f"malformed {what} answer: {len(body)} bytes, expected "
                             f"{'' if exact else 'at least '}{size}")
    return body


# ---- configuration ---------------------------------------------------------------------
@dataclass(frozen=True)
class Rate:
    """The rate limit of external answers: a bucket of ``burst`` answers refilled at ``per_minute``
    a minute; an answer over the limit is refused with ERR_RATE after ``tarpit_ms``. burst 0: none."""

    burst: int = 0
    per_minute: int = 0
    tarpit_ms: int = 0

    def pack(self) -> bytes:
        if not 0 <= self.tarpit_ms <= S.RATE_TARPIT_MAX:
            raise ValueError(f"the tarpit is 0..{S.RATE_TARPIT_MAX} ms, not {self.tarpit_ms}")
        return S.RATE_PAYLOAD_FMT.pack(self.burst, self.per_minute, self.tarpit_ms)


CONFIG_FMT = S.CONFIG_PAYLOAD_FMT


def config_payload(cfg: MechConfig, caps: Caps) -> bytes:
    """CONFIG payload: eps_micro u32 | daily_cap u64 | lifetime_cap u64 | lo, hi, sensitivity f32 | m i32."""
    return CONFIG_FMT.pack(cfg.eps_micro, caps.daily, caps.lifetime, cfg.lo, cfg.hi, cfg.sensitivity,
                           m_wire(cfg.m))


MAX_UNIX_TIME = 253_402_300_799
"""The last second of 9999-12-31 UTC: the latest clock SET_TIME may set (the device counts days
since 1970 in 32 bits and does not check the range itself; dates are shown up to year 9999)."""


def day_date(day: int | None) -> str | None:
    """A device day index (days since 1970-01-01 UTC) as YYYY-MM-DD; None for no day (no trusted
    clock); a day past 9999-12-31, which only a device or a man in the middle can report, as
    "day N (after 9999-12-31)" rather than an error."""
    if day is None:
        return None
    if day > (MAX_UNIX_TIME // 86400):
        return f"day {day} (after 9999-12-31)"
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


# ---- status answers --------------------------------------------------------------------
def shown(text: str) -> str:
    """A device-supplied string as it may be put on a terminal: every character that is not
    printable (control characters, ESC, DEL) and the backslash escaped as Python writes them
    (``\\x1b``), so that a device (or a man in the middle) cannot move the cursor, recolour or
    retitle the operator's terminal, or fake a line of output. For human output only: JSON
    carries the string itself (JSON escapes it)."""
    return "".join(c if c.isprintable() and c != "\\" else repr(c)[1:-1] for c in text)


MODEL_KINDS = {S.ModelKind.F32: "float32", S.ModelKind.S8: "int8"}
"""INFO's model_kind (a model present) by the host's name of it."""


@dataclass(frozen=True)
class ModelInfo:
    """The model INFER runs, as INFO reports it: ``sha256`` (hex) is edgedp.model.cgen.digest of
    its data as deployed, ``kind`` its kernels (float32, int8), ``input_shape`` C order."""

    name: str
    kind: str
    head: str
    input_shape: tuple[int, ...]
    classes: int
    sha256: str

    @property
    def n_features(self) -> int:
        """Input length: the product of the shape."""
        return int(np.prod(self.input_shape))


@dataclass(frozen=True)
class Info:
    """The INFO answer, version 2 (docs/protocol.md "INFO answer"). Unauthenticated: a man in
    the middle can rewrite it (docs/protocol.md, the authentication table).

    ``noise_entropy`` and ``nonce_entropy``: "ok" or "failed", each randomness source as of its
    last draw (the noise DRBG's; the admin nonce generator's); ``rx_buffer``: bytes of requests
    the device holds while it computes (0: one request at a time); ``model``: None without one.

    ``firmware_version`` and ``board`` are the device's own text: show them with ``shown``."""

    build: str
    store: str
    store_ok: bool
    time_ok: bool
    tick_kind: str
    max_classes: int
    tick_hz: int
    rate: Rate
    rx_buffer: int
    noise_entropy: str
    nonce_entropy: str
    model: ModelInfo | None
    firmware_version: str
    board: str

    FMT = S.INFO_HEAD_FMT

    @property
    def entropy(self) -> str:
        """"ok" when every randomness source is, else "failed"."""
        return "ok" if self.noise_entropy == self.nonce_entropy == "ok" else "failed"

    @classmethod
    def parse(cls, b: bytes) -> "Info":
        if b and b[0] != S.INFO_VERSION:
            version = 1 if b[0] in (0, 1) else b[0]  # version 1 began with build (0 or 1)
            raise TransportError(f"the device answers INFO version {version}"
                                 + (" (firmware 0.3.0 or older)" if version == 1 else "")
                                 + f"; this host reads version {S.INFO_VERSION}: update the "
                                 + ("firmware" if version < S.INFO_VERSION else "host tool (pip install -U edgedp)"))
        _sized(b, cls.FMT.size + 3, "INFO", exact=False)
        (_, build, store, store_ok, time_ok, tick_kind, maxk, hz, burst, per_minute, tarpit, rx_buffer,
         noise, nonce, kind, head, classes, rank, *dims, sha) = cls.FMT.unpack_from(b)
        off = cls.FMT.size
        texts = []
        for _ in range(3):
            n = b[off] if off < len(b) else -1
            if n < 0 or off + 1 + n > len(b) or n > S.INFO_TEXT_MAX:
                raise TransportError(f"malformed INFO answer: {len(b)} bytes, text field cut at {off}")
            texts.append(b[off + 1: off + 1 + n].decode("ascii", errors="replace"))
            off += 1 + n
        _sized(b, off, "INFO")
        health = {S.EntropyHealth.OK: "ok", S.EntropyHealth.FAILED: "failed"}
        if noise not in health or nonce not in health:
            raise TransportError(f"malformed INFO answer: unknown entropy health {noise}, {nonce}")
        return cls("test" if build else "production", _state_name(StoreState, store, "INFO"), bool(store_ok),
                   bool(time_ok), _state_name(TickKind, tick_kind, "INFO"), maxk, hz, Rate(burst, per_minute, tarpit),
                   rx_buffer, health[S.EntropyHealth(noise)], health[S.EntropyHealth(nonce)],
                   _model_info(kind, head, classes, rank, dims, sha, texts[2]), texts[0], texts[1])


def _model_info(kind: int, head: int, classes: int, rank: int, dims: list[int], sha: bytes,
                name: str) -> ModelInfo | None:
    """INFO's model fields, checked: None for model_kind NONE (every field zero)."""
    if kind == S.ModelKind.NONE:
        if head or classes or rank or any(dims) or any(sha) or name:
            raise TransportError("malformed INFO answer: model fields set without a model")
        return None
    try:
        kind_name, head_name = MODEL_KINDS[S.ModelKind(kind)], S.ModelHead(head).name.lower()
    except (ValueError, KeyError):
        raise TransportError(f"malformed INFO answer: unknown model kind {kind} or head {head}") from None
    shape = tuple(dims[:rank])
    if not 1 <= rank <= S.INFO_MAX_RANK or not all(shape) or any(dims[rank:]) or not 1 <= classes:
        raise TransportError(f"malformed INFO answer: model input rank {rank}, dims {dims}, {classes} classes")
    return ModelInfo(name, kind_name, head_name, shape, classes, sha.hex())


@dataclass(frozen=True)
class Budget:
    """The BUDGET answer; amounts in micro-epsilon, ``day`` None without a trusted clock.

    Unauthenticated: a man in the middle can rewrite it. ``State`` is the same fields, tagged."""

    recorded_day: int
    day: int | None
    daily_cap: int
    daily_spent: int
    lifetime_cap: int
    lifetime_spent: int
    remaining: int
    auth_counter: int
    store: str
    store_ok: bool
    epsilon_micro: int
    lo: float
    hi: float
    sensitivity: float
    m: int | None

    FMT = S.BUDGET_BODY_FMT

    @classmethod
    def parse(cls, b: bytes) -> "Budget":
        return cls.from_fields(cls.FMT.unpack(_sized(b, cls.FMT.size, "BUDGET")), "BUDGET")

    @classmethod
    def from_fields(cls, v: tuple, what: str) -> "Budget":
        return cls(v[0], None if v[1] == S.NO_DAY else v[1], v[2], v[3], v[4], v[5], v[6], v[7],
                   _state_name(StoreState, v[8], what), bool(v[9]), v[10], v[11], v[12], v[13], m_host(v[14]))

    @property
    def config(self) -> MechConfig:
        return MechConfig(self.epsilon_micro, self.lo, self.hi, self.sensitivity, self.m)

    @property
    def caps(self) -> Caps:
        return Caps(self.daily_cap, self.lifetime_cap)


# ---- queries -----------------------------------------------------------------------------
VECTOR_HEAD = S.VECTOR_HEAD_FMT


def pack_vector(x: np.ndarray, mode: Mode) -> bytes:
    """mode u8 | arg u8 | k u16 | k x f32 (QUERY, LOCAL, NAIVE): one 1-D vector of real scores."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"a query is one 1-D vector of class scores, not an array of shape {x.shape} "
                         "(Device.query_many streams rows)")
    if np.iscomplexobj(x) or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise ValueError(f"a query holds real numbers, not {x.dtype}")
    if not 1 <= len(x) <= MAX_CLASSES:
        raise ValueError(f"a query holds 1..{MAX_CLASSES} values, got {len(x)}")
    return VECTOR_HEAD.pack(mode.kind, mode.arg, len(x)) + x.astype("<f4").tobytes()


QUERY_HEAD = S.QUERY_HEAD_FMT
TOPK_ITEM = np.dtype([("i", "<u2"), ("v", "<i4")])
assert TOPK_ITEM.itemsize == S.TOPK_ITEM


def parse_query(b: bytes, mode: Mode) -> QueryResult:
    """remaining u64 | ticks u32 | m i8 | mode u8 | k u16 | payload by mode."""
    remaining, ticks, m, kind, k = QUERY_HEAD.unpack_from(_sized(b, QUERY_HEAD.size, "QUERY", exact=False))
    if kind != mode.kind:
        raise TransportError(f"malformed QUERY answer: mode {kind}, asked for {mode.kind}")
    p = b[QUERY_HEAD.size:]
    if mode.sends_values:
        r = Released(lattice=np.frombuffer(_sized(p, S.VALUE_BYTES * k, "QUERY"), dtype="<i4")[None, :])
    elif kind == MODE_TOPK:
        rec = np.frombuffer(_sized(p, TOPK_ITEM.itemsize * min(mode.arg, k), "QUERY"), dtype=TOPK_ITEM)
        r = Released(lattice=rec["v"][None, :], indices=rec["i"][None, :], label=rec["i"][:1])
    elif kind == MODE_LABEL:
        r = Released(label=np.frombuffer(_sized(p, S.LABEL_BODY, "QUERY"), dtype="<u2"))
    else:
        assert kind == MODE_BUCKET
        (lab, level) = S.BUCKET_BODY_FMT.unpack(_sized(p, S.BUCKET_BODY, "QUERY"))
        r = Released(label=np.array([lab]), level=np.array([level]))
    return QueryResult.from_release(r, mode, m, k, remaining_micro=remaining, ticks=ticks)


def parse_infer(b: bytes, mode: Mode) -> tuple[QueryResult, int]:
    """An INFER answer: the QUERY layout with infer_ticks u32 after the query head."""
    head, extra = S.QUERY_HEAD, S.INFER_TICKS
    (infer_ticks,) = S.INFER_TICKS_FMT.unpack_from(_sized(b, head + extra, "INFER", exact=False), head)
    return parse_query(b[:head] + b[head + extra:], mode), infer_ticks


# ---- test-build commands -----------------------------------------------------------------
@dataclass(frozen=True)
class LocalAnswer:
    """LOCAL: the on-device consumer's label and the CRC-32 of the un-noised lattice vector."""

    label: int
    crc: int

    FMT = S.LOCAL_BODY_FMT

    @classmethod
    def parse(cls, b: bytes) -> "LocalAnswer":
        return cls(*cls.FMT.unpack(_sized(b, cls.FMT.size, "LOCAL")))


def parse_sample(b: bytes) -> SampleAnswer:
    """SAMPLE's answer: m i8 | J u8 | count u16 | count x i32 noise in lattice steps."""
    head = S.SAMPLE_HEAD_FMT
    m, J, n = head.unpack_from(_sized(b, head.size, "SAMPLE", exact=False))
    _sized(b, head.size + S.VALUE_BYTES * n, "SAMPLE")
    return SampleAnswer(m, J, np.frombuffer(b, dtype="<i4", offset=head.size).astype(np.int64))


def naive_request(x: np.ndarray, scale: float) -> bytes:
    """NAIVE: scale f32 | vector (full mode)."""
    return S.NAIVE_SCALE_FMT.pack(scale) + pack_vector(x, Mode(MODE_FULL))


@dataclass(frozen=True)
class NaiveAnswer:
    """ticks u32 | k u16 | k x f32 outputs of the insecure baseline sampler."""

    ticks: int
    outputs: np.ndarray

    FMT = S.NAIVE_HEAD_FMT

    @classmethod
    def parse(cls, b: bytes) -> "NaiveAnswer":
        ticks, k = cls.FMT.unpack_from(_sized(b, cls.FMT.size, "NAIVE", exact=False))
        _sized(b, cls.FMT.size + S.VALUE_BYTES * k, "NAIVE")
        return cls(ticks, np.frombuffer(b, dtype="<f4", offset=cls.FMT.size))


# ---- authenticated administration ----------------------------------------------------------


@dataclass(frozen=True)
class Challenge:
    """CHALLENGE answer: the one-use nonce and the stored admin counter, tagged by the device."""

    nonce: bytes
    counter: int
    tag: bytes

    @classmethod
    def parse(cls, b: bytes) -> "Challenge":
        if len(b) != S.CHALLENGE_BODY:
            raise ValueError(f"a CHALLENGE answer is {S.CHALLENGE_BODY} bytes, got {len(b)}")
        return cls(*S.CHALLENGE_BODY_FMT.unpack(b))

    def authentic(self, key: bytes) -> bool:
        """True iff the tag is HMAC-SHA256(key, "EDPC" | nonce | counter)."""
        msg = S.AUTH_DOMAIN_CHALLENGE + self.nonce + S.AUTH_COUNTER_FMT.pack(self.counter)
        want = hmac.new(key, msg, hashlib.sha256).digest()
        return hmac.compare_digest(want, self.tag)


def _hmac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


@dataclass(frozen=True)
class State:
    """The STATE answer, checked: the device's fresh nonce and its BUDGET fields, tagged with the
    device key over the host's random challenge (so neither forged nor replayed)."""

    nonce: bytes
    budget: Budget
    rate: Rate

    @classmethod
    def parse(cls, b: bytes, key: bytes, challenge: bytes) -> "State | None":
        """The state, or None if the tag is not HMAC(key, "EDPS" | challenge | body)."""
        _sized(b, S.STATE_BODY + S.AUTH_TAG, "STATE")
        body, tag = b[:S.STATE_BODY], b[S.STATE_BODY:]
        if not hmac.compare_digest(_hmac(key, S.AUTH_DOMAIN_STATE, challenge, body), tag):
            return None
        v = S.STATE_BODY_FMT.unpack(body)
        return cls(v[0], Budget.from_fields(v[1:16], "STATE"), Rate(*v[16:]))


_ADMIN_EVENTS = (AuditEvent.CONFIG, AuditEvent.SET_TIME, AuditEvent.RESET_BUDGET, AuditEvent.RATE,
                 AuditEvent.TEST_SEED)


@dataclass(frozen=True)
class AuditEntry:
    """One audit log entry (store.h): its sequence number, the day (None without a trusted
    clock), the admin counter when it was logged, the event and its argument."""

    seq: int
    day: int | None
    counter: int
    event: int
    arg: int

    @property
    def event_name(self) -> str:
        """config, set-time, exhausted, ...; event-N for a number this host does not know."""
        try:
            return AuditEvent(self.event).name.lower().replace("_", "-")
        except ValueError:
            return f"event-{self.event}"

    @property
    def detail(self) -> str:
        """The argument in words: an admin frame's result, a store state at boot, else the number."""
        if self.event in _ADMIN_EVENTS:
            if self.arg == 0:
                return "accepted"
            try:
                return f"refused: {ErrorCode(self.arg).name}"
            except ValueError:
                return f"refused: error {self.arg}"
        if self.event == AuditEvent.STORE:
            try:
                return f"store {StoreState(self.arg).name.lower()}"
            except ValueError:
                return f"store state {self.arg}"
        if self.event == AuditEvent.ENTROPY:
            return "at boot" if self.arg == 0 else "at a reseed"
        return ""


@dataclass(frozen=True)
class AuditLog:
    """The AUDIT_LOG answer, checked: the device's fresh nonce, the number of events ever logged
    and the entries still in the ring (oldest first), tagged over the host's random challenge."""

    nonce: bytes
    total: int
    entries: tuple[AuditEntry, ...]

    @property
    def overwritten(self) -> int:
        """Events logged but no longer readable (overwritten by the ring, or torn by a power cut)."""
        return self.total - len(self.entries)

    @classmethod
    def parse(cls, b: bytes, key: bytes, challenge: bytes) -> "AuditLog | None":
        """The log, or None if the tag is not HMAC(key, "EDPL" | challenge | body); TransportError if
        the body is malformed (its length does not match its count)."""
        _sized(b, S.AUDIT_HEAD + S.AUTH_TAG, "AUDIT_LOG", exact=False)
        body, tag = b[:-S.AUTH_TAG], b[-S.AUTH_TAG:]
        if not hmac.compare_digest(_hmac(key, S.AUTH_DOMAIN_AUDIT, challenge, body), tag):
            return None
        nonce, total, count = S.AUDIT_HEAD_FMT.unpack_from(body)
        _sized(body, S.AUDIT_HEAD + count * S.AUDIT_ENTRY, "AUDIT_LOG")
        entries = []
        for i in range(count):
            seq, day, counter, event, arg = S.AUDIT_ENTRY_FMT.unpack_from(body, S.AUDIT_HEAD + i * S.AUDIT_ENTRY)
            entries.append(AuditEntry(seq, None if day == S.NO_DAY else day, counter, event, arg))
        return cls(nonce, total, tuple(entries))


@dataclass(frozen=True)
class AdminAnswer:
    """An admin command's answer: result (0 accepted, else the error code) and the stored counter,
    tagged over the nonce and the tag of the frame it answers."""

    result: int
    counter: int
    tag: bytes

    @classmethod
    def parse(cls, b: bytes) -> "AdminAnswer":
        return cls(*S.ADMIN_ANSWER_FMT.unpack(_sized(b, S.ADMIN_ANSWER, "admin")))

    def authentic(self, key: bytes, type_: int, nonce: bytes, frame_tag: bytes) -> bool:
        """True iff the tag is HMAC(key, "EDPA" | type | nonce | frame tag | result | counter)."""
        want = _hmac(key, S.AUTH_DOMAIN_ANSWER, bytes([type_]), nonce, frame_tag, bytes([self.result]),
                     S.AUTH_COUNTER_FMT.pack(self.counter))
        return hmac.compare_digest(want, self.tag)


def admin_body(type_: int, nonce: bytes, counter: int, payload: bytes, key: bytes) -> bytes:
    """counter u64 | payload | HMAC-SHA256(key, "EDP2" | type | nonce | counter | payload)."""
    head = S.AUTH_COUNTER_FMT.pack(counter) + payload
    tag = hmac.new(key, S.AUTH_DOMAIN_ADMIN + bytes([type_]) + nonce + head, hashlib.sha256).digest()
    return head + tag


