"""The series the dashboard draws and ``budget --history`` prints, over the registry's read API
(edgedp.fleet.status) for every device at once. No web framework: ``budget --history`` runs
without the [dashboard] extra."""
from __future__ import annotations

from ..fleet import status
from ..fleet.registry import Registry


def daily(reg: Registry) -> dict[str, list[dict]]:
    """ε spent per day, per device id (fleet.status.daily_spend of each device)."""
    return {d["id"]: status.daily_spend(reg, d["id"]) for d in status.status_rows(reg)}


def audit(reg: Registry) -> list[dict]:
    """Every device's audit timeline, by device then seq, each entry with its ``device``."""
    return [{"device": d["id"], **e} for d in status.status_rows(reg) for e in status.audit_timeline(reg, d["id"])]
