"""``fleet sync``: read each device's authenticated STATE and AUDIT_LOG with its keystore key and
store them in the registry.

Per device the outcome is one of registry.SYNC_OUTCOMES: ``ok`` (both answers authenticated and
stored), ``not-authentic`` (an answer's tag did not verify with the device's key: rewritten on
the way, or not the device provisioned under that id; nothing stored), ``unreachable`` (no
answer, a broken link, a target that does not start), ``refused`` (the device answered with an
error), ``no-key`` (the keystore has no key for it). :func:`worst` is the one outcome the command
exits with, in that order of precedence."""
from __future__ import annotations

from dataclasses import dataclass

from ..device.client import open_device
from ..device.errors import DeviceError, EdgeDPError, NotAuthentic, TransportError
from .keystore import Keystore, KeystoreError
from .registry import Registry, add_snapshot, add_sync, devices

PRECEDENCE = ("not-authentic", "unreachable", "refused", "no-key")
"""The failures, most serious first: what ``fleet sync`` exits with when devices fail differently."""


@dataclass(frozen=True)
class Outcome:
    device_id: str
    outcome: str
    detail: str | None = None
    new_audit_entries: int = 0


def sync_one(reg: Registry, device_id: str, target: str | None, keys: Keystore, timeout: float | None = None) -> Outcome:
    """Read one device and record the outcome (and, if ok, the snapshot and new audit entries)."""
    try:
        key = keys.load(device_id)
    except (KeystoreError, EdgeDPError, OSError) as exc:
        out = Outcome(device_id, "no-key", str(exc))
    else:
        try:
            with open_device(target, timeout) as dev:
                st = dev.state(key)
                log = dev.audit_log(key)
        except NotAuthentic as exc:
            out = Outcome(device_id, "not-authentic", str(exc))
        except TransportError as exc:
            out = Outcome(device_id, "unreachable", str(exc))
        except DeviceError as exc:
            out = Outcome(device_id, "refused", str(exc))
        else:
            with reg.session() as s:  # one transaction: the snapshot, the new entries and the outcome
                snap, new = add_snapshot(s, device_id, st, log)
                add_sync(s, device_id, "ok", None, snap)
            return Outcome(device_id, "ok", None, new)
    with reg.session() as s:
        add_sync(s, device_id, out.outcome, out.detail)
    return out


def sync_all(reg: Registry, keys: Keystore, only: tuple[str, ...] = (), timeout: float | None = None) -> list[Outcome]:
    """Sync every registered device (or those in ``only``), one after another."""
    with reg.session() as s:
        todo = [(d.id, d.target) for d in devices(s) if not only or d.id in only]
    missing = set(only) - {i for i, _ in todo}
    if missing:
        raise ValueError(f"not in the registry: {', '.join(sorted(missing))} (edgedp fleet add ID --target T)")
    return [sync_one(reg, i, t, keys, timeout) for i, t in todo]


def worst(outcomes: list[Outcome]) -> str:
    """The most serious outcome (PRECEDENCE), "ok" if every device synced."""
    seen = {o.outcome for o in outcomes}
    return next((p for p in PRECEDENCE if p in seen), "ok")
