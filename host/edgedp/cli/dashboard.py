"""The dashboard command: the fleet registry as a local, read-only web page (docs/fleet.md, "Dashboard")."""
from __future__ import annotations

import click

from ..dashboard import views
from ..fleet import registry as R
from .common import emit_json, handle_errors, json_option
from .fleet import registry_option


@click.command()
@registry_option
@click.option("--host", default="127.0.0.1", show_default=True, metavar="H",
              help="The address to bind; requests must name it (or localhost) in their Host header.")
@click.option("--port", default=8741, show_default=True, type=click.IntRange(1, 65535), metavar="P")
@json_option
@handle_errors
def dashboard(url: str | None, host: str, port: int, as_json: bool) -> None:
    """A local, read-only web page of the fleet registry: ε per day, lifetime against cap, rate limits,
    audit events, alerts and DP-SGD runs.

    It serves until interrupted; with --json it first prints {"url": ...} on stdout."""
    from ..dashboard import app  # the web framework: the [dashboard] extra, which budget --history does not need
    try:
        app.allowed_hosts(host)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with R.open_registry(url) as reg:
        if as_json:
            emit_json({"url": f"http://{host}:{port}/"})
        else:
            click.echo(f"edgedp dashboard on http://{host}:{port}/ (read-only; Ctrl-C stops it)", err=True)
        app.serve(reg, host, port)


def print_history(url: str | None, as_json: bool) -> None:
    """``budget --history``: ε spent per day per device from the registry (the dashboard's series)."""
    with R.open_registry(url) as reg:
        series = views.daily(reg)
    if as_json:
        emit_json(series)
        return
    if not any(series.values()):
        click.echo("no authenticated snapshots in the registry (edgedp fleet sync)")
    for device, days in series.items():
        for p in days:
            click.echo(f"{device:20s} {p['date'] or 'no trusted clock'}  {p['spent']:g} of {p['cap']:g}")


COMMANDS = [dashboard]
