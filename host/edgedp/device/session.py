"""A long-lived emulated device: QEMU in the background, found through a state file.

``start`` launches QEMU with the image of ``qemu`` (test image) or ``qemu:stm32f4``
(production image), detached from the calling process, with the console on a loopback TCP
port and QMP on a Unix socket, and records both in ``<state dir>/session.json``. While the
session runs, every command that names no target (no ``--target``, no ``EDGEDP_TARGET``)
talks to it (``SessionTarget``), so the configuration, the clock and the spend last as long
as the session instead of one command.

``stop`` pauses the VM, saves the board's persistent memory -- the image's ``.noinit``
sections: on the qemu port, the budget store and the clock record -- with QMP ``pmemsave``,
and quits QEMU. The next ``start`` of the same target puts the saved bytes back at the same
addresses with QEMU's generic loader (``-device loader,file=...,addr=...,force-raw=on``),
which writes them before the CPU leaves reset; the image's startup code copies ``.data`` and
zeroes ``.bss`` only, so ``.noinit`` reaches the firmware as it was saved (as RAM on a
battery would). The production image has no ``.noinit`` (its store is the backup SRAM, which
QEMU does not model): nothing is saved for it. QEMU writes loader blobs again at every
system reset, so a session is never reset in place: ``SessionTarget.reset`` stops (saving)
and starts again.

The saved memory is the state of the last ``stop``: a session whose QEMU ended any other way
(killed, crashed, the host rebooted) spent budget after it that the saved memory does not hold.
Such an unclean end is recorded beside the saved memory it concerns (``memory/<target>.unclean.json``),
and ``start`` of that target refuses to run from the older memory -- which would give that spend
back -- unless asked with ``accept_rollback`` (or ``fresh``, which discards the memory); its error
states the spend the saved memory holds and how much may have been spent since
(:func:`rollback_risk`). The mark is per target: a session of another target neither sees nor
clears it; only a start of its own target that accepts the rollback (or discards the memory)
removes it, and the next clean stop of that session saves memory that holds everything again.

The session's QEMU runs without ``-icount``: the device clock follows the host's clock
(under ``-icount`` it would follow the instructions executed while the firmware works), and
tick counts are not deterministic -- measure with a fresh ``--target qemu``. The test image
sleeps (WFI) until a byte arrives, so an idle session takes almost no host CPU; the stm32f4
image polls the ring its receive interrupt fills, so a ``qemu:stm32f4`` session keeps one host
core busy.

State directory: ``$EDGEDP_STATE_DIR``, else ``$XDG_STATE_HOME/edgedp``, else
``~/.local/state/edgedp``. It holds ``session.json`` while a session runs, ``qemu.log``,
``memory/<target>.json`` with one ``.bin`` file per saved section, and
``memory/<target>.unclean.json`` after an unclean end of a session of that target until a
``start`` of it accepts the rollback. (A ``unclean.json`` in the state directory itself, where
earlier versions kept one mark for every target, is moved beside the memory of the target it
names when first read.)
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import schema as S
from ..mech.lattice import to_epsilon
from . import frames
from .elf import sections
from .errors import EdgeDPError, TransportError
from .store import newest_record
from .targets.qemu import IMAGES, ensure_image, free_port, qemu_argv, qemu_in_flight, qmp
from .transport import Link, LinkWrapper, SerialLink

STATE_FILE = "session.json"
LEGACY_UNCLEAN_FILE = "unclean.json"  # one mark for every target, as earlier versions kept it
LOG_FILE = "qemu.log"
PERSISTENT_PREFIX = ".noinit"
QMP_DIR_PREFIX = "edgedp-session-"


class SessionError(EdgeDPError):
    """A device session that cannot be started, found or stopped as asked."""

    code = "ERR_SESSION"


def state_dir() -> Path:
    """Where the session's state lives (created on first use)."""
    env = os.environ.get("EDGEDP_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "edgedp"


@dataclass(frozen=True)
class Region:
    """A section of the image that keeps its contents across a power cycle."""

    name: str
    addr: int
    size: int


def persistent_regions(elf: Path) -> list[Region]:
    """The image's allocated ``.noinit*`` sections, by address."""
    try:
        secs = sections(elf)
    except ValueError as exc:
        raise SessionError(str(exc)) from None
    return sorted((Region(x.name, x.addr, x.size) for n, x in secs.items()
                   if n.startswith(PERSISTENT_PREFIX) and x.alloc and x.size), key=lambda r: r.addr)


@dataclass
class Session:
    """What ``session.json`` records about a running session."""

    pid: int
    target: str
    elf: str
    port: int
    qmp: str
    started: float
    regions: list[Region] = field(default_factory=list)
    restored: bool = False

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def as_dict(self) -> dict:
        return {**asdict(self), "url": self.url}

    @classmethod
    def from_dict(cls, d: dict) -> "Session":
        return cls(int(d["pid"]), str(d["target"]), str(d["elf"]), int(d["port"]), str(d["qmp"]),
                   float(d["started"]), [Region(**r) for r in d.get("regions", [])], bool(d.get("restored")))


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")


def load() -> Session | None:
    """The recorded session, running or not (None without a state file)."""
    path = state_dir() / STATE_FILE
    try:
        return Session.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise SessionError(f"unreadable session state {path} ({exc}): remove the file") from None


def running() -> Session | None:
    """The recorded session if its QEMU still runs."""
    s = load()
    return s if s is not None and _alive(s.pid) else None


def running_or_raise(required: bool) -> Session | None:
    """The running session; None if there is none and ``required`` is false. TransportError
    if the recorded session's QEMU is gone (its state since the last stop is lost), or if
    ``required`` and no session is recorded."""
    s = load()
    if s is None:
        if required:
            raise TransportError("no device session is running (start one with `edgedp device start`)")
        return None
    if not _alive(s.pid):
        raise TransportError(f"the device session's QEMU (pid {s.pid}) is no longer running: its spend "
                             "since the last `edgedp device stop` is not saved; `edgedp device start` "
                             "says how much and asks for --accept-rollback")
    return s


def forget_stale() -> Session | None:
    """Remove the state of a session whose QEMU is gone, recording the unclean end; return that
    session (None if there was no state file or the session runs)."""
    s = load()
    if s is None or _alive(s.pid):
        return None
    _mark_unclean(s)
    _cleanup(s)
    return s


def _unclean_path(target: str) -> Path:
    """The unclean mark of ``target``: beside the memory it protects (``_memory_paths``)."""
    manifest, _ = _memory_paths(target)
    return manifest.with_name(manifest.stem + ".unclean.json")


def _mark_unclean(s: Session) -> None:
    if s.regions:  # an image without persistent memory loses nothing it would have kept
        path = _unclean_path(s.target)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(path, {"pid": s.pid, "target": s.target, "started": s.started, "found": time.time()})


def _adopt_legacy_mark() -> None:
    """Move the one mark earlier versions kept (``unclean.json``) to the target it names; one
    that cannot be read is copied to every target's (it could be any one's)."""
    legacy = state_dir() / LEGACY_UNCLEAN_FILE
    try:
        text = legacy.read_text()
    except FileNotFoundError:
        return
    try:
        rec = json.loads(text)
        targets = [str(rec["target"])] if isinstance(rec, dict) and rec.get("target") in IMAGES else list(IMAGES)
    except ValueError:
        targets = list(IMAGES)
    for t in targets:
        path = _unclean_path(t)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    legacy.unlink()


def unclean_end(target: str) -> dict | None:
    """The recorded unclean end of a session of ``target`` (None if its last session stopped
    cleanly, or its rollback was accepted since); a mark that cannot be read counts as one."""
    _adopt_legacy_mark()
    try:
        rec = json.loads(_unclean_path(target).read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        rec = None
    if not isinstance(rec, dict):
        return {"target": target, "pid": 0, "started": 0.0, "found": 0.0}
    return {**rec, "target": target}


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def rollback_risk(target: str) -> str:
    """What starting ``target`` from its saved memory after an unclean end may give back."""
    rec = unclean_end(target) or {}
    saved = saved_memory(target)
    ended = f"the {target} session's QEMU (pid {rec.get('pid')}, started {_utc(rec.get('started', 0))}) " \
            "ended without `edgedp device stop`"
    if saved is None:
        return (f"{ended} and no memory was ever saved: the device would start blank, giving back "
                "every epsilon that session spent")
    mem = b"".join(Path(r["file"]).read_bytes() for r in saved["regions"] if Path(r["file"]).is_file())
    rec_budget = newest_record(mem)
    since = _utc(saved["saved"])
    if rec_budget is None:
        return f"{ended}; the memory saved at {since} holds no budget record: every epsilon spent is at risk"
    b = rec_budget
    left = "no lifetime cap" if not b.lifetime_cap else \
        f"at most the {to_epsilon(max(b.lifetime_cap - b.lifetime_spent, 0)):g} epsilon left under the lifetime cap"
    return (f"{ended}; the memory saved at {since} holds a spend of {to_epsilon(b.lifetime_spent):g} epsilon "
            f"({to_epsilon(b.daily_spent):g} on day {b.day}). Every answer after {since} would be given back: up to "
            f"the daily cap of {to_epsilon(b.daily_cap):g} epsilon for each day the session ran since, {left}")


def _cleanup(s: Session) -> None:
    """Remove the state file and the QMP socket with the directory ``start`` made for it."""
    (state_dir() / STATE_FILE).unlink(missing_ok=True)
    sock = Path(s.qmp)
    if sock.parent.name.startswith(QMP_DIR_PREFIX):
        sock.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            sock.parent.rmdir()


def _memory_paths(target: str) -> tuple[Path, Path]:
    """(manifest, directory of .bin files) of the saved memory of ``target``."""
    slug = target.replace(":", "-")
    d = state_dir() / "memory"
    return d / f"{slug}.json", d / slug


def saved_memory(target: str) -> dict | None:
    """The manifest of the memory saved by the last ``stop`` of ``target``: regions, files, time."""
    manifest, _ = _memory_paths(target)
    try:
        return json.loads(manifest.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise SessionError(f"unreadable saved memory {manifest} ({exc}): start with --fresh") from None


def discard_memory(target: str) -> bool:
    """Delete the saved memory of ``target``; True if there was any."""
    manifest, files = _memory_paths(target)
    existed = manifest.exists()
    manifest.unlink(missing_ok=True)
    shutil.rmtree(files, ignore_errors=True)
    return existed


def _loader_args(target: str, regions: list[Region]) -> list[str]:
    """``-device loader`` arguments that put the saved memory of ``target`` back, after checking
    that it was saved from sections at the same addresses with the same sizes."""
    saved = saved_memory(target)
    if saved is None:
        return []
    now = {(r.name, r.addr, r.size) for r in regions}
    then = {(r["name"], r["addr"], r["size"]) for r in saved["regions"]}
    if now != then:
        raise SessionError(
            f"the memory saved for {target} ({sorted(then)}) does not fit the image's persistent "
            f"sections ({sorted(now)}): the image changed; start with --fresh to discard it")
    args = []
    for r in saved["regions"]:
        f = Path(r["file"])
        if not f.is_file() or f.stat().st_size != r["size"]:
            raise SessionError(f"saved memory file {f} is missing or not {r['size']} bytes: "
                               "start with --fresh to discard it")
        args += ["-device", f"loader,file={f},addr={r['addr']:#x},force-raw=on"]
    return args


def _log_tail(n: int = 600) -> str:
    try:
        return (state_dir() / LOG_FILE).read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""


def _answers_ping(url: str, proc: subprocess.Popen, timeout: float) -> None:
    """Connect to the console and PING until the firmware answers (SessionError if QEMU exits).
    The PING is framed here (frames.py) rather than through the client, which sits above sessions."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SessionError(f"QEMU exited with status {proc.returncode}: {_log_tail()}")
        try:
            link = SerialLink(url, connect_timeout=1.0)
            try:
                if _pings(link, 2.0):
                    return
            finally:
                link.close()
        except TransportError:
            pass
        if time.monotonic() > deadline:
            raise SessionError(f"the device in QEMU did not answer on {url} within {timeout:.0f} s: "
                               f"{_log_tail()}") from None


def _pings(link: Link, timeout: float) -> bool:
    """True once the firmware on ``link`` answers one PING within ``timeout`` seconds."""
    reader = frames.FrameReader()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        link.write(b"\x00" + frames.encode(S.FrameType.PING, 1, b"up"))
        poll_end = min(end, time.monotonic() + 0.5)
        while time.monotonic() < poll_end:
            for f in reader.feed(link.read(0.05)):
                if f.type == S.FrameType.PING | S.FrameType.RESPONSE and f.seq == 1:
                    return True
    return False


def start(target: str = "qemu", fresh: bool = False, timeout: float = 30.0, port: int | None = None,
          accept_rollback: bool = False) -> Session:
    """Start a session for ``target`` (``qemu`` or ``qemu:stm32f4``) and return it.

    SessionError if one runs already; the state of a session whose QEMU is gone is removed
    first (``forget_stale``). After an unclean end of the last session of ``target``, SessionError
    stating :func:`rollback_risk` unless ``accept_rollback`` (start from the older saved memory)
    or ``fresh`` (discard the memory saved for ``target``), either of which, once QEMU answers,
    clears ``target``'s mark (and no other's); ``port`` (default: a free one) is the console's
    TCP port."""
    if target not in IMAGES:
        raise SessionError(f"a device session runs {' or '.join(IMAGES)}, not {target!r}")
    current = running()
    if current is not None:
        raise SessionError(f"a device session is already running ({current.target}, pid {current.pid}, "
                           f"{current.url}): `edgedp device stop` first")
    forget_stale()
    if unclean_end(target) is not None and not (fresh or accept_rollback):
        raise SessionError(f"refusing to start: {rollback_risk(target)}. Start with --accept-rollback "
                           "to accept that, or --fresh to discard the saved memory")
    board, usart = IMAGES[target]
    elf = ensure_image(board)
    regions = persistent_regions(elf)
    if fresh:
        discard_memory(target)
    loader = _loader_args(target, regions)
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    qmp_dir = tempfile.mkdtemp(prefix=QMP_DIR_PREFIX)  # short path: Unix socket names are limited
    qmp_path = str(Path(qmp_dir) / "qmp.sock")
    port = port or free_port()
    argv = qemu_argv(elf, usart, port, qmp_path, icount=False, wait=False) + loader
    with open(d / LOG_FILE, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    s = Session(proc.pid, target, str(elf), port, qmp_path, time.time(), regions, bool(loader))
    try:
        _answers_ping(s.url, proc, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        shutil.rmtree(qmp_dir, ignore_errors=True)
        raise
    _write_json(d / STATE_FILE, s.as_dict())
    if fresh or accept_rollback:  # (without either, start refused above if there was a mark)
        _unclean_path(target).unlink(missing_ok=True)
    return s


@dataclass(frozen=True)
class Stopped:
    """What ``stop`` did: the session, the files its memory was saved to (none if QEMU was
    already gone: ``saved`` False, the previously saved memory is kept)."""

    session: Session
    saved: bool
    files: list[str]


def stop(timeout: float = 10.0) -> Stopped:
    """Save the persistent memory of the running session and quit its QEMU."""
    s = load()
    if s is None:
        raise SessionError("no device session is running (start one with `edgedp device start`)")
    if not _alive(s.pid):
        _mark_unclean(s)
        _cleanup(s)
        return Stopped(s, False, [])
    qmp(s.qmp, "stop")
    manifest, files_dir = _memory_paths(s.target)
    files_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for r in s.regions:
        f = files_dir / f"{r.name.lstrip('.')}.bin"
        tmp = f.with_name(f.name + ".tmp")
        qmp(s.qmp, "pmemsave", {"val": r.addr, "size": r.size, "filename": str(tmp)})
        if not tmp.is_file() or tmp.stat().st_size != r.size:
            raise SessionError(f"QMP pmemsave did not write {r.size} bytes to {tmp}")
        tmp.replace(f)
        saved.append({**asdict(r), "file": str(f)})
    if saved:
        _write_json(manifest, {"target": s.target, "elf": s.elf, "saved": time.time(), "regions": saved})
    try:
        qmp(s.qmp, "quit")
    except TransportError:
        pass  # QEMU may close the socket before answering
    deadline = time.monotonic() + timeout
    while _alive(s.pid):
        if time.monotonic() > deadline:
            os.kill(s.pid, 9)
            break
        time.sleep(0.05)
    _cleanup(s)
    return Stopped(s, True, [x["file"] for x in saved])


class SessionTarget:
    """The running session as a target: the console socket; ``close`` disconnects and leaves
    QEMU running.

    ``reset`` is a power cycle that keeps the persistent memory: ``stop`` (saving it) and
    ``start`` on the same console port. Not a QMP system_reset: QEMU writes the blobs of
    ``-device loader`` again at every reset, so the memory restored at start would overwrite
    the store -- a rollback of the spend. (Nothing else resets a session: the qemu image
    never requests a reset and QEMU models no watchdog there.)"""

    def __init__(self, session: Session):
        self.session = session
        self.name = f"session:{session.target}"
        self.image = Path(session.elf)
        self.image_started = session.started  # an image rebuilt after this is not the one running
        self.keeps_state = True
        self.private_link = True  # the session this host started, on its loopback console port
        self._link = _Reconnectable(SerialLink(session.url, connect_timeout=5.0,
                                               in_flight=qemu_in_flight(session.target)))

    def link(self) -> Link:
        return self._link

    def reset(self) -> None:
        self._link.inner.close()
        stop()
        self.session = start(self.session.target, port=self.session.port)
        self._link.inner = SerialLink(self.session.url, connect_timeout=5.0,
                                      in_flight=qemu_in_flight(self.session.target))

    def close(self) -> None:
        self._link.close()


class _Reconnectable(LinkWrapper):
    """The link a Device holds across ``SessionTarget.reset``, which replaces the connection
    (``inner``)."""
