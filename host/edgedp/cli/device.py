"""Device commands: info, query, sample, budget, audit-log, admin."""
from __future__ import annotations

import contextlib
import datetime as dt
import time

import click
import numpy as np
from click.core import ParameterSource

from ..device import admin as authadmin
from ..device.client import Device, connect, default_timeout, load_key, open_device
from ..device.errors import AnswerLost, DeviceError, EdgeDPError, ErrorCode, NotAuthentic, StateMismatch
from ..device.targets import Target, start_target
from ..device.protocol import (CONFIG, RATE, RESET_BUDGET, SET_TIME, Budget, Caps, MechConfig, QueryResult, Rate,
                               SampleRequest, State, config_payload)
from ..schema import SET_TIME_PAYLOAD_FMT
from ..mech.lattice import MAX_CLASSES, make_lattice, to_epsilon, to_micro
from ..mech.modes import BUCKET_NAMES, MODE_TOPK, Mode
from ..model.image import check_target_inputs, describe_target_model
from .common import (close_stdout_quietly, detail, dumps, emit_json, fail, handle_errors, json_option, note,
                     progress, progress_option, target_option)
from .config import config_default, config_path
from .exit_codes import ExitCode
from .inputs import check_finite, read_rows
from .output import Sink, StopRequest, open_sink
from .params import (CLASSES, DAILY_CAP, DATE, EPSILON, LIFETIME_CAP, MODE, SAMPLES, SENSITIVITY, UNIX_TIME,
                     check_mode_fits, check_range, check_writable)

key_option = click.option("--key-file", type=click.Path(dir_okay=False), default=config_default("key_file"),
                          help="Device HMAC key (64 hex digits; default: edgedp.toml's key_file). Test images "
                               "use tests/keys/test-device.key.")
admin_key_option = click.option("--key-file", type=click.Path(dir_okay=False),  # admin_key checks it is set
                                default=config_default("key_file"),
                                help="Device HMAC key file (64 hex digits; default: edgedp.toml's key_file), "
                                     "e.g. tests/keys/test-device.key.")


NEEDS_KEY = "this needs an authenticated command: pass --key-file"
QUERY_NEEDS_KEY = (f"{NEEDS_KEY} (--epsilon, --sensitivity and --range are checked against the device's "
                   "authenticated configuration, and the device did not authenticate it with the test images' key; "
                   "without those options query runs the device's own configuration)")
LINK_NEEDS_KEY = (f"{NEEDS_KEY} ({{what}} checked against the device's authenticated configuration, and over "
                  "{link} the public test key proves nothing: a man in the middle can sign a state with it; "
                  "nothing was sent; without those options query runs the device's own configuration){hint}")
FROM_CONFIG_HINT = "; for a test image: --key-file tests/keys/test-device.key"


def admin_key(key_file: str | None, what: str) -> bytes:
    """The key an admin command signs with: --key-file or edgedp.toml's key_file, never a silent
    fallback to the public test key."""
    if not key_file:
        raise click.UsageError(f"{what} needs the device key: pass --key-file (or set key_file in edgedp.toml)")
    return load_key(key_file)


def resolve_key(dev: Device, key_file: str | None) -> bytes:
    """The key from --key-file, or the bundled test key when talking to a test build.

    "A test build" is what the unauthenticated INFO says: a man in the middle can make a
    production device look like one. That is harmless: the test key is public, so signing with
    it grants nothing, and a production device (which does not hold it) refuses what it signs
    (ERR_AUTH, or NotAuthentic on STATE) before anything is charged or changed."""
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
    """The device's caps with the options the user gave replaced (lifetime 0: none); a lifetime
    cap below the daily cap is refused (the day could never spend its cap)."""
    caps = Caps(b.daily_cap if daily_cap is None else to_micro(daily_cap),
                b.lifetime_cap if lifetime_cap is None else to_micro(lifetime_cap))
    if caps.lifetime and caps.lifetime < caps.daily:
        raise click.UsageError(f"the lifetime cap {to_epsilon(caps.lifetime):g} is below the daily cap "
                               f"{to_epsilon(caps.daily):g} (a cap not given is the device's): raise "
                               "--lifetime-cap, lower --daily-cap, or give --lifetime-cap 0 for none")
    return caps


def day_date(day: int | None) -> str | None:
    """A device day index (days since 1970-01-01 UTC) as YYYY-MM-DD."""
    return None if day is None else (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


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
                         daily_cap: float | None = None, lifetime_cap: float | None = None,
                         state: State | None = None) -> authadmin.Outcome:
    """CONFIG with the options given, every other value from the authenticated state; verified after.

    ``state``: the STATE just read with ``key`` (nothing sent since), to sign for its nonce
    instead of reading another (authadmin.run)."""
    signed: list[tuple[MechConfig, Caps]] = []

    def build(b: Budget) -> bytes:
        signed.append((merged_config(b, epsilon, sensitivity, value_range, m), merged_caps(b, daily_cap, lifetime_cap)))
        return config_payload(*signed[0])
    return authadmin.run(dev, key, CONFIG, build, lambda before, after: config_check(*signed[0])(before, after),
                         state)


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
    config = config_path()
    with open_device(target) as dev:
        i = dev.info()
        model = describe_target_model(dev.target)
    d = {"board": i.board, "build": i.build, "entropy": i.entropy, "firmware_version": i.firmware_version,
         "max_classes": i.max_classes, "tick": i.tick_kind, "tick_hz": i.tick_hz,
         "store": i.store, "store_ok": i.store_ok, "time_ok": i.time_ok, "model": model, **rate_dict(i.rate),
         "config": None if config is None else str(config)}
    if as_json:
        emit_json(d)
    else:
        for k, v in d.items():
            if k == "model" and isinstance(v, dict):
                v = (f"{v['name']} ({v['head']} head, {v['n_features']} inputs -> {v['n_classes']} classes, "
                     f"sha256 {v['sha256'][:16]}…)")
            click.echo(f"{k:17s} {'none' if v is None else v}")


def check_test_key_link(target: Target, key_file: str | None, epsilon: float | None, sensitivity: float | None,
                        value_range: tuple[float, float] | None, epsilon_from_config: bool = False) -> None:
    """Refuse, before anything is sent, options that ensure_config would check with the public test
    key over a link a man in the middle may sit on (a pyserial URL: Target.private_link): he
    would see the challenge and sign a STATE claiming the options, so the rows would run (and be
    charged) at the device's real configuration. ``epsilon_from_config``: the epsilon is
    edgedp.toml's, not the command line's (the message says so)."""
    if not key_file and not getattr(target, "private_link", False) and \
            (epsilon is not None or sensitivity is not None or value_range is not None):
        toml = epsilon_from_config and sensitivity is None and value_range is None
        what = "epsilon from edgedp.toml is" if toml else "--epsilon, --sensitivity and --range are"
        raise EdgeDPError(LINK_NEEDS_KEY.format(what=what, link=target.name, hint=FROM_CONFIG_HINT if toml else ""),
                          "ERR_AUTH")


def ensure_config(dev: Device, key_file: str | None, epsilon: float | None, sensitivity: float | None,
                  value_range: tuple[float, float] | None, k: int) -> MechConfig:
    """The mechanism the queries of k classes will run: the device's, with the options given.

    Whether to reconfigure is decided only from the authenticated state: STATE, tagged with
    --key-file's key, or without one the test images' key -- only on a target edgedp started on
    a link of its own: the caller has run check_test_key_link on the target before connecting,
    which refuses a pyserial URL before anything is sent; a device that does not hold it, a production image, ends here with QUERY_NEEDS_KEY:
    nothing is sent after it. If the options differ from STATE, CONFIG is signed for that
    STATE's nonce (nothing was sent in between) and STATE is read again to check it: what is
    signed comes only from the authenticated state and the options. Only without a key and without --epsilon, --sensitivity and --range, when
    nothing can be signed or skipped, is the configuration read from the unauthenticated BUDGET
    (for the table and the clamping warning). A configuration the device could not serve for k
    classes is refused here, with the reason."""
    if not key_file and epsilon is None and sensitivity is None and value_range is None:
        cfg = dev.budget().config
        cfg.lattice(k)
        return cfg
    key = load_key(key_file)
    try:
        st = dev.state(key)
    except (NotAuthentic, DeviceError) as exc:
        if key_file or (isinstance(exc, DeviceError) and exc.error != ErrorCode.ERR_AUTH):
            raise  # the key given is wrong (exit 7), or a refusal --key-file cannot lift (ERR_ENTROPY)
        raise EdgeDPError(QUERY_NEEDS_KEY, "ERR_AUTH") from None
    cfg = merged_config(st.budget, epsilon, sensitivity, value_range)
    cfg.lattice(k)
    if cfg.same_on_device(st.budget.config):
        return cfg
    cfg = configure_from_state(dev, key, epsilon, sensitivity, value_range, state=st).after.config
    cfg.lattice(k)
    return cfg


def warn_clamped(rows: np.ndarray, cfg: MechConfig) -> None:
    """One stderr line when inputs lie outside the range they will be clamped to."""
    outside = int(np.count_nonzero((rows < cfg.lo) | (rows > cfg.hi)))
    if outside:
        note(f"warning: {outside} input values lie outside the range [{cfg.lo:g}, {cfg.hi:g}] and are "
             "clamped to it; for logits pass --range LO HI (and a matching --sensitivity)")


TEST_IMAGE_NOTE = ("note: this device runs a test image: its noise comes from the public test seed and can be "
                   "replayed, so these answers give no privacy")
NO_PART_ON_QEMU = ("{err} is expected on QEMU: {target} runs the board image, which needs the STM32 {part}, and "
                   "QEMU has no model of it, so the device refuses every external answer (it fails closed); use "
                   "--target qemu (the QEMU port) or a real board; no further row was sent")
STOPS = {  # refusals that hold for every further row: (the board part QEMU lacks, the text elsewhere)
    ErrorCode.ERR_ENTROPY: ("RNG", "the device's entropy source failed: it refuses every external answer; "
                                   "no further row was sent"),
    ErrorCode.ERR_TIME: ("RTC", "the device has no trusted clock: it refuses every external answer until "
                                "`edgedp admin set-time`; no further row was sent"),
}


class Table:
    """query's table: columns wide enough for the inputs and the configured range."""

    def __init__(self, rows: np.ndarray, cfg: MechConfig, m: Mode, infer: bool):
        self.infer, self.mode = infer, m
        digits = len(str(max(rows.shape[1] - 1, 0)))
        self.raw_w = max(len("raw top-1"), digits + len(f" (-{float(np.max(np.abs(rows))):.3f})"))
        value = max(len(f"{cfg.lo:.3f}"), len(f"{cfg.hi:.3f}"))
        width = m.arg * (digits + value) if m.kind == MODE_TOPK else len("label  ()") + digits + value
        self.priv_w = min(max(28, width), 80)

    def header(self) -> str:
        return f"{'row':>4} {'raw top-1':>{self.raw_w}} {'private':>{self.priv_w}} {'remaining eps':>14}"

    def line(self, i: int, x: np.ndarray, rec: dict) -> str:
        raw = "on device" if self.infer else f"{int(np.argmax(x))} ({x.max():.3f})"
        priv = _describe(rec["output"], self.priv_w) if rec["output"] else rec["status"]
        rem = f"{rec['remaining']:.3f}" if rec["remaining"] is not None else "-"
        return f"{i:>4} {raw:>{self.raw_w}} {priv:>{self.priv_w}} {rem:>14}"


@click.command()
@target_option
@click.option("--epsilon", "-e", type=EPSILON, default=config_default("epsilon"),
              help="Per-query epsilon (reconfigures the device; default: edgedp.toml's, else the device's).")
@click.option("--sensitivity", "-d", type=SENSITIVITY, default=None, help="L1 sensitivity of the clamped vector.")
@click.option("--range", "value_range", type=float, nargs=2, default=None, metavar="LO HI", callback=check_range,
              help="Input/output range (default: the device's, [0, 1] for probabilities).")
@click.option("--mode", "-m", type=MODE, default="full", show_default=True,
              help="full | topk:K | label | bucket | round:D | simplex")
@click.option("--infer", is_flag=True,
              help="INPUT rows are model inputs (e.g. images.npy): the device runs its model (INFER) and "
                   "releases only the private output; range and sensitivity are the model's.")
@click.argument("input_path", metavar="INPUT", default="-")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write what was released, each answer as it arrives: .jsonl (every row and status, one line "
                   "each), or .npy (values for full, round and simplex; labels for label; a record array of row, "
                   "indices and values for topk, of row, label and level for bucket). Checked before the first "
                   "query, replaced once a row is answered; Ctrl-C waits for the answer in flight and keeps the "
                   "file complete.")
@key_option
@json_option
@handle_errors
def query(target: str | None, epsilon: float | None, sensitivity: float | None,
          value_range: tuple[float, float] | None, mode: Mode, infer: bool, input_path: str, out: str | None,
          key_file: str | None, as_json: bool) -> None:
    """Stream rows of logits/probabilities (.npy, .npz, .csv, or - for stdin) through the device.

    With --infer the rows are model inputs (e.g. images.npy of shape (n, 64)) for the model compiled
    into the image; only its private output is released. Rows holding NaN or inf are refused here,
    before anything is sent. --epsilon, --sensitivity and --range are checked against the device's
    authenticated state (--key-file, else the test images' key on a target edgedp started: at a
    serial URL they need --key-file) and signed in a CONFIG if they differ. Exit code 8 if the
    device refused a row (or, without --key-file, one of those options went to a serial URL or to
    a device that does not authenticate with the test images' key), 130 after Ctrl-C and
    143 after SIGTERM (the answers so far are saved), 4 if --out cannot be written (the stream
    stops before the next query)."""
    m = mode
    if infer and (sensitivity is not None or value_range is not None):
        raise click.UsageError("--infer uses the deployed model's range and sensitivity: drop --range/--sensitivity")
    rows = read_rows(input_path)
    if rows.shape[1] > MAX_CLASSES:
        raise ValueError(f"rows have {rows.shape[1]} classes; a query holds at most {MAX_CLASSES}")
    check_finite(rows, "stdin" if input_path == "-" else input_path)
    if not infer:
        check_mode_fits(m, rows.shape[1])
    sink = open_sink(check_writable(out), m, len(rows), dumps) if out else None
    stop = StopRequest()
    with contextlib.ExitStack() as deferred, contextlib.ExitStack() as cleanup:  # (cleanup: target, then file)
        if sink is not None:
            cleanup.callback(sink.close)
        t = start_target(target)
        cleanup.callback(t.close)
        check_test_key_link(t, key_file, epsilon, sensitivity, value_range,
                            click.get_current_context().get_parameter_source("epsilon") == ParameterSource.DEFAULT)
        dev = connect(t, default_timeout())
        if infer:  # a width that is not the model's: refused before anything is sent
            check_target_inputs(dev.target, rows.shape[1])
        cfg = ensure_config(dev, key_file, epsilon, sensitivity, value_range, rows.shape[1])
        if not infer:  # model inputs are not clamped to the mechanism's range
            warn_clamped(rows, cfg)
        run = QueryRun(rows, Table(rows, cfg, m, infer), sink, as_json, t.name, stop)
        if not as_json:
            click.echo(run.table.header())
        t0 = time.perf_counter()
        # From the first row until the target is closed and the file complete (cleanup exits
        # first), a first signal only stops the stream: run.finish says what was answered and saved.
        deferred.enter_context(stop.deferring_signals())
        deferred.enter_context(stop.summary_on_error(run.summary, as_json))  # (exits before the handlers are put back)
        answers = (dev.infer_many if infer else dev.query_many)(rows, m, stop=stop.__bool__)  # (none sent once set)
        for i, r in enumerate(answers):
            run.take(i, r)
        elapsed = time.perf_counter() - t0
        # (asked once: a board link's connect has read it; after a signal, not for a full timeout)
        i_dev = dev.last_info or dev.info(authadmin.INTERRUPTED_REREAD_S if stop.signal else None)
    detail(f"device: {i_dev.board}, {i_dev.build} build, firmware {i_dev.firmware_version}")
    detail(f"{run.done} rows in {elapsed:.2f} s ({run.done / elapsed if elapsed else 0:.0f} rows/s)")
    run.finish(i_dev.build == "test")


class QueryRun:
    """What query does with each answer as it arrives: file, stdout, and when to stop sending."""

    def __init__(self, rows: np.ndarray, table: Table, sink: Sink | None, as_json: bool, target_name: str,
                 stop: StopRequest):
        self.rows, self.table, self.sink, self.as_json, self.target_name = rows, table, sink, as_json, target_name
        self.stop = stop
        self.answered = self.refused = self.lost = 0
        self.write_error: OSError | None = None
        self.pipe_closed = self.budget_noted = self.rate_noted = False

    @property
    def done(self) -> int:
        return self.answered + self.refused + self.lost

    def take(self, i: int, r: QueryResult | DeviceError | AnswerLost) -> None:
        """Row i's answer, refusal or lost answer: saved (a write that fails stops the stream),
        then shown. A lost answer (the link dropped it; the device charged the row) stops the
        stream; the rows already on the wire still come."""
        if isinstance(r, AnswerLost):
            answer, rec = None, {"row": i, "status": r.code, "output": None, "remaining": None}
            self.lost += 1
            if not self.stop.reason:
                self.stop.stop(f"row {i}'s answer was lost on the link (it may have been charged): no more rows sent")
                note(self.stop.reason or "")
        elif isinstance(r, DeviceError):
            answer, rec = None, {"row": i, "status": r.code, "output": None, "remaining": None}
            if r.wait is not None:  # ERR_RATE: seconds until the bucket has an answer again
                rec["retry_after_s"] = None if r.wait == 0xFFFFFFFF else r.wait
            self.refused += 1
        else:
            answer, rec = r, {"row": i, "status": "ok", "output": result_dict(r), "remaining": r.remaining,
                              "ticks": r.ticks}
            self.answered += 1
        if self.sink is not None and self.write_error is None:
            try:
                self.sink.write(i, rec, answer)
            except OSError as exc:
                self.write_error = exc
                self.stop.stop(str(exc))
        if not self.pipe_closed:
            try:
                click.echo(dumps(rec) if self.as_json else self.table.line(i, self.rows[i], rec))
            except BrokenPipeError:
                self.pipe_closed = True
                self.stop.stop("stdout closed")
        if isinstance(r, DeviceError) and r.error in STOPS and not self.stop.reason:
            on_qemu = "stm32f4" in self.target_name and self.target_name.startswith(("qemu", "session"))
            board, elsewhere = STOPS[r.error]
            self.stop.stop(NO_PART_ON_QEMU.format(err=r.code, target=self.target_name.removeprefix("session:"),
                                                  part=board) if on_qemu else elsewhere)
            note(self.stop.reason or "")
        if rec["status"] == "ERR_BUDGET" and not self.budget_noted:  # once, also for rows already on the wire
            self.budget_noted = True
            note("budget exhausted: the device refuses further external answers today")
        elif rec["status"] == "ERR_RATE" and not self.rate_noted:
            self.rate_noted = True
            note(f"rate limit: {r}")

    def summary(self) -> str:
        """What was answered and saved (every answer is on stdout and in --out as it arrives)."""
        saved = f"; {self.sink.saved} answers saved in {self.sink.path}" if self.sink is not None else ""
        return f"{self.done} of {len(self.rows)} rows ({self.answered} answered){saved}"

    def finish(self, test_image: bool) -> None:
        """End the command with the exit code of what happened (cli/exit_codes.py)."""
        if self.pipe_closed:
            close_stdout_quietly()
            raise SystemExit(ExitCode.BROKEN_PIPE)
        if test_image:
            note(TEST_IMAGE_NOTE)
        self.stop.end(self.summary(), as_json=self.as_json)
        if self.write_error is not None:
            fail(self.write_error, self.as_json)
        if self.lost:
            fail(EdgeDPError(f"{self.lost} answer(s) lost on the link after the device charged them; "
                             f"{self.answered} answered, {self.refused} refused", "ERR_LOST"), self.as_json,
                 ExitCode.TRANSPORT)
        if self.refused:
            raise SystemExit(ExitCode.REFUSED)


def _describe(o: dict, width: int) -> str:
    if "level" in o:
        return f"label {o['label']} ({o['level']})"
    if "indices" in o:
        return " ".join(f"{i}:{v:.2f}" for i, v in zip(o["indices"], o["values"]))[:width]
    if "values" in o:
        return f"label {o['label']} ({max(o['values']):.3f})"
    return f"label {o['label']}"


@click.command()
@target_option
@click.option("--epsilon", "-e", type=EPSILON, default=config_default("epsilon"),
              help="Per-query epsilon (default: edgedp.toml's; one of the two is needed).")
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
    from ..device.noise import draw_samples  # (its progress bars are needed by this command only)
    if epsilon is None:  # click does not enforce required= on an option with a callable default
        raise click.UsageError("sample needs --epsilon (or epsilon in edgedp.toml)")

    req = SampleRequest(to_micro(epsilon), sensitivity, classes, count)
    lat = make_lattice(classes, req.eps_micro, sensitivity, 0.0, 1.0)
    out_path = check_writable(out)
    with open_device(target) as dev:
        z = draw_samples(dev, req, progress=progress(no_progress))
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
    key = admin_key(key_file, "admin config")
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
@click.option("--date", "date", type=DATE, default=None, help="YYYY-MM-DD (midnight UTC); not with --unix.")
@json_option
@handle_errors
def admin_set_time(target: str | None, key_file: str, unix_seconds: int | None, date: int | None,
                   as_json: bool) -> None:
    """Set the device clock (default: this machine's clock)."""
    if date is not None and unix_seconds is not None:
        raise click.UsageError("give --unix or --date, not both")
    if date is not None:
        unix_seconds = date
    if unix_seconds is None:
        unix_seconds = int(time.time())
    key = admin_key(key_file, "admin set-time")
    day = unix_seconds // 86400

    def check(before: Budget, after: Budget) -> str | None:
        return None if after.day == day else f"day {after.day} instead of {day}"
    with open_device(target) as dev:
        out = authadmin.run(dev, key, SET_TIME, lambda b: SET_TIME_PAYLOAD_FMT.pack(unix_seconds), check)
    d = {"accepted_counter": out.counter, "unix": unix_seconds, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    emit_json(d) if as_json else click.echo(f"clock set to {unix_seconds} ({day_date(day)}, counter {out.counter})")
    note_lost_at_exit(d)


@admin.command("reset-budget")
@target_option
@admin_key_option
@json_option
@handle_errors
def admin_reset_budget(target: str | None, key_file: str, as_json: bool) -> None:
    """Reset today's spend (the lifetime spend is never reset)."""
    key = admin_key(key_file, "admin reset-budget")

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
    key = admin_key(key_file, "admin rate")
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


COMMANDS = [info, query, sample, budget, audit_log, admin]
