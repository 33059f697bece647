"""The device API: one request, one response, errors as exceptions.

    with open_device("qemu") as dev:
        print(dev.info())
        r = dev.query(probs, Mode.parse("label"))
"""
from __future__ import annotations

import collections
import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np

from .. import schema as S
from ..mech import chacha
from ..mech.modes import MODE_FULL, Mode
from ..paths import test_key_path
from ..trust import key_file_problem
from . import frames, protocol as P
from .errors import AnswerLost, DeviceError, EdgeDPError, ErrorCode, NotAuthentic, StateUnknown, TransportError
from .targets import Target, start_target
from .transport import Link


REPLAYS_FROM = (0, 3, 0)
"""The first firmware version whose noise comes from the reference's keystream (ChaCha12,
edgedp.mech.chacha); earlier firmware ran ChaCha20 (docs/privacy.md section 3)."""
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_Answer = TypeVar("_Answer")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """INFO's firmware version "X.Y.Z" (or "X.Y") as a tuple; None for anything else."""
    m = _VERSION.fullmatch(text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


DEFAULT_TIMEOUT = 10.0
TIMEOUT_ENV = "EDGEDP_TIMEOUT"


def default_timeout() -> float:
    """Seconds to wait for an answer: EDGEDP_TIMEOUT (what `--timeout` sets), else 10."""
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.1 <= value <= 3600:
        raise ValueError(f"{TIMEOUT_ENV}={text!r}: give seconds between 0.1 and 3600")
    return value


def timeout_or(default: float) -> float:
    """EDGEDP_TIMEOUT when it is set (`--timeout`), else ``default`` (a command's own wait)."""
    return default_timeout() if os.environ.get(TIMEOUT_ENV) else default


class KeyFileModeError(PermissionError):
    """A key file group or others can read or write: not used (the message names the chmod)."""


def load_key(path: str | Path | None = None) -> bytes:
    """A device key file: 64 hex digits (32 bytes); default (None or "", as `--key-file ""` gives,
    which means no key everywhere): the public key of test images.

    A file named here that group or others can read or write is refused (KeyFileModeError,
    naming the ``chmod 600`` to run; edgedp.trust.key_file_problem) -- unless it holds the public
    test key, which is used whatever its mode: the key is public, so its mode protects nothing, and
    a checkout's tests/keys/ has it 0644 (git keeps no other mode)."""
    named = bool(path)
    path = Path(path or test_key_path())
    key = _read_key(path)
    problem = key_file_problem(path) if named else None
    if problem:
        if key != _read_key(test_key_path()):
            raise KeyFileModeError(problem)
    return key


def _read_key(path: Path) -> bytes:
    try:
        key = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise TransportError(f"cannot read key file {path}: {exc}") from None
    if len(key) != 32:
        raise TransportError(f"key file {path} must hold 32 bytes as 64 hex digits")
    return key


def _infer_local_answer(body: bytes) -> tuple[int, int]:
    """INFER_LOCAL's answer: (label, CRC-32 of the raw float32 output)."""
    _, label, crc = S.INFER_LOCAL_BODY_FMT.unpack(body)
    return label, crc


class Device:
    """Protocol client over any Link."""

    def __init__(self, link: Link, timeout: float = 10.0, target: Target | None = None):
        self.link = link
        self.timeout = timeout
        self.target = target
        self._reader = frames.FrameReader()
        self._seq = 0
        self._pending: list[frames.Frame] = []
        self.last_info: P.Info | None = None  # the last INFO answer (unauthenticated), if any was read

    # ---- transport ----------------------------------------------------------
    def next_seq(self) -> int:
        """1..65535: 0 is the seq of the device's answers to frames it could not parse."""
        self._seq = self._seq % 0xFFFF + 1
        return self._seq

    def send_raw(self, data: bytes) -> None:
        self.link.write(data)

    def receive(self, timeout: float | None = None) -> frames.Frame:
        """Next frame from the device (skipping undecodable chunks), within ``timeout`` seconds
        (default: the device's); TransportError after that."""
        wait = self.timeout if timeout is None else timeout
        return self._receive_by(time.monotonic() + wait, wait)

    def _receive_by(self, deadline: float, wait: float) -> frames.Frame:
        """Next frame before the monotonic ``deadline``, set ``wait`` seconds before it."""
        while not self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError(f"no response from the device within {wait:g} s "
                                     f"(a slow machine or emulator: raise --timeout / {TIMEOUT_ENV})")
            self._pending += self._reader.feed(self.link.read(min(left, 0.5)))
        return self._pending.pop(0)

    def request(self, type_: int, body: bytes = b"", timeout: float | None = None) -> bytes:
        """Send a frame, wait for the response with the same seq, return its body."""
        seq = self.next_seq()
        self.link.write(frames.encode(type_, seq, body))
        return self.response(seq, type_, timeout)

    def response(self, seq: int, type_: int, timeout: float | None = None,
                 later: Iterable[int] = ()) -> bytes:
        """The body of the response to request seq (frames with other seqs are stale answers, e.g.
        to garbage sent earlier, and skipped); AnswerLost if one for a request in ``later`` (sent
        after seq) comes first: seq's was lost, and that later answer stays to be read.

        ``timeout`` (default: the device's) is a deadline for the answer, set when the wait
        begins: stale frames do not restart it (a peer sending one a second, or the answers to
        frames it queued ahead in the device's tarpit, cannot keep the host waiting)."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            f = self._receive_by(deadline, wait)
            if f.seq != seq:
                if f.seq in later:
                    self._pending.insert(0, f)
                    raise AnswerLost(seq, f"the answer to {f.seq} came first")
                continue
            if f.type == P.ERROR:
                raise P.parse_error(f.body)
            if f.type != type_ | P.RESPONSE:
                raise TransportError(f"unexpected response type 0x{f.type:02x} to 0x{type_:02x}")
            return f.body

    def sync(self, timeout: float | None = None) -> None:
        """Resynchronise: flush any half-received frame with 0x00 and PING until one answers.

        Bytes sent while a device boots are dropped by its UART, so this retries."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            self.link.write(b"\x00")
            try:
                self.ping(b"sync", timeout=0.5)
                return
            except TransportError:
                if time.monotonic() > deadline:
                    raise TransportError(f"the device does not answer PING within {wait:g} s "
                                         "(is it running this firmware?)") from None

    # ---- commands -----------------------------------------------------------
    def ping(self, data: bytes = b"", timeout: float | None = None) -> bytes:
        return self.request(P.PING, data, timeout)

    def info(self, timeout: float | None = None) -> P.Info:
        """INFO (unauthenticated); kept as ``last_info``."""
        self.last_info = P.Info.parse(self.request(P.INFO, timeout=timeout))
        return self.last_info

    def budget(self) -> P.Budget:
        return P.Budget.parse(self.request(P.BUDGET))

    def query(self, x: np.ndarray, mode: Mode | str = "full") -> P.QueryResult:
        """One external answer for one 1-D vector (charged to the budget); DeviceError if refused.

        Raises ValueError before sending for a 2-D array (use ``query_many``), complex
        values or more than 1024 classes."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        return P.parse_query(self.request(P.QUERY, P.pack_vector(x, mode)), mode)

    def infer(self, x: np.ndarray, mode: Mode | str = "full") -> tuple[P.QueryResult, int]:
        """Model inputs in, the private release of the model's output out (charged like QUERY):
        (answer, ticks of the inference; 0 in production builds)."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        return P.parse_infer(self.request(P.INFER, P.pack_vector(x, mode)), mode)

    def infer_many(self, rows: Iterable[np.ndarray], mode: Mode | str = "full", in_flight: int | None = None,
                   stop: Callable[[], bool] | None = None) -> Iterator[P.QueryResult | DeviceError | AnswerLost]:
        """``query_many`` for INFER: one private answer (or the refusal) per row of model inputs."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        yield from self._pipeline(P.INFER, (P.pack_vector(x, mode) for x in rows),
                                  lambda body: P.parse_infer(body, mode)[0], in_flight, stop)

    def infer_local(self, x: np.ndarray) -> tuple[int, int]:
        """The model's local path (test builds): (argmax of the raw output, crc32 of its float32 bytes)."""
        return _infer_local_answer(self.request(P.INFER_LOCAL, P.pack_vector(x, Mode(MODE_FULL))))

    def infer_local_many(self, rows: Iterable[np.ndarray], in_flight: int | None = None
                         ) -> Iterator[tuple[int, int] | DeviceError | AnswerLost]:
        """``infer_local`` for each row, pipelined as ``infer_many`` (test builds)."""
        yield from self._pipeline(P.INFER_LOCAL, (P.pack_vector(x, Mode(MODE_FULL)) for x in rows),
                                  _infer_local_answer, in_flight)

    def query_many(self, rows: Iterable[np.ndarray], mode: Mode | str = "full", in_flight: int | None = None,
                   stop: Callable[[], bool] | None = None) -> Iterator[P.QueryResult | DeviceError | AnswerLost]:
        """Stream rows (a 2-D array, or any iterable of vectors such as a generator) through QUERY.

        Yields one item per row, in order: its QueryResult, the DeviceError that refused it, or
        AnswerLost if its answer was lost on the link (the stream goes on). Up to ``in_flight`` requests (default: the link's ``in_flight``) are
        on the wire ahead of their answers; each answer is matched to its request by sequence
        number. After ERR_BUDGET no further row is sent (the device refuses every further external
        answer until its day rolls over); rows already sent still yield their answers. Bad input
        raises ValueError before its row is sent, after the rows before it. ``stop``, if given, is
        asked before a row taken from ``rows`` but held back by the link's byte budget is sent:
        once it returns True no further row is sent (the rows iterator alone cannot recall it)."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        yield from self._pipeline(P.QUERY, (P.pack_vector(x, mode) for x in rows),
                                  lambda body: P.parse_query(body, mode), in_flight, stop)

    def _pipeline(self, type_: int, bodies: Iterator[bytes], parse: Callable[[bytes], _Answer], in_flight: int | None,
                  stop: Callable[[], bool] | None = None) -> Iterator[_Answer | DeviceError | AnswerLost]:
        """Requests of type_ with the given bodies, up to in_flight unanswered and, beyond the
        first, within the link's ``in_flight_bytes``; their parsed answers (or refusals) in order.
        A response for a later request while an earlier one is unanswered means the earlier's
        answer was lost: its item is AnswerLost (never a mismatched answer), and the later
        answers, paid for, still come in their places."""
        depth = max(1, in_flight or getattr(self.link, "in_flight", 1))
        budget: int | None = getattr(self.link, "in_flight_bytes", None)
        waiting: collections.deque[int] = collections.deque()
        sizes: collections.deque[int] = collections.deque()  # wire bytes of each waiting request
        held: tuple[int, bytes] | None = None  # encoded, not sent: it did not fit the budget
        failed: ValueError | None = None
        more = True
        while True:
            burst = []
            while (more or held) and len(waiting) < depth:
                if held is None:
                    try:
                        body = next(bodies)
                    except StopIteration:
                        more = False
                        break
                    except ValueError as exc:  # bad input: answer the rows before it, then raise
                        failed, more = exc, False
                        break
                    seq = self.next_seq()
                    held = (seq, frames.encode(type_, seq, body))
                seq, frame = held
                if waiting and budget is not None and sum(sizes) + len(frame) > budget:
                    break
                if stop is not None and stop():  # taken before the stop, not yet sent: dropped
                    more, held = False, None
                    break
                burst.append(frame)
                waiting.append(seq)
                sizes.append(len(frame))
                held = None
            if burst:
                self.link.write(b"".join(burst))
            if not waiting:
                if failed is not None:
                    raise failed
                return
            seq = waiting.popleft()
            sizes.popleft()
            item: _Answer | DeviceError | AnswerLost
            try:
                item = parse(self.response(seq, type_, later=waiting))
            except DeviceError as exc:
                item = exc
                if exc.error == ErrorCode.ERR_BUDGET:
                    more, held = False, None
            except AnswerLost as exc:  # the answers after it are matched as they come
                item = exc
            except TransportError as exc:  # no answer at all: every request on the wire is lost
                for s in (seq, *waiting):  # charged: their rows are reported before the error
                    yield AnswerLost(s, str(exc))
                raise
            yield item

    def local(self, x: np.ndarray) -> P.LocalAnswer:
        """Run the on-device local path (test builds): label and CRC-32 of the raw lattice vector."""
        return P.LocalAnswer.parse(self.request(P.LOCAL, P.pack_vector(x, Mode(MODE_FULL))))

    def sample(self, req: P.SampleRequest) -> P.SampleAnswer:
        """Raw noise samples (test builds), at most ``P.MAX_SAMPLES`` per request."""
        return P.parse_sample(self.request(P.SAMPLE, req.pack()))

    def naive(self, x: np.ndarray, scale: float) -> P.NaiveAnswer:
        """The naive rand()+logf baseline on the device (test builds)."""
        return P.NaiveAnswer.parse(self.request(P.NAIVE, P.naive_request(x, scale)))

    # ---- authenticated administration ---------------------------------------
    def challenge(self, key: bytes) -> P.Challenge:
        """A fresh nonce (the device's previous one dies) and the admin counter, checked against key
        (the answer is tagged, so a man in the middle cannot make us sign a counter of its choosing)."""
        ch = P.Challenge.parse(self.request(P.CHALLENGE))
        if not ch.authentic(key):
            # The device does not hold this key (or the answer was forged): it would refuse
            # anything signed with it, so report what it would answer.
            raise DeviceError(ErrorCode.ERR_AUTH, P.CHALLENGE)
        return ch

    def _challenged(self, type_: int, parse, key: bytes, timeout: float | None = None):
        """An answer tagged over a random challenge of ours (the device's nonce is fresh, the
        previous one dead); NotAuthentic if the tag is wrong."""
        challenge = os.urandom(S.AUTH_NONCE)
        answer = parse(self.request(type_, challenge, timeout), key, challenge)
        if answer is None:
            raise NotAuthentic(f"the device's {P.FrameType(type_).name} answer is not authentic: rewritten on the way, "
                               f"or the device does not hold this key")
        return answer

    def state(self, key: bytes, timeout: float | None = None) -> P.State:
        """The device's state, authenticated (STATE with a random challenge); ``timeout``: seconds
        to wait for it (default: the device's)."""
        return self._challenged(P.STATE, P.State.parse, key, timeout)

    def audit_log(self, key: bytes) -> P.AuditLog:
        """The device's audit log, authenticated like ``state`` (AUDIT_LOG with a random challenge)."""
        return self._challenged(P.AUDIT_LOG, P.AuditLog.parse, key)

    def admin_frame(self, type_: int, payload: bytes, key: bytes, counter: int | None = None,
                    nonce: bytes | None = None) -> tuple[int, bytes]:
        """(seq, wire bytes) of an authenticated command for ``nonce`` (default: a fresh one from
        CHALLENGE, and counter = the challenged counter + 1). The frame is valid once, until the
        device draws another nonce."""
        seq, wire, _, _ = self._signed(type_, payload, key, counter, nonce)
        return seq, wire

    def _signed(self, type_: int, payload: bytes, key: bytes, counter: int | None,
                nonce: bytes | None) -> tuple[int, bytes, bytes, bytes]:
        """(seq, wire, nonce, tag) of a signed frame."""
        if nonce is None:
            ch = self.challenge(key)
            nonce, counter = ch.nonce, ch.counter + 1 if counter is None else counter
        if counter is None:
            raise ValueError("a command signed for a given nonce needs its counter")
        seq, body = self.next_seq(), P.admin_body(type_, nonce, counter, payload, key)
        return seq, frames.encode(type_, seq, body), nonce, body[-S.AUTH_TAG:]

    def admin(self, type_: int, payload: bytes, key: bytes, counter: int | None = None,
              nonce: bytes | None = None) -> int:
        """Send an authenticated command; returns the counter the device accepted it with.

        The answer must carry the device's tag over this frame: a refusal so tagged is a
        DeviceError with ``authenticated``. Anything else is StateUnknown: an untagged ERROR frame
        (which anyone on the link can forge, and which a man in the middle can send while he
        withholds the frame to deliver it later; the device's own ERR_ENTROPY or ERR_LEN look the
        same), no answer, garbage, or an answer whose tag is wrong (the caller re-reads the
        authenticated state, which draws a new nonce: admin.run)."""
        seq, wire, nonce, tag = self._signed(type_, payload, key, counter, nonce)
        name = P.T(type_).name
        self.link.write(wire)
        try:
            ans = P.AdminAnswer.parse(self.response(seq, type_))
        except DeviceError as exc:  # an untagged ERROR frame: it proves nothing about the signed frame
            raise StateUnknown(f"state unknown: the signed {name} was sent, then answered by an untagged "
                               f"ERROR ({exc}), which anyone on the link can forge") from None
        except TransportError as exc:
            raise StateUnknown(f"state unknown: the signed {name} was sent, then {exc}") from None
        if not ans.authentic(key, type_, nonce, tag):
            raise StateUnknown(f"state unknown: the answer to the signed {name} is not authentic")
        if ans.result:
            raise DeviceError(ErrorCode(ans.result), type_, authenticated=True)
        return ans.counter

    def configure(self, key: bytes, cfg: P.MechConfig, caps: P.Caps, counter: int | None = None) -> int:
        return self.admin(P.CONFIG, P.config_payload(cfg, caps), key, counter)

    def set_time(self, key: bytes, unix_seconds: int) -> int:
        """SET_TIME; ValueError (nothing sent) outside 0..``P.MAX_UNIX_TIME`` (year 9999)."""
        if not 0 <= unix_seconds <= P.MAX_UNIX_TIME:
            raise ValueError(f"a device clock is 0..{P.MAX_UNIX_TIME} Unix seconds (to 9999-12-31 UTC), "
                             f"not {unix_seconds}")
        return self.admin(P.SET_TIME, S.SET_TIME_PAYLOAD_FMT.pack(unix_seconds), key)

    def reset_budget(self, key: bytes) -> int:
        return self.admin(P.RESET_BUDGET, b"", key)

    def require_test_build(self, command: str) -> P.Info:
        """INFO, or EdgeDPError (ERR_BUILD) at once when the image is not a test build, whose
        test commands (TEST_SEED, SAMPLE, NAIVE) and reported ticks ``command`` needs."""
        info = self.info()
        if info.build != "test":
            raise EdgeDPError(
                f"{command} needs a test image: {self._where()} runs a {info.build} image (board {P.shown(info.board)}), "
                "which refuses the test commands and reports no ticks by design; run a test image "
                "(--target qemu, posix or renode)", "ERR_BUILD")
        return info

    def require_replayable(self, command: str) -> P.Info:
        """require_test_build, and EdgeDPError (ERR_BUILD) when the image's firmware does not
        generate the keystream the reference replays (``REPLAYS_FROM``): ``command`` compares the
        device's noise with the reference's bit for bit."""
        info = self.require_test_build(command)
        version = parse_version(info.firmware_version)
        if version is None:
            raise EdgeDPError(
                f"{command}: {self._where()} reports firmware version {info.firmware_version!r}, which this host "
                f"cannot read, so it cannot tell which keystream the image's noise comes from", "ERR_BUILD")
        if version < REPLAYS_FROM:
            first = ".".join(map(str, REPLAYS_FROM))
            raise EdgeDPError(
                f"{command} replays the device's noise with ChaCha{chacha.ROUNDS}, the keystream of firmware "
                f"{first} and later; {self._where()} runs firmware {P.shown(info.firmware_version)}, whose noise comes from "
                f"ChaCha20: run a {first} image (`make firmware`), or check this one with the edgedp of its "
                "version", "ERR_BUILD")
        return info

    def _where(self) -> str:
        return self.target.name if self.target else "the device"

    def set_time_if_unset(self, key: bytes) -> bool:
        """SET_TIME to the host's clock when the device's authenticated STATE shows no trusted
        clock (no day: a fresh board's RTC, an emulator's reset calendar); True if it was sent."""
        if self.state(key).budget.day is not None:
            return False
        self.set_time(key, int(time.time()))
        return True

    def test_seed(self, key: bytes, seed: bytes) -> int:
        if len(seed) != P.SEED_BYTES:
            raise ValueError(f"a test seed is {P.SEED_BYTES} bytes")
        return self.admin(P.TEST_SEED, seed, key)


def connect(target: Target, timeout: float = 10.0, sync_timeout: float | None = None,
            link: Link | None = None) -> Device:
    """A synchronised Device on a started target (through ``link``, default the target's own).

    Retries PING for ``sync_timeout`` (default ``timeout``) while the firmware boots; the
    caller stops the target (also when this raises). On a link that does not know yet how many
    requests the device buffers (a board at a URL: transport.SerialLink) it asks INFO once (its
    rx_buffer)."""
    dev = Device(link or target.link(), timeout=timeout, target=target)
    dev.sync(sync_timeout)
    if getattr(dev.link, "board_pending", False):  # a board at a URL: may it take pipelined requests?
        try:
            info = dev.info()
        except (DeviceError, TransportError):  # not an INFO this host reads: one request at a time
            dev.link.learn_rx_buffer(0)  # type: ignore[attr-defined]  # board_pending: a SerialLink
        else:
            dev.link.learn_rx_buffer(info.rx_buffer)  # type: ignore[attr-defined]  # as above
    return dev


@contextlib.contextmanager
def open_device(target: str | None = None, timeout: float | None = None) -> Iterator[Device]:
    """Start or connect to a target and yield a synchronised Device; stops it afterwards.

    ``timeout``: seconds to wait for each answer and for the boot (default: ``default_timeout()``)."""
    timeout = default_timeout() if timeout is None else timeout
    t = start_target(target)
    try:
        yield connect(t, timeout)
    finally:
        t.close()
