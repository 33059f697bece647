"""The harness on Renode through the real CLI: `edgedp verify` and `edgedp bench` on the
stm32f4 test image (`--target renode`), and both refusing a production image at once
(`--target renode:build/stm32f4/edgedp.elf`).

Needs Renode (`renode` on PATH or EDGEDP_RENODE); skipped with that reason without it, as in
CI. The Robot suite renode/edgedp.robot (`make test-renode`) covers the same ground inside
`renode-test`; `edgedp verify --target renode` with its defaults (1,000 queries) is the
full check (docs/benchmarks.md §8)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from edgedp.device.errors import TransportError
from edgedp.device.targets.renode import find_renode

from ..helpers import ROOT, make, run_cli

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module", autouse=True)
def renode() -> str:
    try:
        exe = find_renode()
    except TransportError:
        pytest.skip("Renode is not installed (no renode on PATH, EDGEDP_RENODE unset): renode/README.md")
    make("build/stm32f4/edgedp.elf", "build/stm32f4-test/edgedp.elf")
    return exe


def edgedp(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=ROOT, timeout=timeout)


def test_verify_on_renode_is_bit_exact() -> None:
    r = edgedp("verify", "--target", "renode", "-n", "60", "--samples", "2000", "--json", "--no-progress")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["queries"] == 60 and res["mismatches"] == 0 and res["ok"]


def test_bench_on_renode_reads_the_dp_step_from_the_dwt(tmp_path: Path) -> None:
    # The plot goes to tmp_path: build/bench/ exists only after some other bench run, and
    # bench refuses an --plot whose folder is missing.
    r = edgedp("bench", "--target", "renode", "--k", "10", "--epsilon", "1", "-n", "3", "--no-trace",
               "--no-footprint", "--json", "--no-progress", "--plot", str(tmp_path / "renode.png"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert (res["target"], res["board"], res["build"]) == ("renode", "stm32f4", "test")
    assert res["tick"]["kind"] == "dwt" and res["tick"]["ticks_per_instruction"] == pytest.approx(4.0)
    (row,) = res["rows"]
    assert row["dp_ticks"] > 0 and row["dp_cycles_measured"] == row["dp_ticks"]
    assert row["dp_instructions"] == pytest.approx(row["dp_ticks"] / 4)
    assert 0 < row["dp_us_measured"] < 100.0   # k = 10 at 4 virtual cycles per instruction, 168 MHz
    assert row["naive_ticks"] > 0
    assert (tmp_path / "renode.png").stat().st_size > 0


@pytest.mark.parametrize("command", [["verify", "-n", "5"], ["bench", "--quick", "--no-trace", "--no-footprint"]])
def test_verify_and_bench_refuse_the_production_image_on_renode(command: list[str]) -> None:
    # refused after Renode's start and one INFO (300 s: a liveness bound, not a measurement)
    r = edgedp(*command, "--target", "renode:build/stm32f4/edgedp.elf", timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"edgedp: error: {command[0]} needs a test image: renode:build/stm32f4/edgedp.elf runs a "
            "production image") in r.stderr


def test_pipelined_queries_on_renode_are_bit_exact_and_in_order(test_key: bytes) -> None:
    """The stm32f4 test image's interrupt-driven receive ring on Renode's USART and NVIC models:
    24 queries with 8 in flight (what a board at a URL gets, transport.BOARD_IN_FLIGHT), every
    answer its own request's and bit for bit the reference's. (Renode's USART, like QEMU's, holds
    bytes the firmware has not read, so the polled port answered these too: this checks the
    interrupt path on a second model, not the loss it prevents on a board.)"""
    import numpy as np

    from edgedp.device import protocol as P
    from edgedp.device.client import Device, connect
    from edgedp.device.protocol import Caps, MechConfig
    from edgedp.device.targets import start_target
    from edgedp.device.transport import BOARD_IN_FLIGHT
    from edgedp.mech.lattice import MICRO
    from edgedp.mech.reference import ReferenceDevice

    from ..conftest import TEST_EPOCH
    from ..native.test_pipelined_queries import Recording

    target = start_target("renode")
    try:
        dev = connect(target, timeout=60)
        dev.set_time(test_key, TEST_EPOCH + 86400)
        dev.configure(test_key, MechConfig(), Caps(daily=1000 * MICRO))
        dev.reset_budget(test_key)
        seed = bytes(range(7, 39))
        dev.test_seed(test_key, seed)
        ref = ReferenceDevice(MechConfig(), seed)
        rng = np.random.default_rng(4)
        rows = [rng.random(10, dtype=np.float32) for _ in range(24)]
        rec = Recording(dev.link)
        got = list(Device(rec, timeout=60).query_many(rows, "full", in_flight=BOARD_IN_FLIGHT))
    finally:
        target.close()
    assert len(got) == len(rows)
    for x, r in zip(rows, got):
        assert isinstance(r, P.QueryResult) and r.same_answer(ref.query(x, "full"))
    assert rec.got == rec.sent and rec.ahead == BOARD_IN_FLIGHT
