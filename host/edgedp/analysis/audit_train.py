"""``edgedp audit-train``: an empirical epsilon lower bound for a DP-SGD configuration, from canaries
(Jagielski et al. 2020, Nasr et al. 2021 and 2023; Steinke, Nasr and Jagielski 2023).

The training is ``edgedp.train.dpsgd.train`` (Poisson batches, clipping, Gaussian noise of the
multiplier that the accountant calibrates for the stated epsilon) with an explicit seed per
training, on the configured data (digits by default, or an X, y .npz). The neighbouring relation
is add/remove of one record (docs/privacy.md §4.3).

Two-world audit: ``trainings`` models without any canary (world B), as many with the Dirac canary
and as many with the out-of-distribution canary (world A of each):

* the Dirac canary is ``scale * e_j`` for the feature j that the training data uses least (all
  zeros in digits), with a fixed label c; it is scored white-box on the weights: W[j, c] minus the
  mean of W[j, .] over the other classes (logistic regression);
* the out-of-distribution canary is an input no digit looks like (checkerboard at full intensity)
  with a fixed label; it is scored black-box by its loss (minus the cross-entropy).

``epsilon_lower_bound.lower_bound`` turns each canary's scores in the two worlds into a bound at
(confidence, delta).

One-run audit: ``canaries`` Dirac canaries on features appended to the data (zero for every real
record), each included independently with probability 1/2, in one training. The top and bottom
``guesses / 2`` white-box scores are guessed in and out; Steinke et al.'s Theorem (Appendix D's
p-value with the 2·m·delta term) turns the number of correct guesses into a bound.

The three tests share the confidence (Bonferroni); the reported bound is the largest.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
from scipy.stats import binom

from . import epsilon_lower_bound
from .parallel import pmap

METHODS = ("both", "two-world", "one-run")
CANARY_SCALE = 1e3


@dataclass(frozen=True)
class AuditTrainConfig:
    """A DP-SGD configuration and the audit's size (the keys of the TOML file)."""

    epsilon: float = 1.0             # stated epsilon: the noise multiplier is calibrated for it (PLD)
    delta: float = 1e-5
    clip_norm: float = 1.0
    clipping: str = "per-example"    # or "per-batch" (the configuration error the audit must flag)
    optimizer: str = "sgd"
    learning_rate: float = 2.0
    sampling_rate: float = 0.1
    steps: int = 40
    data: str = "digits"             # digits or an .npz of X, y
    n_train: int = 1000              # records of the training split used (0: all)
    seed: int = 0
    method: str = "both"
    trainings: int = 100             # two-world: models per world
    canaries: int = 500              # one-run: canaries in the one training
    guesses: int = 100               # one-run: guesses (half in, half out)
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError("epsilon must be finite and > 0")
        if not 0 < self.delta < 1:
            raise ValueError("delta must be in (0, 1)")
        if not self.clip_norm > 0:
            raise ValueError("clip_norm must be > 0")
        if self.clipping not in ("per-example", "per-batch"):
            raise ValueError("clipping must be per-example or per-batch")
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError("optimizer must be sgd or adam")
        if not 0 < self.sampling_rate <= 1:
            raise ValueError("sampling_rate must be in (0, 1]")
        if self.steps < 1 or self.n_train < 0:
            raise ValueError("steps must be >= 1 and n_train >= 0")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}")
        if self.trainings < 8:
            raise ValueError("trainings must be >= 8 per world")
        if not 2 <= self.guesses <= self.canaries:
            raise ValueError("guesses must be between 2 and the number of canaries")
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must be in (0, 1)")

    @classmethod
    def from_mapping(cls, d: dict) -> "AuditTrainConfig":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown keys: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        return cls(**d)

    @classmethod
    def read(cls, path: str | Path) -> "AuditTrainConfig":
        """A TOML file: the keys at the top level or in an [audit-train] table."""
        try:
            d = tomllib.loads(Path(path).read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: cannot parse ({exc})") from None
        d = d.get("audit-train", d)
        try:
            return cls.from_mapping(d)
        except TypeError as exc:
            raise ValueError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class Canary:
    x: np.ndarray     # (d,)
    label: int
    feature: int      # the Dirac feature (-1: scored by loss)


@dataclass(frozen=True)
class _Job:
    """One training: the data (plus canaries) and its seed; what to score afterwards."""

    X: np.ndarray
    y: np.ndarray
    seed: int
    score: tuple[Canary, ...]


def _load(cfg: AuditTrainConfig):
    from ..datasets import load
    d = load(cfg.data, cfg.seed)
    X, y = d.X_train, d.y_train
    if cfg.n_train and cfg.n_train < len(y):
        X, y = X[: cfg.n_train], y[: cfg.n_train]
    return np.asarray(X, np.float32), np.asarray(y, np.int32), d.n_classes


def noise_multiplier(cfg: AuditTrainConfig) -> float:
    """The multiplier the accountant calibrates for the stated (epsilon, delta), q and steps (PLD)."""
    from ..train import accountant
    return accountant.calibrate(cfg.epsilon, cfg.sampling_rate, cfg.steps, cfg.delta, "pld")


def _train_and_score(cfg: AuditTrainConfig, nm: float, n_classes: int, job: _Job) -> list[float]:
    """Train one model and return each listed canary's score (white-box Dirac, or minus the loss)."""
    from ..train import dpsgd
    hyper = dpsgd.Hyper(hidden=(), optimizer=cfg.optimizer, learning_rate=cfg.learning_rate,
                        sampling_rate=cfg.sampling_rate)
    out = dpsgd.train(job.X, job.y, n_classes, nm, cfg.clip_norm, cfg.steps, hyper, job.seed, clipping=cfg.clipping)
    W = np.asarray(out.params[-1][0], np.float64)
    scores = []
    for c in job.score:
        if c.feature >= 0:
            row = W[c.feature]
            scores.append(float(row[c.label] - (row.sum() - row[c.label]) / (len(row) - 1)))
        else:
            z = dpsgd.predict_logits(out.params, c.x[None, :])[0].astype(np.float64)
            scores.append(float(z[c.label] - np.logaddexp.reduce(z)))
    return scores


def dirac_canary(X: np.ndarray, label: int) -> Canary:
    j = int(np.argmin(np.abs(X).max(axis=0)))
    x = np.zeros(X.shape[1], np.float32)
    x[j] = CANARY_SCALE
    return Canary(x, label, j)


def ood_canary(X: np.ndarray, label: int) -> Canary:
    d = X.shape[1]
    top = float(np.abs(X).max()) or 1.0
    x = np.where(np.arange(d) % 2 == 0, top, 0.0).astype(np.float32)
    return Canary(x, label, -1)


def _with(X: np.ndarray, y: np.ndarray, c: Canary) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([X, c.x[None, :]]), np.append(y, np.int32(c.label))


def _seed(cfg: AuditTrainConfig, *path: int) -> int:
    return int(np.random.SeedSequence([cfg.seed, 0xA7, *path]).generate_state(1)[0] & 0x7FFFFFFF)


def two_world(cfg: AuditTrainConfig, X: np.ndarray, y: np.ndarray, n_classes: int, nm: float, alpha: float,
              jobs: int, progress: bool) -> dict[str, dict]:
    """Bounds for the Dirac (white-box) and out-of-distribution (black-box) canaries."""
    dirac, ood = dirac_canary(X, 0), ood_canary(X, 1)
    both = (dirac, ood)
    T = cfg.trainings
    todo = ([_Job(X, y, _seed(cfg, 0, i), both) for i in range(T)]
            + [_Job(*_with(X, y, dirac), _seed(cfg, 1, i), (dirac,)) for i in range(T)]
            + [_Job(*_with(X, y, ood), _seed(cfg, 2, i), (ood,)) for i in range(T)])
    res = pmap(_train_and_score, [(cfg, nm, n_classes, j) for j in todo], jobs=jobs, desc="audit trainings",
               progress=progress, star=True)
    out_scores = np.array(res[:T])
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0xA7, 3]))
    docs = {}
    for i, (name, scoring) in enumerate((("dirac", "white-box: weight of the canary's feature and label"),
                                         ("ood", "black-box: minus the canary's loss"))):
        s_in = np.array([r[0] for r in res[(i + 1) * T:(i + 2) * T]])
        b = epsilon_lower_bound.lower_bound({"score": s_in}, {"score": out_scores[:, i]}, alpha, rng, cfg.delta)
        docs[name] = {"method": "two-world", "canary": name, "scoring": scoring, "trainings_per_world": T,
                      "mean_score_in": float(s_in.mean()), "mean_score_out": float(out_scores[:, i].mean()),
                      **b.as_dict()}
    return docs


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """P[at least v of r guesses correct] for m canaries under (eps, delta)-DP (Steinke et al. 2023,
    Appendix D): the binomial tail at p = e^eps / (1 + e^eps) plus 2·m·delta times the largest
    average of the pmf below v."""
    p = 1.0 / (1.0 + math.exp(-eps))
    tail = float(binom.sf(v - 1, r, p))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    below = binom.pmf(np.arange(v - 1, -1, -1), r, p)       # pmf at v-1, v-2, ..., 0
    avg = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + avg * delta * 2 * m, 1.0)


def one_run_bound(m: int, r: int, v: int, delta: float, alpha: float) -> float:
    """The largest epsilon whose p-value stays below alpha (0 if none): bisection."""
    if one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, r, v, hi, delta) < alpha and hi < 100:
        lo, hi = hi, 2 * hi
    for _ in range(40):
        mid = (lo + hi) / 2
        if one_run_p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run(cfg: AuditTrainConfig, X: np.ndarray, y: np.ndarray, n_classes: int, nm: float, alpha: float) -> dict:
    """Many Dirac canaries on appended features, each in with probability 1/2, one training."""
    m = cfg.canaries
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0xA7, 4]))
    d = X.shape[1]
    labels = rng.integers(0, n_classes, m).astype(np.int32)
    member = rng.random(m) < 0.5
    Xa = np.hstack([X, np.zeros((len(X), m), np.float32)])
    can = [Canary(np.where(np.arange(d + m) == d + i, CANARY_SCALE, 0.0).astype(np.float32), int(labels[i]), d + i)
           for i in range(m)]
    ins = [c for c, keep in zip(can, member) if keep]
    Xt = np.vstack([Xa] + [c.x[None, :] for c in ins])
    yt = np.concatenate([y, labels[member]])
    scores = np.array(_train_and_score(cfg, nm, n_classes, _Job(Xt, yt, _seed(cfg, 4), tuple(can))))
    order = np.argsort(-scores, kind="stable")
    k = cfg.guesses // 2
    guessed_in, guessed_out = order[:k], order[-k:]
    v = int(member[guessed_in].sum() + (~member[guessed_out]).sum())
    r = 2 * k
    return {"method": "one-run", "canary": "dirac", "scoring": "white-box, on appended features",
            "canaries": m, "members": int(member.sum()), "guesses": r, "correct": v,
            "epsilon_lower_bound": one_run_bound(m, r, v, cfg.delta, alpha), "alpha": alpha, "delta": cfg.delta}


def audit(cfg: AuditTrainConfig, jobs: int = 1, progress: bool = False) -> dict:
    """The audit's JSON document: ``epsilon_lower_bound`` (the largest of the tests) and ``epsilon_stated``."""
    X, y, k = _load(cfg)
    nm = noise_multiplier(cfg)
    tests = 2 * (cfg.method != "one-run") + (cfg.method != "two-world")
    alpha = (1 - cfg.confidence) / tests
    results: list[dict] = []
    if cfg.method != "one-run":
        results += list(two_world(cfg, X, y, k, nm, alpha, jobs, progress).values())
    if cfg.method != "two-world":
        results.append(one_run(cfg, X, y, k, nm, alpha))
    lb = max(r["epsilon_lower_bound"] for r in results)
    return {"epsilon_lower_bound": lb, "epsilon_stated": cfg.epsilon, "passed": lb <= cfg.epsilon,
            "confidence": cfg.confidence, "delta": cfg.delta, "noise_multiplier": nm, "n_train": int(len(y)),
            "config": asdict(cfg), "tests": results}


def with_overrides(cfg: AuditTrainConfig, **kw) -> AuditTrainConfig:
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})
