"""Device error codes and the one exception type the host raises for them."""
from __future__ import annotations

from ..schema import ErrorCode


MEANING: dict[ErrorCode, str] = {
    # one line per code of the schema (tests/unit/test_schema.py checks that none is missing)
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
}


class EdgeDPError(Exception):
    """Any failure the user should see as one line; ``code`` is the JSON error name."""

    code = "ERR_HOST"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        if code:
            self.code = code


class DeviceError(EdgeDPError):
    """The device answered a request with an error frame."""

    def __init__(self, error: ErrorCode, request_type: int):
        self.error = error
        self.request_type = request_type
        super().__init__(f"{error.name}: {MEANING[error]}", error.name)


class TransportError(EdgeDPError):
    """No answer, a broken link, or a target that cannot start."""

    code = "ERR_TRANSPORT"


class StateUnknownError(TransportError):
    """The link failed after a command that changes the device's state was sent: whether the
    device applied it is unknown (read its state, e.g. BUDGET, before acting on it)."""

    code = "ERR_STATE_UNKNOWN"
