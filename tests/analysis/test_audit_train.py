"""audit-train: the canary audits flag DP-SGD with per-batch clipping (its stated ε = 1 is exceeded)
and pass the same configuration with per-example clipping (plain SGD), end to end through the CLI."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy.stats import binom

from edgedp.analysis import audit_train as A
from edgedp.cli import main

CONFIG = """# DP-SGD as the user runs it (plain SGD), audited at a small size
[audit-train]
epsilon = 1.0
delta = 1e-5
clip_norm = 1.0
clipping = "{clipping}"
optimizer = "sgd"
learning_rate = 2.0
sampling_rate = 0.1
steps = 40
n_train = 1000
trainings = 16
canaries = 500
guesses = 100
"""


def test_one_run_p_value_and_bound() -> None:
    # delta = 0: the binomial tail of eps-DP randomised response
    p = 1 / (1 + math.exp(-1.0))
    assert A.one_run_p_value(100, 40, 30, 1.0, 0.0) == pytest.approx(binom.sf(29, 40, p))
    assert A.one_run_p_value(100, 40, 30, 1.0, 1e-3) > A.one_run_p_value(100, 40, 30, 1.0, 0.0)
    # all r guesses right: P = p^r = alpha at the bound
    r, alpha = 50, 0.05
    q = alpha ** (1 / r)
    assert A.one_run_bound(100, r, r, 0.0, alpha) == pytest.approx(math.log(q / (1 - q)), abs=1e-6)
    assert A.one_run_bound(100, r, r // 2, 0.0, alpha) == 0.0   # chance level proves nothing


def test_config_file_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[audit-train]\nclippin = 'per-batch'\n")
    r = CliRunner().invoke(main, ["audit-train", str(bad)])
    assert r.exit_code == 4 and "unknown keys: clippin" in r.output


@pytest.mark.slow
def test_flags_per_batch_clipping_and_passes_per_example(tmp_path: Path) -> None:
    docs = {}
    for clipping in ("per-example", "per-batch"):
        cfg = tmp_path / f"{clipping}.toml"
        cfg.write_text(CONFIG.format(clipping=clipping))
        r = CliRunner().invoke(main, ["audit-train", str(cfg), "--json", "--no-progress"])
        assert r.output.strip(), f"audit-train printed nothing (exit {r.exit_code}): {r.exception!r}"
        docs[clipping] = (r.exit_code, json.loads(r.output.splitlines()[-1]))
    code, good = docs["per-example"]
    assert code == 0 and good["epsilon_stated"] == 1.0 and good["epsilon_lower_bound"] <= 1.0, good
    code, bad = docs["per-batch"]
    assert code == 1 and bad["epsilon_lower_bound"] > 2.0, bad
    one_run = next(t for t in bad["tests"] if t["method"] == "one-run")
    assert one_run["correct"] > 0.9 * one_run["guesses"]
    # the white-box Dirac canary moves its weight far more than per-example clipping allows
    dirac = {k: next(t for t in d["tests"] if t["canary"] == "dirac" and t["method"] == "two-world")
             for k, (_, d) in docs.items()}
    shift = {k: t["mean_score_in"] - t["mean_score_out"] for k, t in dirac.items()}
    assert shift["per-batch"] > 5 * abs(shift["per-example"]), shift
