"""Device commands: info, query, sample, budget, admin."""
from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import click
import numpy as np

from ..device import admin as authadmin
from ..device.client import Device, load_key, open_device
from ..device.errors import DeviceError, EdgeDPError, ErrorCode, StateMismatch
from ..device.noise import draw_samples
from ..device.protocol import (CONFIG, RATE, RESET_BUDGET, SET_TIME, Budget, Caps, MechConfig, QueryResult, Rate,
                               SampleRequest, config_payload)
from ..schema import SET_TIME_PAYLOAD_FMT
from ..mech.lattice import MAX_CLASSES, make_lattice, to_epsilon, to_micro
from ..mech.modes import BUCKET_NAMES, MODE_BUCKET, MODE_TOPK, Mode
from ..model.image import check_target_inputs, describe_target_model
from .common import dumps, emit_json, handle_errors, json_option, progress_option, target_option
from .inputs import read_rows
from .params import (CLASSES, DAILY_CAP, EPSILON, LIFETIME_CAP, SAMPLES, SENSITIVITY, UNIX_TIME, check_range,
                     check_writable)

key_option = click.option("--key-file", type=click.Path(dir_okay=False), default=None,
                          help="Device HMAC key (64 hex digits). Test images use tests/keys/test-device.key.")
admin_key_option = click.option("--key-file", type=click.Path(dir_okay=False), required=True,
                                help="Device HMAC key file (64 hex digits), e.g. tests/keys/test-device.key.")


NEEDS_KEY = "this needs an authenticated command: pass --key-file"


def resolve_key(dev: Device, key_file: str | None) -> bytes:
    """The key from --key-file, or the bundled test key when talking to a test build."""
    if key_file:
        return load_key(key_file)
    if dev.info().build == "test":
        return load_key()
    raise EdgeDPError(NEEDS_KEY, "ERR_AUTH")


def merged_config(b: Budget, epsilon: float | None = None, sensitivity: float | None = None,
                  value_range: tuple[float, float] | None = None, m: int | None = None) -> MechConfig:
    """The device's mechanism configuration with the options the user gave replaced."""
    cur = b.config
    lo, hi = value_range if value_range is not None else (cur.lo, cur.hi)
    return MechConfig(cur.eps_micro if epsilon is None else to_micro(epsilon), lo, hi,
                      cur.sensitivity if sensitivity is None else sensitivity, cur.m if m is None else m)


def merged_caps(b: Budget, daily_cap: float | None = None, lifetime_cap: float | None = None) -> Caps:
    """The device's caps with the options the user gave replaced (lifetime 0: none)."""
    return Caps(b.daily_cap if daily_cap is None else to_micro(daily_cap),
                b.lifetime_cap if lifetime_cap is None else to_micro(lifetime_cap))


def config_check(cfg: MechConfig, caps: Caps) -> authadmin.Check:
    """The check that the state after CONFIG holds exactly cfg and caps."""
    def check(before: Budget, after: Budget) -> str | None:
        if not after.config.same_on_device(cfg):
            return f"mechanism {after.config} instead of {cfg}"
        if after.caps != caps:
            return f"caps {after.caps} instead of {caps}"
        return None
    return check


def configure_from_state(dev: Device, key: bytes, epsilon: float | None = None, sensitivity: float | None = None,
                         value_range: tuple[float, float] | None = None, m: int | None = None,
                         daily_cap: float | None = None, lifetime_cap: float | None = None) -> authadmin.Outcome:
    """CONFIG with the options given, every other value from the authenticated state; verified after."""
    signed: list[tuple[MechConfig, Caps]] = []

    def build(b: Budget) -> bytes:
        signed.append((merged_config(b, epsilon, sensitivity, value_range, m), merged_caps(b, daily_cap, lifetime_cap)))
        return config_payload(*signed[0])
    return authadmin.run(dev, key, CONFIG, build, lambda before, after: config_check(*signed[0])(before, after))


def budget_dict(b: Budget) -> dict:
    eps = to_epsilon
    return {
        "day": b.day, "recorded_day": b.recorded_day,
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
        model = describe_target_model(dev.target)
    d = {"board": i.board, "build": i.build, "entropy": i.entropy, "firmware_version": i.firmware_version,
         "max_classes": i.max_classes, "tick": i.tick_kind, "tick_hz": i.tick_hz,
         "store": i.store, "store_ok": i.store_ok, "time_ok": i.time_ok, "model": model, **rate_dict(i.rate)}
    if as_json:
        emit_json(d)
    else:
        for k, v in d.items():
            if k == "model" and isinstance(v, dict):
                v = (f"{v['name']} ({v['head']} head, {v['n_features']} inputs -> {v['n_classes']} classes, "
                     f"sha256 {v['sha256'][:16]}…)")
            click.echo(f"{k:17s} {'none' if v is None else v}")


def ensure_config(dev: Device, key_file: str | None, epsilon: float | None, sensitivity: float | None,
                  value_range: tuple[float, float] | None, k: int) -> MechConfig:
    """The mechanism the queries of k classes will run: the device's, with the options given.

    BUDGET (the configuration), then, only if it differs, STATE (the authenticated state and a
    fresh nonce), CONFIG signed for that nonce with --key-file or else the test images' key, and
    STATE again to check it: what is signed comes only from the authenticated state and the
    options. A configuration the device could not serve for k classes is refused here, with
    the reason."""
    b = dev.budget()
    cfg = merged_config(b, epsilon, sensitivity, value_range)
    cfg.lattice(k)
    if cfg.same_on_device(b.config):
        return cfg
    try:
        out = configure_from_state(dev, load_key(key_file), epsilon, sensitivity, value_range)
    except DeviceError as exc:
        if exc.error == ErrorCode.ERR_AUTH and not key_file:
            raise EdgeDPError(NEEDS_KEY, "ERR_AUTH") from None
        raise
    cfg = out.after.config
    cfg.lattice(k)
    return cfg


def warn_clamped(rows: np.ndarray, cfg: MechConfig) -> None:
    """One stderr line when inputs lie outside the range they will be clamped to."""
    outside = int(np.count_nonzero((rows < cfg.lo) | (rows > cfg.hi)))
    if outside:
        click.echo(f"warning: {outside} input values lie outside the range [{cfg.lo:g}, {cfg.hi:g}] and are "
                   "clamped to it; for logits pass --range LO HI (and a matching --sensitivity)", err=True)


TEST_IMAGE_NOTE = ("note: this device runs a test image: its noise comes from the public test seed and can be "
                   "replayed, so these answers give no privacy")


@click.command()
@target_option
@click.option("--epsilon", "-e", type=EPSILON, default=None, help="Per-query epsilon (reconfigures the device).")
@click.option("--sensitivity", "-d", type=SENSITIVITY, default=None, help="L1 sensitivity of the clamped vector.")
@click.option("--range", "value_range", type=float, nargs=2, default=None, metavar="LO HI", callback=check_range,
              help="Input/output range (default: the device's, [0, 1] for probabilities).")
@click.option("--mode", "-m", default="full", show_default=True,
              help="full | topk:K | label | bucket | round:D | simplex")
@click.option("--infer", is_flag=True,
              help="INPUT rows are model inputs (e.g. images.npy): the device runs its model (INFER) and "
                   "releases only the private output; range and sensitivity are the model's.")
@click.argument("input_path", metavar="INPUT", default="-")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write what was released: .jsonl (every row and status), or .npy (values for full, round "
                   "and simplex; labels for label; a record array of row, indices and values for topk, of row, "
                   "label and level for bucket).")
@key_option
@json_option
@handle_errors
def query(target: str | None, epsilon: float | None, sensitivity: float | None,
          value_range: tuple[float, float] | None, mode: str, infer: bool, input_path: str, out: str | None,
          key_file: str | None, as_json: bool) -> None:
    """Stream rows of logits/probabilities (.npy, .npz, .csv, or - for stdin) through the device.

    With --infer the rows are model inputs (e.g. images.npy of shape (n, 64)) for the model compiled
    into the image; only its private output is released."""
    m = Mode.parse(mode)
    if infer and (sensitivity is not None or value_range is not None):
        raise ValueError("--infer uses the deployed model's range and sensitivity: drop --range/--sensitivity")
    rows = read_rows(input_path)
    if rows.shape[1] > MAX_CLASSES:
        raise ValueError(f"rows have {rows.shape[1]} classes; a query holds at most {MAX_CLASSES}")
    out_path = check_writable(out) if out else None
    records: list[dict] = []
    answers: list[tuple[int, QueryResult]] = []
    with open_device(target) as dev:
        if infer:
            check_target_inputs(dev.target, rows.shape[1])
        cfg = ensure_config(dev, key_file, epsilon, sensitivity, value_range, rows.shape[1])
        if not infer:  # model inputs are not clamped to the mechanism's range
            warn_clamped(rows, cfg)
        if not as_json:
            click.echo(f"{'row':>4} {'raw top-1':>10} {'private':>28} {'remaining eps':>14}")
        for i, (x, r) in enumerate(zip(rows, (dev.infer_many(rows, m) if infer else dev.query_many(rows, m)))):
            if isinstance(r, DeviceError):
                rec = {"row": i, "status": r.code, "output": None, "remaining": None}
                if r.wait is not None:
                    rec["retry_after_s"] = None if r.wait == 0xFFFFFFFF else r.wait
            else:
                answers.append((i, r))
                rec = {"row": i, "status": "ok", "output": result_dict(r), "remaining": r.remaining, "ticks": r.ticks}
            records.append(rec)
            if as_json:
                emit_json(rec)
            else:
                raw = "on device" if infer else f"{int(np.argmax(x))} ({x.max():.3f})"
                priv = _describe(rec["output"], m) if rec["output"] else rec["status"]
                rem = f"{rec['remaining']:.3f}" if rec["remaining"] is not None else "-"
                click.echo(f"{i:>4} {raw:>10} {priv:>28} {rem:>14}")
            if rec["status"] == "ERR_BUDGET":
                click.echo("budget exhausted: the device refuses further external answers today", err=True)
            elif rec["status"] == "ERR_RATE":
                click.echo(f"rate limit: {r}", err=True)
        test_image = dev.info().build == "test"
    if test_image:
        click.echo(TEST_IMAGE_NOTE, err=True)
    if out_path:
        _save(out_path, m, records, answers)
    if len(answers) < len(records):
        raise SystemExit(2)


def _describe(o: dict, m: Mode) -> str:
    if "level" in o:
        return f"label {o['label']} ({o['level']})"
    if "indices" in o:
        return " ".join(f"{i}:{v:.2f}" for i, v in zip(o["indices"], o["values"]))[:28]
    if "values" in o:
        return f"label {o['label']} ({max(o['values']):.3f})"
    return f"label {o['label']}"


def released_array(m: Mode, answers: list[tuple[int, QueryResult]]) -> np.ndarray:
    """Everything the answered rows released, as one array (see query --out)."""
    if m.sends_values:
        return np.array([r.values for _, r in answers], dtype=np.float64).reshape(len(answers), -1)
    if m.kind == MODE_TOPK:
        K = len(answers[0][1].lattice) if answers else m.arg
        rec = np.zeros(len(answers), dtype=[("row", "i8"), ("indices", "i8", (K,)), ("values", "f8", (K,))])
        for j, (i, r) in enumerate(answers):
            rec[j] = (i, r.indices, r.values)
        return rec
    if m.kind == MODE_BUCKET:
        rec = np.zeros(len(answers), dtype=[("row", "i8"), ("label", "i8"), ("level", "i8")])
        for j, (i, r) in enumerate(answers):
            rec[j] = (i, r.label, r.level)
        return rec
    return np.array([r.label for _, r in answers], dtype=np.int64)


def _save(path: Path, m: Mode, records: list[dict], answers: list[tuple[int, QueryResult]]) -> None:
    if path.suffix == ".npy":
        np.save(path, released_array(m, answers))
    else:
        path.write_text("".join(dumps(r) + "\n" for r in records))


@click.command()
@target_option
@click.option("--epsilon", "-e", type=EPSILON, required=True)
@click.option("--sensitivity", "-d", type=SENSITIVITY, default=2.0, show_default=True)
@click.option("--classes", "-k", type=CLASSES, default=10, show_default=True, help="k (sets the lattice step).")
@click.option("--n", "count", type=SAMPLES, default=100000, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Output .npy (float64 noise).")
@json_option
@progress_option
@handle_errors
def sample(target: str | None, epsilon: float, sensitivity: float, classes: int, count: int, out: str,
           as_json: bool, no_progress: bool) -> None:
    """Raw noise samples from the device (test builds), before output clamping."""
    req = SampleRequest(to_micro(epsilon), sensitivity, classes, count)
    lat = make_lattice(classes, req.eps_micro, sensitivity, 0.0, 1.0)
    out_path = check_writable(out)
    with open_device(target) as dev:
        z = draw_samples(dev, req, progress=not no_progress)
    np.save(out_path, z * lat.granularity)
    d = {"n": int(len(z)), "granularity": lat.granularity, "t": lat.t, "epsilon": epsilon,
         "sensitivity": sensitivity, "classes": classes, "out": out}
    if as_json:
        emit_json(d)
    else:
        click.echo(f"wrote {len(z)} samples to {out} (g = 2^-{lat.m}, t = {lat.t:.2f} steps)")


UNAUTHENTICATED = ("unauthenticated: read with BUDGET, which a man in the middle can rewrite; "
                   "pass --key-file for the authenticated state")


@click.command()
@target_option
@key_option
@json_option
@handle_errors
def budget(target: str | None, key_file: str | None, as_json: bool) -> None:
    """The privacy budget: today's and lifetime spend, caps, and the store's state.

    With --key-file the numbers are the device's authenticated state (STATE, tagged with the
    device key over a fresh challenge); without, they are unauthenticated and say so."""
    key = load_key(key_file) if key_file else None
    with open_device(target) as dev:
        st = dev.state(key) if key else None
        d = {**budget_dict(st.budget), **rate_dict(st.rate)} if st else budget_dict(dev.budget())
    d["authenticated"] = key is not None
    if as_json:
        emit_json(d)
    else:
        for k, v in d.items():
            click.echo(f"{k:18s} {v}")
        if key is None:
            click.echo(UNAUTHENTICATED)


@click.group()
def admin() -> None:
    """Authenticated administration (HMAC-SHA256 with the device key)."""


LOST_AT_EXIT = ("note: this device is an emulator started for this command only: the change is gone when it "
                "exits. `edgedp device start` runs one that keeps its configuration, clock and budget between "
                "commands (they then talk to it)")


def lost_at_exit(dev: Device) -> bool:
    """True when the device's state ends with this command (a fresh emulator, not a session)."""
    return not getattr(dev.target, "keeps_state", True)


def note_lost_at_exit(d: dict) -> None:
    if d["lost_at_exit"]:
        click.echo(LOST_AT_EXIT, err=True)


@admin.command("config")
@target_option
@admin_key_option
@click.option("--epsilon", "-e", type=EPSILON, help="Per-query epsilon.")
@click.option("--daily-cap", type=DAILY_CAP, help="Epsilon per UTC day.")
@click.option("--lifetime-cap", type=LIFETIME_CAP, default=None, help="Epsilon in total (0 = none).")
@click.option("--sensitivity", "-d", type=SENSITIVITY, default=None)
@click.option("--range", "value_range", type=float, nargs=2, default=None, metavar="LO HI", callback=check_range)
@click.option("--lattice-exponent", type=click.IntRange(-30, 30), default=None,
              help="Fix g = 2^-M, -30..30 (default: automatic).")
@json_option
@handle_errors
def admin_config(target: str | None, key_file: str, epsilon: float | None, daily_cap: float | None,
                 lifetime_cap: float | None, sensitivity: float | None, value_range: tuple[float, float] | None,
                 lattice_exponent: int | None, as_json: bool) -> None:
    """Set the mechanism and caps; unspecified values keep the device's (authenticated) ones.

    Reads the authenticated state, signs the change for its fresh nonce, and re-reads the state
    to check it holds exactly what was signed (exit 5 if not, 6 if the answer never came)."""
    key = load_key(key_file)
    with open_device(target) as dev:
        out = configure_from_state(dev, key, epsilon, sensitivity, value_range, lattice_exponent, daily_cap,
                                   lifetime_cap)
    d = {"accepted_counter": out.counter, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    if as_json:
        emit_json(d)
    else:
        a = out.after
        click.echo(f"configured (counter {out.counter}), checked in the authenticated state: epsilon "
                   f"{to_epsilon(a.epsilon_micro):g} per query, range [{a.lo:g}, {a.hi:g}], sensitivity "
                   f"{a.sensitivity:g}, daily cap {to_epsilon(a.daily_cap):g}, lifetime cap "
                   f"{to_epsilon(a.lifetime_cap) if a.lifetime_cap else 'none'}")
    note_lost_at_exit(d)


@admin.command("set-time")
@target_option
@admin_key_option
@click.option("--unix", "unix_seconds", type=UNIX_TIME, default=None, help="Seconds since 1970-01-01 UTC.")
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
    key = load_key(key_file)
    day = unix_seconds // 86400

    def check(before: Budget, after: Budget) -> str | None:
        return None if after.day == day else f"day {after.day} instead of {day}"
    with open_device(target) as dev:
        out = authadmin.run(dev, key, SET_TIME, lambda b: SET_TIME_PAYLOAD_FMT.pack(unix_seconds), check)
    d = {"accepted_counter": out.counter, "unix": unix_seconds, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    emit_json(d) if as_json else click.echo(f"clock set to {unix_seconds} (day {day}, counter {out.counter})")
    note_lost_at_exit(d)


@admin.command("reset-budget")
@target_option
@admin_key_option
@json_option
@handle_errors
def admin_reset_budget(target: str | None, key_file: str, as_json: bool) -> None:
    """Reset today's spend (the lifetime spend is never reset)."""
    key = load_key(key_file)

    def check(before: Budget, after: Budget) -> str | None:
        since = after.lifetime_spent - before.lifetime_spent  # answers after the reset, if any
        return None if after.daily_spent <= since else f"{to_epsilon(after.daily_spent):g} spent today"
    with open_device(target) as dev:
        out = authadmin.run(dev, key, RESET_BUDGET, lambda b: b"", check)
    d = {"accepted_counter": out.counter, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    emit_json(d) if as_json else click.echo(f"daily budget reset (counter {out.counter})")
    note_lost_at_exit(d)


@admin.command("rate")
@target_option
@admin_key_option
@click.option("--burst", type=click.IntRange(0, 2**32 - 1), required=True,
              help="External answers the bucket holds (0: no rate limit).")
@click.option("--per-minute", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True,
              help="Answers added to the bucket per minute.")
@click.option("--tarpit-ms", type=click.IntRange(0, 2000), default=0, show_default=True,
              help="Delay before a refusal over the limit (ERR_RATE) leaves the device.")
@json_option
@handle_errors
def admin_rate(target: str | None, key_file: str, burst: int, per_minute: int, tarpit_ms: int, as_json: bool) -> None:
    """Limit the rate of external answers (QUERY, INFER): a token bucket; over it, ERR_RATE with the wait."""
    key = load_key(key_file)
    want = Rate(burst, per_minute, tarpit_ms)
    payload = want.pack()
    with open_device(target) as dev:
        out = authadmin.run(dev, key, RATE, lambda b: payload, lambda before, after: None)
    if out.rate != want:
        raise StateMismatch(f"after RATE the authenticated state is not what was signed: {out.rate}, not {want}")
    d = {"accepted_counter": out.counter, **rate_dict(out.rate), "authenticated": True}
    emit_json(d) if as_json else click.echo(
        f"rate limit: {'none' if not burst else f'{burst} answers, {per_minute} more per minute, tarpit {tarpit_ms} ms'}"
        f" (counter {out.counter}), checked in the authenticated state")


COMMANDS = [info, query, sample, budget, admin]
