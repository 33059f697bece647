"""Analysis commands: account, tradeoff, attack mia / attack extract, report."""
from __future__ import annotations

import dataclasses
import math
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
import numpy as np
from click.core import ParameterSource

from .. import datasets as data
from ..analysis import accounting, extraction, mia, populations, tradeoff
from ..analysis.jsonable import finite_json
from ..analysis.protected_api import SOFTMAX, ensemble, parse_epsilon, parse_modes
from ..analysis.parallel import default_jobs
from ..analysis.settings import Settings, estimate_seconds
from .common import (dask_option, emit_json, handle_errors, json_option, note, progress as show_progress,
                     target_option)
from .keys import key_option
from .output import StopRequest


def _csv(text: str, option: str) -> list[str]:
    """The comma-separated items of an option's value; a usage error when there are none."""
    items = [t for t in (s.strip() for s in text.split(",")) if t]
    if not items:
        raise click.UsageError(f"{option} needs at least one value (got {text!r})")
    return items


def common_options(fn):
    """--seed, --quick, --jobs, --dask, --json, --no-progress (in that order on the function)."""
    fn = click.option("--no-progress", is_flag=True, help="No progress bars on stderr.")(fn)
    fn = dask_option(fn)
    fn = json_option(fn)
    fn = click.option("--jobs", "-j", type=click.IntRange(1, 64), default=default_jobs(), show_default=True,
                      help="Worker processes.")(fn)
    fn = click.option("--quick", is_flag=True, help="Same pipeline on small settings (tests, smoke runs).")(fn)
    fn = click.option("--seed", type=int, default=0, show_default=True, help="Seeds data split, models and noise.")(fn)
    return fn


grid_options = [
    click.option("--epsilons", default=None, metavar="E1,E2,…",
                 help="Per-query epsilons (inf = no noise). Default 0.1,0.5,1,2,5,10,inf (quick: 0.1,1,10,inf)."),
    click.option("--modes", default=None, metavar="M1,M2,…",
                 help="Output modes. Default full,topk:3,label,bucket,round:2,simplex (quick: full,label)."),
    click.option("--teachers", type=click.IntRange(1, 500), default=None, help="Ensemble size T (default 30)."),
]


def with_grid(fn):
    for opt in reversed(grid_options):
        fn = opt(fn)
    return fn


def make_settings(quick: bool, seed: int, epsilons: str | None, modes: str | None, teachers: int | None,
                  shadows: int | None = None) -> Settings:
    eps = tuple(parse_epsilon(e) for e in _csv(epsilons, "--epsilons")) if epsilons is not None else None
    mds = tuple(str(m) for m in parse_modes(_csv(modes, "--modes"))) if modes is not None else None
    return Settings.make(quick=quick, seed=seed, epsilons=eps, modes=mds, shadows=shadows, teachers=teachers)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def announce(command: str, s: Settings, jobs: int, dpsgd: bool = True) -> None:
    """Before a long run: how long it will roughly take, and what --quick would take."""
    est = estimate_seconds(s, command, jobs, dpsgd)
    if s.quick or est < 60:
        return
    quick = estimate_seconds(Settings.make(quick=True, seed=s.seed), command, jobs, dpsgd)
    note(f"edgedp {command}: these settings take roughly {_duration(est)} with --jobs {jobs} (about "
         f"{s.shadows + 1} models of {s.model.teachers} teachers, {len(s.modes)} modes × {len(s.epsilons)} ε); "
         f"--quick runs the same pipeline on small settings in roughly {_duration(quick)}")


def _eps(e: float) -> str:
    return "inf" if math.isinf(e) else f"{e:g}"


def _command_line() -> str:
    return "edgedp " + " ".join(shlex.quote(a) for a in sys.argv[1:])


# ---- account ----------------------------------------------------------------------------

class Count(click.ParamType):
    """A non-negative whole number, also written as 1e8."""

    name = "N"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            v = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (math.isfinite(v) and v >= 0 and v == int(v)):
            self.fail(f"{value!r} is not a whole number >= 0", param, ctx)
        return int(v)


def _device_mechanism(target: str | None, classes: int | None,
                      key_file: str | None) -> tuple[float, accounting.Mechanism, str, bool]:
    """The configured per-query ε, Δ and lattice exponent of a device, and k: the given --classes,
    else the most classes an answer of this device can carry (INFO, which nothing authenticates).
    With --key-file from STATE, which the device authenticates; without, from BUDGET, which a man
    in the middle can rewrite. The last value is True only if all of it was authenticated (a key
    and --classes); the text says which part was not."""
    from ..device.client import load_key, open_device
    from ..mech.lattice import to_epsilon

    with open_device(target) as dev:
        b = dev.state(load_key(key_file)).budget if key_file else dev.budget()
        k = classes if classes is not None else dev.info().max_classes
    mech = accounting.Mechanism(k, float(b.sensitivity), b.m)
    how = "authenticated (STATE)" if key_file else \
        "unauthenticated (BUDGET, which a man in the middle can rewrite: pass --key-file)"
    eps = to_epsilon(b.epsilon_micro)
    return eps, mech, (f"read from the device, {how}: ε = {eps:g}, "
                       f"Δ = {float(b.sensitivity):g}, lattice "
                       f"{'automatic' if b.m is None else f'2^-{b.m}'}"
                       + ("" if classes is not None else
                          f", k = {k} (its largest answer, from the unauthenticated INFO: "
                          f"give --classes)")), \
        bool(key_file) and classes is not None


def _account_rows(c: accounting.Composition) -> list[str]:
    rows = [f"{c.queries} answers at ε = {c.epsilon:g} (δ = {c.delta:g}) of the device's mechanism: k = {c.classes}, "
            f"Δ = {c.sensitivity:g}, lattice 2^-{c.exponent} (S = {c.lattice_steps} steps)",
            f"  ε of one answer        {c.answer_epsilon:.12g}   (ε + k·2^-36: the sampler's table rounding, "
            f"docs/privacy.md §2)",
            f"  basic composition      {c.basic:.7g}",
            f"  advanced (DRV)         {c.advanced:.7g}"]
    if c.queries <= accounting.PLD_MAX_QUERIES:
        rows.append(f"  PLD (dp_accounting)    {c.pld:.7g}")
    else:
        rows.append(f"  optimal ε-DP comp.     {c.pld:.7g}   (Kairouz et al.; PLD beyond "
                    f"{accounting.PLD_MAX_QUERIES:,} answers is not run)")
    rows += [f"  table slack            {c.slack_epsilon:.3g}   (N·k·2^-36, ε: the tables' rounding; included, "
             f"every total is taken at ε + k·2^-36 per answer)",
             f"  published formula      {c.advanced_composition_first_term:.6g}   (ε·√(2N ln(1/δ)): omits Nε(e^ε−1), not a bound)",
             f"  δ of the composition   {c.delta:.6g}",
             f"  + tail cap             {c.cap_delta:.3g}   (N·k·2^-66, δ: the sampler's cap, docs/privacy.md §2)",
             f"  + timing               {c.timing_delta:.3g}   (N·2^-40, δ: a deadline overrun seen in the "
             f"answer's timing, docs/privacy.md §6)",
             f"  = total δ              {c.total_delta:.6g}   (every total above holds at this δ)"]
    return rows


@click.command()
@click.option("--epsilon", "-e", type=float, default=None, help="Per-query epsilon (default with --from-device: the device's).")
@click.option("--queries", "-n", type=Count(), default=None, help="Number of answers to compose (e.g. 1000, 1e8).")
@click.option("--delta", type=float, default=accounting.DEFAULT_DELTA, show_default=True)
@click.option("--classes", "-k", type=click.IntRange(1), default=None,
              help=f"Classes per answer (default {accounting.DEFAULT_CLASSES}; with --from-device the device's largest).")
@click.option("--sensitivity", type=float, default=None,
              help=f"L1 sensitivity Δ of the answers (default {accounting.DEFAULT_SENSITIVITY:g}).")
@click.option("--lattice-exponent", "exponent", type=int, default=None,
              help="Lattice exponent m (step 2^-m) of the device's CONFIG; default: its automatic choice.")
@click.option("--from-device", is_flag=True, help="Read ε, Δ and the lattice exponent from the device (--target); "
              "with --key-file from its authenticated state.")
@target_option
@key_option
@click.option("--target-epsilon", type=float, default=None,
              help="Inverse: lifetime epsilon to stay within (with --days).")
@click.option("--days", type=click.IntRange(1), default=365, show_default=True, help="Horizon for --target-epsilon.")
@click.option("--method", type=click.Choice(accounting.METHODS), default="pld", show_default=True,
              help="Accounting used by the inverse.")
@json_option
@handle_errors
def account(epsilon: float | None, queries: int | None, delta: float, classes: int | None, sensitivity: float | None,
            exponent: int | None, from_device: bool, target: str | None, key_file: str | None,
            target_epsilon: float | None, days: int, method: str, as_json: bool) -> None:
    """Total epsilon of N answers of the device's mechanism (basic, advanced, PLD) with every
    per-answer term, or the largest daily query count for a lifetime target (--target-epsilon,
    --days), ready for `edgedp admin config`."""
    if (queries is None) == (target_epsilon is None):
        raise click.UsageError("give either --queries N or --target-epsilon E (with --days)")
    source, authenticated = None, None
    if from_device:
        if sensitivity is not None or exponent is not None:
            raise click.UsageError("--from-device reads Δ and the lattice exponent; do not also give --sensitivity or "
                             "--lattice-exponent")
        dev_eps, mech, source, authenticated = _device_mechanism(target, classes, key_file)
        epsilon = dev_eps if epsilon is None else epsilon
    else:
        if epsilon is None:
            raise ValueError("give --epsilon (or --from-device)")
        mech = accounting.Mechanism(accounting.DEFAULT_CLASSES if classes is None else classes,
                                    accounting.DEFAULT_SENSITIVITY if sensitivity is None else sensitivity, exponent)
    if queries is not None:
        c = accounting.compose(epsilon, queries, delta, mech)
        if as_json:
            emit_json(finite_json({**c.as_dict(), "device": source, "device_authenticated": authenticated}))
            return
        if source:
            click.echo(source)
        click.echo("\n".join(_account_rows(c)))
        return
    assert target_epsilon is not None  # the usage check above: one of the two
    p = accounting.plan_daily_queries(epsilon, target_epsilon, days, delta, method, mech)
    answer_delta = p.total_queries * mech.answer_delta()
    if as_json:
        emit_json(finite_json({**p.as_dict(), "device": source, "device_authenticated": authenticated,
                               "classes": mech.classes,
                               "sensitivity": mech.sensitivity, "exponent": mech.m,
                               "total_delta": delta + answer_delta}))
        return
    if source:
        click.echo(source)
    if p.daily_queries == 0:
        click.echo(f"even one answer a day for {days} days at ε = {epsilon:g} exceeds ε = {target_epsilon:g} "
                   f"({method}); lower the per-query ε or the horizon")
        return
    click.echo(f"at most {p.daily_queries} answers/day for {days} days ({p.total_queries} in total) "
               f"stay within ε = {target_epsilon:g} ({method}: {p.achieved_epsilon:.6g} with the table slack "
               f"N·k·2^-36, k = {mech.classes}; at δ = {delta:g} + {answer_delta:.3g} for the tail cap and timing)")
    click.echo(f"  {p.admin_command()}")
    click.echo(f"  (the device charges basic composition, so its caps read {p.daily_cap:g} a day and "
               f"{p.lifetime_cap:g} in total; the guarantee is the {method} total above)")


# ---- tradeoff ---------------------------------------------------------------------------

def _dpsgd_choice_text(rows: list[dict]) -> list[str]:
    out = [f"which deployment wins within a per-record budget E over N answers (mode {rows[0]['mode']}; "
           f"output noise spends E/N-ish per answer by optimal composition, DP-SGD spends E once):",
           f"  {'E':>5s} {'N':>8s} {'eps/answer':>10s} {'softmax':>8s} {'ensemble':>8s} {'dpsgd':>6s}  winner"]
    for r in rows:
        def f(v):
            return "   n/a" if v is None else f"{v:6.3f}"
        out.append(f"  {r['total_epsilon']:5g} {r['queries']:8d} {r['per_query_epsilon']:10.3g} {f(r['softmax']):>8s} "
                   f"{f(r.get('ensemble')):>8s} {f(r['dpsgd']):>6s}  {r['winner']}")
    return out


def _check_data(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--data: digits, or an existing .npz (an .npy holds one array; outputs and labels need two)."""
    if value == "digits":
        return value
    if Path(value).suffix != ".npz":
        raise click.BadParameter(f"{value}: give digits or an .npz file with arrays X and y (features, labels) "
                                 "or probs (or logits) and labels, e.g. np.savez('out.npz', probs=probs, "
                                 "labels=labels)", ctx, param)
    if not Path(value).is_file():
        raise click.BadParameter(f"{value} does not exist", ctx, param)
    return value


def _show_tradeoff(doc: dict, info: dict, rows: list[dict], model_path: str | None, as_json: bool) -> None:
    """tradeoff's result on stdout (--json: the one document)."""
    if as_json:
        emit_json(finite_json(doc))
    else:
        if model_path:
            click.echo(f"model {model_path}: its device outputs (bit-exact kernels)")
        click.echo(f"data {info['data']}: {info['test']} test inputs, non-private accuracy "
                   f"{info['test_accuracy']:.3f}, chance {doc['chance']:.3f}")
        click.echo(f"{'mechanism':9s} {'mode':9s} {'eps':>5s} {'accuracy':>9s} {'agreement':>10s}")
        for r in rows:
            click.echo(f"{r['mechanism']:9s} {r['mode']:9s} {_eps(r['epsilon']):>5s} {r['accuracy']:9.3f} "
                       f"{r['agreement']:10.3f}")
        if "choice" in doc:
            click.echo("\n".join(_dpsgd_choice_text(doc["choice"])))
        if "device_check" in doc:
            d = doc["device_check"]
            how = ("configuration from the authenticated STATE" if d["authenticated"] else
                   "configuration from the unauthenticated BUDGET, which a man in the middle can rewrite: "
                   "pass --key-file")
            if d.get("interrupted"):
                click.echo(f"device: {d['reason']} (ε = {d['epsilon']:g} each; {how}): no test")
            elif "pvalue_values" not in d:
                click.echo(f"device: {d['reason']}: MISMATCH ({how})")
            else:
                click.echo(f"device: {d['queries']} queries at ε = {d['epsilon']:g} (full mode; {how}): values fit "
                           f"the mechanism's law p = {d['pvalue_values']:.3g}; label agreement "
                           f"{d['device_agreement']:.3f} vs reference {d['reference_agreement']:.3f} "
                           f"(p = {d['pvalue_labels']:.3g}): {'OK' if d['ok'] else 'MISMATCH'}")


def _check_done(d: dict) -> str:
    """What a summary after a first signal says the device check did: its queries and their ε."""
    if d.get("interrupted"):
        return f"{d['queries']} of the device check's queries (spent {d['epsilon_spent']:g} epsilon)"
    return f"every device check query (spent {d['queries'] * d['epsilon']:g} epsilon): the test is complete"


@click.command("tradeoff")
@click.option("--data", "data_spec", default="digits", show_default=True, metavar="digits|FILE.npz",
              callback=_check_data,
              help="digits, an .npz of features X and labels y (models trained here, DP-SGD included), "
                   "or an .npz with probs|logits, labels [, votes] (your model's outputs).")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Your deployed model (.joblib or `edgedp train` .npz): its device outputs on --data (all rows of "
                   "an X, y .npz, or the digits test set) instead of models trained here.")
@with_grid
@click.option("--repeats", type=click.IntRange(1), default=None, help="Noise draws over the test set (default 5).")
@click.option("--dpsgd/--no-dpsgd", default=True, show_default=True,
              help="Also train DP-SGD models at each finite ε (the third deployment).")
@target_option
@click.option("--target-queries", type=click.IntRange(1), default=200, show_default=True,
              help="With --target: test rows sent through the device (full mode) and checked against the "
                   "fast sampler at the device's configuration (with --key-file from its authenticated STATE, "
                   "else from the unauthenticated BUDGET). Ctrl-C stops after the query in flight (exit 130).")
@key_option
@common_options
@handle_errors
def tradeoff_cmd(data_spec: str, model_path: str | None, epsilons: str | None, modes: str | None, teachers: int | None,
                 repeats: int | None, dpsgd: bool, target: str | None, target_queries: int, key_file: str | None,
                 seed: int, quick: bool, jobs: int, as_json: bool, no_progress: bool) -> None:
    """Top-1 accuracy and agreement with the non-private prediction for each ε and output mode:
    single model (softmax) with output noise, teacher ensemble (votes), and a DP-SGD model."""
    key_given = click.get_current_context().get_parameter_source("key_file") is ParameterSource.COMMANDLINE
    if key_given and target is None:  # (edgedp.toml's key_file alone is no reason to fail)
        raise click.UsageError("--key-file is for the device check: give --target too")
    key = None
    if target is not None and key_file:  # before the models are trained: a wrong path fails at once
        from ..device.client import load_key
        key = load_key(key_file)
    s = make_settings(quick, seed, epsilons, modes, teachers)
    stop = StopRequest()
    if repeats:
        s = dataclasses.replace(s, repeats=repeats)
    progress = show_progress(no_progress)
    t0 = time.perf_counter()
    md = parse_modes(list(s.modes))
    dp = split = None
    if model_path is not None:
        out = _model_outputs(model_path, data_spec, seed)
        probs, labels, votes, T = out.probs, out.labels, out.votes, out.teachers
        info = {"data": out.source, "model": model_path, "test": int(len(labels)),
                "test_accuracy": float((probs.argmax(1) == labels).mean()), "teachers": T}
    elif data_spec == "digits" or data.has_features(data_spec):
        split = data.load_split(data_spec, seed)
        pop = populations.build_population(split, 1, seed, s.model, ensemble=True, jobs=jobs, progress=progress)
        probs, labels, votes, T = pop.test_probs[0], split.y_test, pop.ensemble_test_votes[0], pop.teachers
        info = {"data": split.name, "test": int(len(labels)), "test_accuracy": pop.test_accuracy,
                "ensemble_test_accuracy": pop.ensemble_test_accuracy, "teachers": T}
        if dpsgd:
            from ..analysis import private_training
            dp = private_training.build(split, pop.masks[:1], list(s.epsilons), seed, progress)
    else:
        out = data.load_outputs(data_spec)
        probs, labels, votes, T = out.probs, out.labels, out.votes, out.teachers
        info = {"data": out.source, "test": int(len(labels)),
                "test_accuracy": float((probs.argmax(1) == labels).mean()), "teachers": T}
    rows = tradeoff.run(probs, labels, md, list(s.epsilons), s.repeats, seed, votes, T, progress=progress)
    k = probs.shape[1]
    doc: dict[str, Any] = {**info, "chance": tradeoff.chance(labels, k), "rows": rows, "settings": s.as_dict()}
    if dp is not None:
        from ..analysis import private_training
        rows += private_training.tradeoff_rows(dp, labels, probs.argmax(1), md)
        cmode = next((m for m in md if str(m) == "label"), md[0])
        doc["choice"] = private_training.choice(dp, probs, votes, T, labels, cmode, seed)
        doc["dpsgd"] = {"delta": dp.delta, "steps": dp.steps, "sampling_rate": dp.sampling_rate,
                        "n_train": dp.n_train, "noise_multipliers": dict(zip(map(str, dp.epsilons),
                                                                              dp.noise_multipliers))}
    doc["seconds"] = time.perf_counter() - t0
    if target is not None:
        from ..analysis import device_check  # imports the device client only when asked
        sent = device_check.Sent()

        def after_link_error() -> str:  # the table, and the check's queries the device charged: no test
            doc["device_check"] = device_check.interrupted(target, key is not None, sent)
            _show_tradeoff(doc, info, rows, model_path, as_json)
            return _check_done(doc["device_check"])

        # Ctrl-C: after the query in flight (the device is closed inside)
        with stop.deferring_signals(), stop.summary_on_error(after_link_error):
            doc["device_check"] = device_check.check(target, probs, target_queries, seed, progress, key,
                                                     stop.__bool__, sent)
    _show_tradeoff(doc, info, rows, model_path, as_json)
    if stop:  # a first signal, also one during the last query, the comparison or the device's close
        stop.end(_check_done(doc["device_check"]))
    if "device_check" in doc and not doc["device_check"]["ok"]:
        sys.exit(1)


def _model_outputs(model_path: str, data_spec: str, seed: int) -> data.Outputs:
    """The deployed model's outputs on the digits test set or on every row of an X, y .npz."""
    from ..model.convert import load_file
    from ..model.deploy import device_outputs, labelled_data

    loaded = load_file(model_path)
    if data_spec == "digits":
        s = data.digits_split(seed)
        return device_outputs(loaded, model_path, s.X_test, s.y_test,
                              f"the digits test set ({len(s.y_test)} records)")
    X, y = labelled_data(data_spec, loaded.model.n_features)
    return device_outputs(loaded, model_path, X, y, data_spec)


# ---- attack -----------------------------------------------------------------------------

@click.group()
def attack() -> None:
    """Attacks on the protected API: membership inference, model extraction."""


@attack.command("mia")
@click.option("--data", "data_spec", default="digits", show_default=True, metavar="digits|FILE.npz",
              help="digits or an .npz of features X and labels y (all models trained here); with --model: the "
                   "records your model was trained on.")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Attack your deployed model (.joblib or `edgedp train` .npz) instead of models trained here: "
                   "the threshold attack on its device outputs, members from --data, non-members from --holdout.")
@click.option("--holdout", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE.npz",
              help="With --model: records (X, y) your model never saw.")
@with_grid
@click.option("--dpsgd/--no-dpsgd", default=True, show_default=True,
              help="Also attack DP-SGD models trained at each finite ε.")
@click.option("--shadows", type=click.IntRange(2), default=None, help="Shadow models (default 16, quick 6).")
@click.option("--daily-cap", type=float, default=10.0, show_default=True,
              help="Daily epsilon cap for the averaging attack.")
@click.option("--plots", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write ROC (log-log) and AUC plots here.")
@common_options
@handle_errors
def attack_mia(data_spec: str, model_path: str | None, holdout: str | None, epsilons: str | None, modes: str | None, teachers: int | None, dpsgd: bool,
               shadows: int | None, daily_cap: float, plot_dir: str | None, seed: int, quick: bool, jobs: int,
               as_json: bool, no_progress: bool) -> None:
    """Confidence-threshold and LiRA (online, offline) membership inference for each mode and ε:
    single model and ensemble with output noise, DP-SGD models; plus the averaging attack within
    one daily budget."""
    s = make_settings(quick, seed, epsilons, modes, teachers, shadows)
    announce("attack mia", s, jobs, dpsgd)
    progress = show_progress(no_progress)
    t0 = time.perf_counter()
    if model_path is not None or holdout is not None:
        _mia_on_model(model_path, data_spec, holdout, s, seed, as_json, t0)
        return
    split = data.load_split(data_spec, seed)
    pop = populations.build_population(split, s.shadows + 1, seed, s.model, ensemble=True, jobs=jobs, progress=progress)
    md = parse_modes(list(s.modes))
    res = mia.run(pop, split.y_pool, md, list(s.epsilons), seed, jobs=jobs, progress=progress)
    if dpsgd:
        from ..analysis import private_training
        dp = private_training.build(split, pop.masks, list(s.epsilons), seed, progress)
        rows, rocs = private_training.mia_rows(dp, pop.masks, split.y_pool, md, seed)
        res.rows += rows
        res.rocs.update(rocs)
    n = s.averaging_inputs
    avg = (mia.averaging(pop.test_probs[0][:n], SOFTMAX, list(s.epsilons), daily_cap, seed)
           + mia.averaging(pop.ensemble_test_votes[0][:n], ensemble(pop.teachers), list(s.epsilons), daily_cap, seed))
    plots_written = []
    if plot_dir:
        from ..analysis import plots
        d = Path(plot_dir)
        for m in s.modes:
            tag = m.replace(":", "")
            plots_written.append(str(plots.auc(res.rows, m, d / f"mia_auc_{tag}.png")))
            for mech in ("softmax", "ensemble") + (("dpsgd",) if dpsgd else ()):
                for a in mia.ATTACKS:
                    plots_written.append(str(plots.roc(res.rocs, mech, a, m, d / f"roc_{mech}_{a}_{tag}.png")))
    doc = {"rows": res.rows, "averaging": avg, "train_accuracy": pop.train_accuracy,
           "test_accuracy": pop.test_accuracy, "plots": plots_written, "settings": s.as_dict(),
           "seconds": time.perf_counter() - t0}
    if as_json:
        emit_json(finite_json(doc))
        return
    click.echo(f"target: train accuracy {pop.train_accuracy:.3f}, test accuracy {pop.test_accuracy:.3f}; "
               f"{s.shadows} shadows, leave-one-out over {pop.size} models")
    _mia_table(res.rows)
    click.echo(f"averaging within a daily cap of {daily_cap:g}:")
    for r in avg:
        click.echo(f"  {r['mechanism']:9s} eps {_eps(r['epsilon']):>5s}: {r['queries']:6d} answers, error "
                   f"{r['mae_debiased']:.3f} of the range, argmax agreement {r['agreement_debiased']:.3f}")


def _mia_table(rows: list[dict]) -> None:
    click.echo(f"{'mechanism':9s} {'mode':9s} {'eps':>5s} {'attack':13s} {'AUC':>6s} {'TPR@1%':>7s} "
               f"{'TPR@0.1%':>8s} {'AUC bound':>9s}")
    for r in rows:
        click.echo(f"{r['mechanism']:9s} {r['mode']:9s} {_eps(r['epsilon']):>5s} {r['attack']:13s} {r['auc']:6.3f} "
                   f"{r['tpr_at_1pct_fpr']:7.4f} {r['tpr_at_0_1pct_fpr']:8.4f} {r['auc_bound']:9.3f}")


def _mia_on_model(model_path: str | None, data_spec: str, holdout: str | None, s: Settings, seed: int,
                  as_json: bool, t0: float) -> None:
    """attack mia --model: the threshold attack on the user's model, members --data, non-members --holdout."""
    if model_path is None or holdout is None or data_spec == "digits":
        raise ValueError("attack mia --model FILE needs --data MEMBERS.npz (the records it was trained on) and "
                         "--holdout OTHERS.npz (records it never saw), both with arrays X and y")
    from ..model.convert import load_file
    from ..model.deploy import device_outputs, labelled_data

    loaded = load_file(model_path)
    outs = [device_outputs(loaded, model_path, *labelled_data(p, loaded.model.n_features), p)
            for p in (data_spec, holdout)]
    members = np.r_[np.ones(len(outs[0].labels), bool), np.zeros(len(outs[1].labels), bool)]
    y = np.r_[outs[0].labels, outs[1].labels]
    T = outs[0].teachers
    x = np.r_[outs[0].votes, outs[1].votes] if T else np.r_[outs[0].probs, outs[1].probs]
    rows = mia.threshold_on(x, y, members, ensemble(T) if T else SOFTMAX, parse_modes(list(s.modes)),
                            list(s.epsilons), seed)
    acc = [float((o.probs.argmax(1) == o.labels).mean()) for o in outs]
    doc = {"model": model_path, "members": data_spec, "holdout": holdout, "rows": rows,
           "train_accuracy": acc[0], "test_accuracy": acc[1], "settings": s.as_dict(),
           "seconds": time.perf_counter() - t0}
    if as_json:
        emit_json(finite_json(doc))
        return
    click.echo(f"target: {model_path} (device outputs): accuracy {acc[0]:.3f} on its {int(members.sum())} training "
               f"records ({data_spec}), {acc[1]:.3f} on {int((~members).sum())} it never saw ({holdout})")
    _mia_table(rows)


@attack.command("extract")
@with_grid
@click.option("--budgets", default=None, metavar="Q1,Q2,…",
              help="Query budgets (default 100,200,400,800 and the pool size).")
@common_options
@handle_errors
def attack_extract(epsilons: str | None, modes: str | None, teachers: int | None, budgets: str | None, seed: int,
                   quick: bool, jobs: int, as_json: bool, no_progress: bool) -> None:
    """Train a surrogate on the API's answers for each query budget, mode and ε."""
    s = make_settings(quick, seed, epsilons, modes, teachers)
    progress = show_progress(no_progress)
    t0 = time.perf_counter()
    split = data.digits_split(seed)
    pool = len(split.y_pool)
    if budgets is not None:
        try:
            bl = sorted({int(b) for b in _csv(budgets, "--budgets")})
        except ValueError:
            raise click.UsageError(f"--budgets takes whole query counts (got {budgets!r})") from None
        if bl[0] < 1 or bl[-1] > pool:
            raise click.UsageError(f"budgets must be between 1 and the pool size {pool}")
    else:
        bl = extraction.budgets_for(pool, quick)
    pop = populations.build_population(split, 1, seed, s.model, ensemble=True, jobs=jobs, progress=progress)
    rows = extraction.run(split, pop, parse_modes(list(s.modes)), list(s.epsilons), bl, seed, jobs=jobs,
                          progress=progress)
    doc = {"rows": rows, "budgets": bl, "pool": pool, "victim_test_accuracy": pop.test_accuracy,
           "settings": s.as_dict(), "seconds": time.perf_counter() - t0}
    if as_json:
        emit_json(finite_json(doc))
        return
    click.echo(f"victim test accuracy {pop.test_accuracy:.3f}; pool of {pool} attacker inputs")
    click.echo(f"{'mechanism':9s} {'mode':9s} {'eps':>5s} {'queries':>7s} {'agreement':>10s} {'accuracy':>9s}")
    for r in rows:
        click.echo(f"{r['mechanism']:9s} {r['mode']:9s} {_eps(r['epsilon']):>5s} {r['queries']:7d} "
                   f"{r['agreement']:10.3f} {r['accuracy']:9.3f}")


# ---- report -----------------------------------------------------------------------------

@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory (required unless --from).")
@click.option("--mode", "-m", default="full", show_default=True, help="The configured output mode.")
@click.option("--epsilon", "-e", type=float, default=1.0, show_default=True, help="Configured per-query ε.")
@click.option("--daily-cap", type=float, default=10.0, show_default=True, help="Configured daily ε cap.")
@click.option("--lifetime-cap", type=float, default=None, help="Configured lifetime ε cap (default: none).")
@click.option("--days", type=click.IntRange(1), default=365, show_default=True, help="Horizon for the totals.")
@click.option("--delta", type=float, default=accounting.DEFAULT_DELTA, show_default=True)
@click.option("--data-sensitivity", type=click.Choice(["high", "medium", "low"]), default="high",
              show_default=True, help="How sensitive the training data is (your declaration).")
@click.option("--data", "data_spec", default="digits", show_default=True, metavar="digits|FILE.npz",
              help="digits or an .npz of features X and labels y (all models trained here).")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Your model: an `edgedp train` .npz (its privacy manifest is checked and reported) or a "
                   ".joblib (scored on the test set with the device kernels).")
@click.option("--allow-non-private", is_flag=True,
              help="Report a --model whose manifest says it is not private (a --seed run); the report says so.")
@click.option("--dpsgd/--no-dpsgd", default=True, show_default=True,
              help="Include DP-SGD models as the third deployment.")
@with_grid
@click.option("--shadows", type=click.IntRange(2), default=None, help="Shadow models (default 16, quick 6).")
@click.option("--check", "policy_path", type=click.Path(dir_okay=False), default=None, metavar="POLICY.toml",
              help="Check the report against these thresholds: one line per violated one, exit 1 if any.")
@click.option("--from", "from_json", type=click.Path(dir_okay=False), default=None, metavar="REPORT.json",
              help="With --check: check this earlier report.json instead of computing a new report.")
@click.option("--audit", "audit_paths", multiple=True, type=click.Path(dir_okay=False), metavar="AUDIT.json",
              help="With --check: an audit-dp or audit-train --json result (repeatable), for "
                   "max_lower_bound_ratio.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="With --check: write the verdicts as JUnit XML (one test case per threshold).")
@common_options
@handle_errors
def report(out_dir: str | None, mode: str, epsilon: float, daily_cap: float, lifetime_cap: float | None, days: int,
           delta: float, data_sensitivity: str, data_spec: str, model_path: str | None, allow_non_private: bool,
           dpsgd: bool,
           epsilons: str | None, modes: str | None, teachers: int | None, shadows: int | None,
           policy_path: str | None, from_json: str | None, audit_paths: tuple[str, ...], junit_path: str | None,
           seed: int, quick: bool, jobs: int, as_json: bool, no_progress: bool) -> None:
    """Pre-release privacy audit of a configuration: DIR/report.md, DIR/report.json and plots.
    With --check POLICY.toml, a privacy gate for CI: exit 1 when a threshold is violated."""
    from ..analysis import policy as pol
    if policy_path is None and (from_json or audit_paths or junit_path):
        raise ValueError("--from, --audit and --junit go with --check POLICY.toml")
    if (out_dir is None) == (from_json is None):
        raise ValueError("give --out DIR (compute a report) or --check with --from REPORT.json (check an earlier one)")
    def gate_input_failed(source: str, exc: ValueError) -> NoReturn:
        """The policy or report cannot be read: the JUnit file still says so, then the error ends the command."""
        if junit_path:
            Path(junit_path).write_text(pol.junit([], [pol.AuditError(source, str(exc))]))
        raise exc

    try:
        thresholds = pol.read_policy(policy_path) if policy_path else None
    except ValueError as exc:
        gate_input_failed(str(policy_path), exc)
    read = [pol.read_audit(a) for a in audit_paths]
    audits = [r for r in read if not isinstance(r, pol.AuditError)]
    audit_errors = [r for r in read if isinstance(r, pol.AuditError)]
    if from_json is not None:
        try:
            doc = pol.read_json(from_json, "report")
        except ValueError as exc:
            gate_input_failed(from_json, exc)
        out = {}
    else:
        assert out_dir is not None  # the check above: one of the two
        from ..analysis import report as rep  # matplotlib only when needed
        cfg = rep.AuditConfig(mode=mode, epsilon=epsilon, daily_cap=daily_cap, lifetime_cap=lifetime_cap, days=days,
                              delta=delta, data_sensitivity=data_sensitivity)
        s = make_settings(quick, seed, epsilons, modes, teachers, shadows)
        describe: Callable[[np.ndarray, np.ndarray], dict] | None = None
        if model_path and not model_path.endswith(".npz"):
            from ..model.convert import load_file
            from ..model.deploy import deployed_model_doc
            path = model_path
            loaded = load_file(path)  # a file that is no model fails now, not after the pipeline

            def describe_deployed(X: np.ndarray, y: np.ndarray) -> dict:
                return deployed_model_doc(loaded, path, X, y)
            describe = describe_deployed
        announce("report", s, jobs, dpsgd)
        doc = rep.build(cfg, s, Path(out_dir), jobs=jobs, progress=show_progress(no_progress), command=_command_line(),
                        data_spec=data_spec, dpsgd=dpsgd, model_path=None if describe else model_path,
                        allow_non_private=allow_non_private, describe_model=describe)
        out = {"out": str(Path(out_dir)), "report": str(Path(out_dir) / "report.md"), "meaning": doc["meaning"],
               "seconds": doc["timing_seconds"]["total"], "plots": doc["plots"]}
        if not as_json:
            click.echo(doc["meaning"])
            click.echo(f"wrote {Path(out_dir) / 'report.md'}, report.json and {len(doc['plots'])} plots "
                       f"in {doc['timing_seconds']['total']:.0f} s")
    verdicts = None
    if thresholds is not None:
        try:
            verdicts = pol.check(thresholds, doc, audits)
        except (KeyError, TypeError):
            gate_input_failed(str(from_json), ValueError(f"{from_json}: not a report.json written by `edgedp report`"))
        if junit_path:
            Path(junit_path).write_text(pol.junit(verdicts, audit_errors))
        passed = all(v.passed for v in verdicts) and not audit_errors
        out["policy"] = {"file": policy_path, "passed": passed, "verdicts": [v.as_dict() for v in verdicts],
                         "audit_errors": [e.as_dict() for e in audit_errors]}
        if not as_json:
            failed = [v for v in verdicts if not v.passed]
            for v in failed:
                click.echo(v.line())
            for e in audit_errors:
                click.echo(e.line())
            click.echo(f"policy {policy_path}: {len(verdicts) - len(failed)} of {len(verdicts)} thresholds met"
                       + (f"; {len(audit_errors)} audit file(s) unusable: the gate fails" if audit_errors else ""))
    if as_json:
        emit_json(finite_json(out))
    if verdicts is not None and not out["policy"]["passed"]:
        sys.exit(1)


COMMANDS = [account, tradeoff_cmd, attack, report]
