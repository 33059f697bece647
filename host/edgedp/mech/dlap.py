"""The discrete Laplace law of the device's noise: P(z) = (1-r)/(1+r) r^|z|, r = exp(-1/t).

One place for its tail, distribution function, a vectorised sampler (NumPy's generator, not
the device's stream) and a goodness-of-fit test of integer samples against it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def tail(a: np.ndarray, inv_t: float) -> np.ndarray:
    """P(Z >= a) for integers a >= 1 (= P(Z <= -a))."""
    r = np.exp(-inv_t)
    return np.power(r, np.asarray(a, dtype=np.float64)) / (1 + r)


def cdf(z: np.ndarray, inv_t: float) -> np.ndarray:
    """P(Z <= z) for integers z."""
    z = np.asarray(z, dtype=np.float64)
    return np.where(z >= 0, 1.0 - tail(np.abs(z) + 1, inv_t), tail(np.abs(z), inv_t))


def sample(inv_t: float, size, rng: np.random.Generator) -> np.ndarray:
    """Samples as the difference of two geometric variables of success probability 1 - r."""
    p = -np.expm1(-inv_t)
    return rng.geometric(p, size=size).astype(np.int64) - rng.geometric(p, size=size)


@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    dof: int
    pvalue: float
    bins: int
    n: int


def chi_square(samples: np.ndarray, inv_t: float, bins_per_side: int = 50) -> ChiSquare:
    """Pearson chi-square of integer samples against the law.

    Bins: {0}, then on each side of zero ``bins_per_side`` ranges of |z| of about
    equal probability (integer boundaries; the last bin is the whole tail)."""
    z = np.asarray(samples, dtype=np.int64)
    n = len(z)
    r = np.exp(-inv_t)
    p0 = (1 - r) / (1 + r)
    t = 1.0 / inv_t
    q = np.arange(1, bins_per_side) / bins_per_side
    bounds = np.unique(np.ceil(1 + t * -np.log1p(-q)).astype(np.int64))
    starts = np.concatenate([[1], bounds])
    ends = np.concatenate([bounds, [np.iinfo(np.int64).max]])
    last = ends == np.iinfo(np.int64).max
    side_mass = tail(starts, inv_t) - np.where(last, 0.0, tail(np.minimum(ends, 2**53), inv_t))
    absz = np.abs(z)
    idx = np.searchsorted(starts, absz, side="right") - 1
    obs = [np.count_nonzero(z == 0)]
    exp = [n * p0]
    for sign in (1, -1):
        sel = (z * sign) > 0
        obs += list(np.bincount(idx[sel], minlength=len(starts)))
        exp += list(n * side_mass)
    obs_a, exp_a = np.asarray(obs, dtype=float), np.asarray(exp, dtype=float)
    keep = exp_a > 0
    stat = float(((obs_a[keep] - exp_a[keep]) ** 2 / exp_a[keep]).sum())
    dof = int(keep.sum()) - 1
    from scipy import stats  # only when testing: the device commands do not need scipy
    return ChiSquare(stat, dof, float(stats.chi2.sf(stat, dof)), int(keep.sum()), n)
