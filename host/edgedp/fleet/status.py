"""The registry read: what ``edgedp fleet status --json`` prints (:func:`status_rows`), the
per-day spend series (:func:`daily_spend`), the audit timeline and the DP-SGD runs -- the one
module a reader of the registry (``fleet status``, the dashboard) needs. Nothing here writes.

Each row's numbers are the device's last *authenticated* state (``state_snapshots``); a device
whose last sync did not authenticate has ``authenticated`` false and an alert saying why, and
keeps showing the last numbers that did (with their ``last_seen``). The alerts compare the last
snapshot with the one before it (docs/fleet.md, "Alerts")."""
from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..device.protocol import day_date
from ..mech.lattice import to_epsilon
from .registry import AuditEntry, Device, Registry, Snapshot, Sync, TrainingRun, latest_provisioning

CAP_ALERT_FRACTION = 0.9
"""A spend at or above this fraction of its cap raises an alert."""
EMULATED = "emulated, not private"
"""What an emulated (qemu) device is, wherever the fleet shows it: its noise seed is public."""


def _eps(micro: int | None) -> float | None:
    return None if micro is None else to_epsilon(micro)


def _last_snapshots(s: Session, device_id: str, n: int = 2) -> Sequence[Snapshot]:
    return s.scalars(select(Snapshot).where(Snapshot.device_id == device_id)
                     .order_by(Snapshot.id.desc()).limit(n)).all()


def _last_sync(s: Session, device_id: str) -> Sync | None:
    return s.scalars(select(Sync).where(Sync.device_id == device_id).order_by(Sync.id.desc()).limit(1)).first()


def alerts(s: Session, device_id: str) -> list[dict]:
    """The device's alerts, each {"kind", "message"}: its last sync's failure (not-authentic,
    unreachable, refused), a spend at or above 90 % of its cap (daily-cap, lifetime-cap), audit
    events overwritten before a sync read them (audit-overwritten), a store lost or reset
    (store-loss), a clock moved back (clock-back), and a spend lower than the previous sync's
    (spend-down)."""
    out: list[dict] = []
    sync = _last_sync(s, device_id)
    if sync is not None and sync.outcome != "ok":
        out.append({"kind": sync.outcome, "message": f"last sync ({sync.at.isoformat()}): {sync.detail}"})
    snaps = _last_snapshots(s, device_id)
    if not snaps:
        return out
    cur, prev = snaps[0], (snaps[1] if len(snaps) > 1 else None)
    for kind, spent, cap in (("daily-cap", cur.daily_spent, cur.daily_cap),
                             ("lifetime-cap", cur.lifetime_spent, cur.lifetime_cap)):
        if cap > 0 and spent >= CAP_ALERT_FRACTION * cap:
            out.append({"kind": kind, "message": f"{kind.split('-')[0]} spend {to_epsilon(spent):g} is "
                                                 f"{100 * spent / cap:.0f} % of its cap {to_epsilon(cap):g}"})
    if cur.audit_lost:
        out.append({"kind": "audit-overwritten", "message": f"{cur.audit_lost} audit events were overwritten "
                                                            "(or torn) before a sync read them"})
    store_events = 0
    if prev is not None and prev.audit_total is not None:
        store_events = s.scalar(select(func.count()).select_from(AuditEntry).where(
            AuditEntry.device_id == device_id, AuditEntry.event == "store", AuditEntry.seq > prev.audit_total)) or 0
    if not cur.store_ok or store_events:
        why = f"store {cur.store}" + ("" if cur.store_ok else " (not usable: external answers refused)")
        if store_events:
            why += f"; {store_events} store event(s) in the audit log since the previous sync"
        out.append({"kind": "store-loss", "message": why})
    elif prev is not None and None not in (cur.audit_total, prev.audit_total) and \
            cur.audit_total < prev.audit_total:  # type: ignore[operator]  # both checked not None
        out.append({"kind": "store-loss", "message": f"the audit log went back from {prev.audit_total} to "
                                                     f"{cur.audit_total} events: the store was lost or replaced"})
    if prev is not None:
        if (prev.day is not None and (cur.day is None or cur.day < prev.day)) or cur.recorded_day < prev.recorded_day:
            out.append({"kind": "clock-back", "message": f"the device's day went from {day_date(prev.day)} to "
                                                         f"{day_date(cur.day) or 'no trusted clock'}"})
        if cur.lifetime_spent < prev.lifetime_spent or (
                cur.recorded_day == prev.recorded_day and cur.daily_spent < prev.daily_spent):
            out.append({"kind": "spend-down", "message": (
                f"spend went down since the previous sync: lifetime {to_epsilon(prev.lifetime_spent):g} -> "
                f"{to_epsilon(cur.lifetime_spent):g}, today {to_epsilon(prev.daily_spent):g} -> "
                f"{to_epsilon(cur.daily_spent):g}")})
    return out


def device_row(s: Session, d: Device) -> dict:
    """One device's status (the fields of ``fleet status --json``)."""
    snaps = _last_snapshots(s, d.id, 1)
    cur = snaps[0] if snaps else None
    sync = _last_sync(s, d.id)
    prov = latest_provisioning(s, d.id)
    return {
        "id": d.id, "board": d.board, "target": d.target, "emulated": d.emulated,
        "private": not d.emulated, "note": EMULATED if d.emulated else None,
        "authenticated": sync is not None and sync.outcome == "ok" and cur is not None,
        "daily_spent": _eps(cur.daily_spent) if cur else None,
        "lifetime_spent": _eps(cur.lifetime_spent) if cur else None,
        "daily_cap": _eps(cur.daily_cap) if cur else None,
        "lifetime_cap": _eps(cur.lifetime_cap) if cur and cur.lifetime_cap else None,
        "epsilon_per_query": _eps(cur.epsilon_per_query) if cur else None,
        "date": day_date(cur.day) if cur else None,
        "rate": ({"burst": cur.rate_burst or None, "per_minute": cur.rate_per_minute,
                  "tarpit_ms": cur.rate_tarpit_ms} if cur else None),
        "store": cur.store if cur else None,
        "audit_events": cur.audit_total if cur else None,
        "last_seen": cur.taken_at.isoformat() if cur else None,
        "last_sync": ({"at": sync.at.isoformat(), "outcome": sync.outcome, "detail": sync.detail}
                      if sync else None),
        "model": ({"name": prov.model_name, "sha256": prov.model_sha256} if prov else None),
        "key_fingerprint": prov.key_fingerprint if prov else None,
        "alerts": alerts(s, d.id),
    }


def status_rows(reg: Registry) -> list[dict]:
    """Every device's status, by id: the rows of ``fleet status --json`` (and the dashboard's
    ``/api/devices``)."""
    with reg.session() as s:
        return [device_row(s, d) for d in s.scalars(select(Device).order_by(Device.id)).all()]


def daily_spend(reg: Registry, device_id: str) -> list[dict]:
    """ε spent per device day, oldest first: for each day a sync saw, the highest daily spend an
    authenticated snapshot recorded for it ({"day", "date", "spent", "cap"})."""
    with reg.session() as s:
        rows = s.execute(select(Snapshot.recorded_day, func.max(Snapshot.daily_spent), func.max(Snapshot.daily_cap))
                         .where(Snapshot.device_id == device_id).group_by(Snapshot.recorded_day)
                         .order_by(Snapshot.recorded_day)).all()
    return [{"day": day, "date": day_date(day), "spent": to_epsilon(spent), "cap": to_epsilon(cap)}
            for day, spent, cap in rows]


def lifetime_spend(reg: Registry, device_id: str) -> list[dict]:
    """Lifetime spend at each authenticated snapshot, oldest first ({"at", "spent", "cap"}; cap None: none)."""
    with reg.session() as s:
        snaps = s.scalars(select(Snapshot).where(Snapshot.device_id == device_id).order_by(Snapshot.id)).all()
        return [{"at": x.taken_at.isoformat(), "spent": to_epsilon(x.lifetime_spent),
                 "cap": _eps(x.lifetime_cap) if x.lifetime_cap else None} for x in snaps]


def audit_timeline(reg: Registry, device_id: str) -> list[dict]:
    """The device's audit entries the registry holds, by seq."""
    with reg.session() as s:
        es = s.scalars(select(AuditEntry).where(AuditEntry.device_id == device_id).order_by(AuditEntry.seq)).all()
        return [{"seq": e.seq, "date": day_date(e.day), "counter": e.counter, "event": e.event, "detail": e.detail}
                for e in es]


def training_runs(reg: Registry) -> list[dict]:
    """The DP-SGD runs, oldest first, with ε through each epoch (None: not private)."""
    with reg.session() as s:
        runs = s.scalars(select(TrainingRun).order_by(TrainingRun.id)).all()
        return [{"name": r.name, "started_at": r.started_at.isoformat(), "epsilon": r.epsilon, "delta": r.delta,
                 "relation": r.relation, "manifest": r.manifest,
                 "per_epoch": [e.epsilon for e in r.epochs]} for r in runs]
