"""``edgedp device start|status|stop``: a long-lived emulated device (edgedp.device.session)."""
from __future__ import annotations

import datetime as dt
import time

import click

from ..device import session
from ..device.client import TIMEOUT_ENV
from .common import emit_json, handle_errors, json_option


@click.group("device")
def device() -> None:
    """A long-lived emulated device that keeps its state between commands.

    While a session runs, commands without --target (and without EDGEDP_TARGET) use it;
    --target or EDGEDP_TARGET still choose another target, and --target session insists
    on the session. `stop` saves the board's persistent memory (budget store, clock record)
    and the next `start` restores it."""


def _uptime(started: float) -> str:
    return str(dt.timedelta(seconds=int(time.time() - started)))


def _memory_line(target: str) -> str:
    saved = session.saved_memory(target)
    if saved is None:
        return "no saved memory"
    when = dt.datetime.fromtimestamp(saved["saved"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = ", ".join(f"{r['name']} {r['size']} B" for r in saved["regions"])
    return f"memory saved {when}: {parts}"


@device.command("start")
@click.option("--target", "-t", "target", default="qemu", show_default=True,
              type=click.Choice(sorted(session.IMAGES)), help="Image to run.")
@click.option("--fresh", is_flag=True, help="Discard the memory saved by the last stop (blank store).")
@click.option("--accept-rollback", is_flag=True,
              help="After a session ended without `device stop` (QEMU killed or crashed): start from the "
                   "memory saved by the last stop anyway, giving back what was spent since.")
@click.option("--timeout", type=click.FloatRange(min=0.1, max=3600), default=30.0, show_default=True,
              envvar=TIMEOUT_ENV, metavar="SECONDS", help=f"Seconds to wait for the firmware to boot (env {TIMEOUT_ENV}).")
@json_option
@handle_errors
def start(target: str, fresh: bool, accept_rollback: bool, timeout: float, as_json: bool) -> None:
    """Start QEMU in the background, restoring the memory saved by the last stop.

    The spend lives in the emulated board's memory, saved only by `device stop`: after a session
    ended any other way, start refuses (exit status 1, stating the spend the saved memory holds and
    what may have been spent since) unless --accept-rollback or --fresh."""
    stale = session.forget_stale()
    if stale is not None:
        click.echo(f"edgedp: removed the state of a session whose QEMU (pid {stale.pid}) is gone; "
                   "its memory since the last stop is lost", err=True)
    if accept_rollback and not fresh and session.unclean_end(target) is not None:
        click.echo(f"edgedp: accepting the rollback: {session.rollback_risk(target)}", err=True)
    s = session.start(target, fresh, timeout, accept_rollback=accept_rollback)
    if as_json:
        emit_json(s.as_dict())
        return
    restored = "restored " + ", ".join(r.name for r in s.regions) if s.restored else \
        ("blank persistent memory" if s.regions else "no persistent memory in this image")
    click.echo(f"device session started: {s.target}, pid {s.pid}, console {s.url} ({restored})")


@device.command("status")
@json_option
@handle_errors
def status(as_json: bool) -> None:
    """Is a session running? Exit status 0 if so, 1 if not."""
    s = session.load()
    alive = s is not None and session.running() is not None
    if as_json:
        emit_json({"running": alive, "stale": s is not None and not alive,
                   "session": s.as_dict() if s else None})
    elif s is None:
        click.echo("no device session")
    elif not alive:
        click.echo(f"stale: the session's QEMU (pid {s.pid}) is not running and its spend since the last "
                   "stop is not saved; `edgedp device start --accept-rollback` or `--fresh` goes on")
    else:
        click.echo(f"running: {s.target}, pid {s.pid}, console {s.url}, QMP {s.qmp}, up {_uptime(s.started)}")
        click.echo(f"  {_memory_line(s.target)}")
    if not alive:
        raise SystemExit(1)


@device.command("stop")
@json_option
@handle_errors
def stop(as_json: bool) -> None:
    """Save the board's persistent memory and stop QEMU."""
    r = session.stop()
    if as_json:
        emit_json({"session": r.session.as_dict(), "saved": r.saved, "files": r.files})
    elif not r.saved:
        click.echo(f"the session's QEMU (pid {r.session.pid}) was no longer running: nothing saved "
                   f"({_memory_line(r.session.target)}); state removed, and the next start needs "
                   "--accept-rollback or --fresh")
    else:
        click.echo(f"device session stopped; {_memory_line(r.session.target)}")
