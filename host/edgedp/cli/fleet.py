"""``edgedp fleet add|list|sync|status``: the registry of devices and their authenticated budgets
(edgedp.fleet; docs/fleet.md)."""
from __future__ import annotations

import sys

import click

from ..fleet import keystore as K
from ..fleet import registry as R
from ..fleet import status as V
from ..fleet.sync import sync_all, worst
from ..device.errors import TransportError
from ..device.targets import check_spec
from .common import emit_json, handle_errors, json_option
from .exit_codes import ExitCode

registry_option = click.option("--registry", "url", default=None, metavar="URL",
                               help=f"SQLAlchemy URL of the registry (default: ${R.REGISTRY_ENV}, else a SQLite file "
                                    "in the user data directory).")
keystore_option = click.option("--keystore", default=None, type=click.Path(file_okay=False),
                               help=f"Keystore folder (default: ${K.KEYSTORE_ENV}, else edgedp/keys in the user data "
                                    "directory).")



def _target(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return check_spec(value)
    except TransportError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


target_option = click.option("--target", "-t", required=True, metavar="T", callback=_target,
                             help="How sync reaches the device: a pyserial URL (socket://HOST:PORT, /dev/ttyACM0) "
                                  "or any --target of the other commands.")

SYNC_EXIT = {"ok": ExitCode.OK, "not-authentic": ExitCode.NOT_AUTHENTIC, "unreachable": ExitCode.TRANSPORT,
             "refused": ExitCode.REFUSED, "no-key": ExitCode.BAD_INPUT}
"""fleet sync's exit code: that of the most serious outcome (edgedp.fleet.sync.PRECEDENCE)."""


@click.group("fleet")
def fleet() -> None:
    """The fleet registry: devices, their authenticated budgets and audit logs (docs/fleet.md)."""


@fleet.command("add")
@click.argument("device_id")
@target_option
@registry_option
@json_option
@handle_errors
def add(device_id: str, target: str, url: str | None, as_json: bool) -> None:
    """Register DEVICE_ID (its key in the keystore under that id) reached at --target."""
    K.check_id(device_id)
    with R.open_registry(url) as reg:
        with reg.session() as s:
            d = R.add_device(s, device_id, target)
            row = {"id": d.id, "target": d.target, "board": d.board, "emulated": d.emulated}
    if as_json:
        emit_json(row)
    else:
        click.echo(f"added {device_id} at {target}" + (f" ({V.EMULATED})" if row["emulated"] else ""))


@fleet.command("list")
@registry_option
@json_option
@handle_errors
def list_(url: str | None, as_json: bool) -> None:
    """The registered devices."""
    with R.open_registry(url) as reg:
        with reg.session() as s:
            rows = [{"id": d.id, "target": d.target, "board": d.board, "emulated": d.emulated} for d in R.devices(s)]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(f"{r['id']:20s} {r['board'] or '-':14s} {r['target'] or '-'}"
                   + (f"  ({V.EMULATED})" if r["emulated"] else ""))


@fleet.command("sync")
@click.argument("device_ids", nargs=-1)
@registry_option
@keystore_option
@json_option
@handle_errors
def sync(device_ids: tuple[str, ...], url: str | None, keystore: str | None, as_json: bool) -> None:
    """Read each device's authenticated STATE and AUDIT_LOG with its keystore key and store them.

    Exit code: the most serious outcome's -- 7 not authentic, before 3 unreachable, before 8
    refused, before 4 no key in the keystore; 0 when every device synced."""
    with R.open_registry(url) as reg:
        outcomes = sync_all(reg, K.Keystore(keystore), device_ids)
    if as_json:
        emit_json([{"id": o.device_id, "outcome": o.outcome, "detail": o.detail,
                    "new_audit_entries": o.new_audit_entries} for o in outcomes])
    else:
        for o in outcomes:
            click.echo(f"{o.device_id:20s} {o.outcome}" + (f": {o.detail}" if o.detail else
                                                           f" ({o.new_audit_entries} new audit entries)"))
    sys.exit(SYNC_EXIT[worst(outcomes)])


@fleet.command("status")
@registry_option
@json_option
@handle_errors
def status(url: str | None, as_json: bool) -> None:
    """Each device's last authenticated spend, caps, last sync and alerts."""
    with R.open_registry(url) as reg:
        rows = V.status_rows(reg)
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        spent = ("never synced" if r["daily_spent"] is None else
                 f"today {r['daily_spent']:g}/{r['daily_cap']:g}, lifetime {r['lifetime_spent']:g}/"
                 f"{'none' if r['lifetime_cap'] is None else format(r['lifetime_cap'], 'g')}")
        auth = "authenticated" if r["authenticated"] else "NOT authenticated"
        click.echo(f"{r['id']:20s} {auth:17s} {spent}; last seen {r['last_seen'] or 'never'}"
                   + (f" ({V.EMULATED})" if r["emulated"] else ""))
        for a in r["alerts"]:
            click.echo(f"  alert {a['kind']}: {a['message']}")
