"""An empirical epsilon lower bound from samples of two neighbouring worlds (Jagielski et al. 2020,
Nasr et al. 2021): if a mechanism M is (eps, delta)-DP, then for every event E and neighbours
a, b: P[M(a) in E] <= e^eps P[M(b) in E] + delta, so

    eps >= ln((P[M(a) in E] - delta) / P[M(b) in E]).

The event is a threshold on a candidate score (a statistic) of the output ({s >= tau} or its
complement, favouring either world). For each of the S statistics, its best event is chosen on
one half of each world's samples (the selection half); each is then evaluated once, on the other
half (the evaluation half), with one-sided Clopper-Pearson limits at level alpha/(2S) each: the
lower limit of P[E | a] and the upper limit of P[E | b]; the bound is the largest of the S. Each
is below the true epsilon with probability at least 1 - alpha/S, whatever was tried on the
selection half, so (Bonferroni over the statistics) the largest is with probability at least
1 - alpha. A statistic that separates the worlds is thus never hidden by another that looked
better on the selection half.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import beta

MAX_THRESHOLDS = 400   # candidate thresholds per score (distinct values, or quantiles beyond that)


def cp_lower(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided lower Clopper-Pearson limit of a binomial proportion at level alpha."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)


def cp_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided upper Clopper-Pearson limit of a binomial proportion at level alpha."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)


def eps_from_counts(ka: np.ndarray, na: int, kb: np.ndarray, nb: int, alpha: float, delta: float) -> np.ndarray:
    """ln((lower(P[E|a]) - delta) / upper(P[E|b])), -inf where the numerator is not positive."""
    lo_a = cp_lower(ka, na, alpha / 2) - delta
    hi_b = cp_upper(kb, nb, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lo_a > 0, np.log(np.maximum(lo_a, 1e-300) / hi_b), -np.inf)


def _thresholds(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    both = np.concatenate([sa, sb])
    u = np.unique(both)
    if len(u) <= MAX_THRESHOLDS:
        return u
    tail = np.geomspace(1e-6, 0.5, MAX_THRESHOLDS // 2)
    return np.unique(np.concatenate([np.quantile(both, np.concatenate([tail, 1 - tail])), u[:3], u[-3:]]))


def _counts_at_least(s: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """#(s >= tau) for each tau."""
    srt = np.sort(s)
    return len(s) - np.searchsorted(srt, taus, side="left")


@dataclass(frozen=True)
class Event:
    """{score >= threshold} (or its complement, ``upper`` False) as evidence for world ``favours``."""

    score: str
    threshold: float
    upper: bool
    favours: str   # "a" or "b"

    def inside(self, s: np.ndarray) -> np.ndarray:
        return s >= self.threshold if self.upper else s < self.threshold

    def describe(self) -> str:
        return f"{self.score} {'>=' if self.upper else '<'} {self.threshold:g} (favours world {self.favours})"


@dataclass(frozen=True)
class Bound:
    epsilon_lower_bound: float
    event: Event | None
    selection_estimate: float     # the bound the event reached on the selection half
    hits_a: int                   # evaluation-half counts of the event
    hits_b: int
    n_a: int
    n_b: int
    alpha: float
    delta: float

    def as_dict(self) -> dict:
        d = asdict(self)
        d["event"] = None if self.event is None else {**asdict(self.event), "text": self.event.describe()}
        return d


def choose_event(scores_a: Mapping[str, np.ndarray], scores_b: Mapping[str, np.ndarray], alpha: float,
                 delta: float) -> tuple[Event | None, float]:
    """The event with the largest bound on these samples (the selection half)."""
    best: tuple[float, Event | None] = (-math.inf, None)
    for name, sa in scores_a.items():
        sb = scores_b[name]
        taus = _thresholds(sa, sb)
        ca, cb = _counts_at_least(sa, taus), _counts_at_least(sb, taus)
        na, nb = len(sa), len(sb)
        for upper, ka, kb in ((True, ca, cb), (False, na - ca, nb - cb)):
            for favours, (k1, n1, k2, n2) in (("a", (ka, na, kb, nb)), ("b", (kb, nb, ka, na))):
                e = eps_from_counts(k1, n1, k2, n2, alpha, delta)
                i = int(np.argmax(e))
                if e[i] > best[0]:
                    best = (float(e[i]), Event(name, float(taus[i]), upper, favours))
    return best[1], best[0]


def lower_bound(scores_a: Mapping[str, np.ndarray], scores_b: Mapping[str, np.ndarray], alpha: float,
                rng: np.random.Generator, delta: float = 0.0) -> Bound:
    """For each statistic, choose its event on a random half of each world's samples and bound
    epsilon on the other half at alpha split over the statistics; the largest bound.

    ``scores_a[name]`` and ``scores_b[name]`` hold one candidate score per sample of each world
    (the same samples for every name). The result is a lower bound with confidence 1 - alpha;
    0 when no event separates the worlds (epsilon >= 0 always holds)."""
    na = len(next(iter(scores_a.values())))
    nb = len(next(iter(scores_b.values())))
    if min(na, nb) < 4:
        raise ValueError("an audit needs at least 4 samples per world")
    pa, pb = rng.permutation(na), rng.permutation(nb)
    sel_a, ev_a = pa[: na // 2], pa[na // 2:]
    sel_b, ev_b = pb[: nb // 2], pb[nb // 2:]
    each = alpha / len(scores_a)
    best = Bound(0.0, None, -math.inf, 0, 0, len(ev_a), len(ev_b), each, delta)
    for name in scores_a:
        event, est = choose_event({name: scores_a[name][sel_a]}, {name: scores_b[name][sel_b]}, each, delta)
        if event is None:
            continue
        ha = int(np.count_nonzero(event.inside(scores_a[name][ev_a])))
        hb = int(np.count_nonzero(event.inside(scores_b[name][ev_b])))
        k1, n1, k2, n2 = (ha, len(ev_a), hb, len(ev_b)) if event.favours == "a" else (hb, len(ev_b), ha, len(ev_a))
        eps = max(0.0, float(eps_from_counts(np.asarray(k1), n1, np.asarray(k2), n2, each, delta)))
        if best.event is None or eps > best.epsilon_lower_bound:
            best = Bound(eps, event, est, ha, hb, len(ev_a), len(ev_b), each, delta)
    return best
