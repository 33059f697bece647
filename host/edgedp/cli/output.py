"""``query --out``: every answer is on disk as soon as it arrives, and Ctrl-C waits for the answer in flight.

An answer is paid for (charged to the device's budget) before the host sees it, so the host must
not lose it: the output file is opened before the first query, each answer is written and flushed
when it arrives (a JSONL line; a row appended to the .npy, whose header is rewritten to count it,
so the file is a complete array after every answer), and a write that fails stops the stream
before the next row is sent, the file cut back to what was written whole (never part of a line
or of a row)."""
from __future__ import annotations

import contextlib
import os
import signal
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any, Protocol

import numpy as np

from ..device.protocol import QueryResult
from ..mech.modes import MODE_BUCKET, MODE_TOPK, Mode
from ..device.errors import EdgeDPError, TransportError
from .common import fail
from .signals import exit_code, interrupt


def released_array(m: Mode, answers: list[tuple[int, QueryResult]]) -> np.ndarray:
    """Everything the answered rows released, as one array (see query --out): values for full,
    round and simplex; labels for label; a record array of row, indices and values for topk, of
    row, label and level for bucket."""
    if m.sends_values:
        k = len(answers[0][1].lattice) if answers else 0  # values are the lattice in host units
        return np.array([r.values for _, r in answers], dtype=np.float64).reshape(len(answers), k)
    if m.kind == MODE_TOPK:
        K = len(answers[0][1].lattice) if answers else m.arg
        rec = np.zeros(len(answers), dtype=[("row", "i8"), ("indices", "i8", (K,)), ("values", "f8", (K,))])
        for j, (i, r) in enumerate(answers):
            rec[j] = (i, r.indices, r.values)
        return rec
    if m.kind == MODE_BUCKET:
        rec = np.zeros(len(answers), dtype=[("row", "i8"), ("label", "i8"), ("level", "i8")])
        for j, (i, r) in enumerate(answers):
            rec[j] = (i, r.label, r.level)
        return rec
    return np.array([r.label for _, r in answers], dtype=np.int64)


class Sink(Protocol):
    path: Path
    saved: int  # answers (QueryResults) on disk

    def write(self, row: int, record: dict, answer: QueryResult | None) -> None: ...
    def close(self) -> None: ...


class OutputError(OSError):
    """The output file cannot be written: the stream stops before the next charge."""


class _OutputFile:
    """The output file: checked (opened for appending, so nothing is truncated) before the first
    query, replaced only when the first row's outcome arrives. A command that ends before any
    row leaves an existing file as it was, and creates none."""

    def __init__(self, path: Path, binary: bool):
        self.path, self._file_mode, self.saved = path, "w+b" if binary else "w", 0
        existed = path.exists()
        try:
            open(path, "ab").close()
        except OSError as exc:
            raise ValueError(f"cannot write {path}: {exc.strerror or exc}") from None
        self._created = not existed
        self._f: IO | None = None

    def file(self) -> IO:
        if self._f is None:
            self._f = open(self.path, self._file_mode)
        return self._f

    def failed(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write {self.path} ({exc.strerror or exc}): stopped before the next query")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._f is not None:
                self._f.close()
            elif self._created:
                self.path.unlink()


class JsonlSink(_OutputFile):
    """One JSON line per row (answers and refusals), written whole as it arrives: a write that
    fails (a full disk) is cut back to the last complete line, so the file never ends in part of
    one."""

    def __init__(self, path: Path, dumps: Callable[[dict], str]):
        super().__init__(path, binary=True)
        self._dumps = dumps
        self._end = 0  # bytes of complete lines

    def write(self, row: int, record: dict, answer: QueryResult | None) -> None:
        data = (self._dumps(record) + "\n").encode()
        left = memoryview(data)
        try:
            f = self.file()
            while left:
                n = os.write(f.fileno(), left)  # unbuffered: what failed is known to the byte
                left = left[n:]
        except OSError as exc:
            with contextlib.suppress(OSError):  # the part that was written goes: room is freed
                os.ftruncate(self.file().fileno(), self._end)
            raise self.failed(exc) from None
        self._end += len(data)
        self.saved += answer is not None


class NpySink(_OutputFile):
    """A .npy that holds every answer so far: each row is appended, then the header's count is
    rewritten in place (its length is fixed, room for every row). Writes are unbuffered, so what
    failed is known to the byte: a row that cannot be written whole (a full disk) is cut off again,
    and the file stays the valid array of the answers saved before it; if not even the header
    can be written, the file is removed (no answer was saved)."""

    def __init__(self, path: Path, mode: Mode, max_rows: int):
        super().__init__(path, binary=True)
        self._mode, self._max = mode, max_rows
        self._dtype: np.dtype | None = None
        self._inner: tuple[int, ...] = ()
        self._header_len = 0
        self._end = 0  # bytes of the header and the rows saved

    def _header(self, count: int) -> bytes:
        assert self._dtype is not None
        d = {"descr": np.lib.format.dtype_to_descr(self._dtype), "fortran_order": False,
             "shape": (count, *self._inner)}
        text = repr(d)
        if not self._header_len:  # room for the largest count, 64-byte aligned as numpy writes it
            widest = len(repr({**d, "shape": (self._max, *self._inner)})) + 1
            self._header_len = -(-(10 + widest) // 64) * 64 - 10
        return np.lib.format.magic(1, 0) + struct.pack("<H", self._header_len) + \
            (text.ljust(self._header_len - 1) + "\n").encode("latin1")

    def _put(self, data: bytes, at: int) -> None:
        """Write all of ``data`` at offset ``at`` (OSError if the system takes only part of it)."""
        fd, view = self.file().fileno(), memoryview(data)
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n

    def _start(self, first: np.ndarray) -> None:
        self._dtype, self._inner = first.dtype, first.shape[1:]
        header = self._header(0)
        try:
            self._put(header, 0)
        except OSError:
            self._dtype = None  # nothing was saved: the file goes (close)
            raise
        self._end = len(header)

    def write(self, row: int, record: dict, answer: QueryResult | None) -> None:
        try:
            self.file()  # a refusal too: the command has begun, the old file is replaced
            if answer is None:
                return
            arr = released_array(self._mode, [(row, answer)])
            if self._dtype is None:
                self._start(arr)
            data = arr.astype(self._dtype).tobytes()
            try:
                self._put(data, self._end)
                self._put(self._header(self.saved + 1), 0)  # (in place: no new blocks)
            except OSError:
                with contextlib.suppress(OSError):  # the part of the row that was written goes
                    os.ftruncate(self.file().fileno(), self._end)
                    self._put(self._header(self.saved), 0)
                raise
        except OSError as exc:
            raise self.failed(exc) from None
        self._end += len(data)
        self.saved += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._f is not None and self._dtype is None:  # rows, but no answer saved: an empty array
                try:
                    self._start(released_array(self._mode, []))
                except OSError:  # not even the header fits: no file rather than a partial one
                    self._f.close()
                    self._f = None
                    self.path.unlink()
        super().close()


def open_sink(path: Path, mode: Mode, max_rows: int, dumps: Callable[[dict], str]) -> Sink:
    return NpySink(path, mode, max_rows) if path.suffix == ".npy" else JsonlSink(path, dumps)


class StopRequest:
    """Set by the first SIGINT/SIGTERM (or by the command) to end the stream after the answer in flight.

    The command passes ``stop=request.__bool__`` to the device client, which sends no row once it
    holds; a second signal interrupts at once: KeyboardInterrupt for SIGINT, Terminated for
    SIGTERM (cli/signals.py: exit 130 or 143)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.reason: str | None = None

    def __bool__(self) -> bool:
        return self.signal is not None or self.reason is not None

    def stop(self, reason: str) -> None:
        self.reason = self.reason or reason

    def end(self, done: str, cause: EdgeDPError | None = None, as_json: bool = False) -> None:
        """After a first signal, end the command: one ERR_INTERRUPTED line on stderr saying what was
        done (``done``: counts and the budget spent), then the error that followed the signal
        (``cause``: ``…; then: <it>``, and for a failed link that an answer lost with it may have
        been charged), exit 130 for SIGINT, 143 for SIGTERM. Under --json the
        command has already written its (partial or complete) document to stdout, as bench does:
        the error is not a second one (``as_json``: query, whose stdout is one line per row, adds
        it as its last line)."""
        if self.signal is not None:
            then = f"; then: {cause}" if cause is not None else ""
            if isinstance(cause, TransportError):
                then += " (an answer lost with the link may have been charged)"
            fail(EdgeDPError(f"interrupted after {done}{then}", "ERR_INTERRUPTED"), as_json, exit_code(self.signal))

    @contextlib.contextmanager
    def summary_on_error(self, report: Callable[[], str], as_json: bool = False) -> Iterator[None]:
        """An EdgeDPError in the block after a first signal (the link failed on the answer in
        flight, a last read, the close) still ends the command as ``end`` does, with the error as
        the cause: ``report()`` first shows or writes what was answered (the partial document under
        --json) and returns what was done. Without a signal the error goes on as before. Enter it
        inside ``deferring_signals`` so that it exits before the handlers are put back."""
        try:
            yield
        except EdgeDPError as exc:
            if self.signal is None:
                raise
            self.end(report(), exc, as_json)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is not None:
            interrupt(signum)
        self.signal = signum

    @contextlib.contextmanager
    def deferring_signals(self) -> Iterator["StopRequest"]:
        """Within the block, SIGINT and SIGTERM set this request instead of interrupting a request
        whose answer is already paid for (main thread only; elsewhere signals act as usual). A
        signal the process ignores (SIG_IGN, e.g. SIGINT for `edgedp query … &` in a script)
        stays ignored."""
        old: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int] = {}
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                h = signal.getsignal(s)
                if h is not None and h != signal.SIG_IGN:  # ignored by the parent (or set outside Python): kept
                    signal.signal(s, self._handler)  # (ValueError outside the main thread: nothing to put back)
                    old[s] = h
        except ValueError:  # not the main thread
            pass
        try:
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
