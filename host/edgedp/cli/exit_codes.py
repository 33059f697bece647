"""The ``edgedp`` exit codes: one table, used by every command and documented in docs/cli.md.

A script can tell from the code alone whether to fix its arguments (2), its data (3), wait for
the next day's budget or use the right key (4), check the link (5), or find out what the device
did before retrying (6)."""
from __future__ import annotations

from enum import IntEnum

import click

from ..device.errors import DeviceError, EdgeDPError, ErrorCode, StateUnknownError, TransportError


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    """The command ran and what it checks failed (verify mismatch, audit-config, bench --check
    MISSED, device status: no session), or the host could not do it (a device session already
    running, a missing pip extra)."""
    USAGE = 2
    """Bad or contradictory options and arguments, or a bad edgedp.toml: nothing was sent."""
    BAD_INPUT = 3
    """An input file that cannot be read or holds values the device would refuse (NaN, wrong
    width), or an output that cannot be written: nothing was sent, or sending stopped there."""
    REFUSED = 4
    """The device refused (an ERR_* answer: budget, authentication, value, entropy, ...);
    for query, at least one row was refused."""
    TRANSPORT = 5
    """No answer, a broken link, or a target that cannot start."""
    STATE_UNKNOWN = 6
    """The command may or may not have taken effect on the device (e.g. the link failed after an
    authenticated command was sent): read the device's state before retrying."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT): what was answered so far is saved and reported."""
    TERMINATED = 143
    """SIGTERM: as for SIGINT."""
    BROKEN_PIPE = 141
    """The reader of stdout went away (``edgedp query ... | head``): stop quietly, as a
    program killed by SIGPIPE would, with no further query sent."""


def for_exception(exc: BaseException) -> ExitCode:
    """The exit code of an error that ended a command."""
    if isinstance(exc, StateUnknownError):
        return ExitCode.STATE_UNKNOWN
    if isinstance(exc, TransportError):
        return ExitCode.TRANSPORT
    if isinstance(exc, DeviceError) or (isinstance(exc, EdgeDPError) and exc.code in ErrorCode.__members__):
        return ExitCode.REFUSED
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
