"""The fleet registry on both backends it supports: SQLite (the default) and a real PostgreSQL
this module starts itself (tests/helpers.py Postgres, from Debian's package). Snapshots are
stored only from answers whose tag verified; audit entries once per seq, the overwritten ones
counted; every alert of docs/fleet.md raised by the change that means it, and not otherwise."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgedp import schema as S
from edgedp.device import protocol as P
from edgedp.fleet import registry as R
from edgedp.fleet import status

from ..helpers import postgres

KEY = bytes(range(32))
CHALLENGE = bytes(16)
MICRO = 1_000_000


def state(daily: float = 0.0, lifetime: float = 0.0, day: int = 20454, recorded: int | None = None,
          daily_cap: float = 10.0, lifetime_cap: float = 100.0, store: int = 1, store_ok: bool = True,
          key: bytes = KEY) -> P.State | None:
    """A STATE answer as a device tags it, parsed (None if it does not verify with KEY)."""
    body = S.STATE_BODY_FMT.pack(bytes(16), day if recorded is None else recorded, day, int(daily_cap * MICRO),
                                 int(daily * MICRO), int(lifetime_cap * MICRO), int(lifetime * MICRO),
                                 int((daily_cap - daily) * MICRO), 7, store, int(store_ok), 500_000,
                                 0.0, 1.0, 1.0, -1, 4, 60, 100)
    tag = P._hmac(key, S.AUTH_DOMAIN_STATE, CHALLENGE, body)
    return P.State.parse(body + tag, KEY, CHALLENGE)


def audit(total: int, seqs: list[int], event: int = 1) -> P.AuditLog:
    entries = b"".join(S.AUDIT_ENTRY_FMT.pack(q, 20454, q, event, 0) for q in seqs)
    body = S.AUDIT_HEAD_FMT.pack(bytes(16), total, len(seqs)) + entries
    log = P.AuditLog.parse(body + P._hmac(KEY, S.AUTH_DOMAIN_AUDIT, CHALLENGE, body), KEY, CHALLENGE)
    assert log is not None
    return log


@pytest.fixture(scope="module")
def pg() -> Iterator[object]:
    server = postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def reg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[R.Registry]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'sub' / 'registry.sqlite'}"
    else:
        url = request.getfixturevalue("pg").create(f"t{os.getpid()}_{abs(hash(request.node.nodeid))}")
    r = R.open_registry(url)
    yield r
    r.close()


def test_migrated_to_head_and_sqlite_folder_private(reg: R.Registry, tmp_path: Path) -> None:
    assert R.current_revision(reg.engine) == R.head_revision()
    if reg.engine.url.get_backend_name() == "sqlite":
        assert (tmp_path / "sub").stat().st_mode & 0o077 == 0
    R.upgrade(reg.engine)  # idempotent
    assert R.current_revision(reg.engine) == R.head_revision()


def test_forged_state_is_not_a_state() -> None:
    assert state(key=bytes(32)) is None  # what add_snapshot could never be given


def test_snapshot_and_audit_dedup(reg: R.Registry) -> None:
    with reg.session() as s:
        R.add_device(s, "a", "socket://127.0.0.1:1")
        snap, new = R.add_snapshot(s, "a", state(1.0, 2.0), audit(3, [1, 2, 3]))
        R.add_sync(s, "a", "ok", None, snap)
    assert new == 3 and snap.audit_lost == 0
    with reg.session() as s:  # the same three again and two more: stored once
        snap, new = R.add_snapshot(s, "a", state(1.5, 2.5), audit(5, [1, 2, 3, 4, 5]))
        R.add_sync(s, "a", "ok", None, snap)
    assert new == 2 and snap.audit_lost == 0
    assert [e["seq"] for e in status.audit_timeline(reg, "a")] == [1, 2, 3, 4, 5]
    row = status.status_rows(reg)[0]
    assert row["id"] == "a" and row["authenticated"] is True
    assert (row["daily_spent"], row["lifetime_spent"], row["daily_cap"], row["lifetime_cap"]) == (1.5, 2.5, 10.0, 100.0)
    assert row["alerts"] == [] and row["last_seen"] is not None
    assert status.daily_spend(reg, "a") == [{"day": 20454, "date": "2026-01-01", "spent": 1.5, "cap": 10.0}]


def test_unknown_device_refused(reg: R.Registry) -> None:
    with pytest.raises(R.RegistryError, match="not in the registry"), reg.session() as s:
        R.add_snapshot(s, "ghost", state())


def kinds(reg: R.Registry) -> list[str]:
    return [a["kind"] for a in status.status_rows(reg)[0]["alerts"]]


def two_syncs(reg: R.Registry, first: P.State | None, second: P.State | None,
              logs: tuple[P.AuditLog, P.AuditLog] | None = None) -> list[str]:
    with reg.session() as s:
        R.add_device(s, "d", "qemu")
    for st, log in zip((first, second), logs or (None, None)):
        assert st is not None
        with reg.session() as s:
            snap, _ = R.add_snapshot(s, "d", st, log)
            R.add_sync(s, "d", "ok", None, snap)
    return kinds(reg)


def test_alert_daily_cap(reg: R.Registry) -> None:
    assert two_syncs(reg, state(8.9), state(9.0)) == ["daily-cap"]


def test_alert_lifetime_cap(reg: R.Registry) -> None:
    assert two_syncs(reg, state(1, 89), state(1, 90)) == ["lifetime-cap"]


def test_no_alert_below_90_percent_or_without_cap(reg: R.Registry) -> None:
    assert two_syncs(reg, state(1, 2), state(8.99, 500, lifetime_cap=0)) == []


def test_alert_audit_overwritten(reg: R.Registry) -> None:
    # 40 events since the first sync, the ring holds 32: events 4..8 were overwritten unread
    logs = (audit(3, [1, 2, 3]), audit(40, list(range(9, 41))))
    assert two_syncs(reg, state(), state(), logs) == ["audit-overwritten"]
    assert status.status_rows(reg)[0]["alerts"][0]["message"].startswith("5 audit events")


def test_alert_store_loss_by_state_and_by_event(reg: R.Registry) -> None:
    assert two_syncs(reg, state(), state(store=0, store_ok=False)) == ["store-loss"]


def test_alert_store_event(reg: R.Registry) -> None:
    logs = (audit(1, [1]), audit(2, [1, 2], event=int(S.AuditEvent.STORE)))
    assert two_syncs(reg, state(), state(), logs) == ["store-loss"]


def test_alert_clock_back(reg: R.Registry) -> None:
    assert two_syncs(reg, state(day=20455), state(day=20454)) == ["clock-back"]


def test_alert_spend_down(reg: R.Registry) -> None:
    assert two_syncs(reg, state(2, 5), state(1, 4)) == ["spend-down"]


def test_no_spend_down_on_a_new_day(reg: R.Registry) -> None:
    assert two_syncs(reg, state(2, 5, day=20454), state(0, 5, day=20455)) == []


def test_failed_sync_flagged_and_keeps_last_authentic_numbers(reg: R.Registry) -> None:
    two_syncs(reg, state(1, 1), state(2, 2))
    with reg.session() as s:
        R.add_sync(s, "d", "not-authentic", "the device's STATE answer is not authentic")
    row = status.status_rows(reg)[0]
    assert row["authenticated"] is False and row["daily_spent"] == 2.0
    assert [a["kind"] for a in row["alerts"]] == ["not-authentic"]


def test_training_runs(reg: R.Registry) -> None:
    with reg.session() as s:
        R.add_training_run(s, "mlp", 1.2, 1e-5, "add-remove", [0.5, 0.9, 1.2])
        R.add_training_run(s, "seeded", None, 1e-5, "add-remove", [None, None])
    runs = status.training_runs(reg)
    assert [(r["name"], r["epsilon"], r["per_epoch"]) for r in runs] == [
        ("mlp", 1.2, [0.5, 0.9, 1.2]), ("seeded", None, [None, None])]


def test_bad_url_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="registry URL nosuchdb"):
        R.open_registry("nosuchdb://x/y")


def test_a_registry_file_others_could_have_written_is_refused(tmp_path: Path) -> None:
    """Its snapshots count as authenticated: a file another user could write is not read."""
    db = tmp_path / "registry.sqlite"
    R.open_registry(f"sqlite:///{db}").close()
    db.chmod(0o666)
    with pytest.raises(ValueError, match=r"registry .* refused: writable by group and others"):
        R.open_registry(f"sqlite:///{db}")
    db.chmod(0o600)
    with R.open_registry(f"sqlite:///{db}") as reg, reg.session() as s:
        assert R.devices(s) == []
