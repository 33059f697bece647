"""The on-device audit log (issue 17 item 8): every event kind is logged with its day and admin
counter, the ring survives restarts and wraps, AUDIT_LOG answers are tagged over the host's
challenge, and `edgedp audit-log` prints them (exit 7 when the answer is not authentic)."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from edgedp import schema as S
from edgedp.device import admin, protocol as P
from edgedp.device.errors import DeviceError, NotAuthentic
from edgedp.device.protocol import Caps, MechConfig
from edgedp.mech.lattice import MICRO
from edgedp.schema import AuditEvent as E

from ..helpers import KEY, TEST_EPOCH, run_cli

pytestmark = pytest.mark.native
DAY = TEST_EPOCH // 86400
X = np.array([0.2, 0.8], dtype=np.float32)


def events(log: P.AuditLog) -> list[tuple[int, int | None, int, int]]:
    return [(e.event, e.day, e.counter, e.arg) for e in log.entries]


def test_each_event_is_logged_with_its_day_and_counter(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    log = dev.audit_log(test_key)
    assert events(log) == [(E.STORE, DAY, 0, S.StoreState.FRESH)] and log.total == 1
    # admin frames with a valid tag, accepted or refused (which commits no counter), with the stored counter
    dev.configure(test_key, MechConfig(), Caps(2 * MICRO))
    dev.set_time(test_key, TEST_EPOCH + 86400)
    with pytest.raises(DeviceError, match="ERR_BAD_VALUE"):
        dev.admin(P.RATE, struct.pack("<III", 1, 1, 2001), test_key)
    # the budget's first refusal of a day, once
    dev.query(X, "label")
    dev.query(X, "label")
    for _ in range(2):
        with pytest.raises(DeviceError, match="ERR_BUDGET"):
            dev.query(X, "label")
    dev.reset_budget(test_key)
    # the first rate refusal after an answer, once
    admin.run(dev, test_key, P.RATE, lambda b: P.Rate(1, 0, 0).pack(), lambda b, a: None)
    dev.query(X, "label")
    for _ in range(2):
        with pytest.raises(DeviceError, match="ERR_RATE"):
            dev.query(X, "label")
    log = dev.audit_log(test_key)
    assert events(log)[1:] == [
        (E.CONFIG, DAY, 1, 0), (E.SET_TIME, DAY + 1, 2, 0), (E.RATE, DAY + 1, 2, S.ErrorCode.ERR_BAD_VALUE),
        (E.EXHAUSTED, DAY + 1, 2, 0), (E.RESET_BUDGET, DAY + 1, 3, 0), (E.RATE, DAY + 1, 4, 0),
        (E.RATE_TRIP, DAY + 1, 4, 0)]
    assert [e.seq for e in log.entries] == list(range(1, 9)) and log.total == 8 and log.overwritten == 0
    # a forged admin frame (no valid tag) logs nothing; neither does a query that is answered
    with pytest.raises(DeviceError, match="ERR_AUTH"):
        dev.admin(P.RESET_BUDGET, b"", bytes(32))
    assert dev.audit_log(test_key).total == 8
    # the log survives a restart; a corrupt store and failed entropy at boot are logged
    raw = bytearray(posix_device.store.read_bytes())
    assert len(raw) == S.STORE_SIZE
    raw[8] ^= 1
    raw[S.STORE_SLOT_SIZE + 8] ^= 1
    posix_device.store.write_bytes(bytes(raw))
    dev = posix_device.start(EDP_POSIX_ENTROPY="fail")
    log = dev.audit_log(test_key)
    assert events(log)[-2:] == [(E.STORE, DAY, 0, S.StoreState.CORRUPT), (E.ENTROPY, DAY, 0, 0)]  # clock: EDP_POSIX_TIME
    assert log.total == 10 and [e.seq for e in log.entries] == list(range(1, 11))


def test_the_ring_wraps_and_reports_what_was_overwritten(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    for _ in range(S.AUDIT_ENTRIES + 4):
        dev.reset_budget(test_key)
    log = dev.audit_log(test_key)
    total = S.AUDIT_ENTRIES + 5
    assert log.total == total and len(log.entries) == S.AUDIT_ENTRIES and log.overwritten == 5
    assert [e.seq for e in log.entries] == list(range(6, total + 1))
    assert [e.counter for e in log.entries] == list(range(5, total))
    assert posix_device.start().audit_log(test_key).total == total  # the next seq is found after a restart


def test_audit_log_answers_are_fresh_and_tagged(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    a, b = dev.audit_log(test_key), dev.audit_log(test_key)
    assert a.nonce != b.nonce and a.entries == b.entries
    with pytest.raises(NotAuthentic):
        dev.audit_log(bytes(32))
    body = dev.request(P.AUDIT_LOG, b"c" * 16)
    assert P.AuditLog.parse(body, test_key, b"c" * 16) is not None
    assert P.AuditLog.parse(body, test_key, b"d" * 16) is None  # not replayable to another challenge
    forged = bytearray(body)
    forged[S.AUDIT_HEAD + 16] = E.CONFIG  # the first entry's event rewritten
    assert P.AuditLog.parse(bytes(forged), test_key, b"c" * 16) is None
    with pytest.raises(DeviceError, match="ERR_LEN"):
        dev.request(P.AUDIT_LOG, b"short")


def test_cli_audit_log_json_on_the_host_build(native_builds: None, tmp_path) -> None:
    env = {"EDP_STORE_FILE": str(tmp_path / "store.bin"), "EDP_POSIX_TIME": str(TEST_EPOCH)}
    assert run_cli("admin", "reset-budget", "--target", "posix", "--key-file", KEY, env=env).returncode == 0
    r = run_cli("audit-log", "--target", "posix", "--key-file", KEY, "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["authenticated"] is True and out["total"] == 2 and out["overwritten"] == 0
    assert [(e["seq"], e["event"], e["day"], e["counter"], e["detail"]) for e in out["entries"]] == [
        (1, "store", DAY, 0, "store fresh"), (2, "reset-budget", DAY, 1, "accepted")]
    r = run_cli("audit-log", "--target", "posix", "--key-file", KEY, env=env)
    assert r.returncode == 0 and "2 events logged, 2 kept (0 overwritten)" in r.stdout and "reset-budget" in r.stdout
    wrong = tmp_path / "wrong.key"
    wrong.write_text("11" * 32)
    wrong.chmod(0o600)  # a key file of one's own: others-readable ones are refused
    r = run_cli("audit-log", "--target", "posix", "--key-file", str(wrong), env=env)
    assert r.returncode == 7 and "not authentic" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("audit-log", "--target", "posix", env=env)
    assert r.returncode == 2 and "--key-file" in r.stderr
