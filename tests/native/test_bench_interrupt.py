"""`edgedp bench` stopped part way keeps what it measured: Ctrl-C (the terminal's, to the whole
process group) and a device that dies mid-run, through the real command on the native build."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from edgedp.bench import report

from ..helpers import EDGEDP, cli_env

KS, EPSILONS = (1, 10, 100, 1000), (1.0, 10.0)
GRID = [(k, eps) for eps in EPSILONS for k in KS]


def bench_until_first_row(tmp_path: Path, then) -> tuple[subprocess.CompletedProcess, dict]:
    """Start a bench whose grid takes far longer than one row (20,000 queries a point), call
    then(process) once the first point is measured (progress on stderr), and wait for the end."""
    args = [str(EDGEDP), "bench", "--target", "posix", "-n", "20000", "--no-trace", "--no-deadline", "--no-footprint",
            "--plot", str(tmp_path / "b.png"), "--markdown", str(tmp_path / "b.md"), "--json"]
    for k in KS:
        args += ["--k", str(k)]
    for eps in EPSILONS:
        args += ["--epsilon", f"{eps:g}"]
    with open(tmp_path / "out.json", "w+") as out:
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, text=True, env=cli_env(), process_group=0)
        seen = []
        assert p.stderr is not None
        for line in p.stderr:
            seen.append(line)
            if "measured (1 of 8 points)" in line:
                then(p)
                break
        err = "".join(seen) + p.stderr.read()
        p.wait(timeout=30)
        out.seek(0)
        text = out.read()
    r = subprocess.CompletedProcess(args, p.returncode, text, err)
    assert "Traceback" not in err, err
    return r, json.loads(text)


def check_partial(tmp_path: Path, res: dict, stopped: str) -> None:
    measured = [(r["k"], r["epsilon"]) for r in res["rows"]]
    assert res["partial"] is True and stopped in res["stopped"]
    assert 1 <= len(measured) < len(GRID) and measured == GRID[:len(measured)]
    assert [(m["k"], m["epsilon"]) for m in res["missing"]] == GRID[len(measured):]
    assert "host reference" in res["skipped"] and "host" not in res
    assert all(r["queries"] == 20000 and r["queries_per_second"] > 0 for r in res["rows"])
    # the grid's tables in the markdown have the rows measured and say what is missing
    md = report.parse((tmp_path / "b.md").read_text())["grid"].body
    for table in report.tables(md):
        assert [row[:2] for row in table[1:]] == [[str(k), f"{e:g}"] for k, e in measured]
    assert f"{len(measured)} points measured" in md
    assert "not measured: " + ", ".join(f"k={k} eps={e:g}" for k, e in GRID[len(measured):]) in md
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_ctrl_c_keeps_the_rows_measured(native_builds: None, tmp_path: Path) -> None:
    r, res = bench_until_first_row(tmp_path, lambda p: os.killpg(p.pid, signal.SIGINT))
    assert r.returncode == 130, r.stderr
    check_partial(tmp_path, res, "interrupted")
    last = r.stderr.splitlines()[-1]
    assert last.startswith("edgedp: error: Partial run (interrupted): ") and "not run: host reference" in last
    assert r.stdout.count("\n") == 1  # one JSON object: the result, no second error object


def child_of(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def test_a_device_lost_mid_run_keeps_the_rows_measured(native_builds: None, tmp_path: Path) -> None:
    if not Path("/proc/self/task").exists():
        pytest.skip("needs /proc to find the native device's process")
    r, res = bench_until_first_row(tmp_path, lambda p: os.kill(child_of(p.pid), signal.SIGKILL))
    assert r.returncode == 3, r.stderr  # TRANSPORT: the link broke
    check_partial(tmp_path, res, "")
    assert res["stopped"] != "interrupted"
    assert r.stderr.splitlines()[-1].startswith("edgedp: error: Partial run (")


def test_ctrl_c_after_the_grid_skips_the_later_parts(native_builds: None, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the grid's last part runs: the grid is complete, --e2e is not run, and the
    result says so (partial, nothing missing, e2e skipped), exit 130."""
    from click.testing import CliRunner

    from edgedp.bench import e2e, run as bench_run
    from edgedp.cli import main
    real = bench_run.run

    def interrupted_at_the_end(*args, **kwargs):
        result = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # deferred by the command: it sets its stop request
        return result

    def not_reached(*args, **kwargs):
        raise AssertionError("--e2e ran after Ctrl-C")

    monkeypatch.setattr(bench_run, "run", interrupted_at_the_end)
    monkeypatch.setattr(e2e, "run", not_reached)
    r = CliRunner().invoke(main, ["bench", "--target", "posix", "--quick", "--k", "1", "--epsilon", "1", "--no-trace",
                                  "--no-deadline", "--no-footprint", "--plot", str(tmp_path / "b.png"),
                                  "--e2e", "8", "--json"])
    assert r.exit_code == 130, r.output
    res = json.loads(r.stdout)
    assert res["partial"] and res["stopped"] == "interrupted" and res["missing"] == [] and res["skipped"] == ["e2e"]
    assert [(row["k"], row["epsilon"]) for row in res["rows"]] == [(1, 1.0)] and "host" in res
    assert r.stderr.endswith("edgedp: error: Partial run (interrupted): 1 points measured; not run: e2e\n")


def test_ctrl_c_during_the_last_part_still_exits_130(tmp_path: Path, monkeypatch) -> None:
    """A Ctrl-C while the run's last part works (deferred, so that part finishes): the result is
    complete, and the command still says it was interrupted and exits 130 (docs/cli.md)."""
    from click.testing import CliRunner

    from edgedp.bench import run as bench_run
    from edgedp.cli import main

    def last_part_interrupted(*args, **kwargs) -> dict:
        os.kill(os.getpid(), signal.SIGINT)  # arrives while the footprint, say, is measured
        return {"rows": [], "targets": {}, "board": "stub", "target": "stub", "commit": "stub"}
    monkeypatch.setattr(bench_run, "run", last_part_interrupted)
    r = CliRunner().invoke(main, ["bench", "--plot", str(tmp_path / "b.png"), "--json"])
    assert r.exit_code == 130, r.output
    assert "partial" not in json.loads(r.stdout) and "the result is complete" in r.stderr


def test_an_error_in_a_later_part_keeps_the_rows(tmp_path: Path, monkeypatch) -> None:
    """The grid measured, then a later part fails (here the host reference): the rows are kept,
    the result says partial with the part's error, and the command exits non-zero."""
    from click.testing import CliRunner

    from edgedp.bench import run as bench_run
    from edgedp.cli import main

    def broken(n: int) -> dict:
        raise RuntimeError("no reference today")
    monkeypatch.setattr(bench_run, "reference_rates", broken)
    r = CliRunner().invoke(main, ["bench", "--target", "posix", "--quick", "--k", "10", "--epsilon", "1",
                                  "--no-trace", "--no-deadline", "--no-footprint",
                                  "--plot", str(tmp_path / "b.png"), "--json"])
    res = json.loads(r.stdout)
    assert r.exit_code != 0 and res["partial"] is True and "no reference today" in res["stopped"]
    assert [(row["k"], row["epsilon"]) for row in res["rows"]] == [(10, 1.0)] and res["missing"] == []
    assert res["skipped"] == ["host reference"]


def test_a_plot_that_fails_loses_only_itself(tmp_path: Path, monkeypatch) -> None:
    """The plot is written after the markdown and its failure (a full disk, a folder gone) is one
    warning: the measured rows still reach the markdown and the JSON, exit 0."""
    from click.testing import CliRunner

    from edgedp.bench import run as bench_run
    from edgedp.cli import main

    def full_disk(result, path):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(bench_run, "plot", full_disk)
    r = CliRunner().invoke(main, ["bench", "--target", "posix", "--quick", "--k", "1", "--epsilon", "1", "--no-trace",
                                  "--no-deadline", "--no-footprint", "--plot", str(tmp_path / "b.png"),
                                  "--markdown", str(tmp_path / "b.md"), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["plot"] is None and [(row["k"], row["epsilon"]) for row in res["rows"]] == [(1, 1.0)]
    assert "| 1 | 1 |" in (tmp_path / "b.md").read_text()
    assert "warning: the plot was not written" in r.stderr and "No space left" in r.stderr
