"""Authenticated administration that never acts on unauthenticated state.

``run`` reads the device's state with STATE (tagged over a random challenge; or takes the
STATE the caller has just read, whose nonce the device still holds), builds what it signs only
from that state and the caller's options, sends the command signed for the state's
fresh nonce, checks the tagged answer, re-reads the authenticated state and checks that it is
exactly what was signed. Every failure after the signed frame went out re-reads the state first
(an interrupt too, Ctrl-C or SIGTERM, which then says whether the command took effect): that
draws a new nonce, so a frame a man in the middle withheld can never land later.

A peer on the link can always kill a signed frame by drawing a new nonce first (one CHALLENGE,
STATE or AUDIT_LOG of its own between the operator's STATE and the frame): the device refuses
the frame and tags its refusal over a nonce this host never saw. When the answer is not
authentic and the re-read state shows the command did not take effect, ``run`` signs it once
more for the re-read state's nonce (nothing was sent since) and says why (``Outcome.retried``);
a second failure is StateUnknown with both reasons. docs/privacy.md's threat table lists it.
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
    retried: str | None = None  # why the command was signed a second time (None: it was not)


Build = Callable[[Budget], bytes]
"""The payload to sign, from the authenticated state."""
Check = Callable[[Budget, Budget], str | None]
"""(before, after) -> None if the state after is what was signed, else why not."""


INTERRUPTED_REREAD_S = 2.0
"""How long an interrupted command waits for the state it re-reads: the operator asked to stop."""


def _reread(dev: Device, key: bytes, timeout: float | None = None) -> State | EdgeDPError:
    """The authenticated state (which draws a new nonce), or why it could not be read."""
    try:
        return dev.state(key, timeout)
    except EdgeDPError as exc:
        return exc


def _took(name: str, counter: int, after: State | EdgeDPError) -> str:
    """Whether the command signed with ``counter`` took effect, from the state re-read after it
    (or the re-read's failure: then the withheld frame may still land)."""
    if isinstance(after, EdgeDPError):
        return (f"{name} was signed and may have been sent; the authenticated state could not be re-read ({after}), "
                "so the signed frame may still land if it was withheld: read the state (edgedp budget --key-file) "
                "before any retry")
    took = after.budget.auth_counter >= counter
    return (f"re-read the authenticated state: {name} {'took effect' if took else 'did not take effect'} "
            f"(counter {after.budget.auth_counter}), and the signed frame can no longer land")


class _NotTaken(Exception):
    """A signed frame answered by nothing authentic, and the re-read state (``state``, whose
    nonce is the device's current one) shows it did not take effect: it may be signed again."""

    def __init__(self, why: str, state: State):
        super().__init__(why)
        self.state = state


def _send(dev: Device, key: bytes, type_: int, build: Build, st: State) -> tuple[int, int]:
    """Sign ``build(st.budget)`` for ``st``'s nonce and send it: (counter signed, counter accepted).
    _NotTaken, StateUnknown, DeviceError and KeyboardInterrupt as ``run`` explains."""
    counter = st.budget.auth_counter + 1
    payload = build(st.budget)
    name = T(type_).name
    try:
        return counter, dev.admin(type_, payload, key, counter=counter, nonce=st.nonce)
    except StateUnknown as exc:
        after = _reread(dev, key)
        if isinstance(after, State) and after.budget.auth_counter < counter:
            raise _NotTaken(f"{exc}; {_took(name, counter, after)}", after) from None
        raise StateUnknown(f"{exc}; {_took(name, counter, after)}") from None
    except DeviceError:  # tagged over this frame (untagged refusals are StateUnknown); an ERR_AUTH leaves the
        _reread(dev, key)  # nonce alive, and a copy of the frame could be withheld: draw a new nonce
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (cli/signals.Terminated) with the frame maybe out
        # (a second signal during the re-read interrupts it: the operator insists)
        raise type(exc)(_took(name, counter, _reread(dev, key, INTERRUPTED_REREAD_S))) from None


def run(dev: Device, key: bytes, type_: int, build: Build, check: Check, state: State | None = None) -> Outcome:
    """Sign ``build(state)`` for the device's authenticated state, send it, and verify the result.

    ``state``: a STATE the caller read with ``key`` just before, with nothing sent since (its
    nonce is the device's current one, docs/protocol.md); default: read one here. Raises
    DeviceError for a refusal the device tagged over the frame, StateUnknown when anything else
    came back (an untagged ERROR, garbage, nothing, a wrong tag: the state is re-read first, and
    the message says whether the command took effect, or why the re-read failed too) -- unless
    the re-read shows it did not take effect: then ``build`` is called again on the re-read state,
    signed for its nonce and sent once more (``Outcome.retried`` says why), and only a second
    such failure is StateUnknown, with both reasons. StateMismatch when the state after is not
    what was signed; NotAuthentic (nothing sent) when the first state read is not authentic."""
    st = dev.state(key) if state is None else state
    name = T(type_).name
    retried: str | None = None
    try:
        counter, accepted = _send(dev, key, type_, build, st)
    except _NotTaken as first:
        retried, st = str(first), first.state
        try:
            counter, accepted = _send(dev, key, type_, build, st)
        except (_NotTaken, StateUnknown) as second:
            raise StateUnknown(f"{first}; signed again for the fresh nonce: {second}") from None
    before = st.budget
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
    return Outcome(counter, before, after, st_after.rate, retried)
