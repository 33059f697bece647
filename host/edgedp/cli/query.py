"""query (rows through the device's mechanism, or its model with --infer) and sample (raw noise)."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING

import click
import numpy as np
from click.core import ParameterSource

from ..device import admin as authadmin
from ..device.client import Device, connect, default_timeout, load_key, open_device
from ..device.errors import AnswerLost, ChargedNotReceived, DeviceError, EdgeDPError, ErrorCode, NotAuthentic
from ..device.targets import Target, start_target
from ..device.protocol import Budget, MechConfig, QueryResult, SampleRequest, shown
from ..device.spend import Spend, spend_between
from ..mech.lattice import MAX_CLASSES, make_lattice, to_epsilon, to_micro
from ..mech.modes import BUCKET_NAMES, MODE_TOPK, Mode
from ..model.image import check_target_inputs
from .admin import configure_from_state, merged_config
from .common import (close_stdout_quietly, detail, dumps, emit_json, fail, handle_errors, json_option, note,
                     progress, progress_option, target_option)
from .config import config_default
from .exit_codes import ExitCode
from .inputs import check_finite, read_rows
from .keys import NEEDS_KEY, key_option
from .output import OutputError, Sink, StopRequest, open_sink
from .params import CLASSES, EPSILON, MODE, SAMPLES, SENSITIVITY, check_mode_fits, check_range, check_writable

if TYPE_CHECKING:
    from tqdm import tqdm

QUERY_NEEDS_KEY = (f"{NEEDS_KEY} (--epsilon, --sensitivity and --range are checked against the device's "
                   "authenticated configuration, and the device did not authenticate it with the test images' key; "
                   "without those options query runs the device's own configuration)")
LINK_NEEDS_KEY = (f"{NEEDS_KEY} ({{what}} checked against the device's authenticated configuration, and over "
                  "{link} the public test key proves nothing: a man in the middle can sign a state with it; "
                  "nothing was sent; without those options query runs the device's own configuration){hint}")
FROM_CONFIG_HINT = "; for a test image: --key-file tests/keys/test-device.key"


def result_dict(r: QueryResult) -> dict:
    out: dict = {"label": int(r.label)}
    if r.values is not None:
        out["values"] = [float(v) for v in r.values]
    if r.indices is not None:
        out["indices"] = [int(i) for i in r.indices]
    if r.level is not None:
        out["level"] = BUCKET_NAMES[r.level]
    return out


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
                  value_range: tuple[float, float] | None, k: int) -> tuple[MechConfig, Budget | None]:
    """The mechanism the queries of k classes will run: the device's, with the options given;
    and the authenticated state the stream starts from (None when no STATE was read).

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
        return cfg, None
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
        return cfg, st.budget
    after = configure_from_state(dev, key, epsilon, sensitivity, value_range, state=st).after
    cfg = after.config
    cfg.lattice(k)
    return cfg, after


def check_spend(dev: Device, key_file: str | None, before: Budget | None, run: "QueryRun") -> None:
    """After the stream: with a key (``before`` read with it), read the authenticated STATE and
    keep what the device charged against the answers received (``run.spend``); without one,
    say that refused or lost rows cannot be checked. A state that cannot be read is noted, not
    fatal: the answers are already reported."""
    unreceived = run.refused + run.lost
    if before is None:
        if unreceived:
            note(f"note: {unreceived} rows were reported refused or lost; without --key-file this host cannot "
                 "check whether the device charged them (a refusal is not authenticated)")
        return
    try:
        after = dev.state(load_key(key_file), authadmin.INTERRUPTED_REREAD_S if run.stop.signal else None).budget
    except EdgeDPError as exc:
        note(f"note: the authenticated state could not be read after the stream ({exc}): what the device "
             "charged is not checked")
        return
    run.spend = spend_between(before, after, run.answered)
    detail(f"authenticated spend: {to_epsilon(run.spend.charged):g} epsilon charged for {run.answered} answers "
           "received")


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
@click.option("--no-progress", is_flag=True,
              help="No progress bar (rows/s, ε left, ETA on stderr; shown only when stdout and stderr are both "
                   "terminals, never under --json or -q).")
@handle_errors
def query(target: str | None, epsilon: float | None, sensitivity: float | None,
          value_range: tuple[float, float] | None, mode: Mode, infer: bool, input_path: str, out: str | None,
          key_file: str | None, as_json: bool, no_progress: bool) -> None:
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
        cfg, before = ensure_config(dev, key_file, epsilon, sensitivity, value_range, rows.shape[1])
        if not infer:  # model inputs are not clamped to the mechanism's range
            warn_clamped(rows, cfg)
        bar = progress_bar(len(rows)) if progress(no_progress) and not as_json and terminals() else None
        if bar is not None:
            cleanup.callback(bar.close)  # (first: the summary and any error come after it is gone)
        run = QueryRun(rows, Table(rows, cfg, m, infer), sink, as_json, t.name, stop, bar)
        if not as_json:
            run.echo(run.table.header())
        t0 = time.perf_counter()
        # From the first row until the target is closed and the file complete (cleanup exits
        # first), a first signal only stops the stream: run.finish says what was answered and saved.
        deferred.enter_context(stop.deferring_signals())
        deferred.enter_context(stop.summary_on_error(run.summary, as_json))  # (exits before the handlers are put back)
        answers = (dev.infer_many if infer else dev.query_many)(rows, m, stop=stop.__bool__)  # (none sent once set)
        for i, r in enumerate(answers):
            run.take(i, r)
        elapsed = time.perf_counter() - t0
        check_spend(dev, key_file, before, run)
        # (asked once: a board link's connect has read it; after a signal, not for a full timeout)
        i_dev = dev.last_info or dev.info(authadmin.INTERRUPTED_REREAD_S if stop.signal else None)
    detail(f"device: {shown(i_dev.board)}, {i_dev.build} build, firmware {shown(i_dev.firmware_version)}")
    detail(f"{run.done} rows in {elapsed:.2f} s ({run.done / elapsed if elapsed else 0:.0f} rows/s)")
    run.finish(i_dev.build == "test")


def terminals() -> bool:
    """Whether stdout and stderr are both terminals (the only case query shows a progress bar)."""
    return all(f is not None and f.isatty() for f in (sys.stdout, sys.stderr))


def progress_bar(total: int) -> tqdm:
    """query's progress bar on stderr: rows answered of total, rows/s, ETA and (as postfix) ε left."""
    from tqdm import tqdm  # (imported only when a bar is shown)
    return tqdm(total=total, desc="query", unit="row", file=sys.stderr, leave=False, dynamic_ncols=True)


class QueryRun:
    """What query does with each answer as it arrives: file, stdout, the progress bar, and when to
    stop sending."""

    def __init__(self, rows: np.ndarray, table: Table, sink: Sink | None, as_json: bool, target_name: str,
                 stop: StopRequest, bar: tqdm | None = None):
        self.rows, self.table, self.sink, self.as_json, self.target_name = rows, table, sink, as_json, target_name
        self.stop, self.bar = stop, bar
        self.answered = self.refused = self.lost = 0
        self.write_error: OSError | None = None
        self.pipe_closed = self.budget_noted = self.rate_noted = False
        self.spend: Spend | None = None  # what the authenticated state says was charged (check_spend)

    @property
    def done(self) -> int:
        return self.answered + self.refused + self.lost

    def echo(self, text: str) -> None:
        """A line on stdout, above the progress bar when one is shown."""
        if self.bar is None:
            click.echo(text)
        else:
            with self.bar.external_write_mode():
                click.echo(text)

    def note(self, text: str) -> None:
        """A note on stderr, above the progress bar when one is shown."""
        if self.bar is None:
            note(text)
        else:
            with self.bar.external_write_mode(file=sys.stderr):
                note(text)

    def take(self, i: int, r: QueryResult | DeviceError | AnswerLost) -> None:
        """Row i's answer, refusal or lost answer: saved (a write that fails stops the stream),
        then shown. A lost answer (the link dropped it; the device charged the row) stops the
        stream; the rows already on the wire still come."""
        if isinstance(r, AnswerLost):
            answer, rec = None, {"row": i, "status": r.code, "output": None, "remaining": None}
            self.lost += 1
            if not self.stop.reason:
                self.stop.stop(f"row {i}'s answer was lost on the link (it may have been charged): no more rows sent")
                self.note(self.stop.reason or "")
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
        if self.bar is not None:
            if rec["remaining"] is not None:
                self.bar.set_postfix_str(f"ε left {rec['remaining']:.3f}", refresh=False)
            self.bar.update(1)  # (before the line: the bar redrawn under it counts it)
        if not self.pipe_closed:
            try:
                self.echo(dumps(rec) if self.as_json else self.table.line(i, self.rows[i], rec))
            except BrokenPipeError:
                self.pipe_closed = True
                self.stop.stop("stdout closed")
        if isinstance(r, DeviceError) and r.error in STOPS and not self.stop.reason:
            on_qemu = "stm32f4" in self.target_name and self.target_name.startswith(("qemu", "session"))
            board, elsewhere = STOPS[r.error]
            self.stop.stop(NO_PART_ON_QEMU.format(err=r.code, target=self.target_name.removeprefix("session:"),
                                                  part=board) if on_qemu else elsewhere)
            self.note(self.stop.reason or "")
        if rec["status"] == "ERR_BUDGET" and not self.budget_noted:  # once, also for rows already on the wire
            self.budget_noted = True
            self.note("budget exhausted: the device refuses further external answers today")
        elif rec["status"] == "ERR_RATE" and not self.rate_noted:
            self.rate_noted = True
            self.note(f"rate limit: {r}")

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
        if self.spend is not None and self.spend.not_received > self.lost * self.spend.per_answer:
            nr = self.spend.not_received
            fail(ChargedNotReceived(
                f"the authenticated state shows {to_epsilon(self.spend.charged):g} epsilon charged during this "
                f"command and this host received {self.answered} answers ({to_epsilon(self.spend.received):g} "
                f"epsilon): {to_epsilon(nr):g} epsilon was charged for answers it did not receive ({self.refused} "
                f"rows reported refused, {self.lost} lost). A refusal is not authenticated: one forged on the way "
                "can hide a charged answer (or another client used the device meanwhile); suspect the link", nr),
                 self.as_json, extra={"charged_not_received": to_epsilon(nr)})
        if self.write_error is not None:
            assert self.sink is not None
            unsaved = self.answered - self.sink.saved
            whole = "a complete array of those rows" if self.sink.path.suffix == ".npy" else "whole lines only"
            where = ("are on stdout above, as every answer is" if not self.pipe_closed else
                     "were not saved: stdout was closed too")
            fail(OutputError(f"{self.write_error}; {self.answered} answers were charged and {self.sink.saved} written to "
                             f"{self.sink.path} ({whole}); the other {unsaved} {where}"), self.as_json)
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


COMMANDS = [query, sample]
