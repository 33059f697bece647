"""Targets: where a device runs and how to reach it.

``qemu`` (test image in QEMU), ``qemu:stm32f4`` (production image in QEMU),
``qemu:PATH`` (any qemu-port image in QEMU, a provisioned ``qemu`` one included: PATH holds a
``/`` or ends in ``.elf``, so ``qemu:stm32f4`` keeps its meaning), ``posix`` (native build on this machine), ``renode`` (the stm32f4 test image in Renode, when
installed), ``renode:PATH`` (any stm32f4 image in Renode, a provisioned production one included), ``session``
(the running ``edgedp device`` session), or any pyserial URL (``/dev/ttyACM0``,
``socket://host:port``, ``rfc2217://…``)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

from ..errors import TransportError
from ..transport import Link, SerialLink


class Target(Protocol):
    """A started device: a byte link plus lifecycle control."""

    name: str
    keeps_state: bool   # False: an emulator started for one command; its budget, clock and config end with it
    private_link: bool  # True: edgedp started the device (or its session) on a loopback link of its own, so no
    #                     one can sit on it; False: a link anyone on the wire may sit on (a pyserial URL)

    @property
    def image(self) -> Path | None:
        """The image it runs (build/<image>/model.c beside it: its model), None if not known."""

    def link(self) -> Link: ...
    def reset(self) -> None: ...
    def close(self) -> None: ...


class UrlTarget:
    """A device already running somewhere, reached through a pyserial URL."""

    def __init__(self, url: str, baudrate: int = 115200):
        self.name = url
        self.image = None
        self.keeps_state = True
        self.private_link = False  # a board's serial line, a TCP port: a man in the middle may sit on it
        self._link = SerialLink(url, baudrate, in_flight=None)  # pipelining: as the device's INFO says

    def link(self) -> Link:
        return self._link

    def reset(self) -> None:
        raise TransportError(f"{self.name}: reset is not available over a plain serial link")

    def close(self) -> None:
        self._link.close()


DEFAULT_TARGET = "qemu"
NAMES = ("qemu", "qemu:stm32f4", "qemu:PATH", "posix", "posix:san", "renode", "renode:PATH", "session")
SERIAL_HELP = "a pyserial URL (socket://HOST:PORT, rfc2217://HOST:PORT) or a serial device (/dev/ttyACM0, COM3)"


def is_image_path(text: str) -> bool:
    """Whether the text after ``qemu:`` names an image file (it holds a '/' or ends in .elf)
    rather than an image name such as ``stm32f4``."""
    return "/" in text or text.endswith(".elf")


def check_spec(spec: str) -> str:
    """spec if it names a target or a serial link; TransportError at once (listing the valid ones) if not."""
    if spec.startswith("renode:"):
        if Path(spec[len("renode:"):]).is_file():
            return spec
        raise TransportError(f"target {spec}: no such image {spec[len('renode:'):]!r} (renode:PATH names an ELF)")
    if spec.startswith("qemu:") and is_image_path(spec[len("qemu:"):]):
        if Path(spec[len("qemu:"):]).is_file():
            return spec
        raise TransportError(f"target {spec}: no such image {spec[len('qemu:'):]!r} (qemu:PATH names an ELF)")
    if spec in NAMES or "://" in spec or re.fullmatch(r"COM\d+", spec, re.I):
        return spec
    if spec.startswith("/"):
        if Path(spec).exists():
            return spec
        raise TransportError(f"target {spec}: no such serial device")
    raise TransportError(f"unknown target {spec!r}: use {', '.join(NAMES)}, or {SERIAL_HELP}")


def start_target(spec: str | None = None) -> Target:
    """Start (or connect to) the target named by spec, else by EDGEDP_TARGET, else the running
    ``edgedp device`` session, else a fresh 'qemu'. ``session`` names the running session.

    A recorded session whose QEMU is gone is an error, not a silent fresh 'qemu'."""
    spec = spec or os.environ.get("EDGEDP_TARGET")
    if spec:
        check_spec(spec)
    if not spec or spec == "session":
        from ..session import SessionTarget, running_or_raise
        s = running_or_raise(required=spec == "session")
        if s is not None:
            return SessionTarget(s)
        spec = DEFAULT_TARGET
    if spec == "qemu" or spec.startswith("qemu:"):
        from .qemu import QemuTarget
        return QemuTarget.from_spec(spec)
    if spec == "posix" or spec.startswith("posix:"):
        from .posix import PosixTarget
        return PosixTarget.from_spec(spec)
    if spec == "renode" or spec.startswith("renode:"):
        from .renode import RenodeTarget
        return RenodeTarget.from_spec(spec)
    return UrlTarget(spec)
