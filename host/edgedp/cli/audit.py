"""Empirical privacy audits: audit-dp (the device's mechanism) and audit-train (DP-SGD).

Both print the lower bound beside the stated epsilon and exit 1 when the bound exceeds it: a
privacy gate for CI (README, "Privacy gates in CI")."""
from __future__ import annotations

import contextlib
import sys

import click

from ..device.errors import TransportError
from ..device.targets import check_spec
from .common import dask_option, emit_json, handle_errors, json_option, progress_option
from .output import StopRequest

REFERENCE = "reference"
DEVICE_TRIALS = 1_000


def _check_target(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or value == REFERENCE:
        return value
    try:
        return check_spec(value)
    except TransportError as exc:
        raise click.BadParameter(f"{exc} (or {REFERENCE})", ctx, param) from None


def _verdict(doc: dict) -> str:
    lb, st = doc["epsilon_lower_bound"], doc["epsilon_stated"]
    return (f"ε lower bound {lb:.4g} (stated ε = {st:g}) at {100 * doc['confidence']:g}% confidence: "
            + ("OK" if lb <= st else "EXCEEDS the stated ε"))


def _show(doc: dict, as_json: bool, lines: list[str]) -> None:
    from ..analysis.jsonable import finite_json
    if as_json:
        emit_json(finite_json(doc))
    else:
        for line in lines:
            click.echo(line)
        click.echo(_verdict(doc))


def _lines(doc: dict) -> list[str]:
    """audit-dp's text before the verdict: the set-up, then each pair's bound and event."""
    lines = [f"{doc['target']}: mode {doc['mode']}, k = {doc['classes']}, range [{doc['range'][0]:g}, "
             f"{doc['range'][1]:g}], Δ = {doc['sensitivity']:g}, {doc['trials']} answers per world"]
    for p in doc["pairs"]:
        ev = p["event"]["text"] if p["event"] else "no separating event"
        lines.append(f"  {p['name']:9s} bound {p['epsilon_lower_bound']:.4g}  event {ev}: "
                     f"{p['hits_a']}/{p['n_a']} vs {p['hits_b']}/{p['n_b']}")
    return lines


def _shown_complete(doc: dict, as_json: bool) -> str:
    """A complete device bound that a signal came after: shown, and what the summary says was done."""
    _show(doc, as_json, _lines(doc))
    return "every device answer (the bound is complete)"


def _finish(doc: dict, as_json: bool, lines: list[str]) -> None:
    _show(doc, as_json, lines)
    if doc["epsilon_lower_bound"] > doc["epsilon_stated"]:
        sys.exit(1)


@click.command("audit-dp")
@click.option("--target", "-t", default=None, metavar="T", envvar="EDGEDP_TARGET", callback=_check_target,
              help=f"{REFERENCE} (the vectorised sampler: fast), or a device target as elsewhere (a test image: "
                   "qemu, host, a serial URL). Default: the running `edgedp device` session, else a fresh qemu.")
@click.option("--epsilon", "-e", type=float, default=None,
              help="Per-answer ε. reference: the mechanism's (default 1); device: configured on it first "
                   "(default: keep the device's).")
@click.option("--mode", "-m", default="full", show_default=True, help="Output mode: full, topk:K, label, …")
@click.option("--classes", "-k", type=click.IntRange(1, 1024), default=10, show_default=True,
              help="Classes per query vector.")
@click.option("--range", "value_range", type=(float, float), default=(0.0, 1.0), show_default=True,
              metavar="LO HI", help="reference: the input range (e.g. 0 30 for a 30-teacher vote histogram).")
@click.option("--sensitivity", type=float, default=2.0, show_default=True, help="reference: the L1 sensitivity.")
@click.option("--trials", "-n", type=click.IntRange(8), default=None,
              help=f"Answers per world and pair (default 100000 on reference, {DEVICE_TRIALS} on a device).")
@click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=0.95, show_default=True,
              help="Probability that the bound is below the true ε.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the noise (reference) or the device's TEST_SEED, and the sample split.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), default=None,
              help="Device key file for the audit's set-up (default: the public test key).")
@json_option
@progress_option
@handle_errors
def audit_dp(target: str | None, epsilon: float | None, mode: str, classes: int, value_range: tuple[float, float],
             sensitivity: float, trials: int | None, confidence: float, seed: int, key_path: str | None,
             as_json: bool, no_progress: bool) -> None:
    """Empirical ε lower bound of the output mechanism from worst-case neighbouring inputs (range
    extremes, lattice rounding boundaries); exit 1 when it exceeds the stated ε."""
    from tqdm import tqdm

    from ..analysis import audit_dp as A
    from ..mech.modes import Mode

    md = Mode.parse(mode)
    stop = StopRequest()
    stopped: int | None = None  # the device answers charged when the audit stopped before its bound
    res: A.AuditResult | None = None
    if target == REFERENCE:
        mech = A.Mechanism(1.0 if epsilon is None else epsilon, classes, value_range[0], value_range[1], sensitivity)
        mech.lattice  # noqa: B018 - a configuration the device would refuse fails here, in one line
        res = A.audit(A.reference_releaser(mech, md), mech, md, trials or A.DEFAULT_TRIALS, confidence, seed)
    else:
        from ..device.client import load_key, open_device
        n = trials or DEVICE_TRIALS
        key = load_key(key_path)
        answers = 0

        def answered(count: int) -> None:
            nonlocal answers
            answers += count
            bar.update(count)

        def charged(count: int) -> str:
            """No bound: what was charged (under --json as a document too, as bench does)."""
            total = 2 * n * len(pairs)
            if as_json:
                emit_json({"target": target or "default", "mode": str(md), "answers": count,
                           "answers_planned": total, "epsilon_spent": count * mech.epsilon, "complete": False})
            return f"{count} of {total} device answers (spent {count * mech.epsilon:g} epsilon); no bound"

        def after_link_error() -> str:  # the answers so far, or the complete bound (the close failed)
            return charged(answers) if res is None else _shown_complete(res.as_dict(), as_json)

        # (the device is closed before the handlers are put back: a first signal only stops the queries)
        with contextlib.ExitStack() as deferred, open_device(target) as dev:
            mech = A.prepare_device(dev, key, classes, 2 * n * A.MAX_PAIRS, epsilon, seed)
            pairs = A.neighbour_pairs(mech)
            deferred.enter_context(stop.deferring_signals())
            deferred.enter_context(stop.summary_on_error(after_link_error))
            with tqdm(total=2 * n * len(pairs), desc="device answers", disable=no_progress, leave=False,
                      unit="q") as bar:
                rel = A.device_releaser(dev, md, classes, mech.lattice.lo - 1.0, answered, stop.__bool__)
                try:
                    res = A.audit(rel, mech, md, n, confidence, seed, target or "default", pairs)
                except A.Stopped as s:
                    stopped = s.answers
    if stopped is not None:  # (only a signal stops it: this ends the command)
        stop.end(charged(stopped))
    assert res is not None
    doc = res.as_dict()
    if stop:  # during the last answer or the close: the bound is complete, shown, and the signal's exit code follows
        stop.end(_shown_complete(doc, as_json))
    _finish(doc, as_json, _lines(doc))


@click.command("audit-train")
@click.argument("config_path", metavar="[CONFIG.toml]", required=False, type=click.Path(dir_okay=False))
@click.option("--method", type=click.Choice(["both", "two-world", "one-run"]), default=None,
              help="Override the file's method (default both).")
@click.option("--trainings", type=click.IntRange(8), default=None, help="Override: two-world models per world.")
@click.option("--seed", type=int, default=None, help="Override the file's seed (trainings, canaries, split).")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes for the trainings (local backend).")
@dask_option
@json_option
@progress_option
@handle_errors
def audit_train(config_path: str | None, method: str | None, trainings: int | None, seed: int | None, jobs: int,
                as_json: bool, no_progress: bool) -> None:
    """Empirical ε lower bound of a DP-SGD configuration: two-world canary audit (Dirac canary
    scored white-box, out-of-distribution canary scored by loss) and the one-run audit with many
    canaries; exit 1 when the bound exceeds the stated ε.

    CONFIG.toml holds the configuration and the audit's size (keys at the top level or in an
    [audit-train] table: epsilon, delta, clip_norm, clipping, optimizer, learning_rate,
    sampling_rate, steps, data, n_train, seed, method, trainings, canaries, guesses, confidence);
    without it, the defaults of docs/evaluation.md §9."""
    from ..analysis import audit_train as A

    cfg = A.AuditTrainConfig.read(config_path) if config_path else A.AuditTrainConfig()
    cfg = A.with_overrides(cfg, method=method, trainings=trainings, seed=seed)
    doc = A.audit(cfg, jobs=jobs, progress=not no_progress)
    c = doc["config"]
    lines = [f"DP-SGD {c['clipping']} clipping, {c['optimizer']} lr {c['learning_rate']:g}, q = {c['sampling_rate']:g}, "
             f"{c['steps']} steps, C = {c['clip_norm']:g}, noise multiplier {doc['noise_multiplier']:.4g} for "
             f"(ε = {c['epsilon']:g}, δ = {c['delta']:g}), {doc['n_train']} records"]
    for t in doc["tests"]:
        size = (f"{t['trainings_per_world']} trainings per world" if t["method"] == "two-world" else
                f"{t['canaries']} canaries, {t['correct']}/{t['guesses']} guesses correct")
        lines.append(f"  {t['method']:9s} {t['canary']:5s} ({t['scoring']}; {size}): bound {t['epsilon_lower_bound']:.4g}")
    _finish(doc, as_json, lines)
