"""One ``edgedp train`` run: check the privacy parameters, find the noise multiplier for a target
epsilon, cap the steps at a maximum epsilon, train with DP-SGD, account with both accountants
(and at the end of every epoch), evaluate, and build the model file's contents and manifest."""
from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..train.model_file import Model
from . import accountant, dpsgd
from ..datasets import TrainData

MODEL_KINDS = ("logreg", "mlp")
DEFAULT_HIDDEN = (32,)


class LargeDeltaWarning(UserWarning):
    """delta >= 1/n was allowed by the user."""


@dataclass(frozen=True)
class TrainConfig:
    kind: str = "logreg"
    hidden: tuple[int, ...] = DEFAULT_HIDDEN
    target_epsilon: float | None = 1.0
    noise_multiplier: float | None = None
    delta: float = 1e-5
    clip_norm: float = 1.0
    hyper: dpsgd.Hyper = dpsgd.Hyper()
    accountant: str = "pld"
    seed: int | None = None      # None: every draw from the OS CSPRNG (private); an int: reproducible, not private
    allow_large_delta: bool = False
    max_epsilon: float | None = None   # stop before the step that would take epsilon (by ``accountant``) past it

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"model must be one of {', '.join(MODEL_KINDS)}")
        if (self.target_epsilon is None) == (self.noise_multiplier is None):
            raise ValueError("give exactly one of a target epsilon and a noise multiplier")
        if self.target_epsilon is not None and not (math.isfinite(self.target_epsilon) and self.target_epsilon > 0):
            raise ValueError("target epsilon must be finite and > 0")
        if self.noise_multiplier is not None and not self.noise_multiplier > 0:
            raise ValueError("noise multiplier must be > 0")
        if not 0 < self.delta < 1:
            raise ValueError("delta must be in (0, 1)")
        if not (math.isfinite(self.clip_norm) and self.clip_norm > 0):
            raise ValueError("clip norm must be finite and > 0")
        if not 0 < self.hyper.sampling_rate <= 1:
            raise ValueError("sampling rate must be in (0, 1]")
        if not self.hyper.epochs > 0:
            raise ValueError("epochs must be > 0")
        if self.accountant not in accountant.ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {', '.join(accountant.ACCOUNTANTS)}")
        if self.max_epsilon is not None and not (math.isfinite(self.max_epsilon) and self.max_epsilon > 0):
            raise ValueError("max epsilon must be finite and > 0")

    @property
    def layers(self) -> tuple[int, ...]:
        return () if self.kind == "logreg" else self.hidden

    @property
    def steps(self) -> int:
        return dpsgd.steps_for(self.hyper.epochs, self.hyper.sampling_rate)


def check_delta(delta: float, n: int, allow: bool) -> None:
    """delta must be below 1/n: publishing each record in the clear with probability delta is
    (0, delta)-DP and leaks about delta*n records.  Refused unless allowed, then warned."""
    if delta < 1.0 / n:
        return
    msg = (f"delta = {delta:g} >= 1/n = {1.0 / n:.3g}: an (eps, delta) guarantee with delta >= 1/n allows "
           f"publishing a random record in the clear; choose delta < 1/n")
    if not allow:
        raise ValueError(msg + " (or pass --allow-large-delta)")
    warnings.warn(msg, LargeDeltaWarning, stacklevel=2)


@dataclass
class TrainResult:
    model: Model
    training: dict          # the manifest's "training" section
    data: dict              # the manifest's "data" section
    summary: dict           # the --json document


def noise_for(cfg: TrainConfig) -> float:
    if cfg.noise_multiplier is not None:
        return cfg.noise_multiplier
    assert cfg.target_epsilon is not None  # TrainConfig: exactly one of the two
    return accountant.calibrate(cfg.target_epsilon, cfg.hyper.sampling_rate, cfg.steps, cfg.delta, cfg.accountant)


NEIGHBOURING = ("add/remove one training record, with n_train and the denominator n·q treated as public; "
                "under replace-one (n fixed) the same release is (epsilon_replace_one, delta)-DP")
NOT_COVERED = ("statistics of the training data computed without noise (training accuracy, realised batch "
               "sizes): not covered by epsilon, not in the manifest")


NOT_PRIVATE = "not private"
"""What a seeded run stores and prints wherever an ε would appear: the seed replays every draw."""


def non_private_reason(seed: int) -> str:
    return (f"--seed {seed}: initialisation, batch selection and every noise draw are replayable from the seed, "
            f"so the noise can be subtracted and epsilon does not hold")


def epoch_ends(steps: int, sampling_rate: float) -> list[int]:
    """The step at which each epoch (an expected pass, 1/q steps) of a run of ``steps`` steps ends:
    epoch e at round(e/q) (``dpsgd.steps_for``'s rounding), and a last, partial one at ``steps``."""
    ends = []
    e = 1
    while (end := round(e / sampling_rate)) < steps:
        ends.append(end)
        e += 1
    return ends + [steps]


@dataclass(frozen=True)
class Spent:
    """What a run has spent at the end of an epoch: epsilon by the run's accountant after
    ``step`` steps, or NOT_PRIVATE for a seeded run."""

    epoch: int
    step: int
    epsilon: float | str


Progress = Callable[[int, int, "Spent | None"], None]
"""progress(step, steps, spent) after each step: the steps the run will take (fewer than
planned when ``max_epsilon`` caps them) and the last completed epoch's ``Spent`` (None before)."""


def stop_reason(cfg: TrainConfig, cap: accountant.StepCap, planned: int, private: bool) -> str:
    """Why a run capped by ``max_epsilon`` ends before its planned steps (the manifest's stop_reason)."""
    assert cfg.max_epsilon is not None and cap.epsilon_next is not None
    name = cfg.accountant.upper()
    if private:
        why = (f"step {cap.steps + 1} would take ε from {cap.epsilon:.4g} to {cap.epsilon_next:.4g} "
               f"({name}, δ = {cfg.delta:g})")
    else:  # no ε holds for a seeded run: the cap is applied to the parameters' accounting all the same
        why = f"step {cap.steps + 1} would exceed it by {name} accounting of these parameters (a seeded run has no ε)"
    return f"--max-epsilon {cfg.max_epsilon:g}: {why}; stopped after {cap.steps} of {planned} planned steps"


def run(cfg: TrainConfig, data: TrainData, progress: Progress | None = None) -> TrainResult:
    """Train one model with DP-SGD on ``data``.

    With ``cfg.max_epsilon`` the steps are capped before training (``accountant.max_steps``) at
    the most whose epsilon stays within it; a cap below one step's epsilon is refused. Epsilon at
    the end of every epoch is computed before training too (it depends on the parameters only)."""
    n = len(data.y_train)
    check_delta(cfg.delta, n, cfg.allow_large_delta)
    q = cfg.hyper.sampling_rate
    t0 = time.perf_counter()
    nm = noise_for(cfg)
    planned = cfg.steps
    cap = (accountant.max_steps(nm, q, cfg.delta, cfg.max_epsilon, planned, cfg.accountant)
           if cfg.max_epsilon is not None else None)
    if cap is not None and cap.steps == 0:
        assert cfg.max_epsilon is not None and cap.epsilon_next is not None
        raise ValueError(f"--max-epsilon {cfg.max_epsilon:g} is below the ε of a single step "
                         f"({cap.epsilon_next:.4g} by {cfg.accountant.upper()} at noise multiplier {nm:.4g}): "
                         "nothing would be trained")
    steps = planned if cap is None else cap.steps
    ends = epoch_ends(steps, q)
    curve = accountant.epsilon_curve(nm, q, ends, cfg.delta, cfg.accountant)
    t_acc = time.perf_counter() - t0
    private = cfg.seed is None
    shown: list[float | str] = list(curve) if private else [NOT_PRIVATE] * len(curve)
    by_step = {end: Spent(e + 1, end, eps) for e, (end, eps) in enumerate(zip(ends, shown))}
    last: list[Spent | None] = [None]

    def step_done(t: int) -> None:
        last[0] = by_step.get(t, last[0])
        if progress:
            progress(t, steps, last[0])

    hyper = replace(cfg.hyper, hidden=cfg.layers)
    t1 = time.perf_counter()
    out = dpsgd.train(data.X_train, data.y_train, data.n_classes, nm, cfg.clip_norm, steps, hyper, cfg.seed,
                      progress=step_done)
    t_train = time.perf_counter() - t1
    assert out.private == private  # randomness.source: only a seeded run is not private
    g = accountant.guarantee(nm, cfg.hyper.sampling_rate, steps, cfg.delta)
    model = Model(cfg.kind, out.params, np.asarray(data.classes, np.int64))
    test_acc = float(np.mean(np.argmax(model.logits(data.X_test), 1) == data.y_test))
    train_acc = float(np.mean(np.argmax(model.logits(data.X_train), 1) == data.y_train))
    eps = g.epsilon(cfg.accountant)
    training = {"private": out.private, "epsilon": eps, "delta": cfg.delta, "neighbouring": NEIGHBOURING,
                "epsilon_add_remove": eps, "epsilon_replace_one": g.epsilon_replace_one,
                "accountant": cfg.accountant, "noise_multiplier": nm,
                "clip_norm": cfg.clip_norm, "sampling_rate": cfg.hyper.sampling_rate, "sampling": "poisson",
                "steps": steps, "epochs": cfg.hyper.epochs, "n_train": n, "randomness": out.randomness,
                "planned_steps": planned, "max_epsilon": cfg.max_epsilon, "stopped_early": steps < planned,
                "epoch_steps": ends, "epsilon_per_epoch": curve,
                "noise": "Gaussian, float64 by inversion of a full-precision uniform (see randomness); noisy sum rounded "
                         f"to the lattice {dpsgd.noise_lattice(nm * cfg.clip_norm):g}, then float32 "
                         "(docs/privacy.md §4.3)"}
    if not out.private:
        assert cfg.seed is not None  # only a seeded run is not private (randomness.source)
        training.update({"epsilon": NOT_PRIVATE, "epsilon_add_remove": NOT_PRIVATE,
                         "epsilon_replace_one": NOT_PRIVATE, "epsilon_per_epoch": NOT_PRIVATE,
                         "non_private_reason": non_private_reason(cfg.seed), "seed": cfg.seed})
    if cap is not None and steps < planned:
        training["stop_reason"] = stop_reason(cfg, cap, planned, private)
    data_doc = {"name": data.name, "n_features": data.n_features, "n_classes": data.n_classes,
                "input_range": [float(np.min(data.X_train)), float(np.max(data.X_train))]}
    summary: dict = {**{k: training[k] for k in ("private", "epsilon", "delta", "neighbouring", "epsilon_replace_one",
                                           "noise_multiplier", "clip_norm", "sampling_rate", "steps", "accountant",
                                           "randomness", "planned_steps", "max_epsilon", "stopped_early",
                                           "epoch_steps", "epsilon_per_epoch", "stop_reason") if k in training},
               "test_accuracy": test_acc,
               "epsilon_pld": g.epsilon_pld, "epsilon_rdp": g.epsilon_rdp, "target_epsilon": cfg.target_epsilon,
               "model": cfg.kind, "hidden": list(cfg.layers), "n_train": n, "n_test": int(len(data.y_test)),
               "data": data.name, "epochs": cfg.hyper.epochs, "optimizer": cfg.hyper.optimizer,
               "learning_rate": cfg.hyper.learning_rate,
               "not_covered": {"what": NOT_COVERED, "train_accuracy": train_acc,
                               "batch_size_mean": float(out.batch_sizes.mean()),
                               "batch_size_min": int(out.batch_sizes.min()),
                               "batch_size_max": int(out.batch_sizes.max()), "steps_over_block": out.blocks_over},
               "seconds": {"calibration": t_acc, "training": t_train}}
    if not out.private:
        summary.update({"epsilon_pld": NOT_PRIVATE, "epsilon_rdp": NOT_PRIVATE,
                        "non_private_reason": training["non_private_reason"], "seed": cfg.seed})
    return TrainResult(model, training, data_doc, summary)
