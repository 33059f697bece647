"""The ``edgedp`` exit codes: one table, used by every command and documented in docs/cli.md.

A script can tell from the code alone whether to fix its arguments (2), check the link (3), fix
its data (4), read the device's state before retrying (5, 6), suspect the link (7), or wait for
the next day's budget or use the right key (8). The device layer's exceptions carry their row
as ``exit_code`` (edgedp.device.errors); ``for_exception`` maps everything else."""
from __future__ import annotations

from enum import IntEnum

import click

from ..device.errors import EdgeDPError, ErrorCode


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    """The command ran and what it checks failed (verify mismatch, audit-config, bench --check
    MISSED, device status: no session), or the host could not do it (a device session already
    running, a missing pip extra)."""
    USAGE = 2
    """Bad or contradictory options and arguments, or a bad edgedp.toml: nothing was sent."""
    TRANSPORT = 3
    """No answer, a broken link, or a target that cannot start (TransportError)."""
    BAD_INPUT = 4
    """An input file that cannot be read or holds values the device would refuse (NaN, inf,
    wrong width), or an output that cannot be written: nothing was sent, or sending stopped there."""
    STATE_MISMATCH = 5
    """After an admin command, the authenticated device state is not what was signed (StateMismatch)."""
    STATE_UNKNOWN = 6
    """A signed admin command was sent and no authentic answer came back: whether it took effect
    is unknown; read the device's state (edgedp budget) before retrying (StateUnknown)."""
    NOT_AUTHENTIC = 7
    """An answer that should carry the device's tag does not: forged on the way, or the device
    does not hold this key (NotAuthentic); or the authenticated state shows spend for answers
    the host did not receive (ChargedNotReceived)."""
    REFUSED = 8
    """The device refused: an ERR_* answer (budget, authentication, value, entropy, ...); for
    query, at least one row was refused (DeviceError)."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT): what was answered so far is saved and reported."""
    BROKEN_PIPE = 141
    """The reader of stdout went away (``edgedp query ... | head``): stop quietly, as a program
    killed by SIGPIPE would, with no further query sent."""
    TERMINATED = 143
    """SIGTERM: as for SIGINT."""


def for_exception(exc: BaseException) -> ExitCode:
    """The exit code of an error that ended a command."""
    if isinstance(exc, EdgeDPError):
        if type(exc).exit_code == EdgeDPError.exit_code and exc.code in ErrorCode.__members__:
            return ExitCode.REFUSED  # a device refusal reported by the host (e.g. ERR_AUTH: no key)
        return ExitCode(exc.exit_code)
    if isinstance(exc, click.UsageError):
        return ExitCode.USAGE
    if isinstance(exc, (ValueError, OSError, click.FileError)):
        return ExitCode.BAD_INPUT
    return ExitCode.FAILED


def error_name(exc: BaseException) -> str:
    """The ``error`` field of the JSON error object."""
    if isinstance(exc, EdgeDPError):
        return exc.code
    if isinstance(exc, click.UsageError):
        return "ERR_USAGE"
    if isinstance(exc, (ValueError, OSError, click.FileError)):
        return "ERR_INPUT"
    return "ERR_HOST"
