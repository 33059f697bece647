"""Read-only views of the fleet registry for the dashboard and ``budget --history``.

Reads the registry's tables by reflection (devices, state_snapshots, syncs, audit_entries,
dpsgd_runs, dpsgd_epochs: edgedp/fleet/registry.py defines them) and never writes. Amounts in the
registry are micro-ε; every view gives ε. A device row carries what ``fleet status --json`` gives:
``id``, ``authenticated``, ``daily_spent``, ``lifetime_spent``, ``daily_cap``, ``lifetime_cap``,
``last_seen``, ``alerts`` and the rate limit."""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import MetaData, Table, create_engine, select
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from ..device.protocol import day_date
from ..mech.lattice import to_epsilon

TABLES = ("devices", "state_snapshots", "syncs", "audit_entries", "dpsgd_runs", "dpsgd_epochs")
REGISTRY_ENV = "EDGEDP_REGISTRY"
NEAR_CAP = 0.9
"""A spend at or above this fraction of its cap raises an alert."""


class RegistryUnreadable(ValueError):
    """The URL names no registry the dashboard can read (bad URL, no such database, missing tables)."""


@dataclass(frozen=True)
class Fleet:
    """The registry's tables, reflected; ``connect()`` for a read."""

    engine: Engine
    tables: Mapping[str, Table]


def open_fleet(url: str) -> Fleet:
    """The registry at url, read-only. RegistryUnreadable (one line) when it cannot be read."""
    try:
        engine = create_engine(url)
    except (ArgumentError, NoSuchModuleError, ModuleNotFoundError) as exc:
        raise RegistryUnreadable(f"registry URL {url.split(':', 1)[0]}:…: {exc}") from None
    if engine.url.get_backend_name() == "sqlite":
        db = engine.url.database
        if db not in (None, "", ":memory:"):  # SQLite would create a missing file: read only what exists
            engine = create_engine(engine.url.set(database=f"file:{db}?mode=ro", query={"uri": "true"}))
    md = MetaData()
    try:
        md.reflect(engine, only=TABLES)
    except OperationalError as exc:
        raise RegistryUnreadable(f"registry {engine.url.render_as_string(hide_password=True)}: "
                                 f"{str(exc.orig).splitlines()[0]}") from None
    except Exception as exc:  # reflect(only=...) raises InvalidRequestError naming the missing tables
        raise RegistryUnreadable(f"registry {engine.url.render_as_string(hide_password=True)} is not an edgedp "
                                 f"registry: {str(exc).splitlines()[0]} (edgedp fleet add creates one)") from None
    return Fleet(engine, md.tables)


def _snapshots(c: Connection, f: Fleet) -> dict[str, list[RowMapping]]:
    t = f.tables["state_snapshots"]
    out: dict[str, list[RowMapping]] = {}
    for r in c.execute(select(t).order_by(t.c.device_id, t.c.id)).mappings():
        out.setdefault(r["device_id"], []).append(r)
    return out


def _iso(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).isoformat()


def alerts(snaps: Sequence[RowMapping]) -> list[str]:
    """The alerts of a device's latest snapshot against its history (docs/fleet.md, "Alerts")."""
    if not snaps:
        return []
    last, out = snaps[-1], []
    if last["daily_cap"] and last["daily_spent"] >= NEAR_CAP * last["daily_cap"]:
        out.append("daily spend at or above 90% of its cap")
    if last["lifetime_cap"] and last["lifetime_spent"] >= NEAR_CAP * last["lifetime_cap"]:
        out.append("lifetime spend at or above 90% of its cap")
    if last["audit_lost"]:
        out.append(f"{last['audit_lost']} audit entries overwritten since the last sync")
    if not last["store_ok"]:
        out.append(f"store loss ({last['store']})")
    if len(snaps) > 1:
        prev = snaps[-2]
        if last["day"] is not None and prev["day"] is not None and last["day"] < prev["day"]:
            out.append("clock moved back")
        if last["lifetime_spent"] < prev["lifetime_spent"]:
            out.append("spend went down")
    return out


def device_rows(f: Fleet) -> list[dict[str, Any]]:
    """One row per device, as ``fleet status --json`` gives them."""
    d, sy = f.tables["devices"], f.tables["syncs"]
    with f.engine.connect() as c:
        snaps = _snapshots(c, f)
        last_sync = {r["device_id"]: r for r in c.execute(select(sy).order_by(sy.c.id)).mappings()}
        rows = []
        for dev in c.execute(select(d).order_by(d.c.id)).mappings():
            s = snaps.get(dev["id"], [])
            last = s[-1] if s else None
            sync = last_sync.get(dev["id"])
            authenticated = last is not None and (sync is None or sync["outcome"] == "ok")
            row: dict[str, Any] = {
                "id": dev["id"], "board": dev["board"], "emulated": bool(dev["emulated"]),
                "authenticated": authenticated,
                "last_seen": _iso(last["taken_at"]) if last else None,
                "last_sync": sync["outcome"] if sync else None,
                "day": last["day"] if last else None, "date": day_date(last["day"]) if last else None,
                "daily_spent": to_epsilon(last["daily_spent"]) if last else None,
                "daily_cap": to_epsilon(last["daily_cap"]) if last else None,
                "lifetime_spent": to_epsilon(last["lifetime_spent"]) if last else None,
                "lifetime_cap": to_epsilon(last["lifetime_cap"]) if last and last["lifetime_cap"] else None,
                "rate_burst": (last["rate_burst"] or None) if last else None,
                "rate_per_minute": last["rate_per_minute"] if last else None,
                "rate_tarpit_ms": last["rate_tarpit_ms"] if last else None,
                "alerts": alerts(s),
            }
            if sync is not None and sync["outcome"] != "ok":
                row["alerts"].append(f"last sync {sync['outcome']}" + (f": {sync['detail']}" if sync["detail"] else ""))
            rows.append(row)
    return rows


def daily_series(f: Fleet) -> dict[str, list[dict[str, Any]]]:
    """Per device, ε spent per recorded day (the last authenticated snapshot of that day), oldest first."""
    with f.engine.connect() as c:
        snaps = _snapshots(c, f)
    out: dict[str, list[dict[str, Any]]] = {}
    for dev, s in snaps.items():
        per_day: dict[int, int] = {}
        for r in s:
            per_day[r["recorded_day"]] = r["daily_spent"]
        out[dev] = [{"day": day, "date": day_date(day), "spent": to_epsilon(v)} for day, v in sorted(per_day.items())]
    return out


def audit_timeline(f: Fleet) -> list[dict[str, Any]]:
    """Every stored audit entry, by device then sequence number."""
    a = f.tables["audit_entries"]
    with f.engine.connect() as c:
        return [{"device": r["device_id"], "seq": r["seq"], "day": r["day"], "date": day_date(r["day"]),
                 "counter": r["counter"], "event": r["event"], "arg": r["arg"], "detail": r["detail"]}
                for r in c.execute(select(a).order_by(a.c.device_id, a.c.seq)).mappings()]


def training_runs(f: Fleet) -> list[dict[str, Any]]:
    """DP-SGD runs with ε through each epoch (None: not private)."""
    r, e = f.tables["dpsgd_runs"], f.tables["dpsgd_epochs"]
    with f.engine.connect() as c:
        epochs: dict[int, list[dict[str, Any]]] = {}
        for x in c.execute(select(e).order_by(e.c.run_id, e.c.epoch)).mappings():
            epochs.setdefault(x["run_id"], []).append({"epoch": x["epoch"], "epsilon": x["epsilon"]})
        return [{"id": x["id"], "name": x["name"], "epsilon": x["epsilon"], "delta": x["delta"],
                 "relation": x["relation"], "epochs": epochs.get(x["id"], [])}
                for x in c.execute(select(r).order_by(r.c.id)).mappings()]
