"""``edgedp audit-config``: a DP-SGD training configuration checked against the errors that make
its stated epsilon wrong (the training literature and published design notes), each as pass, warn
or fail with the computed consequence.

Checks (``CHECKS``):

* ``delta``: delta < 1/n (fail), and not within 10x of it (warn);
* ``single_release``: the noise multiplier is not the single-release Gaussian calibration
  sqrt(2 ln(1.25/delta))/eps, which ignores the composition over steps;
* ``noise_vs_sigma``: the noise actually added (noise_std) is noise_multiplier * C — a noise
  multiplier entered as sigma (or sigma as the multiplier) changes the real multiplier to sigma/C;
* ``sensitivity``: the sum of per-example clipped gradients has L2 sensitivity C (add/remove one
  record); noise calibrated to another "sensitivity" has real multiplier sigma/C;
* ``epsilon``: the claimed epsilon is at least what accounting gives for the real multiplier,
  the declared sampling and noise, and the steps (``true_epsilon``);
* ``rdp_order``: the claim rests on RDP at a set of orders (``rdp_orders``, or one fixed
  ``rdp_order``) that does not give it;
* ``sampling``: each sampling accounted as what it is — Poisson at rate q (add/remove), fixed
  batches without replacement (RDP, replace-one), shuffling (no amplification, replace-one,
  sensitivity 2C); a fixed ``batch_size`` declared as Poisson is inconsistent;
* ``noise``: Laplace noise in DP-SGD (L2 clipping bounds the L1 sensitivity only by sqrt(d)*C);
* ``preprocessing``: statistics fitted on the private data are released without noise;
* ``hyperparameters``: several trainings on the private data compose (a claim for one run that
  the composition exceeds fails);
* ``clipping``: per-batch instead of per-example clipping, with the empirical canary check;
* ``noise_sampler``: floating-point Gaussian samples (porous low bits, Mironov 2012): a warning.

Exit status of the command (``exit_code``): 0 every check passes, 1 a check fails (the stated
epsilon is wrong) or the configuration cannot be judged (an unknown or misspelt key, a value
outside a key's choices: ``CannotJudge``, the key named), 3 only warnings.
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from . import accountant, canary

CHECKS = ("delta", "single_release", "noise_vs_sigma", "sensitivity", "epsilon", "rdp_order", "sampling", "noise",
          "preprocessing", "hyperparameters", "clipping", "noise_sampler")
SAMPLINGS = ("poisson", "shuffle", "without_replacement")
NOISES = ("gaussian", "laplace")
PREPROCESSING = ("none", "public", "private", "private_dp")
CLIPPINGS = ("per-example", "per-batch")
SAMPLERS = ("float", "discrete")
STATUSES = ("pass", "warn", "fail")
TOLERANCE = 0.01   # relative slack on epsilon comparisons
DELTA_MARGIN = 10.0  # delta within this factor of 1/n is warned about


class CannotJudge(ValueError):
    """The configuration holds something the audit cannot judge (an unknown key, a value outside
    a key's choices, a missing or mistyped setting): it fails closed (exit 1), never passes."""


@dataclass(frozen=True)
class TrainingConfig:
    """What a DP-SGD run claims and does (the fields of the TOML/JSON file and the flags)."""

    epsilon: float
    delta: float
    n: int
    clip_norm: float
    noise_multiplier: float | None = None
    noise_std: float | None = None
    sensitivity: float | None = None
    batch_size: int | None = None
    sampling_rate: float | None = None
    epochs: float | None = None
    steps: int | None = None
    sampling: str = "poisson"
    noise: str = "gaussian"
    preprocessing_fit: str = "none"
    clipping: str = "per-example"
    accountant: str = "pld"
    rdp_order: float | None = None
    rdp_orders: tuple[float, ...] | None = None
    hyperparameter_trials: int = 1
    n_params: int | None = None
    noise_sampler: str = "float"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise CannotJudge("epsilon must be finite and > 0")
        if not 0 < self.delta < 1:
            raise CannotJudge("delta must be in (0, 1)")
        if self.n < 1:
            raise CannotJudge("n (training records) must be >= 1")
        if not self.clip_norm > 0:
            raise CannotJudge("clip_norm must be > 0")
        if self.noise_multiplier is None and self.noise_std is None:
            raise CannotJudge("give noise_multiplier or noise_std")
        for name in ("noise_multiplier", "noise_std", "sensitivity"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise CannotJudge(f"{name} must be > 0")
        if (self.batch_size is None) == (self.sampling_rate is None):
            raise CannotJudge("give exactly one of batch_size and sampling_rate")
        if self.batch_size is not None and not 1 <= self.batch_size <= self.n:
            raise CannotJudge("batch_size must be in [1, n]")
        if self.sampling_rate is not None and not 0 < self.sampling_rate <= 1:
            raise CannotJudge("sampling_rate must be in (0, 1]")
        if (self.epochs is None) == (self.steps is None):
            raise CannotJudge("give exactly one of epochs and steps")
        for name, allowed in (("sampling", SAMPLINGS), ("noise", NOISES), ("preprocessing_fit", PREPROCESSING),
                              ("clipping", CLIPPINGS), ("accountant", accountant.ACCOUNTANTS),
                              ("noise_sampler", SAMPLERS)):
            if getattr(self, name) not in allowed:
                raise CannotJudge(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.rdp_order is not None and not self.rdp_order > 1:
            raise CannotJudge("rdp_order must be > 1")
        if self.rdp_orders is not None and (not self.rdp_orders or not all(a > 1 for a in self.rdp_orders)):
            raise CannotJudge("rdp_orders must be a non-empty list of orders > 1")
        if self.hyperparameter_trials < 1:
            raise CannotJudge("hyperparameter_trials must be >= 1")
        if self.n_params is not None and self.n_params < 1:
            raise CannotJudge("n_params must be >= 1")

    @property
    def orders(self) -> tuple[float, ...] | None:
        """The RDP orders the claim was converted at (``rdp_orders`` and/or ``rdp_order``), if any."""
        got = tuple(self.rdp_orders or ()) + ((self.rdp_order,) if self.rdp_order is not None else ())
        return got or None

    @property
    def fixed_batch(self) -> int:
        """The batch size of a fixed-size sampler (given, or q*n rounded)."""
        return self.batch_size if self.batch_size is not None else max(1, round(self.q * self.n))

    @property
    def q(self) -> float:
        if self.sampling_rate is not None:
            return self.sampling_rate
        assert self.batch_size is not None  # __post_init__: exactly one of batch_size and sampling_rate
        return self.batch_size / self.n

    @property
    def batch(self) -> float:
        """Expected batch size."""
        return self.q * self.n

    @property
    def total_steps(self) -> int:
        if self.steps is not None:
            return self.steps
        assert self.epochs is not None  # __post_init__: exactly one of epochs and steps
        return max(1, round(self.epochs / self.q))

    @property
    def n_epochs(self) -> float:
        return self.total_steps * self.q

    @property
    def stated_multiplier(self) -> float:
        if self.noise_multiplier is not None:
            return self.noise_multiplier
        assert self.noise_std is not None  # __post_init__: noise_multiplier or noise_std
        return self.noise_std / self.clip_norm

    @property
    def real_multiplier(self) -> float:
        """Standard deviation of the noise actually added to the clipped sum, in units of C."""
        if self.noise_std is not None:
            return self.noise_std / self.clip_norm
        nm = self.stated_multiplier  # the given noise_multiplier (no noise_std)
        return nm * self.sensitivity / self.clip_norm if self.sensitivity is not None else nm

    @classmethod
    def from_mapping(cls, d: dict) -> "TrainingConfig":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise CannotJudge(f"unknown configuration keys: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        missing = [k for k in ("epsilon", "delta", "n", "clip_norm") if k not in d]
        if missing:
            raise CannotJudge(f"the configuration needs {', '.join(missing)}")
        d = dict(d)
        for f in fields(cls):
            v = d.get(f.name)
            if v is None or f.name == "rdp_orders":
                continue
            want = f.type.split(" | ")[0]
            ok = (isinstance(v, str) if want == "str" else
                  isinstance(v, int) and not isinstance(v, bool) if want == "int" else
                  isinstance(v, (int, float)) and not isinstance(v, bool))
            if not ok:
                kind = {"int": "a whole number", "float": "a number"}.get(want, "a string")
                raise CannotJudge(f"{f.name} must be {kind}, got {v!r}")
        if d.get("rdp_orders") is not None:
            orders = d["rdp_orders"]
            if not isinstance(orders, (list, tuple)) or not all(isinstance(a, (int, float)) for a in orders):
                raise CannotJudge("rdp_orders must be a list of numbers, e.g. [2, 4, 8, 16, 32]")
            d["rdp_orders"] = tuple(float(a) for a in orders)
        return cls(**d)


def from_manifest(training: dict) -> dict:
    """The audit configuration of an `edgedp train` run from its manifest's ``training`` section
    (what the project's own trainer does: Poisson, Gaussian, per-example clipping, float sampler)."""
    if training.get("private") is False:
        raise CannotJudge(f"the manifest is of a run that is not private ({training.get('non_private_reason')}): "
                          "it claims no ε to check")
    try:
        return {"epsilon": training["epsilon"], "delta": training["delta"], "n": training["n_train"],
                "clip_norm": training["clip_norm"], "noise_multiplier": training["noise_multiplier"],
                "sampling_rate": training["sampling_rate"], "steps": training["steps"],
                "sampling": training["sampling"], "accountant": training["accountant"], "noise": "gaussian",
                "preprocessing_fit": "none", "clipping": "per-example", "noise_sampler": "float"}
    except KeyError as exc:
        raise CannotJudge(f"the manifest's training section lacks {exc}") from None


def read_config(path: str | Path) -> dict:
    """A TOML or JSON file (by suffix; a [dpsgd] table in TOML is accepted too), or the
    NAME.manifest.json that `edgedp train` writes."""
    p = Path(path)
    text = p.read_text()
    try:
        d = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CannotJudge(f"{p}: cannot parse ({exc})") from None
    if not isinstance(d, dict):
        raise CannotJudge(f"{p}: expected a table of settings")
    if "model_sha256" in d and isinstance(d.get("training"), dict):
        return from_manifest(d["training"])
    if "dpsgd" in d and isinstance(d["dpsgd"], dict):
        d = d["dpsgd"]
    return d


@dataclass(frozen=True)
class Check:
    name: str
    status: str            # pass, warn (the claim holds, with a caveat), fail (the stated epsilon is wrong)
    consequence: str
    values: dict

    @property
    def passed(self) -> bool:
        """Not a failure (a warning passes)."""
        return self.status != "fail"

    def as_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}


def exit_code(checks: list[Check]) -> int:
    """0 every check passes, 1 a check fails, 3 only warnings."""
    statuses = {c.status for c in checks}
    return 1 if "fail" in statuses else 3 if "warn" in statuses else 0


def single_release_multiplier(epsilon: float, delta: float) -> float:
    """sigma/Delta of the classical one-shot Gaussian mechanism (Dwork & Roth, Thm A.1)."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


PLD_MIN_MULTIPLIER = 0.5   # below it the PLD's loss range explodes (minutes); RDP is used instead


def _eps(nm: float, q: float, steps: int, delta: float) -> float:
    """Epsilon of Poisson DP-SGD: PLD, or the (looser, still valid) RDP bound for tiny multipliers."""
    return accountant.epsilon(nm, q, steps, delta, "pld" if nm >= PLD_MIN_MULTIPLIER else "rdp")


def _ok(status: bool) -> str:
    return "pass" if status else "fail"


def laplace_l1(cfg: TrainingConfig, n_params: int | None = None) -> float:
    """L1 sensitivity of the clipped sum: a record moves it by up to C in L2, so up to sqrt(d)*C in
    L1 over d parameters (unbounded over all d when d is not given)."""
    d = n_params or cfg.n_params
    return cfg.clip_norm * math.sqrt(d) if d else math.inf


def laplace_scale(cfg: TrainingConfig) -> float:
    """Laplace scale b per coordinate: noise_multiplier * C, or noise_std / sqrt(2)."""
    return cfg.noise_std / math.sqrt(2.0) if cfg.noise_std is not None else cfg.stated_multiplier * cfg.clip_norm


def true_epsilon(cfg: TrainingConfig, runs: int = 1) -> dict:
    """Epsilon of what the configuration does (``runs`` trainings of it composed): its noise, its
    sampling (a fixed batch_size is a fixed-size batch whatever ``sampling`` says), its
    preprocessing.  Returns {"epsilon", "how", "relation"} and, for Poisson Gaussian runs, the
    PLD and RDP values."""
    q, T, d, nm = cfg.q, cfg.total_steps * runs, cfg.delta, cfg.real_multiplier
    if cfg.preprocessing_fit == "private":
        return {"epsilon": math.inf, "how": "preprocessing fitted on the private data without noise",
                "relation": "any"}
    if cfg.noise == "laplace":
        l1 = laplace_l1(cfg)
        e = accountant.laplace_epsilon(laplace_scale(cfg) / l1, q, T, d) if math.isfinite(l1) else math.inf
        return {"epsilon": e, "how": f"PLD of the Poisson-subsampled Laplace, L1 sensitivity {l1:.4g}"
                                     + ("" if cfg.n_params else " (n_params not given)"), "relation": "add/remove"}
    if cfg.sampling == "shuffle":
        epochs = max(1, math.ceil(cfg.n_epochs)) * runs
        return {"epsilon": accountant.shuffle_epsilon(nm, epochs, d), "epochs": epochs,
                "how": f"{epochs} epochs of the Gaussian mechanism at sensitivity 2C, no amplification",
                "relation": "replace-one"}
    if cfg.sampling == "without_replacement" or cfg.batch_size is not None:
        b = cfg.fixed_batch
        return {"epsilon": accountant.without_replacement_epsilon(nm, cfg.n, b, T, d), "batch": b,
                "how": f"RDP of batches of {b} of {cfg.n} drawn without replacement", "relation": "replace-one"}
    rdp_e = accountant.epsilon(nm, q, T, d, "rdp")
    pld_e = _eps(nm, q, T, d)
    return {"epsilon": max(pld_e, rdp_e) if cfg.accountant == "rdp" else pld_e, "epsilon_pld": pld_e,
            "epsilon_rdp": rdp_e, "how": f"Poisson subsampling at q = {q:.4g}, PLD {pld_e:.4g}, RDP {rdp_e:.4g}",
            "relation": "add/remove"}


def audit(cfg: TrainingConfig, X: np.ndarray | None = None, y: np.ndarray | None = None,
          n_classes: int | None = None) -> list[Check]:
    """Every check for ``cfg``; the canary runs on (X, y) when given (our training step)."""
    q, T, d = cfg.q, cfg.total_steps, cfg.delta
    nm_real = cfg.real_multiplier
    claim = cfg.epsilon * (1 + TOLERANCE)
    eps_poisson = _eps(nm_real, q, T, d)
    truth = true_epsilon(cfg)
    eps_true = truth["epsilon"]
    out: list[Check] = []

    inv = 1.0 / cfg.n
    if d >= inv:
        out.append(Check("delta", "fail",
                         f"δ = {d:g} ≥ 1/n = {inv:.3g}: a mechanism that publishes each record in the clear with "
                         f"probability δ satisfies it, leaking about δ·n = {d * cfg.n:.3g} whole records",
                         {"delta": d, "one_over_n": inv}))
    elif d * DELTA_MARGIN >= inv:
        out.append(Check("delta", "warn",
                         f"δ = {d:g} is within {DELTA_MARGIN:g}× of 1/n = {inv:.3g}: about δ·n = {d * cfg.n:.3g} "
                         f"records may be published in the clear; choose δ well below 1/n",
                         {"delta": d, "one_over_n": inv}))
    else:
        out.append(Check("delta", "pass", f"δ = {d:g} < 1/n / {DELTA_MARGIN:g} = {inv / DELTA_MARGIN:.3g}",
                         {"delta": d, "one_over_n": inv}))

    s1 = single_release_multiplier(cfg.epsilon, d)
    looks_single = math.isclose(cfg.stated_multiplier, s1, rel_tol=0.02)
    eps_composed = eps_poisson if cfg.stated_multiplier == nm_real else _eps(cfg.stated_multiplier, q, T, d)
    out.append(Check("single_release", "pass" if not looks_single else "fail" if eps_composed > claim else "warn",
                     (f"noise multiplier {cfg.stated_multiplier:.4g} is the single-release Gaussian value "
                      f"√(2 ln(1.25/δ))/ε = {s1:.4g}, which covers one step; composed over {T} steps at q = {q:.4g} "
                      + (f"the run is ({eps_composed:.4g}, {d:g})-DP, not ε = {cfg.epsilon:g}"
                         if eps_composed > claim else
                         f"the run is ({eps_composed:.4g}, {d:g})-DP: right only by the luck of subsampling, with "
                         f"more noise than ε = {cfg.epsilon:g} needs (calibrate with the accountant)")) if looks_single else
                     f"noise multiplier {cfg.stated_multiplier:.4g} is not the single-release value {s1:.4g}",
                     {"single_release_multiplier": s1, "stated_multiplier": cfg.stated_multiplier,
                      "epsilon_composed": eps_composed}))

    if cfg.noise_std is not None and cfg.noise_multiplier is not None:
        want = cfg.noise_multiplier * cfg.clip_norm
        ok = math.isclose(cfg.noise_std, want, rel_tol=1e-6)
        eps_stated = _eps(cfg.noise_multiplier, q, T, d)
        msg = (f"noise_std {cfg.noise_std:g} = noise_multiplier {cfg.noise_multiplier:g} × C {cfg.clip_norm:g}" if ok
               else f"noise_std {cfg.noise_std:g} ≠ noise_multiplier × C = {want:g}: the noise added is "
                    f"{nm_real:.4g}·C, so the run is ({eps_poisson:.4g}, {d:g})-DP where the stated multiplier "
                    f"would give {eps_stated:.4g}" + (" (σ was entered as the multiplier)" if
                                                     math.isclose(cfg.noise_std, cfg.noise_multiplier) else ""))
        out.append(Check("noise_vs_sigma", _ok(ok), msg,
                         {"noise_std": cfg.noise_std, "expected_noise_std": want, "real_multiplier": nm_real,
                          "epsilon_real": eps_poisson, "epsilon_stated": eps_stated}))
    else:
        out.append(Check("noise_vs_sigma", "pass",
                         f"one noise parameter given: real multiplier σ/C = {nm_real:.4g}",
                         {"real_multiplier": nm_real}))

    if cfg.sensitivity is not None and not math.isclose(cfg.sensitivity, cfg.clip_norm, rel_tol=1e-6):
        out.append(Check("sensitivity", "fail",
                         f"noise calibrated to sensitivity {cfg.sensitivity:g}, but one record moves the sum of "
                         f"clipped gradients by up to C = {cfg.clip_norm:g} (add/remove): real multiplier "
                         f"{nm_real:.4g}, ({eps_poisson:.4g}, {d:g})-DP",
                         {"sensitivity": cfg.sensitivity, "clip_norm": cfg.clip_norm, "real_multiplier": nm_real,
                          "epsilon_real": eps_poisson}))
    else:
        out.append(Check("sensitivity", "pass",
                         f"noise scaled to the clipped sum's sensitivity C = {cfg.clip_norm:g}",
                         {"clip_norm": cfg.clip_norm}))

    ok = eps_true <= claim
    out.append(Check("epsilon", _ok(ok),
                     (f"claimed ε = {cfg.epsilon:g}; accounted with the real multiplier {nm_real:.4g}, {T} steps, "
                      f"{truth['how']} ({truth['relation']}): ({eps_true:.4g}, {d:g})-DP")
                     + ("" if ok else f": the claim understates ε by {eps_true - cfg.epsilon:.4g}"),
                     {"claimed": cfg.epsilon, "epsilon_true": eps_true, "relation": truth["relation"],
                      "epsilon_pld": truth.get("epsilon_pld"), "epsilon_rdp": truth.get("epsilon_rdp"),
                      "steps": T, "sampling_rate": q}))

    out.append(_orders_check(cfg, eps_true))
    out.append(_sampling_check(cfg, eps_poisson))
    out.append(_noise_check(cfg))
    out.append(_preprocessing_check(cfg))
    out.append(_trials_check(cfg))

    canary_doc = None
    if X is not None and y is not None and n_classes:
        batch = max(2, min(len(y), int(round(cfg.batch))))
        canary_doc = canary.influence(X, y, n_classes, cfg.clip_norm, cfg.clipping, batch=batch).as_dict()
    if cfg.clipping == "per-batch":
        nm_batch = nm_real / (2.0 * cfg.batch)
        eps_batch = _eps(nm_batch, q, T, d)
        msg = (f"per-batch clipping: one record can move the clipped batch gradient by up to 2C, not C/batch; "
               f"the noise is then a multiplier {nm_batch:.3g} for that sensitivity: ({eps_batch:.4g}, {d:g})-DP")
        if canary_doc:
            msg += (f". Canary: influence {canary_doc['influence']:.4g} = {canary_doc['bound_ratio']:.3g}·C on a "
                    f"{canary_doc['batch']}-record batch (per-example clipping bounds it by C)")
        out.append(Check("clipping", "fail", msg, {"epsilon_per_batch": eps_batch, "canary": canary_doc}))
    else:
        msg = "per-example clipping to C"
        ok = True
        if canary_doc:
            ok = canary_doc["bounded"]
            msg += (f"; canary influence {canary_doc['influence']:.4g} = {canary_doc['bound_ratio']:.4f}·C ≤ C on "
                    f"a {canary_doc['batch']}-record batch")
        out.append(Check("clipping", _ok(ok), msg, {"canary": canary_doc}))

    float_s = cfg.noise_sampler == "float"
    out.append(Check("noise_sampler", "warn" if float_s else "pass",
                     "floating-point noise samples: the low bits of a float sample are porous (Mironov 2012), so an "
                     "exact noisy value can reveal the unnoised one; no proof covers the released bits (edgedp "
                     "train samples at full float64 precision and rounds the noisy sum to a lattice of about "
                     "σ·2^-16: an argued defence, docs/privacy.md §4.3)"
                     if float_s else "discrete (lattice) noise sampler", {"noise_sampler": cfg.noise_sampler}))
    return out


def _orders_check(cfg: TrainingConfig, eps_true: float) -> Check:
    orders = cfg.orders
    if orders is None:
        return Check("rdp_order", "pass", "no RDP orders given: conversion optimised over the full grid", {})
    q, T, d, nm = cfg.q, cfg.total_steps, cfg.delta, cfg.real_multiplier
    if cfg.noise == "laplace":
        return Check("rdp_order", "pass", "RDP orders are not checked for Laplace noise (the noise check accounts it)",
                     {"rdp_orders": list(orders)})
    if cfg.sampling == "shuffle":
        epochs = max(1, math.ceil(cfg.n_epochs))
        at = accountant.gaussian_rdp_epsilon(nm / 2.0, epochs, d, orders)
        full = accountant.gaussian_rdp_epsilon(nm / 2.0, epochs, d)
    elif cfg.sampling == "without_replacement" or cfg.batch_size is not None:
        at = accountant.without_replacement_epsilon(nm, cfg.n, cfg.fixed_batch, T, d, orders)
        full = accountant.without_replacement_epsilon(nm, cfg.n, cfg.fixed_batch, T, d)
    else:
        at = accountant.rdp_epsilon_at_orders(nm, q, T, d, orders)
        full = accountant.epsilon(nm, q, T, d, "rdp")
    claim = cfg.epsilon * (1 + TOLERANCE)
    listed = ", ".join(f"{a:g}" for a in orders)
    vals = {"rdp_orders": list(orders), "epsilon_at_orders": at, "epsilon_full_grid": full,
            "full_grid": [float(a) for a in (accountant.RDP_ORDERS[0], accountant.RDP_ORDERS[-1])]}
    msg = (f"RDP at the orders [{listed}] gives ε = {at:.4g}; over the full grid "
           f"({accountant.RDP_ORDERS[0]}–{accountant.RDP_ORDERS[-1]}) {full:.4g}")
    if at <= claim:
        return Check("rdp_order", "pass", msg + f": the orders give the claimed ε = {cfg.epsilon:g}", vals)
    if eps_true <= claim:
        return Check("rdp_order", "warn", msg + f": the claim ε = {cfg.epsilon:g} does not follow from those "
                                                f"orders, but holds by the full accounting ({eps_true:.4g})", vals)
    return Check("rdp_order", "fail", msg + f": the claim ε = {cfg.epsilon:g} rests on orders that do not give "
                                            f"it", vals)


def _sampling_check(cfg: TrainingConfig, eps_poisson: float) -> Check:
    d = cfg.delta
    claim = cfg.epsilon * (1 + TOLERANCE)
    if cfg.sampling == "poisson" and cfg.batch_size is not None:
        b = cfg.batch_size
        e = accountant.without_replacement_epsilon(cfg.real_multiplier, cfg.n, b, cfg.total_steps, d)
        return Check("sampling", "fail",
                     f"batch_size = {b} is a fixed batch size, but sampling = \"poisson\" includes each record "
                     f"independently with probability q (a Binomial(n, q) batch): inconsistent. Fixed batches of "
                     f"{b} drawn without replacement are ({e:.4g}, {d:g})-DP (RDP, replace-one), against "
                     f"{eps_poisson:.4g} as if Poisson at q = {cfg.q:.4g}",
                     {"epsilon_without_replacement": e, "epsilon_as_poisson": eps_poisson, "batch_size": b})
    if cfg.sampling == "poisson":
        return Check("sampling", "pass", f"Poisson subsampling at q = {cfg.q:.4g}, as the accountant assumes",
                     {"sampling_rate": cfg.q})
    if cfg.sampling == "shuffle":
        epochs = max(1, math.ceil(cfg.n_epochs))
        e = accountant.shuffle_epsilon(cfg.real_multiplier, epochs, d)
        what = (f"shuffled fixed-size batches: no amplification by subsampling; under replace-one each record is "
                f"in one batch per epoch, whose clipped sum the replacement moves by up to 2C, so each epoch is one "
                f"Gaussian mechanism at multiplier {cfg.real_multiplier / 2:.4g} for that sensitivity; {epochs} "
                f"epochs: ({e:.4g}, {d:g})-DP")
        vals = {"epsilon_without_amplification": e, "epsilon_as_poisson": eps_poisson, "epochs": epochs}
    else:
        e = accountant.without_replacement_epsilon(cfg.real_multiplier, cfg.n, cfg.fixed_batch, cfg.total_steps, d)
        what = (f"fixed batches of {cfg.fixed_batch} drawn without replacement, RDP under replace-one: "
                f"({e:.4g}, {d:g})-DP")
        vals = {"epsilon_without_replacement": e, "epsilon_as_poisson": eps_poisson, "batch_size": cfg.fixed_batch}
    if e <= claim:
        return Check("sampling", "pass", what + f", within the claimed ε = {cfg.epsilon:g}", vals)
    return Check("sampling", "fail", what + f", against {eps_poisson:.4g} as if Poisson: the claimed ε = "
                                            f"{cfg.epsilon:g} does not hold for this sampling", vals)


def _noise_check(cfg: TrainingConfig) -> Check:
    if cfg.noise == "gaussian":
        return Check("noise", "pass", "Gaussian noise, as the accountant assumes", {"noise": "gaussian"})
    b, q, T, d = laplace_scale(cfg), cfg.q, cfg.total_steps, cfg.delta
    floor = accountant.laplace_epsilon(b / laplace_l1(cfg, 1), q, T, d)     # d = 1: the least it can be
    vals = {"noise": "laplace", "scale": b, "n_params": cfg.n_params, "epsilon_one_parameter": floor}
    msg = (f"Laplace noise of scale {b:.4g} per coordinate: the Gaussian accountant does not apply, and per-example "
           f"L2 clipping bounds a record's L1 change of the sum only by √d·C over d parameters; Poisson-subsampled "
           f"Laplace over {T} steps (PLD) is ({floor:.4g}, {d:g})-DP for d = 1")
    if cfg.n_params is None:
        vals["epsilon_laplace"] = math.inf
        return Check("noise", "fail", msg + "; for the model's d (not given: n_params) it is larger without bound, "
                                            f"so ε = {cfg.epsilon:g} is not established", vals)
    l1 = laplace_l1(cfg)
    e = accountant.laplace_epsilon(b / l1, q, T, d)
    vals.update({"l1_sensitivity": l1, "epsilon_laplace": e})
    msg += f" and ({e:.4g}, {d:g})-DP for d = {cfg.n_params} (L1 sensitivity {l1:.4g})"
    if e > cfg.epsilon * (1 + TOLERANCE):
        return Check("noise", "fail", msg + f", not ε = {cfg.epsilon:g}", vals)
    return Check("noise", "pass", msg, vals)


def _preprocessing_check(cfg: TrainingConfig) -> Check:
    p = cfg.preprocessing_fit
    if p == "private":
        return Check("preprocessing", "fail",
                     "preprocessing fitted on the private training data (e.g. feature means, scales, a vocabulary): "
                     "the fitted statistics are part of the released model and carry no noise, so no finite ε "
                     "covers the release (fit on public data, or with DP and add its ε)",
                     {"preprocessing_fit": p, "epsilon_true": math.inf})
    if p == "private_dp":
        return Check("preprocessing", "warn",
                     "preprocessing fitted on the private data with DP: its ε adds to the training's (basic "
                     "composition) and is not in the claimed ε unless included there",
                     {"preprocessing_fit": p})
    return Check("preprocessing", "pass",
                 "no preprocessing fitted on the data" if p == "none" else "preprocessing fitted on public data",
                 {"preprocessing_fit": p})


def _trials_check(cfg: TrainingConfig) -> Check:
    N = cfg.hyperparameter_trials
    if N == 1:
        return Check("hyperparameters", "pass", "one training run on the private data", {"trials": 1})
    d = cfg.delta
    e = true_epsilon(cfg, N)["epsilon"]
    vals = {"trials": N, "epsilon_all_trials": e}
    msg = (f"{N} trainings on the private data (hyperparameter search): releasing the best composes all of them, "
           f"({e:.4g}, {d:g})-DP by composing the {N} runs")
    if e <= cfg.epsilon * (1 + TOLERANCE):
        return Check("hyperparameters", "pass", msg + f", within the claimed ε = {cfg.epsilon:g}", vals)
    return Check("hyperparameters", "fail", msg + f": the claimed ε = {cfg.epsilon:g} covers one run only; the "
                                                  f"search costs {e - cfg.epsilon:.4g} more", vals)
