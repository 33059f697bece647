"""The dashboard command: the fleet registry as a local, read-only web page (docs/fleet.md, "Dashboard")."""
from __future__ import annotations

import os

import click

from ..dashboard import app, queries
from .common import emit_json, handle_errors

registry_option = click.option(
    "--registry", "registry", metavar="URL", default=None,
    help="The registry's SQLAlchemy URL (sqlite:///PATH, postgresql+psycopg://...). Default: $EDGEDP_REGISTRY.")


def open_fleet(url: str | None) -> queries.Fleet:
    """The registry named by --registry, else $EDGEDP_REGISTRY; a one-line error without either."""
    url = url or os.environ.get(queries.REGISTRY_ENV)
    if not url:
        raise click.UsageError(f"no registry: pass --registry URL or set {queries.REGISTRY_ENV}")
    try:
        return queries.open_fleet(url)
    except queries.RegistryUnreadable as exc:
        raise click.UsageError(str(exc)) from None


@click.command()
@registry_option
@click.option("--host", default="127.0.0.1", show_default=True, metavar="H",
              help="The address to bind; requests must name it (or localhost) in their Host header.")
@click.option("--port", default=8741, show_default=True, type=click.IntRange(1, 65535), metavar="P")
@handle_errors
def dashboard(registry: str | None, host: str, port: int) -> None:
    """A local, read-only web page of the fleet registry: ε per day, lifetime against cap, rate limits,
    audit events, alerts and DP-SGD runs."""
    try:
        app.allowed_hosts(host)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    fleet = open_fleet(registry)
    click.echo(f"edgedp dashboard on http://{host}:{port}/ (read-only; Ctrl-C stops it)", err=True)
    app.serve(fleet, host, port)


def print_history(registry: str | None, as_json: bool) -> None:
    """``budget --history``: ε spent per day per device, from the registry (the dashboard's series)."""
    series = queries.daily_series(open_fleet(registry))
    if as_json:
        emit_json(series)
        return
    if not series:
        click.echo("no authenticated snapshots in the registry (edgedp fleet sync)")
    for device, days in series.items():
        for p in days:
            click.echo(f"{device:20s} {p['date'] or 'no trusted clock'}  {p['spent']}")


COMMANDS = [dashboard]
