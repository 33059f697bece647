"""Authenticated administration that never acts on unauthenticated state.

``run`` reads the device's state with STATE (tagged over a random challenge; or takes the
STATE the caller has just read, whose nonce the device still holds), builds what it signs only
from that state and the caller's options, sends the command signed for the state's
fresh nonce, checks the tagged answer, re-reads the authenticated state and checks that it is
exactly what was signed. Every failure after the signed frame went out re-reads the state first
(an interrupt too, Ctrl-C or SIGTERM, which then says whether the command took effect): that
draws a new nonce, so a frame a man in the middle withheld can never land later.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .client import Device
from .errors import DeviceError, EdgeDPError, StateMismatch, StateUnknown
from .protocol import Budget, Rate, State, T


@dataclass(frozen=True)
class Outcome:
    """An accepted command: its counter and the authenticated state before and after."""

    counter: int
    before: Budget
    after: Budget
    rate: Rate  # the rate limit after


Build = Callable[[Budget], bytes]
"""The payload to sign, from the authenticated state."""
Check = Callable[[Budget, Budget], str | None]
"""(before, after) -> None if the state after is what was signed, else why not."""


INTERRUPTED_REREAD_S = 2.0
"""How long an interrupted command waits for the state it re-reads: the operator asked to stop."""


def _reread(dev: Device, key: bytes, timeout: float | None = None) -> Budget | EdgeDPError:
    """The authenticated state (which draws a new nonce), or why it could not be read."""
    try:
        return dev.state(key, timeout).budget
    except EdgeDPError as exc:
        return exc


def _took(name: str, counter: int, after: Budget | EdgeDPError) -> str:
    """Whether the command signed with ``counter`` took effect, from the state re-read after it
    (or the re-read's failure: then the withheld frame may still land)."""
    if isinstance(after, EdgeDPError):
        return (f"{name} was signed and may have been sent; the authenticated state could not be re-read ({after}), "
                "so the signed frame may still land if it was withheld: read the state (edgedp budget --key-file) "
                "before any retry")
    took = after.auth_counter >= counter
    return (f"re-read the authenticated state: {name} {'took effect' if took else 'did not take effect'} "
            f"(counter {after.auth_counter}), and the signed frame can no longer land")


def run(dev: Device, key: bytes, type_: int, build: Build, check: Check, state: State | None = None) -> Outcome:
    """Sign ``build(state)`` for the device's authenticated state, send it, and verify the result.

    ``state``: a STATE the caller read with ``key`` just before, with nothing sent since (its
    nonce is the device's current one, docs/protocol.md); default: read one here. Raises
    DeviceError for a refusal the device tagged over the frame, StateUnknown when anything else
    came back (an untagged ERROR, garbage, nothing, a wrong tag: the state is re-read first, and
    the message says whether the command took effect, or why the re-read failed too), StateMismatch when the state after is not
    what was signed; NotAuthentic (nothing sent) when the first state read is not authentic."""
    st = dev.state(key) if state is None else state
    before, counter = st.budget, st.budget.auth_counter + 1
    payload = build(before)
    name = T(type_).name
    try:
        accepted = dev.admin(type_, payload, key, counter=counter, nonce=st.nonce)
    except StateUnknown as exc:
        raise StateUnknown(f"{exc}; {_took(name, counter, _reread(dev, key))}") from None
    except DeviceError:  # tagged over this frame (untagged refusals are StateUnknown); an ERR_AUTH leaves the
        _reread(dev, key)  # nonce alive, and a copy of the frame could be withheld: draw a new nonce
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (cli/signals.Terminated) with the frame maybe out
        # (a second signal during the re-read interrupts it: the operator insists)
        raise type(exc)(_took(name, counter, _reread(dev, key, INTERRUPTED_REREAD_S))) from None
    try:
        st_after = dev.state(key)
        after = st_after.budget
    except EdgeDPError as exc:
        raise StateUnknown(f"{name} was accepted (counter {accepted}, authentic answer) but the state after "
                           f"could not be re-read to check it: {exc}") from None
    except KeyboardInterrupt as exc:
        raise type(exc)(f"{name} took effect (counter {accepted}, authentic answer); the state after was not "
                        "re-read to check it") from None
    if accepted != counter or after.auth_counter != counter:
        raise StateMismatch(f"{name} was signed with counter {counter}, but the device answered {accepted} "
                            f"and now holds {after.auth_counter}")
    why = check(before, after)
    if why:
        raise StateMismatch(f"after {name} the authenticated state is not what was signed: {why}")
    return Outcome(counter, before, after, st_after.rate)
