"""The harness on Renode through the real CLI: `edgedp verify` and `edgedp bench` on the
stm32f4 test image (`--target renode`), and both refusing a production image at once
(`--target renode:build/stm32f4/edgedp.elf`).

Needs Renode (`renode` on PATH or EDGEDP_RENODE); skipped with that reason without it, as in
CI. The Robot suite renode/edgedp.robot (`make test-renode`) covers the same ground inside
`renode-test`; `edgedp verify --target renode` with its defaults (1,000 queries) is the
full check (docs/benchmarks.md §11)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgedp.device.errors import TransportError
from edgedp.device.targets.renode import find_renode

from ..conftest import ROOT, make

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module", autouse=True)
def renode() -> str:
    try:
        exe = find_renode()
    except TransportError:
        pytest.skip("Renode is not installed (no renode on PATH, EDGEDP_RENODE unset): renode/README.md")
    make("build/stm32f4/edgedp.elf", "build/stm32f4-test/edgedp.elf")
    return exe


def edgedp(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("edgedp")
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_verify_on_renode_is_bit_exact() -> None:
    r = edgedp("verify", "--target", "renode", "-n", "60", "--samples", "2000", "--json", "--no-progress")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["queries"] == 60 and res["mismatches"] == 0 and res["ok"]


def test_bench_on_renode_reads_the_dp_step_from_the_dwt() -> None:
    r = edgedp("bench", "--target", "renode", "--k", "10", "--epsilon", "1", "-n", "3", "--no-trace",
               "--no-footprint", "--json", "--no-progress", "--plot", str(ROOT / "build" / "bench" / "renode.png"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert (res["target"], res["board"], res["build"]) == ("renode", "stm32f4", "test")
    assert res["tick"]["kind"] == "dwt" and res["tick"]["ticks_per_instruction"] == pytest.approx(4.0)
    (row,) = res["rows"]
    assert row["dp_ticks"] > 0 and row["dp_cycles_measured"] == row["dp_ticks"]
    assert row["dp_instructions"] == pytest.approx(row["dp_ticks"] / 4)
    assert 0 < row["dp_us_measured"] < 100.0   # k = 10 at 4 virtual cycles per instruction, 168 MHz
    assert row["naive_ticks"] > 0


@pytest.mark.parametrize("command", [["verify", "-n", "5"], ["bench", "--quick", "--no-trace", "--no-footprint"]])
def test_verify_and_bench_refuse_the_production_image_on_renode(command: list[str]) -> None:
    t0 = time.monotonic()
    r = edgedp(*command, "--target", "renode:build/stm32f4/edgedp.elf")
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"edgedp: error: {command[0]} needs a test image: renode:build/stm32f4/edgedp.elf runs a "
            "production image") in r.stderr
    assert time.monotonic() - t0 < 180   # Renode's start, then one INFO
