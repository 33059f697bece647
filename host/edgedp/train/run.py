"""One ``edgedp train`` run: check the privacy parameters, find the noise multiplier for a target
epsilon, train with DP-SGD, account with both accountants, evaluate, and build the model file's
contents and manifest."""
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


def run(cfg: TrainConfig, data: TrainData, progress: Callable[[int, int], None] | None = None) -> TrainResult:
    """Train one model with DP-SGD on ``data`` (progress(step, steps) after each step)."""
    n = len(data.y_train)
    check_delta(cfg.delta, n, cfg.allow_large_delta)
    t0 = time.perf_counter()
    nm = noise_for(cfg)
    t_acc = time.perf_counter() - t0
    steps = cfg.steps
    hyper = replace(cfg.hyper, hidden=cfg.layers)
    t1 = time.perf_counter()
    out = dpsgd.train(data.X_train, data.y_train, data.n_classes, nm, cfg.clip_norm, steps, hyper, cfg.seed,
                      progress=(lambda t: progress(t, steps)) if progress else None)
    t_train = time.perf_counter() - t1
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
                "noise": "Gaussian, float64 by inversion of a full-precision uniform (see randomness); noisy sum rounded "
                         f"to the lattice {dpsgd.noise_lattice(nm * cfg.clip_norm):g}, then float32 "
                         "(docs/privacy.md §4.3)"}
    if not out.private:
        assert cfg.seed is not None  # only a seeded run is not private (randomness.source)
        training.update({"epsilon": NOT_PRIVATE, "epsilon_add_remove": NOT_PRIVATE,
                         "epsilon_replace_one": NOT_PRIVATE,
                         "non_private_reason": non_private_reason(cfg.seed), "seed": cfg.seed})
    data_doc = {"name": data.name, "n_features": data.n_features, "n_classes": data.n_classes,
                "input_range": [float(np.min(data.X_train)), float(np.max(data.X_train))]}
    summary = {**{k: training[k] for k in ("private", "epsilon", "delta", "neighbouring", "epsilon_replace_one",
                                           "noise_multiplier", "clip_norm", "sampling_rate", "steps", "accountant",
                                           "randomness")},
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
