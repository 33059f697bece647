"""Training commands: train (DP-SGD), audit-config (configuration errors of a DP-SGD run)."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, NoReturn

import click

from .exit_codes import ExitCode
from .common import emit_json, handle_errors, json_option, note, progress as show_progress
from .params import positive

if TYPE_CHECKING:  # (edgedp.train.run needs JAX, imported only when train runs)
    from ..train.run import Spent

SPLIT_SEED = 0   # the train/test split of a private run: a fixed public choice, not a secret


@click.command()
@click.option("--data", "data_spec", default="digits", show_default=True, metavar="digits|FILE.npz",
              help="digits, or an .npz with features X (n, d) and integer labels y (n,).")
@click.option("--model", "kind", type=click.Choice(["logreg", "mlp"]), default="logreg", show_default=True)
@click.option("--hidden", default="32", show_default=True, metavar="H1,H2,…", help="MLP hidden layer sizes.")
@click.option("--target-epsilon", "-e", type=positive("the target epsilon"), default=None,
              help="Find the noise multiplier for this ε (default 1 unless --noise-multiplier is given).")
@click.option("--noise-multiplier", type=positive("the noise multiplier"), default=None,
              help="σ/C instead of a target ε.")
@click.option("--delta", type=positive("delta", 1.0), default=1e-5, show_default=True, help="Must be < 1/n.")
@click.option("--allow-large-delta", is_flag=True, help="Accept δ ≥ 1/n (with a warning).")
@click.option("--clip-norm", "-C", type=positive("the clip norm"), default=1.0, show_default=True, help="Per-example L2 clip norm C.")
@click.option("--sampling-rate", "-q", type=positive("the sampling rate", 1.0), default=0.25, show_default=True,
              help="Poisson sampling rate q (each record in each step with probability q).")
@click.option("--epochs", type=positive("the epochs"), default=15.0, show_default=True, help="Expected passes (steps = epochs/q).")
@click.option("--max-epsilon", type=positive("the maximum epsilon"), default=None,
              help="Stop before the step that would take ε (by --accountant) past this: the steps are capped before "
                   "training, and the manifest says the run stopped early and why.")
@click.option("--optimizer", type=click.Choice(["adam", "sgd"]), default="adam", show_default=True)
@click.option("--learning-rate", "--lr", type=positive("the learning rate"), default=0.05, show_default=True)
@click.option("--accountant", type=click.Choice(["pld", "rdp"]), default="pld", show_default=True,
              help="Accountant for the reported ε and the calibration (both are reported).")
@click.option("--seed", type=int, default=None,
              help="Reproducible run for tests and research: every draw from this seed, so the model is NOT "
                   "private (manifest \"private\": false). Default: every draw from the OS CSPRNG.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default="model.npz", show_default=True,
              help="Model file; its privacy manifest is written beside it (NAME.manifest.json).")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@json_option
@handle_errors
def train(data_spec: str, kind: str, hidden: str, target_epsilon: float | None, noise_multiplier: float | None,
          delta: float, allow_large_delta: bool, clip_norm: float, sampling_rate: float, epochs: float,
          max_epsilon: float | None, optimizer: str, learning_rate: float, accountant: str, seed: int | None, out_path: str, no_progress: bool,
          as_json: bool) -> None:
    """Train a logistic regression or small MLP with DP-SGD (per-example clipping, Poisson
    subsampling, Gaussian noise); write the model and its privacy manifest, which logs ε at the
    end of every epoch (the progress bar shows it as the run goes; "not private" for --seed)."""
    from tqdm import tqdm

    from ..train import model_file as models_io
    try:
        from ..train import dpsgd
        from ..train.run import TrainConfig, run
    except ImportError as exc:
        raise click.ClickException(f"edgedp train needs JAX ({exc}): pip install 'edgedp[train]'") from None
    from .. import datasets as data

    try:
        layers = tuple(int(h) for h in hidden.split(",") if h.strip())
    except ValueError:
        raise click.UsageError(f"--hidden must be comma-separated integers, got {hidden!r}") from None
    if any(h < 1 for h in layers):
        raise click.UsageError("hidden layer sizes must be >= 1")
    if target_epsilon is None and noise_multiplier is None:
        target_epsilon = 1.0
    cfg = TrainConfig(kind=kind, hidden=layers, target_epsilon=target_epsilon, noise_multiplier=noise_multiplier,
                      delta=delta, clip_norm=clip_norm, accountant=accountant, seed=seed,
                      allow_large_delta=allow_large_delta, max_epsilon=max_epsilon,
                      hyper=dpsgd.Hyper(optimizer=optimizer, learning_rate=learning_rate, epochs=epochs,
                                        sampling_rate=sampling_rate))
    d = data.load(data_spec, SPLIT_SEED if seed is None else seed)
    bar = tqdm(total=cfg.steps, desc="DP-SGD", unit="step", disable=not show_progress(no_progress), leave=False)

    def progress(t: int, steps: int, spent: Spent | None) -> None:
        if bar.total != steps:  # --max-epsilon capped the run below its planned steps
            bar.total = steps
        bar.set_postfix_str(spent_text(spent, accountant, max_epsilon) if spent else "", refresh=False)
        bar.update(t - bar.n)
        if spent is not None and spent.step == t:  # an epoch ended: show its ε now (update() may wait)
            bar.refresh()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if show_progress(no_progress):  # (the noise, the step cap and every epoch's ε come before the first step)
            bar.set_postfix_str("calibrating noise" if target_epsilon is not None else "accounting")
        try:
            res = run(cfg, d, progress)
        finally:
            bar.close()
    for w in caught:
        note(f"edgedp: warning: {w.message}")
    man = models_io.save(out_path, res.model, res.training, res.data)
    doc = {**res.summary, "model_file": out_path, "manifest": str(models_io.manifest_path(out_path)),
           "model_sha256": man.model_sha256, "warnings": [str(w.message) for w in caught]}
    if as_json:
        emit_json(doc)
        return
    s = res.summary
    if not s["private"]:
        click.echo(f"NOT PRIVATE: {s['non_private_reason']}; deploy and report refuse it without "
                   f"--allow-non-private")
        click.echo(f"DP-SGD {kind} on {s['data']} ({s['n_train']} records): not private (no (ε, δ): the seed "
                   f"replays it)")
    else:
        click.echo(f"DP-SGD {kind} on {s['data']} ({s['n_train']} records): ({s['epsilon']:.4g}, {delta:g})-DP by "
                   f"{accountant.upper()} (PLD {s['epsilon_pld']:.4g}, RDP {s['epsilon_rdp']:.4g}) for adding or "
                   f"removing one record; replace-one: ({s['epsilon_replace_one']:.4g}, {delta:g})")
    click.echo(f"  noise multiplier {s['noise_multiplier']:.4g}, C = {clip_norm:g}, q = {sampling_rate:g} (Poisson, "
               f"expected batch {s['n_train'] * sampling_rate:.0f}), {s['steps']} steps; {s['randomness']}")
    if s["stopped_early"]:
        click.echo(f"  stopped early: {s['stop_reason']}")
    click.echo(f"  test accuracy {s['test_accuracy']:.3f} on {s['n_test']} held-out records (not covered by ε)")
    click.echo(f"  wrote {out_path} and {models_io.manifest_path(out_path).name}")


def spent_text(spent: Spent, accountant: str, max_epsilon: float | None) -> str:
    """The progress bar's privacy spend: ε after the last completed epoch, or "not private"."""
    if isinstance(spent.epsilon, str):
        return f"ε {spent.epsilon}"
    cap = f" of max {max_epsilon:g}" if max_epsilon is not None else ""
    return f"ε {spent.epsilon:.3g}{cap} ({accountant.upper()}, epoch {spent.epoch})"


def _cannot_judge(exc: Exception, as_json: bool) -> NoReturn:
    """A configuration the audit cannot judge fails closed: exit 1 with the key named, never a pass."""
    if as_json:
        emit_json({"passed": False, "failed": ["config"], "warnings": [], "exit_code": int(ExitCode.FAILED),
                   "error": f"cannot judge the configuration: {exc}", "checks": []})
    else:
        click.echo(f"FAIL  config          cannot judge the configuration: {exc}")
    raise SystemExit(ExitCode.FAILED)


@click.command("audit-config")
@click.argument("config", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--epsilon", type=float, default=None, help="Claimed ε.")
@click.option("--delta", type=float, default=None)
@click.option("--n", "n", type=int, default=None, help="Training records.")
@click.option("--clip-norm", type=float, default=None)
@click.option("--noise-multiplier", type=float, default=None)
@click.option("--noise-std", type=float, default=None, help="σ of the noise added to the clipped sum.")
@click.option("--sensitivity", type=float, default=None, help="Sensitivity the noise was calibrated to.")
@click.option("--batch-size", type=int, default=None)
@click.option("--sampling-rate", type=float, default=None)
@click.option("--epochs", type=float, default=None)
@click.option("--steps", type=int, default=None)
@click.option("--sampling", type=click.Choice(["poisson", "shuffle", "without_replacement"]), default=None,
              help="How batches are drawn (a fixed --batch-size with poisson is inconsistent).")
@click.option("--noise", type=click.Choice(["gaussian", "laplace"]), default=None)
@click.option("--preprocessing-fit", type=click.Choice(["none", "public", "private", "private_dp"]), default=None,
              help="What any feature preprocessing (scaling, vocabulary) was fitted on.")
@click.option("--rdp-orders", default=None, metavar="A1,A2,…", help="RDP orders the claimed ε was converted at.")
@click.option("--hyperparameter-trials", type=int, default=None, help="Trainings run on the private data.")
@click.option("--n-params", type=int, default=None, help="Model parameters (the L1 sensitivity of Laplace noise).")
@click.option("--clipping", type=click.Choice(["per-example", "per-batch"]), default=None)
@click.option("--accountant", type=click.Choice(["pld", "rdp"]), default=None)
@click.option("--rdp-order", type=float, default=None, help="Fixed RDP order used for the conversion, if any.")
@click.option("--noise-sampler", type=click.Choice(["float", "discrete"]), default=None)
@click.option("--no-canary", is_flag=True, help="Skip the empirical clipping check.")
@json_option
@handle_errors
def audit_config(config: str | None, no_canary: bool, as_json: bool, **flags) -> None:
    """Check a DP-SGD configuration (TOML/JSON file, an `edgedp train` NAME.manifest.json, and/or
    flags) for the errors that make its ε wrong.  Exit status 0: every check passes; 1: a check
    fails (the stated ε is wrong) or the configuration cannot be judged (an unknown or misspelt
    key, a value outside its choices: it fails closed, the key named); 3: only warnings."""
    from ..analysis.jsonable import finite_json
    from ..train import config_check
    from ..datasets import digits

    try:
        d = config_check.read_config(config) if config else {}
    except config_check.CannotJudge as exc:
        _cannot_judge(exc, as_json)
    if flags.get("rdp_orders") is not None:
        try:
            flags["rdp_orders"] = [float(a) for a in flags["rdp_orders"].split(",") if a.strip()]
        except ValueError:
            raise ValueError(f"--rdp-orders must be comma-separated numbers, got {flags['rdp_orders']!r}") from None
    d.update({k: v for k, v in flags.items() if v is not None})
    try:
        cfg = config_check.TrainingConfig.from_mapping(d)
    except config_check.CannotJudge as exc:
        _cannot_judge(exc, as_json)
    td = None if no_canary else digits(0)
    checks = config_check.audit(cfg, *((td.X_train, td.y_train, td.n_classes) if td else ()))
    failed = [c.name for c in checks if c.status == "fail"]
    warned = [c.name for c in checks if c.status == "warn"]
    code = config_check.exit_code(checks)
    if as_json:
        emit_json(finite_json({"passed": not failed, "failed": failed, "warnings": warned, "exit_code": code,
                               "checks": [c.as_dict() for c in checks]}))
    else:
        for c in checks:
            click.echo(f"{c.status.upper():4s}  {c.name:15s} {c.consequence}")
        click.echo(f"{len(checks) - len(failed) - len(warned)}/{len(checks)} checks pass"
                   + (f"; warnings: {', '.join(warned)}" if warned else "")
                   + (f"; failed: {', '.join(failed)}" if failed else ""))
    if code:
        raise SystemExit(code)


COMMANDS = [train, audit_config]
