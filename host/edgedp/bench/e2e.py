"""``edgedp bench --e2e``: answers per second through the API and the CLI against the wire limit.

One fresh QEMU test image, k = 10 rows (the bench's softmax-like inputs), FULL mode:

- ``wire_limit_per_s``: what a 115,200-baud UART (10 bits a byte) carries with requests
  pipelined, both directions at once: 11,520 / max(request bytes, response bytes) per answer;
  ``wire_limit_unpipelined_per_s`` the same one request at a time (their sum);
Each rate is the best of REPEATS runs.

- ``api_per_s``: ``Device.query_many`` over the QEMU console socket with the link's in_flight
  (``api_unpipelined_per_s``: in_flight = 1);
- ``cli_per_s``: ``edgedp query ROWS.npy --json`` in a child process on an ``edgedp device``
  session (QEMU), the whole command (interpreter start, imports, sync, the rows, the JSON out)
  timed, after one warm-up command.

QEMU has no baud rate: its socket carries bytes as fast as the emulation makes them, so the
pipelined API can exceed the UART's limit there; the ratio is what the issue asks for.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..device import frames, protocol as P
from ..device.client import connect, load_key
from ..device.errors import TransportError
from ..device.protocol import Caps, MechConfig
from ..mech.modes import Mode
from ..paths import test_key_path

BAUD = 115_200
BITS_PER_BYTE = 10
K = 10
REPEATS = 3
"""Each rate is the best of this many runs (the machine's other load only slows a run down)."""


class _Counting:
    """A link that counts the bytes it reads."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.in_flight = getattr(inner, "in_flight", 1)
        self.read_bytes = 0

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def read(self, timeout: float) -> bytes:
        data = self.inner.read(timeout)
        self.read_bytes += len(data)
        return data

    def close(self) -> None:
        self.inner.close()


def _rows(n: int, seed: int) -> np.ndarray:
    from .run import bench_input
    return np.stack([bench_input(K, seed + i) for i in range(n)])


def _edgedp(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", "import sys; from edgedp.cli import main; sys.exit(main())", *args]
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise TransportError(f"edgedp {' '.join(args[:2])} failed: {r.stderr.strip()[-500:]}")
    return r


def _cli_rate(X: np.ndarray) -> float:
    """`edgedp query ROWS.npy --json` on an `edgedp device` session of its own (state in a
    temporary directory), the whole command timed."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EDGEDP_STATE_DIR": tmp}
        rows = Path(tmp) / "rows.npy"
        np.save(rows, X)
        _edgedp(["device", "start", "--fresh"], env)
        try:
            _edgedp(["admin", "config", "--key-file", str(test_key_path()), "--epsilon", "1",
                     "--daily-cap", "100000", "--lifetime-cap", "0"], env)
            _edgedp(["query", str(rows), "--json"], env)  # warm-up: the plan, the page cache
            best = 0.0
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                _edgedp(["query", str(rows), "--json"], env)
                best = max(best, len(X) / (time.perf_counter() - t0))
            return best
        finally:
            _edgedp(["device", "stop"], env)


def run(n: int = 300, seed: int = 1, progress=None) -> dict:
    """Measure the API (pipelined and not) and the CLI on n rows each."""
    from ..device.targets.qemu import QemuTarget
    say = progress or (lambda msg: None)
    X = _rows(n, seed)
    mode = Mode.parse("full")
    req_bytes = float(np.mean([len(frames.encode(P.QUERY, 1, P.pack_vector(x, mode))) for x in X]))
    target = QemuTarget.from_spec("qemu")
    try:
        dev = connect(target, timeout=60.0, sync_timeout=20.0)
        dev.configure(load_key(), MechConfig(), Caps(daily=10**12))
        counting = _Counting(dev.link)
        dev.link = counting
        list(dev.query_many(X[:8]))                       # warm-up: the plan for k = 10
        say(f"API, {n} rows pipelined (in_flight {counting.in_flight}) and one at a time, best of {REPEATS}")
        api = api1 = 0.0
        for _ in range(REPEATS):
            before = counting.read_bytes
            t0 = time.perf_counter()
            answers = list(dev.query_many(X))
            api = max(api, n / (time.perf_counter() - t0))
            resp_bytes = (counting.read_bytes - before) / n
            if not all(isinstance(a, P.QueryResult) for a in answers):
                raise TransportError("a benchmark query was refused")
            t0 = time.perf_counter()
            list(dev.query_many(X, in_flight=1))
            api1 = max(api1, n / (time.perf_counter() - t0))
    finally:
        target.close()  # before the CLI's own QEMU: the two would share the host's cores
    say(f"CLI, {n} rows")
    cli = _cli_rate(X)
    rate = BAUD / BITS_PER_BYTE
    limit = rate / max(req_bytes, resp_bytes)
    return {"k": K, "rows": n, "mode": "full", "request_bytes": req_bytes, "response_bytes": resp_bytes,
            "in_flight": counting.in_flight, "wire_limit_per_s": limit,
            "wire_limit_unpipelined_per_s": rate / (req_bytes + resp_bytes),
            "api_per_s": api, "api_unpipelined_per_s": api1, "cli_per_s": cli,
            "api_over_limit": api / limit, "cli_over_api": cli / api}


def markdown(res: dict) -> str:
    return "\n".join([
        "| k | wire limit, pipelined (115,200 baud) | one at a time | API (in_flight "
        f"{res['in_flight']}) | API, in_flight 1 | CLI | API / limit | CLI / API |",
        "|---|---|---|---|---|---|---|---|",
        f"| {res['k']} | {res['wire_limit_per_s']:.0f}/s | {res['wire_limit_unpipelined_per_s']:.0f}/s | "
        f"{res['api_per_s']:.0f}/s | {res['api_unpipelined_per_s']:.0f}/s | {res['cli_per_s']:.0f}/s | "
        f"{res['api_over_limit']:.2f} | {res['cli_over_api']:.2f} |"])
