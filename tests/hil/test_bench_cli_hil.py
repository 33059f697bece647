"""`edgedp bench` end to end on QEMU (a reduced grid)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from edgedp.cli import main

pytestmark = pytest.mark.hil


def test_bench_json(tmp_path) -> None:
    png = tmp_path / "bench.png"
    r = CliRunner().invoke(main, ["bench", "--target", "qemu", "--quick", "--k", "1", "--k", "10",
                                  "--epsilon", "1", "--no-footprint", "--plot", str(png), "--json", "--check"])
    out = json.loads(r.stdout)
    assert out["missed"] == [name for name, v in out["targets"].items() if not v["ok"]]
    assert r.exit_code == (1 if out["missed"] else 0), r.output  # --check: a MISSED target fails
    if out["missed"]:
        assert "bench targets MISSED: " + ", ".join(out["missed"]) in r.stderr
    assert [row["k"] for row in out["rows"]] == [1, 10]
    for row in out["rows"]:
        for key in ("dp_instructions", "naive_instructions", "est_cycles", "est_us_168mhz", "queries_per_second"):
            assert row[key] > 0, key
        assert row["conversion_max_error"] <= 6  # rounding + a possible SysTick wrap handler
    assert out["trace"]["lockstep"] and out["host"]["reference_samples_per_second"] > 0
    assert png.stat().st_size > 1000
