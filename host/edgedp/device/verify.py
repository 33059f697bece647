"""Bit-exact replay of a test-build device against the reference, and a chi-square of its noise."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from ..mech.dlap import chi_square_dlap
from ..mech.lattice import make_lattice
from ..mech.modes import Mode
from ..mech.reference import ReferenceDevice, matches
from .client import Device
from .noise import draw_samples

EPSILONS = (0.1, 0.5, 1.0, 2.0, 10.0)
KS = (1, 2, 3, 5, 10, 16, 33, 64, 100)
MODES = ("full", "topk:1", "topk:3", "label", "bucket", "round:0", "round:2", "simplex")
RANGES = ((0.0, 1.0, 2.0), (0.25, 0.5, 0.5), (-20.0, 20.0, 40.0), (0.0, 30.0, 2.0))
"""(lo, hi, sensitivity): probabilities, a narrow range, logits, a 30-teacher vote histogram."""


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


def replay(dev: Device, key: bytes, queries: int, seed: int = 0, progress: bool = True) -> VerifyResult:
    """Re-key the device with a fresh test seed and compare `queries` answers with the reference."""
    rng = np.random.default_rng(seed)
    stream_seed = rng.bytes(32)
    res = VerifyResult()
    eps = 1.0
    dev.configure(key, eps, daily_cap=1e9, lifetime_cap=None)
    dev.test_seed(key, stream_seed)
    ref = ReferenceDevice(stream_seed, round(eps * 1e6))
    lo, hi = 0.0, 1.0
    for i in tqdm(range(queries), desc="bit-exact queries", disable=not progress, leave=False):
        if i % 97 == 96:
            eps = float(rng.choice(EPSILONS))
            lo, hi, sens = RANGES[int(rng.integers(len(RANGES)))]
            dev.configure(key, eps, daily_cap=1e9, lifetime_cap=None, lo=lo, hi=hi, sensitivity=sens)
            ref.configure(round(eps * 1e6), sens, lo, hi)
        k = int(rng.choice(KS))
        mode = Mode.parse(str(rng.choice(MODES)))
        x = varied_input(rng, k, lo, hi)
        got = dev.query(x, mode)
        want = ref.query(x, mode)
        res.queries += 1
        ok = matches(got, want)
        res.by_mode.setdefault(str(mode), [0, 0])
        res.by_mode[str(mode)][0] += 1
        if not ok:
            res.mismatches += 1
            res.by_mode[str(mode)][1] += 1
            if res.first_mismatch is None:
                res.first_mismatch = {"query": i, "k": k, "mode": str(mode), "epsilon": eps, "range": [lo, hi],
                                      "device": getattr(got, "lattice", None), "reference": want}
    return res


def noise_fit(dev: Device, samples: int, epsilon: float = 1.0, sensitivity: float = 2.0, k: int = 10,
              progress: bool = True) -> tuple[int, float, float, int]:
    """(n, p-value, statistic, dof) of `samples` device noise draws against the exact pmf."""
    z = draw_samples(dev, epsilon, sensitivity, k, samples, progress)
    lat = make_lattice(k, round(epsilon * 1e6), sensitivity, 0.0, 1.0)
    c = chi_square_dlap(z, lat.inv_t)
    return c.n, c.pvalue, c.statistic, c.dof
