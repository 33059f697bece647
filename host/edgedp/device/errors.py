"""Device error codes and the one exception type the host raises for them."""
from __future__ import annotations

from ..schema import ErrorCode


MEANING: dict[ErrorCode, str] = {
    # one line per code of the schema (tests/python/test_schema.py checks that none is missing)
    ErrorCode.ERR_CRC: "frame CRC mismatch or undecodable COBS",
    ErrorCode.ERR_LEN: "frame or body has the wrong length",
    ErrorCode.ERR_VERSION: "protocol version not supported by the device",
    ErrorCode.ERR_UNKNOWN: "unknown command (or not in this build)",
    ErrorCode.ERR_BAD_VALUE: "a value the device refuses: NaN/Inf input, k outside 1..1024, a bad mode, "
                             "or a configuration it cannot serve",
    ErrorCode.ERR_BUDGET: "privacy budget exhausted: external output refused",
    ErrorCode.ERR_ENTROPY: "entropy source failed: external output refused",
    ErrorCode.ERR_TIME: "no trusted clock: external output refused",
    ErrorCode.ERR_AUTH: "missing or invalid authentication (or no device key)",
    ErrorCode.ERR_REPLAY: "authentication counter not above the stored one (replay)",
    ErrorCode.ERR_STORE: "persistent budget store unavailable: external output refused",
    ErrorCode.ERR_NO_MODEL: "INFER: this image was built without a model (make firmware MODEL=...)",
    ErrorCode.ERR_TIMING: "the board cannot release answers at a fixed deadline (its port lacks the window timer)",
    ErrorCode.ERR_RATE: "rate limit: no external answer allowed yet",
}


# Each class's ``exit_code`` is its row of the command line's table (edgedp.cli.exit_codes.ExitCode,
# docs/cli.md); tests/python/test_cli_conventions.py checks that they agree.
class EdgeDPError(Exception):
    """Any failure the user should see as one line; ``code`` is the JSON error name."""

    code = "ERR_HOST"
    exit_code = 1

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        if code:
            self.code = code


class DeviceError(EdgeDPError):
    """The device answered a request with an error: an ERROR frame (unauthenticated: a man in
    the middle can forge it) or, for an admin command, a refusal tagged with the device key
    (``authenticated``)."""

    exit_code = 8

    def __init__(self, error: ErrorCode, request_type: int, authenticated: bool = False, wait: int | None = None):
        self.error = error
        self.request_type = request_type
        self.authenticated = authenticated
        self.wait = wait  # ERR_RATE: seconds until the next answer is allowed (0xFFFFFFFF: never)
        more = "" if wait is None else (" (the limit does not refill)" if wait == 0xFFFFFFFF else f" (retry in {wait} s)")
        super().__init__(f"{error.name}: {MEANING[error]}{more}", error.name)


class StateMismatch(EdgeDPError):
    """After an admin command, the authenticated device state is not what was signed."""

    code = "ERR_STATE_MISMATCH"
    exit_code = 5


class StateUnknown(EdgeDPError):
    """A signed admin frame was sent but no authentic answer came back (time-out, or an answer
    whose tag is wrong): whether it took effect is not known from the answer."""

    code = "ERR_STATE_UNKNOWN"
    exit_code = 6


class NotAuthentic(EdgeDPError):
    """An answer that should carry the device's tag does not: forged on the way, or the device
    does not hold this key. Nothing was signed from it."""

    code = "ERR_NOT_AUTHENTIC"
    exit_code = 7


class ChargedNotReceived(EdgeDPError):
    """The authenticated state shows the device charged more than the answers this host received
    (and any it knows were lost): refusals forged on the way for answers it paid for, or another
    client of the device meanwhile (edgedp.device.spend). ``not_received``: the micro-epsilon."""

    code = "ERR_CHARGED_NOT_RECEIVED"
    exit_code = 7

    def __init__(self, message: str, not_received: int):
        super().__init__(message)
        self.not_received = not_received


class TransportError(EdgeDPError):
    """No answer, a broken link, or a target that cannot start."""

    code = "ERR_TRANSPORT"
    exit_code = 3


class AnswerLost(TransportError):
    """A pipelined request's answer was lost on the link (the answer to a later request came
    first). The device received the request, charged it and answered; only the answer is gone."""

    code = "ERR_LOST"

    def __init__(self, seq: int, why: str):
        super().__init__(f"the answer to request {seq} was lost ({why})")
        self.seq = seq
