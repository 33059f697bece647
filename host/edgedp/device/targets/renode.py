"""An stm32f4 image in Renode, console on a loopback TCP socket.

``renode`` runs the stm32f4 test image (build/stm32f4-test/edgedp.elf: test seed, test key,
test commands, INFO build=test), ``renode:PATH`` any image, e.g. the production image
build/stm32f4/edgedp.elf or a provisioned one. Renode runs headless with renode/edgedp.resc,
which loads the image on the STM32F4 Discovery platform of
renode/edgedp-stm32f4.repl and exposes the console (USART2) on a server
socket; the target connects to it, then starts the emulation and waits for the
boot banner, so the firmware is in its frame loop when the first request goes
out.

Renode is started as

    renode --disable-xwt --plain -P MONITOR_PORT \\
        -e '$elf=@build/stm32f4-test/edgedp.elf' -e '$port=PORT' -e 'include @renode/edgedp.resc'

(options from Renode's README, its "Running Renode in different modes" page
and src/Renode/Options.cs: --disable-xwt (alias --disable-gui) opens no
windows, -P serves the Monitor on a TCP port -- "telnet mode" -- instead of a
window, --plain drops colour codes, -e runs a Monitor command). The target
sends ``start``, ``machine Reset`` and ``quit`` to that port; unlike
--console, a Monitor on a socket needs no terminal on stdin. Renode's own
output goes to a log file quoted in error messages.

Renode is not installed by ``make setup``: it must be on PATH, or the
environment variable EDGEDP_RENODE must name its executable.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import TransportError
from ...paths import project_root
from ..transport import Link, LinkWrapper, SerialLink
from .qemu import ensure_image, free_port

RENODE = "renode"
RENODE_ENV = "EDGEDP_RENODE"
TEST_IMAGE = "stm32f4-test"
"""What ``renode`` runs: build/stm32f4-test/edgedp.elf."""
PERFORMANCE_IN_MIPS = 42
"""The cpu's PerformanceInMips in renode/edgedp-stm32f4.repl: virtual time per executed instruction."""
INSTALL_HINT = (
    "Renode is not installed (no `renode` on PATH and EDGEDP_RENODE is not set). Install it from "
    "https://github.com/renode/renode/releases/latest -- on Linux the portable package: "
    "mkdir renode_portable && wget https://builds.renode.io/renode-latest.linux-portable.tar.gz && "
    "tar xf renode-latest.linux-portable.tar.gz -C renode_portable --strip-components=1 && "
    "export PATH=\"$PWD/renode_portable:$PATH\" -- or use --target qemu. See renode/README.md.")

BANNER = re.compile(rb"(edgedp [^\x00\r\n]*)\r?\n\x00")

T = TypeVar("T")


def find_renode() -> str:
    """Path of the Renode executable, or TransportError with install instructions."""
    named = os.environ.get(RENODE_ENV)
    if named:
        path = shutil.which(named) or (named if os.access(named, os.X_OK) else None)
        if not path:
            raise TransportError(f"{RENODE_ENV}={named} is not an executable. {INSTALL_HINT}")
        return path
    path = shutil.which(RENODE)
    if not path:
        raise TransportError(INSTALL_HINT)
    return path


def monitor_path(path: Path) -> str:
    """A host path as a Renode Monitor path argument (@path, spaces escaped)."""
    return "@" + str(path).replace("\\", "/").replace(" ", "\\ ")


def read_banner(link: Link, timeout: float) -> tuple[str, bytes]:
    """Read the boot banner line ("edgedp <version> board=<b> build=<kind>").

    Returns (banner, bytes received after it). TransportError on timeout."""
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        m = BANNER.search(buf)
        if m:
            return m.group(1).decode("ascii", errors="replace"), buf[m.end():]
        left = deadline - time.monotonic()
        if left <= 0:
            raise TransportError(f"no boot banner within {timeout:.0f} s (received {buf[-80:]!r})")
        buf += link.read(min(left, 0.5))


class PrefixLink(LinkWrapper):
    """A link that first returns bytes already read from the underlying one (its buffering is the
    underlying link's: transport.LinkWrapper)."""

    def __init__(self, link: Link, prefix: bytes):
        super().__init__(link)
        self._prefix = prefix

    def read(self, timeout: float) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            return data
        return self.inner.read(timeout)


class RenodeTarget:
    """Renode running renode/edgedp.resc; ``url`` is the console socket.

    ``elf`` defaults to the test image build/stm32f4-test/edgedp.elf (built with make when
    missing or stale), ``resc`` to renode/edgedp.resc, ``port`` to a free loopback port.
    ``banner`` holds the boot banner read at start. Its link learns from INFO, as a board's does,
    whether the image buffers pipelined requests (INFO's rx_buffer: the stm32f4 port's receive
    ring)."""

    def __init__(self, elf: Path | None = None, resc: Path | None = None, port: int | None = None,
                 start_timeout: float = 120.0, boot_timeout: float = 30.0, name: str = "renode"):
        exe = find_renode()  # fail at once, before building anything
        root = project_root()
        self.name = name
        self.elf = Path(elf) if elf else ensure_image(TEST_IMAGE)
        if not self.elf.is_file():
            raise TransportError(f"Renode image {self.elf} not found")
        self.image = self.elf
        self.keeps_state = False
        self.private_link = True
        self.resc = Path(resc) if resc else root / "renode" / "edgedp.resc"
        if not self.resc.exists():
            raise TransportError(f"Renode script {self.resc} not found")
        self.port = port or free_port()
        self.url = f"socket://127.0.0.1:{self.port}"
        self.monitor_port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="edgedp-renode-")
        self.log_path = Path(self._tmp.name) / "renode.log"
        self._log = open(self.log_path, "wb")
        self._link: Link | None = None
        self._monitor: socket.socket | None = None
        argv = [exe, "--disable-xwt", "--plain", "-P", str(self.monitor_port),
                "-e", f"$elf={monitor_path(self.elf.resolve())}",
                "-e", f"$port={self.port}",
                "-e", f"include {monitor_path(self.resc.resolve())}"]
        try:
            self._proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT)
        except OSError as exc:
            self._log.close()
            self._tmp.cleanup()
            raise TransportError(f"cannot start {exe}: {exc}") from None
        try:
            deadline = time.monotonic() + start_timeout
            self._monitor = self._retry(
                deadline, f"no Renode Monitor on port {self.monitor_port}",
                lambda: socket.create_connection(("127.0.0.1", self.monitor_port), timeout=1.0))
            serial_link = self._retry(deadline, f"no console socket on port {self.port}",
                                      lambda: SerialLink(self.url, connect_timeout=0.2, in_flight=None))
            self._link = serial_link
            self.monitor("start")
            self.banner, rest = read_banner(serial_link, boot_timeout)
            self._link = PrefixLink(serial_link, rest)
        except TransportError as exc:
            if self._link is not None:
                self._link.close()
            log = self._stop()
            raise TransportError(f"Renode: {exc}; last output:\n{log[-1500:]}") from None

    @classmethod
    def from_spec(cls, spec: str) -> "RenodeTarget":
        """``renode`` (the test image) or ``renode:PATH`` (the image at PATH)."""
        if spec == "renode":
            return cls()
        if not spec.startswith("renode:") or not spec[len("renode:"):]:
            raise TransportError(f"unknown target {spec!r}: use renode or renode:PATH")
        return cls(elf=Path(spec[len("renode:"):]), name=spec)

    def _retry(self, deadline: float, what: str, connect: Callable[[], T]) -> T:
        """connect() until it succeeds; TransportError when Renode exits or the deadline passes."""
        while True:
            if self._proc.poll() is not None:
                raise TransportError(f"renode exited with status {self._proc.returncode}")
            try:
                return connect()
            except (OSError, TransportError):
                if time.monotonic() > deadline:
                    raise TransportError(what) from None
                time.sleep(0.2)

    def monitor(self, command: str) -> None:
        """Send one command to Renode's Monitor; its answer goes to the log."""
        if self._monitor is None or self._proc.poll() is not None:
            raise TransportError(f"renode exited with status {self._proc.poll()}")
        try:
            self._monitor.sendall(command.encode() + b"\n")
        except OSError as exc:
            raise TransportError(f"Renode Monitor connection failed: {exc}") from None
        self._drain_monitor(0.2)

    def _drain_monitor(self, timeout: float) -> None:
        assert self._monitor is not None
        self._monitor.settimeout(timeout)
        try:
            while True:
                data = self._monitor.recv(65536)
                if not data:
                    return
                self._log.write(data)
        except OSError:  # includes socket.timeout: nothing more for now
            return

    def link(self) -> Link:
        assert self._link is not None
        return self._link

    def reset(self) -> None:
        """Renode's ``machine Reset``: reloads the ELF and restarts the firmware.

        The backup SRAM (the budget store) keeps its contents, but unlike a reset of
        the chip it also resets the backup domain: RCC_BDCR is cleared and the RTC
        restarts at 2020-01-01, so the device has no trusted clock (queries refused
        with ERR_TIME) until the next SET_TIME."""
        self.monitor("machine Reset")

    def _stop(self) -> str:
        """Quit Renode (Monitor `quit`, then terminate/kill) and return its output."""
        if self._proc.poll() is None:
            try:
                self.monitor("quit")
                self._proc.wait(timeout=10)
            except (TransportError, subprocess.TimeoutExpired):
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None
        if not self._log.closed:
            self._log.close()
        log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        self._tmp.cleanup()
        return log

    def close(self) -> None:
        try:
            if self._link is not None:
                self._link.close()
                self._link = None
        finally:
            self._stop()
