"""Exit codes, JSON errors, contradictions and the conveniences of the command line, through the
real `edgedp` command (a child process) against the native device build."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from click.testing import CliRunner

from edgedp.cli import main
from edgedp.cli.exit_codes import ExitCode

from ..helpers import EDGEDP, KEY, cli_env, run_cli

FIND_TOML = {"EDGEDP_CONFIG": None}
"""The environment in which the command looks for edgedp.toml itself (cwd and its parents)."""


def json_error(r: subprocess.CompletedProcess, code: int, name: str, reason: str) -> dict:
    assert r.returncode == code, r.stdout + r.stderr
    err = json.loads(r.stdout.splitlines()[-1])
    assert err["error"] == name and err["exit_code"] == code and reason in err["message"], err
    assert r.stderr.splitlines()[-1].startswith("edgedp: error:") and "Traceback" not in r.stderr, r.stderr
    return err


@pytest.mark.parametrize("args,reason", [
    (["query", "--bogus"], "No such option"),
    (["query", "-m", "topk:0", "-"], "topk:K needs 1 <= K"),
    (["query", "-d", "0", "-"], "sensitivity must be > 0"),
    (["query", "-m", "topk:11", "-"], "the 11 largest of 10 classes"),
    (["admin", "set-time", "--key-file", KEY, "--unix", "5", "--date", "2026-01-02"], "--unix or --date"),
    (["admin", "set-time", "--key-file", KEY, "--date", "2026-13-45"], "valid month (01-12)"),
    (["admin", "config", "--key-file", KEY, "--daily-cap", "10", "--lifetime-cap", "5"],
     "lifetime cap 5 is below the daily cap 10"),
    (["-v", "-q", "info"], "contradict"),
])
def test_usage_errors_are_code_2_and_one_json_object(native_builds: None, args: list[str], reason: str) -> None:
    r = CliRunner().invoke(main, [*args, "--target", "posix", "--json"], input=",".join(["0.1"] * 10) + "\n")
    json_error(subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr), 2, "ERR_USAGE", reason)
    assert r.stdout.count("\n") == 1


def test_bad_input_and_refusal_codes(native_builds: None) -> None:
    json_error(run_cli("query", "--target", "posix", "--json", "/nonexistent.npy"), 4, "ERR_INPUT", "does not exist")
    json_error(run_cli("query", "--target", "posix", "--json", "-", stdin="0.2,nan\n"), 4, "ERR_INPUT", "NaN in row 0")
    json_error(run_cli("query", "--target", "posix", "--json", "--out", "/proc/nope.jsonl", "-", stdin="0.2,0.8\n"), 4,
               "ERR_INPUT", "cannot write /proc/nope.jsonl")  # before the first query: nothing charged
    # The third answer of ε 400 would pass the daily cap of 1000: refused, code 4.
    r = run_cli("query", "--target", "posix", "--json", "-e", "400", "-", stdin="0.1,0.9\n" * 3)
    assert r.returncode == 8, r.stderr
    assert [json.loads(x)["status"] for x in r.stdout.splitlines()] == ["ok", "ok", "ERR_BUDGET"]
    wrong = Path("/tmp/edgedp-wrong.key")
    wrong.write_text("00" * 32)
    wrong.chmod(0o600)  # a key file of one's own: others-readable ones are refused
    json_error(run_cli("admin", "reset-budget", "--target", "posix", "--key-file", str(wrong), "--json"), 7,
               "ERR_NOT_AUTHENTIC", "not authentic")  # the device's tagged state does not check with this key


def test_an_empty_key_file_is_no_key(native_builds: None) -> None:
    """`--key-file ""` (an edgedp.toml default blanked on the command line) is no key everywhere:
    query runs the device's configuration, or checks -e with the test key on the native device it
    started; an admin command asks for the key (the old query tried to read a key file "")."""
    r = run_cli("query", "--target", "posix", "--key-file", "", "--json", "-", stdin="0.2,0.8\n")
    assert r.returncode == 0 and json.loads(r.stdout)["remaining"] == 999.0, r.stderr
    r = run_cli("query", "--target", "posix", "--key-file", "", "-e", "0.5", "--json", "-", stdin="0.2,0.8\n")
    assert r.returncode == 0 and json.loads(r.stdout)["remaining"] == 999.5, r.stderr
    r = run_cli("admin", "reset-budget", "--target", "posix", "--key-file", "")
    assert r.returncode == 2 and "needs the device key: pass --key-file" in r.stderr, r.stderr


@pytest.mark.parametrize("suffix", ["jsonl", "npy"])
def test_an_output_that_fails_stops_before_the_next_charge(native_builds: None, tmp_path: Path,
                                                           suffix: str) -> None:
    full = tmp_path / f"full.{suffix}"
    full.symlink_to("/dev/full")  # every write: ENOSPC, like a full disk
    r = run_cli("query", "--target", "posix", "--json", "--out", str(full), "-", stdin="0.1,0.9\n" * 50)
    err = json_error(r, 4, "ERR_INPUT", "No space left on device")
    assert "stopped before the next query" in err["message"]
    answers = [json.loads(x) for x in r.stdout.splitlines()[:-1]]
    assert 1 <= len(answers) < 50 and all(a["status"] == "ok" for a in answers)
    # every charged answer is on stdout: the last one's remaining budget counts them
    assert answers[-1]["remaining"] == pytest.approx(1000 - len(answers))


def test_a_closed_pipe_ends_quietly_before_the_next_charge(native_builds: None, tmp_path: Path) -> None:
    out = tmp_path / "y.jsonl"
    p = subprocess.Popen([str(EDGEDP), "query", "--target", "posix", "--out", str(out), "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    assert p.stdin and p.stdout
    p.stdin.write("0.1,0.9\n" * 5000)
    p.stdin.close()
    p.stdout.readline(), p.stdout.readline()  # the header and one row, like `| head -2`
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == ExitCode.BROKEN_PIPE
    assert err == ""
    saved = out.read_text().splitlines()
    assert 1 <= len(saved) < 5000  # stopped, and what was charged is in the file
    assert json.loads(saved[-1])["remaining"] == pytest.approx(1000 - len(saved))


def test_edgedp_toml_gives_target_key_and_epsilon(native_builds: None, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / ".git").mkdir()  # the search for the project's file ends at the checkout
    (project / "keys").mkdir()
    (project / "keys" / "dev.key").write_text(Path(KEY).read_text())
    toml = project / "edgedp.toml"
    toml.write_text('[defaults]\ntarget = "posix"\nkey_file = "keys/dev.key"\nepsilon = 2.5\n')
    r = run_cli("query", "--json", "-", stdin="0.1,0.9\n", cwd=project / "sub", env=FIND_TOML)  # in a parent folder
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["remaining"] == pytest.approx(1000 - 2.5)
    # every value taken from the file is named, the signed epsilon included
    for line in (f"edgedp: target posix from {toml}", f"edgedp: key_file {project}/keys/dev.key from {toml}",
                 f"edgedp: epsilon 2.5 from {toml}"):
        assert line + "\n" in r.stderr, r.stderr
    r = run_cli("-v", "info", "--json", cwd=project / "sub", env=FIND_TOML)  # the file in use: info and -v
    assert r.returncode == 0 and json.loads(r.stdout)["config"] == str(toml), r.stdout + r.stderr
    assert f"edgedp: configuration file {toml} (project)\n" in r.stderr, r.stderr
    r = run_cli("admin", "reset-budget", "--json", cwd=project, env=FIND_TOML)  # key_file from the file, relative to it
    assert r.returncode == 0, r.stderr
    # the command line, then EDGEDP_TARGET, beat the file
    r = run_cli("info", "--json", cwd=project, env={**FIND_TOML, "EDGEDP_TARGET": "qemu2"})
    assert r.returncode == 2 and "unknown target 'qemu2'" in r.stderr
    (project / "edgedp.toml").write_text('[defaults]\nepsilon = "one"\n')
    json_error(run_cli("query", "--json", "-", cwd=project, env=FIND_TOML), 2, "ERR_USAGE",
               "defaults.epsilon must be a number")
    (project / "edgedp.toml").write_text('[defaults]\ntraget = "posix"\n')
    json_error(run_cli("info", "--json", cwd=project, env=FIND_TOML), 2, "ERR_USAGE", "unknown key defaults.traget")


def test_budget_text_shows_dates_and_no_python_none(native_builds: None) -> None:
    r = run_cli("budget", "--target", "posix")
    assert r.returncode == 0, r.stderr
    assert "None" not in r.stdout and re.search(r"^date +\d{4}-\d\d-\d\d UTC", r.stdout, re.M), r.stdout
    assert re.search(r"^lifetime cap +none$", r.stdout, re.M)
    d = json.loads(run_cli("budget", "--target", "posix", "--json").stdout)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", d["date"]) and isinstance(d["day"], int)


def test_table_keeps_its_columns_for_wide_logits_and_verbosity(native_builds: None) -> None:
    rows = "12.5,-30.25,45.75\n-99.125,10,3\n"
    r = run_cli("query", "--target", "posix", "--range", "-100", "100", "-d", "400", "-m", "topk:3", "-", stdin=rows)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and len({len(ln) for ln in lines}) == 1, lines
    assert "45.750" in lines[1] and "test image" in r.stderr
    q = run_cli("-q", "query", "--target", "posix", "-", stdin=rows.replace("-", ""))
    assert q.returncode == 0 and q.stderr == ""
    v = run_cli("-v", "query", "--target", "posix", "-", stdin="0.1,0.9\n")
    assert re.search(r"1 rows in [\d.]+ s \(\d+ rows/s\)", v.stderr), v.stderr


@pytest.mark.parametrize("name", ["old.jsonl", "old.npy"])
def test_an_output_is_replaced_only_once_a_row_is_answered(native_builds: None, tmp_path: Path, name: str) -> None:
    old = tmp_path / name
    old.write_text("answers paid for by an earlier run\n")
    # the configuration is refused on the host (its lattice is too fine) after the device was opened
    r = run_cli("query", "--target", "posix", "-d", "1e-30", "--out", str(old), "-", stdin="0.1,0.9\n")
    assert r.returncode == 4 and "lattice" in r.stderr, r.stderr
    assert old.read_text() == "answers paid for by an earlier run\n"
    new = tmp_path / ("new" + old.suffix)
    run_cli("query", "--target", "posix", "-d", "1e-30", "--out", str(new), "-", stdin="0.1,0.9\n")
    assert not new.exists()
    r = run_cli("query", "--target", "posix", "--out", str(old), "-", stdin="0.1,0.9\n")
    assert r.returncode == 0, r.stderr
    if old.suffix == ".npy":
        assert np.load(old).shape == (1, 2)
    else:
        assert json.loads(old.read_text())["status"] == "ok"


@pytest.mark.parametrize("cmd", [["admin", "reset-budget"], ["admin", "set-time", "--unix", "1767225600"],
                                 ["admin", "config", "-e", "1"], ["admin", "rate", "--burst", "5"], ["audit-log"]])
def test_admin_commands_never_fall_back_to_the_public_test_key(native_builds: None, tmp_path: Path,
                                                              cmd: list[str]) -> None:
    """Without --key-file and without key_file in edgedp.toml an admin command is a usage error:
    nothing is signed with the public test key behind the user's back."""
    r = run_cli(*cmd, "--target", "posix", "--json", cwd=tmp_path, env={"EDGEDP_CONFIG": "/dev/null"})
    json_error(r, 2, "ERR_USAGE", "needs the device key")
