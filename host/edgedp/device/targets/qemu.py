"""The firmware in QEMU's netduinoplus2 (STM32F405), UART on a loopback TCP socket.

``qemu`` runs build/qemu/edgedp.elf (test image, console USART1);
``qemu:stm32f4`` runs build/stm32f4/edgedp.elf (production image, console USART2,
where QEMU lacks RCC, RNG and RTC); ``qemu:PATH`` (PATH holds a '/' or ends in .elf) runs that
image of the qemu port (console USART1), e.g. a provisioned ``qemu`` one. Both run with ``-icount shift=3,sleep=on``
so instruction counts are deterministic (sleep=on: while the test image sleeps in WFI waiting
for a byte, its clock follows real time); QMP on a Unix socket resets the MCU."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import TransportError
from ..transport import Link, SerialLink
from .images import ensure_built

IMAGES = {"qemu": ("qemu", 1), "qemu:stm32f4": ("stm32f4", 2)}
QEMU = "qemu-system-arm"
HOST_ENTROPY = 0x2001FFE0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_image(board: str) -> Path:
    """Path of build/<board>/edgedp.elf, built with make if it is missing or stale (with the MODEL
    it was built with: targets/images.py)."""
    return ensure_built(board)


def qemu_argv(elf: Path, usart: int, port: int, qmp_path: str, icount: bool = True,
              wait: bool = True) -> list[str]:
    """The qemu-system-arm command line: the image on netduinoplus2, console USART ``usart`` on a
    loopback TCP server (``wait``: the VM starts only once a client connects), QMP on a Unix socket.

    ``icount``: one instruction is 8 ns of virtual time (deterministic tick counts), and time
    spent asleep (the qemu port's WFI between bytes) is real time; without it the virtual clock
    follows the host's."""
    if shutil.which(QEMU) is None:
        raise TransportError(f"{QEMU} not found: install it with `apt-get install qemu-system-arm` "
                             "(or run `make setup`)")
    serial = ["-serial", "null"] * (usart - 1)
    serial += ["-serial", f"tcp:127.0.0.1:{port},server=on,wait={'on' if wait else 'off'},nodelay=on"]
    argv = [QEMU, "-M", "netduinoplus2", "-nographic", "-monitor", "none",
            "-kernel", str(elf), *serial,
            "-qmp", f"unix:{qmp_path},server=on,wait=off"]
    # Fresh key material for the test image's admin nonce (ports/qemu: 32 bytes at
    # 0x2001FFE0, rewritten by QEMU at every reset); the production image ignores it.
    for i in range(4):
        word = int.from_bytes(secrets.token_bytes(8), "little")
        argv += ["-device", f"loader,addr={HOST_ENTROPY + 8 * i:#x},data={word:#x},data-len=8"]
    if os.environ.get("EDGEDP_QEMU_LOG"):
        # Log accesses to registers QEMU does not model (RCC, RNG, RTC, ...): large.
        argv += ["-d", "unimp,guest_errors", "-D", os.environ["EDGEDP_QEMU_LOG"]]
    if icount:
        argv[1:1] = ["-icount", "shift=3,sleep=on"]
    return argv


def qmp(path: str, command: str, arguments: dict | None = None, timeout: float = 5.0) -> dict:
    """Run one QMP command on the QMP socket at ``path`` and return its response."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(path)
            f = s.makefile("rw")
            json.loads(f.readline())  # greeting
            for cmd, args in (("qmp_capabilities", None), (command, arguments)):
                f.write(json.dumps({"execute": cmd, **({"arguments": args} if args else {})}) + "\n")
                f.flush()
                while True:
                    line = f.readline()
                    if not line:
                        raise TransportError(f"QMP {command}: QEMU closed the connection")
                    msg = json.loads(line)
                    if "return" in msg or "error" in msg:
                        break
    except OSError as exc:
        raise TransportError(f"QMP {command} on {path}: {exc}") from None
    if "error" in msg:
        raise TransportError(f"QMP {command}: {msg['error']}")
    return msg


QEMU_IN_FLIGHT = 8
"""Requests a client may pipeline to the qemu port's image: QEMU's USART model takes a byte from
the console socket only once the firmware has read the previous one (can_receive is !RXNE), and
that port reads its USART only between frames, so nothing is dropped while the device computes;
the socket's buffer holds the rest. Not for the stm32f4 image: its RXNE interrupt reads every
byte at once into its ring, which then is the only buffer, as on a board; its link learns
in_flight and in_flight_bytes from INFO's rx_buffer (SerialLink.learn_rx_buffer, qemu_in_flight)."""


def qemu_in_flight(spec: str) -> int | None:
    """The link's in_flight for a QEMU target or session spec: QEMU_IN_FLIGHT for the qemu port's
    image, None (learn it from INFO, as for a board) for the stm32f4 image."""
    return QEMU_IN_FLIGHT if spec == "qemu" else None


class QemuTarget:
    def __init__(self, elf: Path, usart: int = 1, name: str = "qemu", icount: bool = True,
                 extra_args: Sequence[str] = (), in_flight: int | None = QEMU_IN_FLIGHT):
        """extra_args: appended to the qemu-system-arm command line (e.g. more -device loader);
        in_flight: the link's (qemu_in_flight)."""
        self.name = name
        self.image = elf
        self.keeps_state = False
        self.private_link = True
        self._tmp = tempfile.TemporaryDirectory(prefix="edgedp-qemu-")
        self.qmp_path = str(Path(self._tmp.name) / "qmp.sock")
        self.port = free_port()
        argv = qemu_argv(elf, usart, self.port, self.qmp_path, icount) + list(extra_args)
        # Its own process group: a Ctrl-C at the terminal reaches edgedp, which lets the answer in
        # flight arrive and then stops QEMU, instead of killing the device under it.
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, process_group=0)
        try:
            self._link = SerialLink(f"socket://127.0.0.1:{self.port}", connect_timeout=15.0,
                                    in_flight=in_flight)
        except TransportError:
            err = self._stop()
            raise TransportError(f"QEMU did not open its serial socket: {err.strip()[-500:]}") from None

    @classmethod
    def from_spec(cls, spec: str) -> "QemuTarget":
        path = spec[len("qemu:"):]
        if spec.startswith("qemu:") and ("/" in path or path.endswith(".elf")):
            # qemu:PATH: an image of the qemu port (console USART1), run as built
            return cls(Path(path).resolve(), 1, spec, in_flight=QEMU_IN_FLIGHT)
        if spec not in IMAGES:
            raise TransportError(f"unknown target {spec!r}: use qemu or qemu:stm32f4")
        board, usart = IMAGES[spec]
        return cls(ensure_image(board), usart, spec, in_flight=qemu_in_flight(spec))

    def link(self) -> Link:
        return self._link

    def reset(self) -> None:
        """Warm reset of the emulated MCU (QMP system_reset): RAM .noinit survives."""
        qmp(self.qmp_path, "system_reset")

    def _stop(self) -> str:
        err = ""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                _, e = self._proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                _, e = self._proc.communicate()
        else:
            _, e = self._proc.communicate()
        err = (e or b"").decode(errors="replace")
        return err

    def close(self) -> None:
        try:
            self._link.close()
        finally:
            self._stop()
            self._tmp.cleanup()
