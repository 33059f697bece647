"""Goodness-of-fit of integer noise samples against the exact discrete Laplace pmf."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    dof: int
    pvalue: float
    bins: int
    n: int


def chi_square_dlap(samples: np.ndarray, inv_t: float, bins_per_side: int = 50) -> ChiSquare:
    """Pearson chi-square of samples against P(z) = (1-r)/(1+r) r^|z|, r = exp(-inv_t).

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

    def upper(a: np.ndarray) -> np.ndarray:  # P(z >= a) for a >= 1
        return p0 * np.power(r, a.astype(float)) / (1 - r)

    side_mass = upper(starts) - np.where(ends == np.iinfo(np.int64).max, 0.0, upper(np.minimum(ends, 2**53)))
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
    return ChiSquare(stat, dof, float(stats.chi2.sf(stat, dof)), int(keep.sum()), n)
