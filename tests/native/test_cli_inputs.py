"""Bad input at the command line and the API: one clear error before anything is charged.

The device runs as the native build (``posix`` target: the same firmware on stdin/stdout,
a fresh in-memory store per start)."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
from click.testing import CliRunner

from edgedp import DeviceError, Mode, open_device
from edgedp.cli import query as cli_query
from edgedp.cli import main

from ..helpers import ROOT

KEY = str(ROOT / "tests/keys/test-device.key")
ROWS = "0.1,0.7,0.2\n0.3,0.3,0.4\n"


def run(*args: str, stdin: str | None = ROWS):
    return CliRunner().invoke(main, list(args), input=stdin)


def one_line_error(r, reason: str) -> None:
    assert r.exit_code != 0, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("edgedp: error:"), r.stderr
    assert reason in r.stderr, r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize("args,reason", [
    (["query", "-e", "-1", "-"], "epsilon must be > 0"),
    (["query", "-e", "0", "-"], "epsilon must be > 0"),
    (["query", "-e", "inf", "-"], "epsilon must be finite"),
    (["query", "-e", "nan", "-"], "epsilon must be finite"),
    (["query", "-e", "1e12", "-"], "at most 4294.967295"),
    (["query", "-e", "1e-9", "-"], "at least 1e-6"),
    (["query", "-e", "abc", "-"], "must be a number"),
    (["query", "-d", "-2", "-"], "sensitivity must be > 0"),
    (["query", "-d", "1e39", "-"], "sensitivity must be at most"),
    (["query", "--range", "1", "0", "-"], "LO must be below HI"),
    (["query", "--range", "0", "inf", "-"], "finite float32"),
    (["admin", "config", "--key-file", KEY, "--daily-cap", "inf"], "daily cap must be finite"),
    (["admin", "config", "--key-file", KEY, "--daily-cap", "-1"], "daily cap must be > 0"),
    (["admin", "config", "--key-file", KEY, "--lifetime-cap", "nan"], "lifetime cap must be finite"),
    (["admin", "config", "--key-file", KEY, "--lifetime-cap", "1e20"], "64-bit micro-epsilon"),
    (["admin", "config", "--key-file", KEY, "--epsilon", "0"], "epsilon must be > 0"),
    (["admin", "set-time", "--key-file", KEY, "--unix", "-5"], "not in the range"),
    (["admin", "set-time", "--key-file", KEY, "--unix", "99999999999999999999"], "not in the range"),
    (["sample", "-e", "1", "--n", "-5", "--out", "x.npy"], "not in the range"),
    (["sample", "-e", "1", "-k", "2000", "--out", "x.npy"], "not in the range"),
])
def test_numbers_are_checked_at_the_edge(args: list[str], reason: str) -> None:
    one_line_error(run(*args, "--target", "posix"), reason)


def test_wrong_target_fails_at_once_with_the_list() -> None:
    t0 = time.monotonic()
    r = run("info", "--target", "qemu2")
    one_line_error(r, "unknown target 'qemu2'")
    assert "qemu, qemu:stm32f4, qemu:PATH, posix, posix:san, renode" in r.stderr
    one_line_error(run("info", "--target", "/dev/ttyNOPE9"), "no such serial device")
    assert time.monotonic() - t0 < 5


def test_unwritable_out_fails_before_the_first_query(tmp_path, monkeypatch) -> None:
    def no_device(*a, **k):
        raise AssertionError("the device was opened")
    monkeypatch.setattr(cli_query, "open_device", no_device)
    one_line_error(run("query", "--out", str(tmp_path / "missing" / "y.npy"), "--target", "posix", "-"),
                   "does not exist")
    one_line_error(run("query", "--out", str(tmp_path), "--target", "posix", "-"), "is a directory")
    one_line_error(run("sample", "-e", "1", "--out", str(tmp_path / "no" / "z.npy"), "--target", "posix"),
                   "does not exist")


@pytest.mark.parametrize("array,reason", [
    (np.zeros((0, 10)), "no rows"),
    (np.zeros(0), "no rows"),
    (np.ones((2, 3)) * (1 + 2j), "complex values"),
    (np.array([["a", "b"]]), "data (the device takes real class scores)"),
])
def test_bad_arrays_are_errors(tmp_path, array: np.ndarray, reason: str) -> None:
    np.save(tmp_path / "x.npy", array)
    one_line_error(run("query", "--target", "posix", str(tmp_path / "x.npy")), reason)


def test_tradeoff_wants_an_npz(tmp_path) -> None:
    np.save(tmp_path / "x.npy", np.eye(3))
    one_line_error(run("tradeoff", "--data", str(tmp_path / "x.npy"), "--quick"), "an .npz")
    one_line_error(run("tradeoff", "--data", str(tmp_path / "none.npz"), "--quick"), "does not exist")


@pytest.mark.native
def test_out_keeps_everything_released(native_builds: None, tmp_path) -> None:
    x = np.random.default_rng(0).dirichlet(np.ones(6), size=4)
    np.save(tmp_path / "x.npy", x)
    r = run("query", "--target", "posix", "--mode", "topk:3", "--out", str(tmp_path / "t.npy"), str(tmp_path / "x.npy"))
    assert r.exit_code == 0, r.output
    t = np.load(tmp_path / "t.npy")
    assert t["row"].tolist() == [0, 1, 2, 3] and t["indices"].shape == (4, 3) and t["values"].shape == (4, 3)
    assert all(len(set(row)) == 3 for row in t["indices"].tolist())
    r = run("query", "--target", "posix", "--mode", "bucket", "--out", str(tmp_path / "b.npy"), str(tmp_path / "x.npy"))
    b = np.load(tmp_path / "b.npy")
    assert r.exit_code == 0 and set(b.dtype.names) == {"row", "label", "level"} and set(b["level"]) <= {0, 1, 2}
    r = run("query", "--target", "posix", "--mode", "topk:2", "--out", str(tmp_path / "t.jsonl"), str(tmp_path / "x.npy"))
    recs = [json.loads(ln) for ln in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [len(rec["output"]["indices"]) for rec in recs] == [2] * 4
    assert all(len(rec["output"]["values"]) == 2 for rec in recs)


@pytest.mark.native
def test_query_warns_about_clamping_and_the_test_image(native_builds: None) -> None:
    r = run("query", "--target", "posix", "--json", "-", stdin="-3.2,4.5,0.1\n")
    assert r.exit_code == 0, r.output
    assert "2 input values lie outside the range [0, 1] and are clamped" in r.stderr
    assert "--range" in r.stderr
    assert r.stderr.count("test image") == 1 and "replayed" in r.stderr
    r = run("query", "--target", "posix", "--range", "-5", "5", "-d", "10", "-", stdin="-3.2,4.5,0.1\n")
    assert r.exit_code == 0 and "clamped" not in r.stderr


@pytest.mark.native
def test_query_epsilon_needs_three_requests_before_the_first_query(native_builds: None, monkeypatch) -> None:
    """STATE (the authenticated state the decision to reconfigure is made from, and the nonce the
    CONFIG is signed for), CONFIG, and STATE (the check): no BUDGET (unauthenticated), no INFO, no
    CHALLENGE before the first QUERY; and INFO once, after the stream."""
    from edgedp.device import protocol as P
    from edgedp.device.client import Device
    sent: list[int] = []
    request = Device.request

    def spy(self, type_, body=b"", timeout=None):
        sent.append(type_)
        return request(self, type_, body, timeout)
    monkeypatch.setattr(Device, "request", spy)
    signed = Device._signed

    def spy_admin(self, type_, payload, key, counter, nonce):
        framed = signed(self, type_, payload, key, counter, nonce)
        sent.append(type_)
        return framed
    monkeypatch.setattr(Device, "_signed", spy_admin)
    pipeline = Device._pipeline

    def spy_pipeline(self, type_, bodies, parse, in_flight, stop=None):  # queries go out pipelined
        sent.append(type_)
        return pipeline(self, type_, bodies, parse, in_flight, stop)
    monkeypatch.setattr(Device, "_pipeline", spy_pipeline)
    r = run("query", "--target", "posix", "-e", "0.5", "--json", "-")
    assert r.exit_code == 0, r.output
    sent = [t for t in sent if t != P.PING]  # the synchronising PINGs
    # three before the first query; after the stream one authenticated STATE checks what was charged
    assert sent == [P.STATE, P.CONFIG, P.STATE, P.QUERY, P.STATE, P.INFO]


@pytest.mark.native
def test_api_refuses_bad_vectors_at_once(native_builds: None) -> None:
    with open_device("posix") as dev:
        with pytest.raises(ValueError, match="query_many"):
            dev.query(np.full((2, 3), 0.3))
        with pytest.raises(ValueError, match="real numbers"):
            dev.query(np.full(3, 0.3 + 1j))
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="1..1024 values, got 1025"):
            dev.query(np.full(1025, 0.001))
        assert time.monotonic() - t0 < 1
        r = dev.query(np.array([0.2, 0.5, 0.3]), Mode.parse("label"))
        assert isinstance(r.remaining, float) and r.remaining == pytest.approx(999.0)


@pytest.mark.native
def test_query_many_streams_a_generator_until_the_budget_ends(native_builds: None, test_key: bytes) -> None:
    from edgedp import Caps, MechConfig, to_micro
    with open_device("posix") as dev:
        dev.configure(test_key, MechConfig(), Caps(daily=to_micro(3)))
        rows = (np.array([0.1, 0.6, 0.3]) for _ in range(10))
        out = list(dev.query_many(rows, "full"))
        # Three answers, then ERR_BUDGET: for the row that met the empty budget and for every row
        # already on the wire behind it (pipelined), and no row sent after it.
        assert [type(r).__name__ for r in out[:4]] == ["QueryResult"] * 3 + ["DeviceError"]
        assert [r.remaining for r in out[:3]] == [2.0, 1.0, 0.0]
        assert all(isinstance(r, DeviceError) and r.code == "ERR_BUDGET" for r in out[3:])
        assert len(out) <= 3 + getattr(dev.link, "in_flight", 1)
        assert dev.budget().daily_spent == to_micro(3)
        bad = list(dev.query_many([np.array([np.nan, 0.5])], "label"))
        assert isinstance(bad[0], DeviceError) and bad[0].code == "ERR_BAD_VALUE"


@pytest.mark.native
def test_admin_rate_through_the_cli(native_builds: None, monkeypatch, tmp_path) -> None:
    """`admin rate` sets the limit (checked in the authenticated state), `info` shows it, and a query
    over it is refused with ERR_RATE and its wait, also after the device restarts."""
    monkeypatch.setenv("EDP_STORE_FILE", str(tmp_path / "store.bin"))
    monkeypatch.setenv("EDP_POSIX_TIME", "1767225600")
    r = run("admin", "rate", "--target", "posix", "--key-file", KEY, "--burst", "1", "--per-minute", "2", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["rate_burst"] == 1 and json.loads(r.output)["authenticated"] is True
    assert json.loads(run("info", "--target", "posix", "--json").output)["rate_per_minute"] == 2
    out = run("query", "--target", "posix", "--json", "-", stdin="0.2,0.8\n0.3,0.7\n").stdout.splitlines()
    recs = [json.loads(x) for x in out]
    assert [x["status"] for x in recs] == ["ok", "ERR_RATE"] and recs[1]["retry_after_s"] == 30
    out = run("query", "--target", "posix", "--json", "-", stdin="0.2,0.8\n").stdout.splitlines()
    assert json.loads(out[0])["status"] == "ERR_RATE"  # a new device process: the bucket was committed
    r = run("admin", "rate", "--target", "posix", "--key-file", KEY, "--burst", "1", "--tarpit-ms", "2001")
    assert r.exit_code != 0 and "2001" in r.output
