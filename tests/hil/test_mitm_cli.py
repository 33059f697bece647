"""A man in the middle between the real CLI and QEMU's TCP serial (issue 17 items 1 and 2).

The proxy listens on a loopback port (the CLI's ``--target socket://…``) and relays frames to
and from the QEMU device's serial link, rewriting, forging, withholding or recording them.
Every attack must be detected by the CLI (a distinct exit code) or refused by the device, and
the device must end in the state the operator asked for or in the state it had."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgedp import schema as S
from edgedp.device import frames, protocol as P
from edgedp.device.client import Device
from edgedp.mech.lattice import MICRO
from edgedp.mech.modes import Mode

from ..helpers import EDGEDP, KEY, run_cli, signal_taken, start_cli

pytestmark = pytest.mark.hil
ADMIN = {P.CONFIG, P.SET_TIME, P.RESET_BUDGET}

Rule = Callable[[frames.Frame], list[bytes] | None]
"""A frame in -> the wire chunks to pass on instead (None: pass it unchanged)."""


class Proxy:
    """Relays one CLI connection at a time between a loopback port and the device's link."""

    def __init__(self, dev: Device):
        self.dev = dev
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.to_device: Rule = lambda f: None
        self.to_host: Rule = lambda f: None
        self.seen: list[frames.Frame] = []   # every request frame from the host
        self.forged: list[bytes] = []        # wire bytes to hand the host as if the device sent them
        self._stop = threading.Event()
        self._idle = threading.Event()  # no connection is being relayed (set when one ends)
        self._idle.set()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.srv.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except TimeoutError:
                continue
            self._idle.clear()
            done = threading.Event()
            up = threading.Thread(target=self._host_to_device, args=(conn, done), daemon=True)
            up.start()
            self._device_to_host(conn, done)
            up.join()
            conn.close()
            self._idle.set()

    @staticmethod
    def _chunks(buf: bytearray) -> Iterator[bytes]:
        while (i := buf.find(0)) >= 0:
            chunk = bytes(buf[:i])
            del buf[:i + 1]
            yield chunk

    def _relay(self, chunk: bytes, rule: Rule, record: bool) -> list[bytes]:
        try:
            f = frames.decode(chunk)
        except frames.FrameError:
            return [chunk + b"\x00"]
        if record:
            self.seen.append(f)
        out = rule(f)
        return [chunk + b"\x00"] if out is None else out

    def _host_to_device(self, conn: socket.socket, done: threading.Event) -> None:
        buf = bytearray()
        while data := conn.recv(4096):
            buf += data
            for chunk in self._chunks(buf):
                for w in self._relay(chunk, self.to_device, True):
                    self.dev.link.write(w)
        done.set()

    def _device_to_host(self, conn: socket.socket, done: threading.Event) -> None:
        buf = bytearray()
        while not done.is_set():
            while self.forged:
                conn.sendall(self.forged.pop(0))
            buf += self.dev.link.read(0.1)
            for chunk in self._chunks(buf):
                for w in self._relay(chunk, self.to_host, False):
                    try:
                        conn.sendall(w)
                    except OSError:
                        return

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """Run the CLI through the proxy; return once the proxy has stopped relaying its
        connection, so that no relay thread still reads the device's link (and takes an answer
        meant for the test's own requests) when the command has exited."""
        r = run_cli(*args, "--target", self.url)
        self.settle()
        return r

    def settle(self) -> None:
        """Wait until the proxy relays no connection (call after a command has exited and before
        the test talks to the device itself)."""
        assert self._idle.wait(10), "the proxy still relays the command's connection"

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def sent(self) -> Counter:
        """The request frames the host sent, by type (and forget them)."""
        seen, self.seen = self.seen, []
        return Counter(f.type for f in seen)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.srv.close()


@pytest.fixture
def mitm(qemu: Device) -> Iterator[Proxy]:
    p = Proxy(qemu)
    yield p
    p.close()


def answer(f: frames.Frame, body: bytes) -> list[bytes]:
    return [frames.encode(f.type, f.seq, body, f.version)]


def authentic_state(dev: Device, key: bytes) -> P.Budget:
    return dev.state(key).budget


def test_rewritten_budget_is_never_signed(mitm: Proxy, qemu: Device, test_key: bytes) -> None:
    """The attack of issue 17 item 1: BUDGET rewritten to a tiny sensitivity, a fine lattice and a
    huge daily cap. `admin config -e 0.5` signs only the authenticated state: the device ends
    with ε = 0.5 and everything else as it was."""
    def rewrite(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.BUDGET | P.RESPONSE:
            v = list(S.BUDGET_BODY_FMT.unpack(f.body))
            v[2], v[4], v[13], v[14] = 1_100_000_000 * MICRO, 0, 6.1e-5, 23  # caps, sensitivity, m
            return answer(f, S.BUDGET_BODY_FMT.pack(*v))
        return None
    mitm.to_host = rewrite
    before = authentic_state(qemu, test_key)
    r = mitm.cli("admin", "config", "--key-file", KEY, "-e", "0.5", "--json")
    assert r.returncode == 0, r.stderr
    after = authentic_state(qemu, test_key)
    assert after.epsilon_micro == MICRO // 2
    assert (after.sensitivity, after.m, after.daily_cap, after.lifetime_cap) == \
        (before.sensitivity, before.m, before.daily_cap, before.lifetime_cap) == (2.0, None, 1000 * MICRO, 0)
    assert json.loads(r.stdout)["sensitivity"] == 2.0 and json.loads(r.stdout)["authenticated"] is True
    # and `budget` without a key says its (rewritten) numbers are unauthenticated
    r = mitm.cli("budget")
    assert r.returncode == 0 and "1100000000.0" in r.stdout and "unauthenticated" in r.stdout


def test_rewritten_state_is_refused_before_anything_is_signed(mitm: Proxy, qemu: Device, test_key: bytes) -> None:
    def rewrite(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.STATE | P.RESPONSE:
            b = bytearray(f.body)
            b[16 + 8: 16 + 16] = (10**15).to_bytes(8, "little")  # the daily cap
            return answer(f, bytes(b))
        return None
    mitm.to_host = rewrite
    before = authentic_state(qemu, test_key)
    for args in (["admin", "config", "--key-file", KEY, "-e", "0.5"], ["budget", "--key-file", KEY]):
        r = mitm.cli(*args)
        assert r.returncode == 7 and "not authentic" in r.stderr, r.stderr
    assert not any(f.type in ADMIN for f in mitm.seen), "a command was signed from a rewritten state"
    assert authentic_state(qemu, test_key).epsilon_micro == before.epsilon_micro


def test_forged_ack_and_withheld_config_are_detected(mitm: Proxy, qemu: Device, test_key: bytes) -> None:
    """The attack of issue 17 item 2: the CONFIG setting --daily-cap 5 is swallowed, an ACK forged,
    the frame delivered later. The CLI reports state unknown (exit 6) after re-reading the state;
    the late frame is refused, its nonce gone; the device still allows 1000 ε a day."""
    withheld: list[frames.Frame] = []

    def swallow(f: frames.Frame) -> list[bytes] | None:
        if f.type != P.CONFIG:
            return None
        withheld.append(f)  # nothing goes to the device; the host gets an acknowledgement made up here
        counter = f.body[:8]
        mitm.forged.append(frames.encode(P.CONFIG | P.RESPONSE, f.seq, b"\x00" + counter + bytes(32)))
        return []
    mitm.to_device = swallow
    r = mitm.cli("admin", "config", "--key-file", KEY, "--daily-cap", "5")
    assert r.returncode == 6, r.stdout + r.stderr
    assert "state unknown" in r.stderr and "did not take effect" in r.stderr and "configured" not in r.stdout
    assert "signed again for the fresh nonce" in r.stderr  # the one retry (item 11), swallowed too
    assert len(withheld) == 2
    # the MITM now delivers the withheld frames: each signed for a nonce a re-read killed
    for w in withheld:
        qemu.send_raw(frames.encode(w.type, w.seq, w.body))
        f = qemu.receive()
        assert f.type == P.CONFIG | P.RESPONSE and P.AdminAnswer.parse(f.body).result == S.ErrorCode.ERR_AUTH
    assert authentic_state(qemu, test_key).daily_cap == 1000 * MICRO


def test_captured_frames_replayed_across_nonces_are_refused(mitm: Proxy, qemu: Device, test_key: bytes) -> None:
    """Two genuine admin commands pass the proxy, which records them; replayed later (each after a
    new nonce was drawn) both are refused and change nothing."""
    assert mitm.cli("admin", "config", "--key-file", KEY, "--daily-cap", "7").returncode == 0
    assert mitm.cli("admin", "reset-budget", "--key-file", KEY).returncode == 0
    captured = [f for f in mitm.seen if f.type in ADMIN]
    assert [f.type for f in captured] == [P.CONFIG, P.RESET_BUDGET]
    qemu.query(np.array([0.2, 0.8], dtype=np.float32), "label")
    before = authentic_state(qemu, test_key)
    for f in captured:
        qemu.challenge(test_key)  # the nonce moves on, as it does at every operator command
        qemu.send_raw(frames.encode(f.type, f.seq, f.body))
        ans = P.AdminAnswer.parse(qemu.receive().body)
        assert ans.result == S.ErrorCode.ERR_AUTH
    after = authentic_state(qemu, test_key)
    assert (after.daily_cap, after.daily_spent, after.auth_counter) == \
        (before.daily_cap, before.daily_spent, before.auth_counter) == (7 * MICRO, MICRO, before.auth_counter)


def test_audit_log_through_the_cli_and_a_rewritten_one(mitm: Proxy, qemu: Device, test_key: bytes) -> None:
    """`edgedp audit-log --json` on QEMU shows the fixture's SET_TIME, CONFIG and RESET_BUDGET
    with their day and counter; an entry rewritten on the way (an accepted RESET_BUDGET made to
    look refused) exits 7 with the JSON error and no entries."""
    r = mitm.cli("audit-log", "--key-file", KEY, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    last = out["entries"][-3:]
    counter = qemu.state(test_key).budget.auth_counter
    day = qemu.epoch // 86400  # type: ignore[attr-defined]
    assert [(e["event"], e["day"], e["counter"], e["detail"]) for e in last] == [
        ("set-time", day, counter - 2, "accepted"), ("config", day, counter - 1, "accepted"),
        ("reset-budget", day, counter, "accepted")]
    assert out["total"] == last[-1]["seq"] and out["overwritten"] == out["total"] - len(out["entries"])

    def rewrite(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.AUDIT_LOG | P.RESPONSE:
            b = bytearray(f.body)
            b[-S.AUTH_TAG - 1] = S.ErrorCode.ERR_REPLAY  # the last entry's arg: accepted -> refused
            return answer(f, bytes(b))
        return None
    mitm.to_host = rewrite
    r = mitm.cli("audit-log", "--key-file", KEY, "--json")
    assert r.returncode == 7 and "not authentic" in r.stderr and json.loads(r.stdout)["error"] == "ERR_NOT_AUTHENTIC"
    assert "entries" not in r.stdout


def rows_file(tmp_path: Path, n: int) -> str:
    np.save(tmp_path / "x.npy", np.random.default_rng(n).dirichlet(np.ones(10), size=n))
    return str(tmp_path / "x.npy")


def budget_claims_half_epsilon(f: frames.Frame) -> list[bytes] | None:
    """A proxy rule: every BUDGET answer claims the device runs ε = 0.5 (it runs 1)."""
    if f.type == P.BUDGET | P.RESPONSE:
        v = list(S.BUDGET_BODY_FMT.unpack(f.body))
        v[10] = MICRO // 2  # eps_micro
        return answer(f, S.BUDGET_BODY_FMT.pack(*v))
    return None


def test_a_rewritten_budget_cannot_make_query_skip_its_config(mitm: Proxy, qemu: Device, test_key: bytes,
                                                              tmp_path: Path) -> None:
    """BUDGET rewritten to claim the device already runs ε = 0.5: `query -e 0.5` never reads it;
    it decides from STATE (--key-file's key), signs the CONFIG and the rows run at 0.5 (the old
    host skipped the CONFIG and the rows ran, and were charged, at the device's 1)."""
    mitm.to_host = budget_claims_half_epsilon
    r = mitm.cli("query", "-e", "0.5", "--key-file", KEY, "--json", rows_file(tmp_path, 3))
    assert r.returncode == 0, r.stderr
    after = authentic_state(qemu, test_key)
    assert (after.epsilon_micro, after.daily_spent) == (MICRO // 2, 3 * MICRO // 2)
    sent = mitm.sent()
    assert (sent[P.BUDGET], sent[P.STATE], sent[P.CONFIG], sent[P.QUERY]) == (0, 3, 1, 3)


def test_a_state_forged_with_the_test_key_cannot_skip_the_config(mitm: Proxy, qemu: Device, test_key: bytes,
                                                                 tmp_path: Path) -> None:
    """The man in the middle sees STATE's challenge and signs, with the public test key, a STATE
    claiming the asked ε = 0.5 (here the device holds that key, so even its nonce is genuine).
    Over a serial URL `query -e 0.5` without --key-file refuses before any frame (exit 8): the
    old host trusted the forgery, sent no CONFIG, and the rows ran (and were charged) at the
    device's ε = 1 -- against a production device the honest outcome was this same refusal."""
    challenges: list[bytes] = []

    def note_challenge(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.STATE:
            challenges.append(f.body)
        return None

    def forge(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.STATE | P.RESPONSE and challenges:
            v = list(S.STATE_BODY_FMT.unpack(f.body[:S.STATE_BODY]))
            v[11] = MICRO // 2  # eps_micro (after the nonce, BUDGET's fields)
            body = S.STATE_BODY_FMT.pack(*v)
            return answer(f, body + P._hmac(test_key, S.AUTH_DOMAIN_STATE, challenges.pop(0), body))
        return None
    mitm.to_device, mitm.to_host = note_challenge, forge
    before = authentic_state(qemu, test_key)
    r = mitm.cli("query", "-e", "0.5", "--json", rows_file(tmp_path, 2))
    assert r.returncode == 8, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "pass --key-file" in r.stderr and "man in the middle" in r.stderr
    assert json.loads(r.stdout)["exit_code"] == 8
    assert mitm.sent() == Counter(), "a frame was sent before the refusal"
    after = authentic_state(qemu, test_key)
    assert (after.epsilon_micro, after.daily_spent) == (before.epsilon_micro, before.daily_spent) == (MICRO, 0)


def test_query_reads_each_state_and_info_once(mitm: Proxy, qemu: Device, test_key: bytes, tmp_path: Path) -> None:
    """With --key-file: STATE once to decide (its nonce signs the CONFIG), once to check the
    CONFIG, once after the stream (what was charged, issue 39 item 10); INFO once (connect's, on a board URL; the old host asked it again after the stream).
    Without a key or options: BUDGET alone, for the table."""
    x = rows_file(tmp_path, 2)
    r = mitm.cli("query", "--key-file", KEY, "-e", "0.25", "--json", x)
    assert r.returncode == 0, r.stderr
    sent = mitm.sent()
    assert (sent[P.INFO], sent[P.STATE], sent[P.CHALLENGE], sent[P.CONFIG], sent[P.BUDGET], sent[P.QUERY]) == \
        (1, 3, 0, 1, 0, 2), sent  # STATE: to decide, to check the CONFIG, and the spend after the stream
    assert authentic_state(qemu, test_key).epsilon_micro == MICRO // 4
    r = mitm.cli("query", "--json", x)
    assert r.returncode == 0, r.stderr
    sent = mitm.sent()
    assert (sent[P.INFO], sent[P.BUDGET], sent[P.STATE], sent[P.CONFIG], sent[P.QUERY]) == (1, 1, 0, 0, 2), sent


def forged_rate_refusals(f: frames.Frame) -> list[bytes] | None:
    """A proxy rule: every QUERY answer (charged by the device) swapped for a forged ERR_RATE."""
    if f.type == P.QUERY | P.RESPONSE:
        return [frames.encode(P.ERROR, f.seq, S.ERROR_BODY_FMT.pack(S.ErrorCode.ERR_RATE, P.QUERY))]
    return None


def test_forged_refusals_for_charged_answers_are_reported(mitm: Proxy, qemu: Device, test_key: bytes,
                                                          tmp_path: Path) -> None:
    """Issue 39 item 10: every charged QUERY answer swapped for a forged ERR_RATE. With --key-file
    query reads the authenticated STATE after the stream and reports the 5 epsilon charged for
    answers it never received (exit 7, `charged_not_received` in the JSON error; the old host
    said 5 rows refused, exit 8, and never looked); without a key it says it cannot check."""
    x = rows_file(tmp_path, 5)
    mitm.to_host = forged_rate_refusals
    r = mitm.cli("query", "--key-file", KEY, "--json", x)
    assert r.returncode == 7, r.stdout + r.stderr
    lines = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [ln["status"] for ln in lines[:-1]] == ["ERR_RATE"] * 5
    assert lines[-1]["error"] == "ERR_CHARGED_NOT_RECEIVED" and lines[-1]["charged_not_received"] == 5.0, lines[-1]
    err = r.stderr.splitlines()[-1]
    assert "5 epsilon was charged for answers it did not receive (5 rows reported refused, 0 lost)" in err, err
    assert authentic_state(qemu, test_key).daily_spent == 5 * MICRO  # what the device did charge
    r = mitm.cli("query", x)
    assert r.returncode == 8, r.stdout + r.stderr
    assert "5 rows were reported refused or lost; without --key-file this host cannot check" in r.stderr, r.stderr
    mitm.to_host = lambda f: None  # an honest link: the check passes, nothing more is said
    r = mitm.cli("query", "--key-file", KEY, "--json", x)
    assert r.returncode == 0 and "charged" not in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_signal_during_query_exits_with_its_own_code(mitm: Proxy, tmp_path: Path, signum: int,
                                                              code: int) -> None:
    """The first signal waits for the answer in flight (here withheld by the proxy); the second
    interrupts at once, with the signal's code: 143 for SIGTERM (the old host said 130), 130 for
    SIGINT, and one JSON error object. With a 600 s timeout only the second signal can end the
    command within the 30 s bound."""
    mitm.to_device = lambda f: [] if f.type == P.QUERY else None
    p = start_cli("query", "--json", rows_file(tmp_path, 5), "--target", mitm.url, env={"EDGEDP_TIMEOUT": "600"})
    wait_for(p, lambda: any(f.type == P.QUERY for f in mitm.seen))
    p.send_signal(signum)
    signal_taken(p)
    assert p.poll() is None  # the signal taken, still waiting for the answer in flight
    p.send_signal(signum)
    out, err = p.communicate(timeout=30)
    assert p.returncode == code, err
    assert "Traceback" not in err and json.loads(out.splitlines()[-1])["exit_code"] == code


def wait_for(p: subprocess.Popen, seen: Callable[[], bool]) -> None:
    """Wait until ``seen()`` while the command runs (60 s: a liveness bound)."""
    deadline = time.monotonic() + 60
    while not seen():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)


def refusing_first_info(infos: list[frames.Frame]) -> Rule:
    """A rule that answers the first INFO with an ERROR (kept in ``infos``), so query asks again at its end."""
    def rule(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.INFO | P.RESPONSE and not infos:
            infos.append(f)
            return [frames.encode(P.ERROR, f.seq, S.ERROR_BODY_FMT.pack(S.ErrorCode.ERR_UNKNOWN, P.INFO))]
        return None
    return rule


def test_sigterm_during_query_cleanup_keeps_the_summary(mitm: Proxy, qemu: Device, tmp_path: Path) -> None:
    """SIGTERM while query waits for its last INFO, after the stream (connect's INFO was refused
    on the way, so the command asks again): still deferred, so the command closes the target
    and the file and ends with the summary and 143 (the old host raised at once and said only
    `terminated`)."""
    infos: list[frames.Frame] = []

    def hold_second_info(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.INFO and infos:
            infos.append(f)
            return []
        return None
    mitm.to_host, mitm.to_device = refusing_first_info(infos), hold_second_info
    out = tmp_path / "a.jsonl"
    p = start_cli("query", "--json", "--out", str(out), rows_file(tmp_path, 2), "--target", mitm.url)
    wait_for(p, lambda: len(infos) == 2)
    assert sum(f.type == P.QUERY for f in mitm.seen) == 2
    p.send_signal(signal.SIGTERM)
    signal_taken(p)
    qemu.send_raw(frames.encode(P.INFO, infos[1].seq, infos[1].body))  # the held INFO goes on: answered
    stdout, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert f"interrupted after 2 of 2 rows (2 answered); 2 answers saved in {out}" in err, err
    assert json.loads(stdout.splitlines()[-1])["exit_code"] == 143 and len(out.read_text().splitlines()) == 2


def test_sigterm_after_a_signed_command_says_whether_it_took_effect(mitm: Proxy, qemu: Device,
                                                                    test_key: bytes) -> None:
    """SIGTERM while `admin config` waits for the answer to its signed CONFIG (the proxy withholds
    it; the device applied the command): the command re-reads the authenticated state and says
    the CONFIG took effect, exit 143 (the old host said only `terminated`)."""
    mitm.to_host = lambda f: [] if f.type == P.CONFIG | P.RESPONSE else None
    counter = authentic_state(qemu, test_key).auth_counter
    p = start_cli("admin", "config", "--key-file", KEY, "--daily-cap", "5", "--target", mitm.url)
    wait_for(p, lambda: any(f.type == P.CONFIG for f in mitm.seen))
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    mitm.settle()
    assert p.returncode == 143, err
    assert f"terminated: re-read the authenticated state: CONFIG took effect (counter {counter + 1})" in err, err
    assert "Traceback" not in err and authentic_state(qemu, test_key).daily_cap == 5 * MICRO


def hold_first(kind: int, held: list[frames.Frame]) -> Rule:
    """A rule that withholds the first frame of ``kind`` (kept in ``held``)."""
    def rule(f: frames.Frame) -> list[bytes] | None:
        if f.type == kind and not held:
            held.append(f)
            return []
        return None
    return rule


def test_a_link_error_after_sigterm_still_ends_with_the_summary(mitm: Proxy, tmp_path: Path) -> None:
    """SIGTERM while the first answer is withheld, and then no answer at all: the stream's
    TransportError still ends with the interrupted summary, the error in it, and 143 (the old
    host exited with the transport error's code and no summary)."""
    held: list[frames.Frame] = []
    mitm.to_device = hold_first(P.QUERY, held)
    out = tmp_path / "a.jsonl"
    p = start_cli("query", "--json", "--out", str(out), rows_file(tmp_path, 3), "--target", mitm.url,
                  env={"EDGEDP_TIMEOUT": "2"})
    wait_for(p, lambda: bool(held))
    p.send_signal(signal.SIGTERM)
    stdout, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert "Traceback" not in err and "error: interrupted after 1 of 3 rows (0 answered); 0 answers saved in " \
        f"{out}; then: no response from the device within 2 s" in err, err
    assert json.loads(stdout.splitlines()[-1])["exit_code"] == 143


def test_after_a_signal_the_last_info_is_not_waited_for_a_full_timeout(mitm: Proxy, qemu: Device,
                                                                       tmp_path: Path) -> None:
    """connect's INFO refused, SIGTERM during the stream, the last INFO withheld: the command
    waits 2 s for it (not the timeout, as the old host did, which then exited with the transport
    error's code) and ends with the summary and 143. The timeout is 600 s: a full wait would
    pass the 30 s bound, and the error names the wait."""
    infos: list[frames.Frame] = []
    held: list[frames.Frame] = []
    hold_query = hold_first(P.QUERY, held)
    mitm.to_host = refusing_first_info(infos)
    mitm.to_device = lambda f: [] if f.type == P.INFO and infos else hold_query(f)
    p = start_cli("query", "--json", rows_file(tmp_path, 2), "--target", mitm.url, env={"EDGEDP_TIMEOUT": "600"})
    wait_for(p, lambda: bool(held))
    p.send_signal(signal.SIGTERM)
    signal_taken(p)
    qemu.send_raw(frames.encode(P.QUERY, held[0].seq, held[0].body))  # answered: the stream ends
    stdout, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert "interrupted after 1 of 2 rows (1 answered); then: no response from the device within 2 s" in err, err


def test_an_ignored_sigterm_does_not_stop_the_stream(mitm: Proxy, qemu: Device, tmp_path: Path) -> None:
    """The parent ignores SIGTERM (SIG_IGN, inherited): a SIGTERM mid-stream changes nothing and
    every row is answered (the old host stopped after the answer in flight and exited 143)."""
    held: list[frames.Frame] = []
    mitm.to_device = hold_first(P.QUERY, held)
    p = start_cli("query", "--json", rows_file(tmp_path, 3), "--target", mitm.url,
                  preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    wait_for(p, lambda: bool(held))
    p.send_signal(signal.SIGTERM)
    signal_taken(p)
    qemu.send_raw(frames.encode(P.QUERY, held[0].seq, held[0].body))
    stdout, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert [json.loads(x)["status"] for x in stdout.splitlines()] == ["ok"] * 3


def test_an_epsilon_from_edgedp_toml_is_refused_at_a_url_saying_so(mitm: Proxy, tmp_path: Path) -> None:
    """edgedp.toml's epsilon, no --key-file, a serial URL: refused before any frame (exit 8), and
    the message names edgedp.toml and the test images' key file (the old one spoke of --epsilon,
    which the command line did not have)."""
    (tmp_path / "edgedp.toml").write_text("[defaults]\nepsilon = 0.5\n")
    r = run_cli("query", rows_file(tmp_path, 2), "--target", mitm.url,
                env={"EDGEDP_CONFIG": str(tmp_path / "edgedp.toml")})
    assert r.returncode == 8, r.stderr
    announced, error = r.stderr.splitlines()  # the value the file gave, named; then the refusal
    assert announced == f"edgedp: epsilon 0.5 from {tmp_path / 'edgedp.toml'}", r.stderr
    assert error.startswith("edgedp: error:") and "(epsilon from edgedp.toml is checked against" in error, r.stderr
    assert r.stderr.rstrip().endswith("; for a test image: --key-file tests/keys/test-device.key"), r.stderr
    assert mitm.sent() == Counter(), "a frame was sent before the refusal"


def test_tradeoff_device_check_reads_the_configuration_from_state(mitm: Proxy, qemu: Device, test_key: bytes,
                                                                  tmp_path: Path) -> None:
    """BUDGET rewritten to claim ε = 0.5 (the device runs 1): with --key-file the trade-off check
    never reads BUDGET and tests the answers at STATE's ε; without a key it says its figures are
    the unauthenticated BUDGET's (the old check always compared against BUDGET's)."""
    mitm.to_host = budget_claims_half_epsilon
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "out.npz", probs=rng.dirichlet(np.ones(10), size=40), labels=rng.integers(0, 10, 40))
    args = ("tradeoff", "--data", str(tmp_path / "out.npz"), "--quick", "--modes", "label", "--epsilons", "1",
            "--target-queries", "40", "--no-progress")
    r = mitm.cli(*args, "--key-file", KEY, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["device_check"]
    assert d["authenticated"] is True and d["epsilon"] == 1.0 and d["queries"] == 40 and d["ok"], d
    sent = mitm.sent()
    assert (sent[P.BUDGET], sent[P.STATE], sent[P.QUERY]) == (0, 1, 40)
    r = mitm.cli(*args)
    assert "ε = 0.5" in r.stdout and "unauthenticated BUDGET" in r.stdout, r.stdout
    assert mitm.sent()[P.BUDGET] == 1


@pytest.mark.parametrize("error", [S.ErrorCode.ERR_ENTROPY, S.ErrorCode.ERR_LEN, S.ErrorCode.ERR_AUTH],
                         ids=lambda e: e.name)
def test_an_untagged_error_after_a_signed_frame_is_state_unknown(mitm: Proxy, qemu: Device, test_key: bytes,
                                                                 error: S.ErrorCode) -> None:
    """Issue 39 item 3: the signed CONFIG withheld and answered with a plain ERROR frame (no tag;
    the device's own ERR_ENTROPY or ERR_LEN look the same). The CLI reports state unknown (exit 6;
    the old host believed the refusal: exit 8) after re-reading the authenticated state, so the
    frame delivered later is refused, its nonce gone; the device still allows 1000 ε a day."""
    withheld: list[frames.Frame] = []

    def swallow(f: frames.Frame) -> list[bytes] | None:
        if f.type != P.CONFIG:
            return None
        withheld.append(f)
        mitm.forged.append(frames.encode(P.ERROR, f.seq, S.ERROR_BODY_FMT.pack(error, P.CONFIG)))
        return []
    mitm.to_device = swallow
    r = mitm.cli("admin", "config", "--key-file", KEY, "--daily-cap", "5", "--json")
    assert r.returncode == 6, r.stdout + r.stderr
    assert json.loads(r.stdout)["error"] == "ERR_STATE_UNKNOWN" and "configured" not in r.stdout
    assert f"untagged ERROR ({error.name}" in r.stderr and "did not take effect" in r.stderr, r.stderr
    assert r.stderr.count("did not take effect") == 2 and "signed again for the fresh nonce" in r.stderr
    # the state before, the re-read after the first CONFIG (the retry signs for its nonce), and after the second
    assert len(withheld) == 2 and mitm.sent()[P.STATE] == 3
    for w in withheld:
        qemu.send_raw(frames.encode(w.type, w.seq, w.body))
        f = qemu.receive()
        assert f.type == P.CONFIG | P.RESPONSE and P.AdminAnswer.parse(f.body).result == S.ErrorCode.ERR_AUTH
    assert authentic_state(qemu, test_key).daily_cap == 1000 * MICRO


def test_an_untagged_error_and_a_dropped_reread_give_both_reasons(mitm: Proxy, qemu: Device,
                                                                  test_key: bytes) -> None:
    """Item 3's worst case: the signed CONFIG withheld, a plain ERROR forged, and the STATE re-read
    after it dropped too. Still exit 6, never "refused", and the message gives both reasons and
    says the frame may still land (here it does: nothing drew a new nonce)."""
    withheld: list[frames.Frame] = []

    def swallow(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.CONFIG:
            withheld.append(f)
            mitm.forged.append(frames.encode(P.ERROR, f.seq, S.ERROR_BODY_FMT.pack(S.ErrorCode.ERR_ENTROPY,
                                                                                   P.CONFIG)))
            return []
        return [] if f.type == P.STATE and withheld else None
    mitm.to_device = swallow
    r = mitm.cli("admin", "config", "--key-file", KEY, "--daily-cap", "5", "--timeout", "2")
    assert r.returncode == 6, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "untagged ERROR (ERR_ENTROPY" in r.stderr, r.stderr
    assert "could not be re-read (no response from the device within 2 s" in r.stderr, r.stderr
    assert "may still land" in r.stderr and "configured" not in r.stdout
    qemu.send_raw(frames.encode(withheld[0].type, withheld[0].seq, withheld[0].body))
    f = qemu.receive()
    assert f.type == P.CONFIG | P.RESPONSE and P.AdminAnswer.parse(f.body).result == 0
    assert authentic_state(qemu, test_key).daily_cap == 5 * MICRO


def injecting_ahead_of(kind: int, request: int, times: int) -> tuple[Rule, list[frames.Frame]]:
    """A rule that puts a frame of type ``request`` of its own (a CHALLENGE, STATE or AUDIT_LOG:
    each draws a new nonce) on the wire just ahead of each of the first ``times`` frames of
    ``kind``; and the list of those frames."""
    seen: list[frames.Frame] = []

    def rule(f: frames.Frame) -> list[bytes] | None:
        if f.type != kind or len(seen) >= times:
            return None
        seen.append(f)
        body = b"" if request == P.CHALLENGE else bytes(S.AUTH_NONCE)
        return [frames.encode(request, 0x7F00 + len(seen), body), frames.encode(f.type, f.seq, f.body, f.version)]
    return rule, seen


@pytest.mark.parametrize("request_type", [P.CHALLENGE, P.STATE, P.AUDIT_LOG], ids=lambda t: P.T(t).name)
def test_one_injected_frame_before_the_signed_one_is_retried_once(mitm: Proxy, qemu: Device, test_key: bytes,
                                                                  request_type: int) -> None:
    """Issue 39 item 11: a peer puts one CHALLENGE, STATE or AUDIT_LOG of its own between the
    operator's STATE and the signed CONFIG, so the device draws a new nonce and refuses the CONFIG
    (tagged over a nonce the host never saw). The CLI re-reads the authenticated state (not taken),
    signs once more for its nonce, says why, and the change lands (exit 0; the old host said
    "state unknown", exit 6). Injected before every CONFIG, the retry fails too: exit 6, both reasons."""
    rule, hit = injecting_ahead_of(P.CONFIG, request_type, 1)
    mitm.to_device = rule
    r = mitm.cli("admin", "config", "--key-file", KEY, "--daily-cap", "5", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(hit) == 1 and json.loads(r.stdout)["daily_cap"] == 5.0
    assert r.stderr.count("\n") == 1 and "CONFIG did not take effect" in r.stderr, r.stderr
    assert "signed it again for the fresh nonce, which the device accepted" in r.stderr, r.stderr
    sent = mitm.sent()
    assert (sent[P.CONFIG], sent[P.STATE]) == (2, 3), sent  # (the host's frames: before, the re-read, after)
    assert authentic_state(qemu, test_key).daily_cap == 5 * MICRO

    rule, hit = injecting_ahead_of(P.CONFIG, request_type, 2)
    mitm.to_device = rule
    r = mitm.cli("admin", "config", "--key-file", KEY, "--daily-cap", "7")
    assert r.returncode == 6, r.stdout + r.stderr
    assert len(hit) == 2 and r.stderr.count("\n") == 1 and r.stderr.count("did not take effect") == 2, r.stderr
    assert "signed again for the fresh nonce" in r.stderr, r.stderr
    assert authentic_state(qemu, test_key).daily_cap == 5 * MICRO


def test_stale_frames_do_not_restart_the_timeout(mitm: Proxy) -> None:
    """Issue 39 item 8: the BUDGET request withheld and a frame with another seq sent to the host
    every second: `budget --timeout 2` gives up 2 s after it began to wait (the old host restarted
    its timeout at every stale frame and waited for ever)."""
    budget_seen = threading.Event()

    def withhold_budget(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.BUDGET:
            budget_seen.set()
            return []
        return None
    mitm.to_device = withhold_budget
    stop = threading.Event()

    def stale_every_second() -> None:
        budget_seen.wait(60)
        while not stop.wait(1.0):
            mitm.forged.append(frames.encode(P.PING | P.RESPONSE, 0xFFF0, b"stale"))
    t = threading.Thread(target=stale_every_second, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        r = subprocess.run([EDGEDP, "budget", "--timeout", "2", "--target", mitm.url], capture_output=True,
                           text=True, timeout=20)
    finally:
        stop.set()
        t.join()
    mitm.settle()
    assert budget_seen.is_set() and r.returncode == 3, r.stderr
    assert "no response from the device within 2 s" in r.stderr and time.monotonic() - t0 < 10, r.stderr


def test_frames_queued_in_the_tarpit_do_not_hold_the_operator_past_the_timeout(mitm: Proxy, qemu: Device,
                                                                             test_key: bytes) -> None:
    """Item 8's tarpit: with the rate limit spent and a 300 ms tarpit, a peer puts 6 over-limit
    QUERY frames ahead of the operator's STATE; their ERR_RATE answers come about every 1.1 s
    (QEMU's clock runs slower than the host's, measured), and the STATE's after about 6.5 s.
    `budget --key-file --timeout 3` gives up 3 s after it began to wait (the old host restarted
    its timeout at each of them, waited it all out and exited 0)."""
    qemu.admin(P.RATE, P.Rate(1, 0, 2000).pack(), test_key)
    try:
        qemu.query(np.array([0.2, 0.8], dtype=np.float32), "label")  # the bucket's one answer
        row = P.pack_vector(np.array([0.2, 0.8], dtype=np.float32), Mode.parse("label"))
        tarpit = [frames.encode(P.QUERY, 0x7000 + i, row) for i in range(12)]

        def queue_ahead(f: frames.Frame) -> list[bytes] | None:
            if f.type == P.STATE and tarpit:
                ahead = [*tarpit, frames.encode(f.type, f.seq, f.body, f.version)]
                tarpit.clear()
                return ahead
            return None
        mitm.to_device = queue_ahead
        t0 = time.monotonic()
        r = subprocess.run([EDGEDP, "budget", "--key-file", KEY, "--timeout", "3", "--target", mitm.url],
                           capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - t0
        mitm.settle()
        assert not tarpit and r.returncode == 3, r.stdout + r.stderr
        assert "no response from the device within 3 s" in r.stderr and elapsed < 6, (elapsed, r.stderr)
    finally:
        qemu.sync(120)  # the tarpit is over
        qemu.admin(P.RATE, P.Rate().pack(), test_key)  # (the store keeps the limit across the fixture's resets)


EVIL_BOARD = "\x1b[2J\x1b]0;pwned\x07\rok\\n"
"""A board name that clears the screen, retitles the terminal and rewrites the line."""


def info_with(board: str, version: str | None = None, build: int | None = None, model_name: str | None = None) -> Rule:
    """A proxy rule: INFO answers with this board name (and firmware version, build flag, model name)."""
    def rule(f: frames.Frame) -> list[bytes] | None:
        if f.type != P.INFO | P.RESPONSE:
            return None
        head = list(P.Info.FMT.unpack_from(f.body))
        off = P.Info.FMT.size
        texts = []
        for _ in range(3):  # INFO v2: firmware version, board, model name
            n = f.body[off]
            texts.append(f.body[off + 1: off + 1 + n])
            off += 1 + n
        if build is not None:
            head[1] = build  # head[0] is info_version
        texts = [version.encode() if version is not None else texts[0], board.encode(),
                 model_name.encode() if model_name is not None else texts[2]]
        return answer(f, P.Info.FMT.pack(*head) + b"".join(bytes([len(t)]) + t for t in texts))
    return rule


def test_device_supplied_strings_are_escaped_in_human_output(mitm: Proxy, tmp_path: Path) -> None:
    """Issue 39 item 9: INFO's board name (and firmware version) with terminal escape sequences.
    `info`, `query -v` and verify's refusal of a production image print them escaped (the old host wrote
    them raw, even into a pipe); `info --json` carries the device's string as it came."""
    mitm.to_host = info_with(EVIL_BOARD, version="0.3.0\x1b[1A", model_name="m\x1b[2K")
    r = mitm.cli("info")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\r" not in r.stdout, repr(r.stdout)
    assert "model             m\\x1b[2K (" in r.stdout, r.stdout
    assert "board             \\x1b[2J\\x1b]0;pwned\\x07\\rok\\\\n\n" in r.stdout, r.stdout
    assert "firmware_version  0.3.0\\x1b[1A\n" in r.stdout, r.stdout
    r = mitm.cli("info", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["board"] == EVIL_BOARD, r.stdout
    r = subprocess.run([EDGEDP, "-v", "query", rows_file(tmp_path, 1), "--target", mitm.url], capture_output=True,
                       text=True, timeout=120)
    mitm.settle()
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr and "device: \\x1b[2J\\x1b]0;pwned\\x07\\rok\\\\n, test build" in r.stderr, r.stderr
    mitm.to_host = info_with(EVIL_BOARD, build=0)  # a production image: verify refuses, naming the board
    r = mitm.cli("verify", "--json")
    assert r.returncode != 0 and "needs a test image" in r.stderr, r.stderr
    assert "\x1b" not in r.stderr and "(board \\x1b[2J" in r.stderr, r.stderr
    assert json.loads(r.stdout)["error"] == "ERR_BUILD"


def test_a_day_past_year_9999_is_shown_not_a_traceback(mitm: Proxy) -> None:
    """Issue 39 item 7: BUDGET rewritten to day 3,000,000 (after 9999-12-31): `budget` shows the
    day (the old host ended in an OverflowError traceback)."""
    def far_day(f: frames.Frame) -> list[bytes] | None:
        if f.type == P.BUDGET | P.RESPONSE:
            v = list(S.BUDGET_BODY_FMT.unpack(f.body))
            v[0] = v[1] = 3_000_000  # the recorded day and today
            return answer(f, S.BUDGET_BODY_FMT.pack(*v))
        return None
    mitm.to_host = far_day
    r = mitm.cli("budget")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "day 3000000 (after 9999-12-31)" in r.stdout, r.stdout
    r = mitm.cli("budget", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["day"] == 3_000_000, r.stdout + r.stderr
