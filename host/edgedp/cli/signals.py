"""SIGINT and SIGTERM: which exception each raises and which exit code each ends with.

Every way a signal ends a command gives the same code (cli/exit_codes.py): SIGINT 130, SIGTERM
143, whether it was the first signal outside a deferred stop, the first inside one (every command
that makes charged queries — query, bench, demo, verify, audit-dp, tradeoff's device check — stops
after the answer in flight: cli/output.py StopRequest) or the second inside one (which interrupts
at once)."""
from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

from .exit_codes import ExitCode


class Terminated(KeyboardInterrupt):
    """SIGTERM raised in the main thread: unwinds like Ctrl-C (cleanup runs, the emulator a
    command started is stopped), and ends the command with 143 rather than 130."""


def exit_code(signum: int) -> ExitCode:
    """The exit code of a command ended by ``signum`` (SIGINT or SIGTERM)."""
    return ExitCode.TERMINATED if signum == signal.SIGTERM else ExitCode.INTERRUPTED


def interrupt(signum: int) -> None:
    """Raise what ``signum`` raises when it interrupts at once: Terminated for SIGTERM,
    KeyboardInterrupt for SIGINT."""
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The process's SIGTERM handler outside a deferred stop (installed by ``edgedp``'s main)."""
    interrupt(signum)


Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
"""What signal.signal returns: the previous SIGTERM handler."""


def install() -> Handler:
    """SIGTERM raises Terminated from here on (SIGINT already raises KeyboardInterrupt), unless
    the process ignores it (SIG_IGN: a parent that wants the command to survive SIGTERM) or its
    handler was set outside Python (which could not be put back). Returns the handler replaced,
    for ``restore`` when the command ends (an embedding program's, a test runner's), or None if
    nothing was replaced."""
    try:
        old = signal.getsignal(signal.SIGTERM)
        if old is None or old == signal.SIG_IGN:
            return None
        signal.signal(signal.SIGTERM, raise_terminated)
        return old
    except ValueError:  # not the main thread (an embedding program's worker): its handling stays
        return None


def restore(old: Handler) -> None:
    """Put back the SIGTERM handler ``install`` found (None: it changed nothing)."""
    if old is not None:
        try:
            signal.signal(signal.SIGTERM, old)
        except ValueError:
            pass


def ended(exc: BaseException) -> tuple[ExitCode, str]:
    """The exit code and the error line's text of an interrupt that reached the command's top
    (click wraps the KeyboardInterrupt, or Terminated, in Abort, as its cause): 143 and
    "terminated" for SIGTERM, else 130 and "interrupted", with what the interrupted code said of
    it (admin: whether the signed command took effect)."""
    cause = exc if isinstance(exc, KeyboardInterrupt) else exc.__cause__
    term = isinstance(cause, Terminated)
    what = "terminated" if term else "interrupted"
    return (ExitCode.TERMINATED if term else ExitCode.INTERRUPTED,
            f"{what}: {cause}" if cause is not None and str(cause) else what)
