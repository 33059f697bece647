"""Device commands: info, query, sample, budget, admin."""
from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import click
import numpy as np

from ..device.client import Device, load_key, open_device
from ..device.errors import DeviceError, EdgeDPError
from ..device.noise import draw_samples
from ..device.protocol import Budget, QueryResult
from ..mech.lattice import make_lattice
from ..mech.modes import BUCKET_NAMES, Mode
from ..paths import project_root
from .common import emit_json, handle_errors, json_option, target_option
from .inputs import read_rows

TEST_KEY = "tests/keys/test-device.key"
key_option = click.option("--key-file", type=click.Path(dir_okay=False), default=None,
                          help="Device HMAC key (64 hex digits). Test images use tests/keys/test-device.key.")
admin_key_option = click.option("--key-file", type=click.Path(dir_okay=False), required=True,
                                help="Device HMAC key file (64 hex digits), e.g. tests/keys/test-device.key.")


def resolve_key(dev: Device, key_file: str | None) -> bytes:
    """The key from --key-file, or the bundled test key when talking to a test build."""
    if key_file:
        return load_key(key_file)
    if dev.info().build == "test":
        return load_key(project_root() / TEST_KEY)
    raise EdgeDPError("this needs an authenticated command: pass --key-file", "ERR_AUTH")


def budget_dict(b: Budget) -> dict:
    micro = 1e-6
    return {
        "day": b.day, "recorded_day": b.recorded_day,
        "daily_cap": b.daily_cap * micro, "daily_spent": b.daily_spent * micro,
        "daily_remaining": b.remaining * micro,
        "lifetime_spent": b.lifetime_spent * micro,
        "lifetime_cap": b.lifetime_cap * micro if b.lifetime_cap else None,
        "epsilon_per_query": b.epsilon_micro * micro,
        "range": [b.lo, b.hi], "sensitivity": b.sensitivity, "lattice_exponent": b.m,
        "auth_counter": b.auth_counter, "store": b.store, "store_ok": b.store_ok,
    }


def result_dict(r: QueryResult) -> dict:
    out: dict = {"label": int(r.label)}
    if r.values is not None:
        out["values"] = [float(v) for v in r.values]
    if r.indices is not None:
        out["indices"] = [int(i) for i in r.indices]
    if r.level is not None:
        out["level"] = BUCKET_NAMES[r.level]
    return out


@click.command()
@target_option
@json_option
@handle_errors
def info(target: str | None, as_json: bool) -> None:
    """Board, build, entropy and firmware facts of a device."""
    with open_device(target) as dev:
        i = dev.info()
    d = {"board": i.board, "build": i.build, "entropy": i.entropy, "firmware_version": i.firmware_version,
         "max_classes": i.max_classes, "tick": i.tick_kind, "tick_hz": i.tick_hz,
         "store": i.store, "store_ok": i.store_ok, "time_ok": i.time_ok}
    if as_json:
        emit_json(d)
    else:
        for k, v in d.items():
            click.echo(f"{k:17s} {v}")


def ensure_config(dev: Device, key_file: str | None, epsilon: float | None, sensitivity: float | None,
                  value_range: tuple[float, float] | None) -> Budget:
    """Reconfigure the device (authenticated) if the requested mechanism differs from its config."""
    b = dev.budget()
    want_eps = round(epsilon * 1e6) if epsilon is not None else b.epsilon_micro
    want_sens = sensitivity if sensitivity is not None else b.sensitivity
    want_range = value_range if value_range is not None else (b.lo, b.hi)
    if (want_eps, np.float32(want_sens), tuple(np.float32(want_range))) == \
            (b.epsilon_micro, np.float32(b.sensitivity), (np.float32(b.lo), np.float32(b.hi))):
        return b
    key = resolve_key(dev, key_file)
    dev.configure(key, want_eps / 1e6, b.daily_cap / 1e6, (b.lifetime_cap / 1e6) or None,
                  want_range[0], want_range[1], want_sens, b.m)
    return dev.budget()


@click.command()
@target_option
@click.option("--epsilon", "-e", type=float, default=None, help="Per-query epsilon (reconfigures the device).")
@click.option("--sensitivity", "-d", type=float, default=None, help="L1 sensitivity of the clamped vector.")
@click.option("--range", "value_range", type=float, nargs=2, default=None, metavar="LO HI",
              help="Input/output range (default: the device's, [0, 1] for probabilities).")
@click.option("--mode", "-m", default="full", show_default=True,
              help="full | topk:K | label | bucket | round:D | simplex")
@click.argument("input_path", metavar="INPUT", default="-")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the private outputs: .npy (values, or labels) or .jsonl.")
@key_option
@json_option
@handle_errors
def query(target: str | None, epsilon: float | None, sensitivity: float | None,
          value_range: tuple[float, float] | None, mode: str, input_path: str, out: str | None,
          key_file: str | None, as_json: bool) -> None:
    """Stream rows of logits/probabilities (.npy, .npz, .csv, or - for stdin) through the device."""
    m = Mode.parse(mode)
    rows = read_rows(input_path)
    results: list[dict] = []
    failed = 0
    with open_device(target) as dev:
        if rows.shape[1] > dev.info().max_classes:
            raise ValueError(f"rows have {rows.shape[1]} classes; the device takes at most {dev.info().max_classes}")
        ensure_config(dev, key_file, epsilon, sensitivity, value_range)
        if not as_json:
            click.echo(f"{'row':>4} {'raw top-1':>10} {'private':>28} {'remaining eps':>14}")
        for i, x in enumerate(rows):
            try:
                r = dev.query(x, m)
                rec = {"row": i, "status": "ok", "output": result_dict(r), "remaining": r.remaining * 1e-6,
                       "ticks": r.ticks}
            except DeviceError as exc:
                failed += 1
                rec = {"row": i, "status": exc.code, "output": None, "remaining": None}
            results.append(rec)
            if as_json:
                emit_json(rec)
            else:
                raw = f"{int(np.argmax(x))} ({x.max():.3f})"
                priv = _describe(rec["output"], m) if rec["output"] else rec["status"]
                rem = f"{rec['remaining']:.3f}" if rec["remaining"] is not None else "-"
                click.echo(f"{i:>4} {raw:>10} {priv:>28} {rem:>14}")
            if rec["status"] == "ERR_BUDGET":
                if not as_json:
                    click.echo("budget exhausted: the device refuses further external answers today", err=True)
                break
    if out:
        _save(out, results)
    if failed:
        raise SystemExit(2)


def _describe(o: dict, m: Mode) -> str:
    if "level" in o:
        return f"label {o['label']} ({o['level']})"
    if "indices" in o:
        return " ".join(f"{i}:{v:.2f}" for i, v in zip(o["indices"], o["values"]))[:28]
    if "values" in o:
        return f"label {o['label']} ({max(o['values']):.3f})"
    return f"label {o['label']}"


def _save(out: str, results: list[dict]) -> None:
    path = Path(out)
    if path.suffix == ".npy":
        ok = [r["output"] for r in results if r["output"]]
        if ok and "values" in ok[0] and "indices" not in ok[0]:
            np.save(path, np.array([o["values"] for o in ok]))
        else:
            np.save(path, np.array([o["label"] for o in ok]))
    else:
        from .common import dumps
        path.write_text("".join(dumps(r) + "\n" for r in results))


@click.command()
@target_option
@click.option("--epsilon", "-e", type=float, required=True)
@click.option("--sensitivity", "-d", type=float, default=2.0, show_default=True)
@click.option("--classes", "-k", type=int, default=10, show_default=True, help="k (sets the lattice step).")
@click.option("--n", "count", type=int, default=100000, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Output .npy (float64 noise).")
@json_option
@handle_errors
def sample(target: str | None, epsilon: float, sensitivity: float, classes: int, count: int, out: str,
           as_json: bool) -> None:
    """Raw noise samples from the device (test builds), before output clamping."""
    lat = make_lattice(classes, round(epsilon * 1e6), sensitivity, 0.0, 1.0)
    with open_device(target) as dev:
        z = draw_samples(dev, epsilon, sensitivity, classes, count, progress=not as_json)
    np.save(out, z * lat.granularity)
    d = {"n": int(len(z)), "granularity": lat.granularity, "t": lat.t, "epsilon": epsilon,
         "sensitivity": sensitivity, "classes": classes, "out": out}
    if as_json:
        emit_json(d)
    else:
        click.echo(f"wrote {len(z)} samples to {out} (g = 2^-{lat.m}, t = {lat.t:.2f} steps)")


@click.command()
@target_option
@json_option
@handle_errors
def budget(target: str | None, as_json: bool) -> None:
    """The privacy budget: today's and lifetime spend, caps, and the store's state."""
    with open_device(target) as dev:
        d = budget_dict(dev.budget())
    if as_json:
        emit_json(d)
    else:
        for k, v in d.items():
            click.echo(f"{k:18s} {v}")


@click.group()
def admin() -> None:
    """Authenticated administration (HMAC-SHA256 with the device key)."""


@admin.command("config")
@target_option
@admin_key_option
@click.option("--epsilon", "-e", type=float, help="Per-query epsilon.")
@click.option("--daily-cap", type=float, help="Epsilon per UTC day.")
@click.option("--lifetime-cap", type=float, default=None, help="Epsilon in total (0 = none).")
@click.option("--sensitivity", "-d", type=float, default=None)
@click.option("--range", "value_range", type=float, nargs=2, default=None, metavar="LO HI")
@click.option("--lattice-exponent", type=int, default=None, help="Fix g = 2^-M (default: automatic).")
@json_option
@handle_errors
def admin_config(target: str | None, key_file: str, epsilon: float | None, daily_cap: float | None,
                 lifetime_cap: float | None, sensitivity: float | None, value_range: tuple[float, float] | None,
                 lattice_exponent: int | None, as_json: bool) -> None:
    """Set the mechanism and caps; unspecified values keep the device's."""
    with open_device(target) as dev:
        key = load_key(key_file)
        b = dev.budget()
        lo, hi = value_range if value_range else (b.lo, b.hi)
        counter = dev.configure(
            key, epsilon if epsilon is not None else b.epsilon_micro / 1e6,
            daily_cap if daily_cap is not None else b.daily_cap / 1e6,
            lifetime_cap if lifetime_cap is not None else (b.lifetime_cap / 1e6 or None),
            lo, hi, sensitivity if sensitivity is not None else b.sensitivity,
            lattice_exponent if lattice_exponent is not None else b.m)
        d = {"accepted_counter": counter, **budget_dict(dev.budget())}
    emit_json(d) if as_json else click.echo(f"configured (counter {counter})")


@admin.command("set-time")
@target_option
@admin_key_option
@click.option("--unix", "unix_seconds", type=int, default=None, help="Seconds since 1970-01-01 UTC.")
@click.option("--date", "date", default=None, help="YYYY-MM-DD (midnight UTC).")
@json_option
@handle_errors
def admin_set_time(target: str | None, key_file: str, unix_seconds: int | None, date: str | None,
                   as_json: bool) -> None:
    """Set the device clock (default: this machine's clock)."""
    if date:
        unix_seconds = int(dt.datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc).timestamp())
    if unix_seconds is None:
        unix_seconds = int(time.time())
    with open_device(target) as dev:
        key = load_key(key_file)
        counter = dev.set_time(key, unix_seconds)
        d = {"accepted_counter": counter, "unix": unix_seconds, **budget_dict(dev.budget())}
    emit_json(d) if as_json else click.echo(f"clock set to {unix_seconds} (day {unix_seconds // 86400})")


@admin.command("reset-budget")
@target_option
@admin_key_option
@json_option
@handle_errors
def admin_reset_budget(target: str | None, key_file: str, as_json: bool) -> None:
    """Reset today's spend (the lifetime spend is never reset)."""
    with open_device(target) as dev:
        key = load_key(key_file)
        counter = dev.reset_budget(key)
        d = {"accepted_counter": counter, **budget_dict(dev.budget())}
    emit_json(d) if as_json else click.echo(f"daily budget reset (counter {counter})")


COMMANDS = [info, query, sample, budget, admin]
