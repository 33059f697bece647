"""Answers paid for are never lost: Ctrl-C during `edgedp query --out` against a device session.

The device's own spend (BUDGET, read through `edgedp budget` after the command) counts the
charged answers; every one of them must be in the output file, and the command exits 130."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ..helpers import KEY, start_cli
from .test_device_session import Cli

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    c = Cli(tmp_path_factory.mktemp("interrupt") / "state")
    c.ok("device", "start", "--fresh")
    c.ok("admin", "config", "--key-file", KEY, "--daily-cap", "100000", "--epsilon", "0.25")
    yield c
    c("device", "stop")


def spent(c: Cli) -> float:
    return c.json("budget")["daily_spent"]


def interrupt_after(c: Cli, args: list[str], ready) -> subprocess.CompletedProcess:
    """Run edgedp args, send SIGINT once ready() holds, and wait for it to end."""
    p = start_cli(*args, env=c.env)
    deadline = time.monotonic() + 60
    while not ready():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def rows_in(path: Path) -> int:
    try:
        return len(np.load(path))
    except (OSError, ValueError, EOFError):  # not created yet
        return 0


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


@pytest.mark.parametrize("suffix", ["jsonl", "npy"])
def test_sigint_keeps_every_charged_answer(session: Cli, tmp_path: Path, suffix: str) -> None:
    rows = np.random.default_rng(1).dirichlet(np.ones(10), size=3000)
    np.save(tmp_path / "x.npy", rows)
    out = tmp_path / f"y.{suffix}"
    before = spent(session)
    if suffix == "jsonl":
        ready = lambda: lines(out) >= 20  # noqa: E731
    else:
        ready = lambda: rows_in(out) >= 20  # noqa: E731
    r = interrupt_after(session, ["query", str(tmp_path / "x.npy"), "--out", str(out), "--json"], ready)
    assert r.returncode == 130, r.stderr
    assert "interrupted after" in r.stderr and "Traceback" not in r.stderr
    charged = round((spent(session) - before) / 0.25)
    assert 20 <= charged < 3000
    if suffix == "jsonl":
        recs = [json.loads(ln) for ln in out.read_text().splitlines()]
        assert [x["row"] for x in recs] == list(range(len(recs)))
        assert sum(x["status"] == "ok" for x in recs) == charged
    else:
        assert np.load(out).shape == (charged, 10)
    # stdout holds the same rows and then one JSON error object
    printed = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert printed[-1]["error"] == "ERR_INTERRUPTED" and printed[-1]["exit_code"] == 130
    assert sum(x.get("status") == "ok" for x in printed) == charged
    assert f"{charged} answers saved in {out}" in r.stderr


def test_ctrl_c_at_a_terminal_stops_edgedp_not_the_fresh_qemu(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the whole foreground process group: the QEMU that `query`
    started for itself must not die with it (the answer in flight would be lost, exit 5)."""
    np.save(tmp_path / "x.npy", np.random.default_rng(2).dirichlet(np.ones(10), size=3000))
    out = tmp_path / "y.jsonl"
    env = {**Cli(tmp_path / "state").env}
    p = start_cli("query", "--target", "qemu", str(tmp_path / "x.npy"), "--out", str(out), env=env,
                  stdout=subprocess.DEVNULL, start_new_session=True)  # its own group, as a shell job
    deadline = time.monotonic() + 60
    while lines(out) < 20:
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    recs = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert f"{len(recs)} answers saved" in err
    assert recs[-1]["remaining"] == pytest.approx(1000 - len(recs))  # every charge up to the last is here


def test_npy_is_a_complete_array_even_after_sigkill(session: Cli, tmp_path: Path) -> None:
    """No handler runs on SIGKILL: the .npy on disk must still load, holding the answers saved."""
    np.save(tmp_path / "x.npy", np.random.default_rng(3).dirichlet(np.ones(10), size=3000))
    out = tmp_path / "y.npy"
    before = spent(session)
    p = start_cli("query", str(tmp_path / "x.npy"), "--out", str(out), "-m", "topk:3", env=session.env,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while rows_in(out) < 20:
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    p.kill()
    p.wait(timeout=30)
    saved = np.load(out)
    charged = round((spent(session) - before) / 0.25)
    assert saved.dtype.names == ("row", "indices", "values") and list(saved["row"]) == list(range(len(saved)))
    assert 20 <= len(saved) <= charged  # at most the answer in flight is lost to a SIGKILL
