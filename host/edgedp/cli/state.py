"""What a device reports: the info, budget and audit-log commands and their dict and line formatting."""
from __future__ import annotations

import click

from ..device.client import load_key, open_device
from ..device.protocol import Budget, Rate, day_date, shown
from ..mech.lattice import to_epsilon
from ..model.image import describe_target_model
from .common import emit_json, handle_errors, json_option, target_option
from .config import config_path
from .keys import admin_key, admin_key_option, key_option


def budget_dict(b: Budget) -> dict:
    eps = to_epsilon
    return {
        "day": b.day, "date": day_date(b.day), "recorded_day": b.recorded_day,
        "recorded_date": day_date(b.recorded_day),
        "daily_cap": eps(b.daily_cap), "daily_spent": eps(b.daily_spent),
        "daily_remaining": eps(b.remaining),
        "lifetime_spent": eps(b.lifetime_spent),
        "lifetime_cap": eps(b.lifetime_cap) if b.lifetime_cap else None,
        "epsilon_per_query": eps(b.epsilon_micro),
        "range": [b.lo, b.hi], "sensitivity": b.sensitivity, "lattice_exponent": b.m,
        "auth_counter": b.auth_counter, "store": b.store, "store_ok": b.store_ok,
    }


def rate_dict(r: Rate) -> dict:
    return {"rate_burst": r.burst or None, "rate_per_minute": r.per_minute, "rate_tarpit_ms": r.tarpit_ms}


@click.command()
@target_option
@json_option
@handle_errors
def info(target: str | None, as_json: bool) -> None:
    """Board, build, entropy and firmware facts of a device."""
    config = config_path()
    with open_device(target) as dev:
        i = dev.info()
        image = describe_target_model(dev.target)
    model: dict | None = None
    if i.model is not None:  # the device's own account (INFO v2); the image's settings when it is that model
        m = i.model
        model = {"name": m.name, "sha256": m.sha256, "kind": m.kind, "head": m.head,
                 "input_shape": list(m.input_shape), "n_features": m.n_features, "n_classes": m.classes}
        if isinstance(image, dict) and image["sha256"] == m.sha256:
            model.update({k: image[k] for k in ("nets", "range", "sensitivity")})
    d = {"board": i.board, "build": i.build, "entropy": i.entropy, "noise_entropy": i.noise_entropy,
         "nonce_entropy": i.nonce_entropy, "firmware_version": i.firmware_version,
         "max_classes": i.max_classes, "rx_buffer": i.rx_buffer, "tick": i.tick_kind, "tick_hz": i.tick_hz,
         "store": i.store, "store_ok": i.store_ok, "time_ok": i.time_ok, "model": model, **rate_dict(i.rate),
         "config": None if config is None else str(config)}
    if as_json:
        emit_json(d)
    else:
        for k, v in d.items():
            if k == "model" and isinstance(v, dict):
                v = (f"{shown(v['name'])} ({v['kind']}, {v['head']} head, input "
                     f"{'x'.join(map(str, v['input_shape']))} -> {v['n_classes']} classes, sha256 {v['sha256'][:16]}…)")
            elif k in ("board", "firmware_version"):  # the device's own text (and the model's name above)
                v = shown(v)
            click.echo(f"{k:17s} {'none' if v is None else v}")

UNAUTHENTICATED = ("unauthenticated: read with BUDGET, which a man in the middle can rewrite; "
                   "pass --key-file for the authenticated state")


@click.command()
@target_option
@key_option
@json_option
@click.option("--history", is_flag=True, help="ε spent per day per device from the fleet registry (the "
                                              "dashboard's series), not a device's budget.")
@click.option("--registry", metavar="URL", default=None, help="With --history: the registry's SQLAlchemy URL "
                                                             "(default: $EDGEDP_REGISTRY, else a SQLite file in "
                                                             "the user data directory).")
@handle_errors
def budget(target: str | None, key_file: str | None, as_json: bool, history: bool, registry: str | None) -> None:
    """The privacy budget: today's and lifetime spend, caps, and the store's state.

    With --key-file the numbers are the device's authenticated state (STATE, tagged with the
    device key over a fresh challenge); without, they are unauthenticated and say so. With
    --history, the per-day series that `edgedp fleet sync` stored in the registry."""
    if history:
        from .dashboard import print_history
        print_history(registry, as_json)
        return
    if registry is not None:
        raise click.UsageError("--registry goes with --history")
    key = load_key(key_file) if key_file else None
    with open_device(target) as dev:
        st = dev.state(key) if key else None
        d = {**budget_dict(st.budget), **rate_dict(st.rate)} if st else budget_dict(dev.budget())
    d["authenticated"] = key is not None
    if as_json:
        emit_json(d)
    else:
        for k, v in budget_lines(d):
            click.echo(f"{k:18s} {v}")
        if key is None:
            click.echo(UNAUTHENTICATED)


def budget_lines(d: dict) -> list[tuple[str, str]]:
    """budget's text: dates rather than day numbers, words rather than Python's None."""
    cap = "none" if d["lifetime_cap"] is None else str(d["lifetime_cap"])  # ε amounts exactly, as floats
    m = "automatic" if d["lattice_exponent"] is None else f"{d['lattice_exponent']} (g = 2^-{d['lattice_exponent']})"
    lo, hi = d["range"]
    date = "no trusted clock (edgedp admin set-time)" if d["date"] is None else f"{d['date']} UTC"
    if d["recorded_day"] != d["day"]:
        date += f" (spend recorded for {d['recorded_date']})"
    return [("date", date),
            ("daily cap", str(d["daily_cap"])), ("spent today", str(d["daily_spent"])),
            ("remaining today", str(d["daily_remaining"])), ("lifetime spent", str(d["lifetime_spent"])),
            ("lifetime cap", cap), ("epsilon per query", str(d["epsilon_per_query"])),
            ("range", f"[{lo:g}, {hi:g}]"), ("sensitivity", f"{d['sensitivity']:g}"), ("lattice exponent", m),
            ("admin counter", str(d["auth_counter"])),
            ("store", d["store"] + ("" if d["store_ok"] else " (not usable: external answers refused)"))]


@click.command("audit-log")
@target_option
@admin_key_option
@json_option
@handle_errors
def audit_log(target: str | None, key_file: str, as_json: bool) -> None:
    """The device's audit log: admin commands, time sets, budget exhaustion, store loss, entropy
    failures and rate-limit trips, each with its day and admin counter.

    Read with AUDIT_LOG, tagged with the device key over a fresh challenge (exit 7 if the answer
    is not authentic). The key is never guessed from INFO: a man in the middle could claim a
    test build and forge a log with the public test key."""
    key = admin_key(key_file, "audit-log")  # load_key(None) would be the public test key
    with open_device(target) as dev:
        log = dev.audit_log(key)
    entries = [{"seq": e.seq, "day": e.day, "date": day_date(e.day), "counter": e.counter, "event": e.event_name, "arg": e.arg,
                "detail": e.detail} for e in log.entries]
    if as_json:
        emit_json({"total": log.total, "overwritten": log.overwritten, "entries": entries, "authenticated": True})
        return
    click.echo(f"{log.total} events logged, {len(log.entries)} kept ({log.overwritten} overwritten); authenticated")
    for e in log.entries:
        click.echo(f"{e.seq:6d}  {day_date(e.day) or 'no clock':10s}  counter {e.counter:<6d} {e.event_name:13s} {e.detail}")


COMMANDS = [info, budget, audit_log]
