"""``edgedp audit-config``: a DP-SGD training configuration checked against the errors that make
its stated epsilon meaningless (the training literature and published design notes), each as pass/fail
with the computed consequence.

Checks (``CHECKS``):

* ``delta``: delta < 1/n;
* ``single_release``: the noise multiplier is not the single-release Gaussian calibration
  sqrt(2 ln(1.25/delta))/eps, which ignores the composition over steps;
* ``noise_vs_sigma``: the noise actually added (noise_std) is noise_multiplier * C — a noise
  multiplier entered as sigma (or sigma as the multiplier) changes the real multiplier to sigma/C;
* ``sensitivity``: the sum of per-example clipped gradients has L2 sensitivity C (add/remove one
  record); noise calibrated to another "sensitivity" has real multiplier sigma/C;
* ``epsilon``: the claimed epsilon is at least what PLD and RDP accounting give for the real
  multiplier, sampling rate and steps;
* ``rdp_order``: RDP converted to (eps, delta) at a fixed order instead of the optimal one;
* ``sampling``: shuffled (fixed-size) batches accounted as Poisson subsampling;
* ``clipping``: per-batch instead of per-example clipping, with the empirical canary check;
* ``noise_sampler``: floating-point Gaussian/Laplace samples (porous low bits, Mironov 2012).
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from . import accountant, canary

CHECKS = ("delta", "single_release", "noise_vs_sigma", "sensitivity", "epsilon", "rdp_order", "sampling",
          "clipping", "noise_sampler")
SAMPLINGS = ("poisson", "shuffle")
CLIPPINGS = ("per-example", "per-batch")
SAMPLERS = ("float", "discrete")
TOLERANCE = 0.01   # relative slack on epsilon comparisons


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
    clipping: str = "per-example"
    accountant: str = "pld"
    rdp_order: float | None = None
    noise_sampler: str = "float"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError("epsilon must be finite and > 0")
        if not 0 < self.delta < 1:
            raise ValueError("delta must be in (0, 1)")
        if self.n < 1:
            raise ValueError("n (training records) must be >= 1")
        if not self.clip_norm > 0:
            raise ValueError("clip_norm must be > 0")
        if self.noise_multiplier is None and self.noise_std is None:
            raise ValueError("give noise_multiplier or noise_std")
        for name in ("noise_multiplier", "noise_std", "sensitivity"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be > 0")
        if (self.batch_size is None) == (self.sampling_rate is None):
            raise ValueError("give exactly one of batch_size and sampling_rate")
        if self.batch_size is not None and not 1 <= self.batch_size <= self.n:
            raise ValueError("batch_size must be in [1, n]")
        if self.sampling_rate is not None and not 0 < self.sampling_rate <= 1:
            raise ValueError("sampling_rate must be in (0, 1]")
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("give exactly one of epochs and steps")
        for name, allowed in (("sampling", SAMPLINGS), ("clipping", CLIPPINGS), ("accountant", accountant.ACCOUNTANTS),
                              ("noise_sampler", SAMPLERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.rdp_order is not None and not self.rdp_order > 1:
            raise ValueError("rdp_order must be > 1")

    @property
    def q(self) -> float:
        return self.sampling_rate if self.sampling_rate is not None else self.batch_size / self.n

    @property
    def batch(self) -> float:
        """Expected batch size."""
        return self.q * self.n

    @property
    def total_steps(self) -> int:
        return self.steps if self.steps is not None else max(1, round(self.epochs / self.q))

    @property
    def n_epochs(self) -> float:
        return self.total_steps * self.q

    @property
    def stated_multiplier(self) -> float:
        return self.noise_multiplier if self.noise_multiplier is not None else self.noise_std / self.clip_norm

    @property
    def real_multiplier(self) -> float:
        """Standard deviation of the noise actually added to the clipped sum, in units of C."""
        if self.noise_std is not None:
            return self.noise_std / self.clip_norm
        if self.sensitivity is not None:
            return self.noise_multiplier * self.sensitivity / self.clip_norm
        return self.noise_multiplier

    @classmethod
    def from_mapping(cls, d: dict) -> "TrainingConfig":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown configuration keys: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        for f in fields(cls):  # a value of the wrong type is named, not met later as a TypeError
            if f.name in d and d[f.name] is not None:
                kind = str(f.type).split(" |")[0]
                v = d[f.name]
                ok = isinstance(v, str) if kind == "str" else \
                    isinstance(v, (int, float) if kind == "float" else int) and not isinstance(v, bool)
                if not ok:
                    what = {"str": "a string", "int": "an integer"}.get(kind, "a number")
                    raise ValueError(f"{f.name} must be {what}, not {v!r}")
        missing = [k for k in ("epsilon", "delta", "n", "clip_norm") if k not in d]
        if missing:
            raise ValueError(f"the configuration needs {', '.join(missing)}")
        return cls(**d)


def read_config(path: str | Path) -> dict:
    """A TOML or JSON file (by suffix; a [dpsgd] table in TOML is accepted too)."""
    p = Path(path)
    text = p.read_text()
    try:
        d = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{p}: cannot parse ({exc})") from None
    if "dpsgd" in d and isinstance(d["dpsgd"], dict):
        d = d["dpsgd"]
    if not isinstance(d, dict):
        raise ValueError(f"{p}: expected a table of settings")
    return d


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    consequence: str
    values: dict

    def as_dict(self) -> dict:
        return asdict(self)


def single_release_multiplier(epsilon: float, delta: float) -> float:
    """sigma/Delta of the classical one-shot Gaussian mechanism (Dwork & Roth, Thm A.1)."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


PLD_MIN_MULTIPLIER = 0.5   # below it the PLD's loss range explodes (minutes); RDP is used instead


def _eps(nm: float, q: float, steps: int, delta: float) -> float:
    """Epsilon of the run: PLD, or the (looser, still valid) RDP bound for tiny multipliers."""
    return accountant.epsilon(nm, q, steps, delta, "pld" if nm >= PLD_MIN_MULTIPLIER else "rdp")


def audit(cfg: TrainingConfig, X: np.ndarray | None = None, y: np.ndarray | None = None,
          n_classes: int | None = None) -> list[Check]:
    """Every check for ``cfg``; the canary runs on (X, y) when given (our training step)."""
    q, T, d = cfg.q, cfg.total_steps, cfg.delta
    nm_real = cfg.real_multiplier
    eps_real = {"rdp": accountant.epsilon(nm_real, q, T, d, "rdp"), "pld": _eps(nm_real, q, T, d)}
    out: list[Check] = []

    inv = 1.0 / cfg.n
    out.append(Check("delta", d < inv,
                     f"δ = {d:g} < 1/n = {inv:.3g}" if d < inv else
                     f"δ = {d:g} ≥ 1/n = {inv:.3g}: a mechanism that publishes each record in the clear with "
                     f"probability δ satisfies it, leaking about δ·n = {d * cfg.n:.3g} whole records",
                     {"delta": d, "one_over_n": inv}))

    s1 = single_release_multiplier(cfg.epsilon, d)
    looks_single = math.isclose(cfg.stated_multiplier, s1, rel_tol=0.02)
    eps_pld = eps_real["pld"]
    eps_composed = eps_pld if cfg.stated_multiplier == nm_real else _eps(cfg.stated_multiplier, q, T, d)
    out.append(Check("single_release", not looks_single,
                     (f"noise multiplier {cfg.stated_multiplier:.4g} is the single-release Gaussian value "
                      f"√(2 ln(1.25/δ))/ε = {s1:.4g}, which covers one step; composed over {T} steps at q = {q:.4g} "
                      + (f"the run is ({eps_composed:.4g}, {d:g})-DP, not ε = {cfg.epsilon:g}"
                         if eps_composed > cfg.epsilon * (1 + TOLERANCE) else
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
                    f"{nm_real:.4g}·C, so the run is ({eps_pld:.4g}, {d:g})-DP where the stated multiplier "
                    f"would give {eps_stated:.4g}" + (" (σ was entered as the multiplier)" if
                                                     math.isclose(cfg.noise_std, cfg.noise_multiplier) else ""))
        out.append(Check("noise_vs_sigma", ok, msg, {"noise_std": cfg.noise_std, "expected_noise_std": want,
                                                     "real_multiplier": nm_real, "epsilon_real": eps_pld,
                                                     "epsilon_stated": eps_stated}))
    else:
        out.append(Check("noise_vs_sigma", True,
                         f"one noise parameter given: real multiplier σ/C = {nm_real:.4g}",
                         {"real_multiplier": nm_real}))

    if cfg.sensitivity is not None and not math.isclose(cfg.sensitivity, cfg.clip_norm, rel_tol=1e-6):
        out.append(Check("sensitivity", False,
                         f"noise calibrated to sensitivity {cfg.sensitivity:g}, but one record moves the sum of "
                         f"clipped gradients by up to C = {cfg.clip_norm:g} (add/remove): real multiplier "
                         f"{nm_real:.4g}, ({eps_pld:.4g}, {d:g})-DP",
                         {"sensitivity": cfg.sensitivity, "clip_norm": cfg.clip_norm, "real_multiplier": nm_real,
                          "epsilon_real": eps_pld}))
    else:
        out.append(Check("sensitivity", True, f"noise scaled to the clipped sum's sensitivity C = {cfg.clip_norm:g}",
                         {"clip_norm": cfg.clip_norm}))

    worst = max(eps_real.values()) if cfg.accountant == "rdp" else eps_real["pld"]
    ok = worst <= cfg.epsilon * (1 + TOLERANCE)
    out.append(Check("epsilon", ok,
                     (f"claimed ε = {cfg.epsilon:g}; accounted with the real multiplier {nm_real:.4g}, q = {q:.4g}, "
                      f"{T} steps: PLD {eps_real['pld']:.4g}, RDP {eps_real['rdp']:.4g} (δ = {d:g})")
                     + ("" if ok else f": the claim understates ε by {worst - cfg.epsilon:.4g}"),
                     {"claimed": cfg.epsilon, "epsilon_pld": eps_real["pld"], "epsilon_rdp": eps_real["rdp"],
                      "steps": T, "sampling_rate": q}))

    if cfg.rdp_order is not None:
        fixed = accountant.rdp_epsilon_at_order(nm_real, q, T, d, cfg.rdp_order)
        opt = eps_real["rdp"]
        diff = fixed - opt
        ok = abs(diff) <= TOLERANCE * opt
        out.append(Check("rdp_order", ok,
                         f"RDP converted at the fixed order α = {cfg.rdp_order:g} gives ε = {fixed:.4g}; optimised "
                         f"over α it is {opt:.4g}" + ("" if ok else f": the fixed order {'overstates' if diff > 0 else 'understates'} "
                                                      f"ε by {abs(diff):.4g}"),
                         {"rdp_order": cfg.rdp_order, "epsilon_fixed_order": fixed, "epsilon_optimal": opt}))
    else:
        out.append(Check("rdp_order", True, "no fixed RDP order: conversion optimised over α", {}))

    if cfg.sampling == "shuffle":
        epochs = max(1, math.ceil(cfg.n_epochs))
        eps_shuffle = accountant.gaussian_epsilon(nm_real, epochs, d)
        out.append(Check("sampling", False,
                         f"shuffled fixed-size batches accounted as Poisson subsampling (q = {q:.4g}): the "
                         f"amplification by subsampling does not apply. Provable without it (each record in one "
                         f"batch per epoch, {epochs} epochs of the Gaussian mechanism at multiplier {nm_real:.4g}): "
                         f"({eps_shuffle:.4g}, {d:g})-DP, against {eps_pld:.4g} as if Poisson",
                         {"epsilon_as_poisson": eps_pld, "epsilon_without_amplification": eps_shuffle,
                          "epochs": epochs}))
    else:
        out.append(Check("sampling", True, f"Poisson subsampling at q = {q:.4g}, as the accountant assumes",
                         {"sampling_rate": q}))

    canary_doc = None
    if X is not None and y is not None and n_classes:
        canary_doc = canary.influence(X, y, n_classes, cfg.clip_norm, cfg.clipping,
                                      batch=max(2, min(64, int(round(cfg.batch))))).as_dict()
    if cfg.clipping == "per-batch":
        nm_batch = nm_real / (2.0 * cfg.batch)
        eps_batch = _eps(nm_batch, q, T, d)
        msg = (f"per-batch clipping: one record can move the clipped batch gradient by up to 2C, not C/batch; "
               f"the noise is then a multiplier {nm_batch:.3g} for that sensitivity: ({eps_batch:.4g}, {d:g})-DP")
        if canary_doc:
            msg += (f". Canary: influence {canary_doc['influence']:.4g} = {canary_doc['bound_ratio']:.3g}·C on a "
                    f"{canary_doc['batch']}-record batch (per-example clipping bounds it by C)")
        out.append(Check("clipping", False, msg, {"epsilon_per_batch": eps_batch, "canary": canary_doc}))
    else:
        msg = "per-example clipping to C"
        ok = True
        if canary_doc:
            ok = canary_doc["bounded"]
            msg += f"; canary influence {canary_doc['influence']:.4g} = {canary_doc['bound_ratio']:.4f}·C ≤ C"
        out.append(Check("clipping", ok, msg, {"canary": canary_doc}))

    float_s = cfg.noise_sampler == "float"
    out.append(Check("noise_sampler", not float_s,
                     "floating-point Gaussian samples: their low bits are porous (Mironov 2012), so the exact "
                     "noisy value can reveal the unnoised one and the stated ε does not hold for the released "
                     "bits; use a discrete (lattice) Gaussian or round the noisy update to a coarse lattice"
                     if float_s else "discrete (lattice) noise sampler", {"noise_sampler": cfg.noise_sampler}))
    return out
