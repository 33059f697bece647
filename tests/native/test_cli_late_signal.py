"""A first Ctrl-C that arrives after the last charged answer (during the test, the comparison or
the device's close) still ends `verify`, `audit-dp` and `tradeoff --target` with 130 once their
complete result is out; under --json that result is the one document on stdout and the error is
on stderr only (as bench does), also when the command stopped early (a partial document).

The real CLI against the native device (--target posix); the signal is the process's own SIGINT,
sent from inside the step that follows the last answer, so it lands there every time (a signal
sent from outside would land there only by chance)."""
from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgedp.cli import main

KEY = str(Path(__file__).resolve().parents[1] / "keys" / "test-device.key")


def sigint_after(fn: Callable) -> Callable:
    """``fn``, then a SIGINT to this process (what a user's Ctrl-C right after it would do)."""
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return out
    return wrapped


def sigint_before(fn: Callable) -> Callable:
    def wrapped(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return fn(*args, **kwargs)
    return wrapped


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("edgedp: error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "out.npz", probs=rng.dirichlet(np.ones(10), size=40), labels=rng.integers(0, 10, 40))
    return tmp_path / "out.npz"


@pytest.mark.native
@pytest.mark.parametrize("as_json", [False, True])
def test_tradeoff_signal_during_the_comparison(native_builds: None, outputs: Path, monkeypatch: pytest.MonkeyPatch,
                                               as_json: bool) -> None:
    from edgedp.analysis import device_check
    monkeypatch.setattr(device_check, "compare", sigint_before(device_check.compare))
    r = CliRunner().invoke(main, ["tradeoff", "--data", str(outputs), "--quick", "--modes", "label", "--epsilons",
                                  "1", "--target", "posix", "--target-queries", "20", "--key-file", KEY,
                                  "--no-progress", *(["--json"] if as_json else [])])
    assert r.exit_code == 130, (r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert "interrupted after every device check query (spent 20 epsilon): the test is complete" in line, line
    if as_json:
        d = json.loads(r.stdout)["device_check"]  # one document: the complete check
        assert d["queries"] == 20 and "pvalue_values" in d and "interrupted" not in d, d
    else:
        assert "device: 20 queries at ε = 1" in r.stdout, r.stdout


@pytest.mark.native
@pytest.mark.parametrize("as_json", [False, True])
def test_verify_signal_after_the_last_sample(native_builds: None, monkeypatch: pytest.MonkeyPatch,
                                             as_json: bool) -> None:
    from edgedp.cli import verify
    monkeypatch.setattr(verify, "noise_fit", sigint_after(verify.noise_fit))
    r = CliRunner().invoke(main, ["verify", "--target", "posix", "-n", "16", "--samples", "1000", "--key-file", KEY,
                                  "--no-progress", *(["--json"] if as_json else [])])
    assert r.exit_code == 130, (r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert "interrupted after every query and noise sample (0 mismatches; spent " in line, line
    assert line.endswith("authenticated STATE): the verdict is complete"), line
    if as_json:
        d = json.loads(r.stdout)
        assert d["complete"] is True and d["queries"] == 16 and d["samples"] == 1000, d
    else:
        assert "verdict        PASS" in r.stdout, r.stdout


@pytest.mark.native
def test_verify_json_stopped_early_writes_the_partial_result(native_builds: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from edgedp.cli import verify
    monkeypatch.setattr(verify, "noise_fit", sigint_before(verify.noise_fit))
    r = CliRunner().invoke(main, ["verify", "--target", "posix", "-n", "16", "--samples", "1000", "--key-file", KEY,
                                  "--no-progress", "--json"])
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert "interrupted after every query, not all noise samples (0 mismatches; spent " in one_error_line(r.stderr)
    d = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))  # no bare NaN
    assert d["complete"] is False and d["queries"] == 16 and d["samples"] == 0 and d["epsilon_spent"] > 0, d


@pytest.mark.native
def test_audit_dp_json_keeps_a_complete_bound(native_builds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgedp.analysis import audit_dp
    monkeypatch.setattr(audit_dp, "audit", sigint_after(audit_dp.audit))
    r = CliRunner().invoke(main, ["audit-dp", "--target", "posix", "--key", KEY, "--trials", "8", "--no-progress",
                                  "--json"])
    assert r.exit_code == 130, (r.stdout, r.stderr)
    assert "interrupted after every device answer (the bound is complete)" in one_error_line(r.stderr)
    d = json.loads(r.stdout)
    assert d["trials"] == 8 and d["epsilon_lower_bound"] >= 0, d


def test_tradeoff_key_file_without_target_is_a_usage_error(outputs: Path) -> None:
    r = CliRunner().invoke(main, ["tradeoff", "--data", str(outputs), "--key-file", KEY])
    assert r.exit_code == 2 and "--key-file is for the device check: give --target too" in r.stderr, r.stderr


def test_tradeoff_bad_key_file_fails_before_the_trade_off(outputs: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The key is read first: a typo costs nothing (no trade-off run, no device opened)."""
    from edgedp.analysis import tradeoff
    ran: list[int] = []
    monkeypatch.setattr(tradeoff, "run", lambda *a, **k: ran.append(1))
    r = CliRunner().invoke(main, ["tradeoff", "--data", str(outputs), "--target", "posix", "--key-file",
                                  str(tmp_path / "missing.key")])
    assert r.exit_code != 0 and "cannot read key file" in r.stderr and not ran, r.stderr


@pytest.mark.native
def test_audit_dp_json_stopped_writes_what_was_charged(native_builds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal after the 5th answer: no bound, and the one stdout object says 5 answers were charged."""
    from edgedp.analysis import audit_dp
    real = audit_dp.device_releaser

    def releaser(dev, mode, k, below, progress=None, stop=None):
        seen = [0]

        def counted(n: int) -> None:
            if progress:
                progress(n)
            seen[0] += n
            if seen[0] == 5:
                os.kill(os.getpid(), signal.SIGINT)
        return real(dev, mode, k, below, counted, stop)
    monkeypatch.setattr(audit_dp, "device_releaser", releaser)
    r = CliRunner().invoke(main, ["audit-dp", "--target", "posix", "--key", KEY, "--trials", "8", "--epsilon", "1",
                                  "--no-progress", "--json"])
    assert r.exit_code == 130, (r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert "interrupted after 5 of " in line and "device answers (spent 5 epsilon); no bound" in line, line
    d = json.loads(r.stdout)
    assert d["answers"] == 5 and d["epsilon_spent"] == 5 and d["complete"] is False, d
