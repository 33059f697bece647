"""Bit-exact replay of a test-build device against the reference, and a chi-square of its noise."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from ..mech import dlap
from ..mech.lattice import MICRO, make_lattice, to_epsilon, to_micro
from ..mech.modes import Mode
from ..mech.reference import ReferenceDevice
from . import protocol as P
from .client import Device
from .noise import draw_samples

EPS_MICRO = tuple(to_micro(e) for e in (0.1, 0.5, 1.0, 2.0, 10.0))
"""The per-query epsilons a replay draws from, in micro-epsilon."""
KS = (1, 2, 3, 5, 10, 16, 33, 64, 100)
MODES = ("full", "topk:1", "topk:3", "label", "bucket", "round:0", "round:2", "simplex")
RANGES = ((0.0, 1.0, 2.0), (0.25, 0.5, 0.5), (-20.0, 20.0, 40.0), (0.0, 30.0, 2.0))
"""(lo, hi, sensitivity): probabilities, a narrow range, logits, a 30-teacher vote histogram."""
CAPS = P.Caps(daily=10**15)
"""Caps no replay reaches (10^9 epsilon a day, no lifetime cap)."""


@dataclass
class VerifyResult:
    queries: int = 0
    mismatches: int = 0
    samples: int = 0
    chi2_pvalue: float = float("nan")
    chi2_statistic: float = float("nan")
    chi2_dof: int = 0
    first_mismatch: dict | None = None
    by_mode: dict = field(default_factory=dict)
    charged_micro: int = 0
    """The ε (micro) of the answered queries, each at the configuration it ran: what the device
    charged for them (for a caller that cannot read the device's STATE afterwards)."""

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and self.chi2_pvalue >= 1e-3

    def as_dict(self) -> dict:
        return {"queries": self.queries, "mismatches": self.mismatches, "samples": self.samples,
                "chi2_pvalue": self.chi2_pvalue, "chi2_statistic": self.chi2_statistic,
                "chi2_dof": self.chi2_dof, "by_mode": self.by_mode, "first_mismatch": self.first_mismatch,
                "ok": self.ok}


def varied_input(rng: np.random.Generator, k: int, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """Probability-like vectors, values outside the range, near-ties and equal values, mapped onto [lo, hi]."""
    kind = rng.integers(4)
    if kind == 0:
        u = rng.dirichlet(np.ones(k))
    elif kind == 1:
        u = rng.normal(0.5, 0.8, k)
    elif kind == 2:
        u = rng.integers(0, 9, k) / 8.0 + rng.choice([0.0, 2.0 ** -12, -(2.0 ** -12)], k)
    else:
        u = np.full(k, rng.random())
    return lo + (hi - lo) * u


def _answer(r: P.QueryResult) -> dict:
    return {"m": r.m, "lattice": r.lattice, "indices": r.indices, "label": r.label, "level": r.level}


def replay(dev: Device, key: bytes, queries: int, seed: int = 0, progress: bool = True,
           stop: Callable[[], bool] | None = None, res: VerifyResult | None = None) -> VerifyResult:
    """Re-key the device with a fresh test seed and compare `queries` answers with the reference;
    fewer if ``stop()`` holds before a query (none is sent after it does: ``queries`` counts those
    answered). ``res``: the result to fill, answer by answer (it holds the answers compared so
    far if the link fails)."""
    rng = np.random.default_rng(seed)
    stream_seed = rng.bytes(32)
    res = VerifyResult() if res is None else res
    cfg = P.MechConfig()
    dev.configure(key, cfg, CAPS)
    dev.test_seed(key, stream_seed)
    ref = ReferenceDevice(cfg, stream_seed)
    for i in tqdm(range(queries), desc="bit-exact queries", disable=not progress, leave=False):
        if stop and stop():
            break
        if i % 97 == 96:
            eps_micro = int(rng.choice(EPS_MICRO))
            lo, hi, sens = RANGES[int(rng.integers(len(RANGES)))]
            cfg = P.MechConfig(eps_micro, lo, hi, sens)
            dev.configure(key, cfg, CAPS)
            ref.configure(cfg)
        k = int(rng.choice(KS))
        mode = Mode.parse(str(rng.choice(MODES)))
        x = varied_input(rng, k, cfg.lo, cfg.hi)
        got = dev.query(x, mode)
        want = ref.query(x, mode)
        res.queries += 1
        res.charged_micro += cfg.eps_micro
        res.by_mode.setdefault(str(mode), [0, 0])
        res.by_mode[str(mode)][0] += 1
        if not got.same_answer(want):
            res.mismatches += 1
            res.by_mode[str(mode)][1] += 1
            if res.first_mismatch is None:
                res.first_mismatch = {"query": i, "k": k, "mode": str(mode), "epsilon": to_epsilon(cfg.eps_micro),
                                      "range": [cfg.lo, cfg.hi], "device": _answer(got), "reference": _answer(want)}
    return res


def noise_fit(dev: Device, samples: int, eps_micro: int = MICRO, sensitivity: float = 2.0, k: int = 10,
              progress: bool = True, stop: Callable[[], bool] | None = None) -> dlap.ChiSquare | None:
    """Chi-square of ``samples`` device noise draws against the exact law; None if ``stop()``
    held before they were all drawn."""
    z = draw_samples(dev, P.SampleRequest(eps_micro, sensitivity, k, samples), progress, stop)
    if len(z) < samples:
        return None
    return dlap.chi_square(z, make_lattice(k, eps_micro, sensitivity, 0.0, 1.0).inv_t)
