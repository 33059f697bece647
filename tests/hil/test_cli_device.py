"""The device commands end to end through the real CLI (native target; one run on QEMU)."""
from __future__ import annotations

import json
import socket
import subprocess

import numpy as np
import pytest

from ..helpers import KEY, run_cli


def cli(*args: str, target: str = "posix", stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """`edgedp ARGS... --target TARGET`; with ``check``, asserting that it succeeded."""
    r = run_cli(*args, "--target", target, stdin=stdin, timeout=600)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_info_json(native_builds: None) -> None:
    d = json.loads(cli("info", "--json").stdout)
    assert {"board", "build", "entropy", "firmware_version", "max_classes"} <= d.keys()
    assert d["build"] == "test" and d["max_classes"] == 1024


def test_query_stdin_json_lines(native_builds: None) -> None:
    rows = "0.1,0.7,0.2\n0.3,0.3,0.4\n"
    out = cli("query", "--json", "--mode", "topk:2", "-", stdin=rows).stdout.splitlines()
    recs = [json.loads(x) for x in out]
    assert [r["status"] for r in recs] == ["ok", "ok"]
    assert all(len(r["output"]["indices"]) == 2 for r in recs)
    assert recs[1]["remaining"] < recs[0]["remaining"]


def test_query_reconfigures_epsilon_and_writes_out(native_builds: None, tmp_path) -> None:
    x = np.random.default_rng(0).dirichlet(np.ones(10), size=5)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    recs = [json.loads(ln) for ln in cli("query", "--json", "-e", "2.5", str(tmp_path / "x.npy"),
                                          "--out", str(out)).stdout.splitlines()]
    assert len(recs) == 5
    assert np.load(out).shape == (5, 10)


def test_query_nan_row_is_refused_before_anything_is_sent(native_builds: None) -> None:
    r = cli("query", "--json", "-", stdin="0.5,0.5\n0.5,nan\n0.5,inf\n", check=False)
    assert r.returncode == 4
    [err] = [json.loads(x) for x in r.stdout.splitlines()]  # no row was answered
    assert err["error"] == "ERR_INPUT" and "NaN and inf in rows 1, 2" in err["message"]


def test_bad_inputs_are_one_line_errors(native_builds: None) -> None:
    r = cli("query", "--json", "/nonexistent.npy", check=False)
    assert r.returncode != 0 and json.loads(r.stdout)["error"] == "ERR_INPUT"
    r = cli("query", "--mode", "topk:0", "-", stdin="1,2\n", check=False)
    assert r.returncode != 0 and r.stderr.count("\n") == 1


def test_admin_without_a_valid_key_fails_with_device_error(native_builds: None, tmp_path) -> None:
    wrong = tmp_path / "wrong.key"
    wrong.write_text("00" * 32)
    wrong.chmod(0o600)  # a key file of one's own: others-readable ones are refused
    r = cli("admin", "reset-budget", "--key-file", str(wrong), "--json", check=False)
    # the STATE answer is tagged with the device's key, not this one: nothing is signed from it
    assert r.returncode == 7 and json.loads(r.stdout)["error"] == "ERR_NOT_AUTHENTIC"
    r = cli("admin", "config", "--key-file", KEY, "--daily-cap", "3", "--json")
    assert json.loads(r.stdout)["daily_cap"] == 3.0


def test_sample_json(native_builds: None, tmp_path) -> None:
    d = json.loads(cli("sample", "-e", "1", "-d", "2", "-k", "10", "--n", "5000", "--out",
                       str(tmp_path / "z.npy"), "--json").stdout)
    assert d["n"] == 5000 and d["granularity"] == 2 ** -11
    assert d["t"] == pytest.approx(4106.0)
    z = np.load(tmp_path / "z.npy")
    assert z.shape == (5000,) and abs(np.abs(z).mean() - 2.0) < 0.2


def test_verify_json_on_native(native_builds: None) -> None:
    d = json.loads(cli("verify", "--queries", "300", "--samples", "100000", "--json").stdout)
    assert d["queries"] == 300 and d["mismatches"] == 0 and d["chi2_pvalue"] > 1e-3


def test_missing_device_is_a_clear_error() -> None:
    r = cli("info", "--json", target="socket://127.0.0.1:9", check=False)
    assert r.returncode == 3  # cli/exit_codes.py: TRANSPORT
    assert json.loads(r.stdout)["error"] == "ERR_TRANSPORT"


@pytest.mark.hil
def test_budget_and_verify_on_qemu() -> None:
    d = json.loads(cli("budget", "--json", target="qemu").stdout)
    assert {"day", "daily_cap", "daily_spent", "daily_remaining", "lifetime_spent", "lifetime_cap", "store"} <= d.keys()
    v = json.loads(cli("verify", "--queries", "200", "--samples", "100000", "--json", target="qemu").stdout)
    assert v["mismatches"] == 0 and v["chi2_pvalue"] > 1e-3


def test_timeout_option_and_env_on_device_commands(tmp_path) -> None:
    """--timeout and EDGEDP_TIMEOUT bound the wait for a device that never answers (issue 17.9):
    the error names the wait it gave up after (1 s, not the default 10 s)."""
    with socket.socket() as srv:  # accepts the connection, never answers
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        url = f"socket://127.0.0.1:{srv.getsockname()[1]}"
        for args, env in ((["budget", "--timeout", "1"], {}), (["info"], {"EDGEDP_TIMEOUT": "1"})):
            r = run_cli(*args, "--target", url, env=env, timeout=60)
            assert r.returncode != 0 and "does not answer PING within 1 s" in r.stderr, r.stderr
    r = run_cli("budget", "--timeout", "0")
    assert r.returncode == 2 and "--timeout" in r.stderr


def test_edgedp_root_that_is_no_checkout_is_one_line(tmp_path) -> None:
    r = run_cli("info", "--target", "qemu", env={"EDGEDP_ROOT": str(tmp_path)}, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"EDGEDP_ROOT={tmp_path} is not an edgedp checkout" in r.stderr
