"""What N answers cost: composition of per-query epsilon-DP Laplace answers, and budget planning.

Three bounds on the total privacy loss of N answers, each epsilon-DP (pure, delta = 0):

* basic composition: N * eps (exact for pure DP at delta = 0, and what the device charges);
* advanced composition (Dwork, Rothblum, Vadhan 2010): for any delta' > 0,
  eps * sqrt(2 N ln(1/delta')) + N * eps * (e^eps - 1), at delta = delta'.
  A published design note quotes only the first term; without the second the "bound" is not one;
* privacy loss distributions (``dp_accounting.pld``): the tight numerical (eps, delta)
  for N-fold composition of the Laplace mechanism at noise multiplier 1/eps.

The PLD models each answer as the continuous Laplace mechanism with the same epsilon (the
device's vector answer has L1 sensitivity Delta' and per-coordinate discrete Laplace noise of
scale Delta'/eps, which is eps-DP; see docs/evaluation.md for the modelling note).  The PLD
computation is pessimistic (an upper bound) at any discretisation interval; the interval is
chosen from (eps, N) to keep time and memory bounded and is reported.

Also here: what an (eps, delta) guarantee means as a hypothesis test (the largest true
positive rate any membership test can have at a given false positive rate, and the AUC bound).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import dp_accounting
from dp_accounting.pld import PLDAccountant

from ..mech.lattice import MICRO, to_micro

DEFAULT_DELTA = 1e-6
METHODS = ("basic", "advanced", "pld")


def basic(epsilon: float, queries: int) -> float:
    """Basic composition: N * eps."""
    _check(epsilon, queries)
    return queries * epsilon


def advanced(epsilon: float, queries: int, delta: float = DEFAULT_DELTA) -> float:
    """Advanced composition (DRV 2010) for N eps-DP answers at total delta = ``delta``."""
    _check(epsilon, queries, delta)
    if queries == 0:
        return 0.0
    return (epsilon * math.sqrt(2.0 * queries * math.log(1.0 / delta))
            + queries * epsilon * math.expm1(epsilon))


def seed_formula(epsilon: float, queries: int, delta: float = DEFAULT_DELTA) -> float:
    """The published eps * sqrt(2 N ln(1/delta)): the advanced bound without its N eps (e^eps - 1) term.

    Not a valid bound; computed only to show what it leaves out."""
    _check(epsilon, queries, delta)
    return epsilon * math.sqrt(2.0 * queries * math.log(1.0 / delta))


def pld_interval(epsilon: float, queries: int) -> float:
    """Discretisation of the privacy loss used for PLD accounting.

    dp_accounting's default 1e-4, coarsened for long compositions (2e-7 of N*eps: the error
    stays far below 1% of the result while the FFT stays below ~10^7 points) and never coarser
    than eps/4 (a single answer's loss spans [-eps, eps])."""
    return min(epsilon / 4.0, max(1e-4, 2e-7 * queries * epsilon))


def pld(epsilon: float, queries: int, delta: float = DEFAULT_DELTA, interval: float | None = None) -> float:
    """Total epsilon at ``delta`` of N eps-Laplace answers by PLD accounting (dp_accounting)."""
    _check(epsilon, queries, delta)
    if queries == 0:
        return 0.0
    acc = PLDAccountant(value_discretization_interval=interval or pld_interval(epsilon, queries))
    acc.compose(dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / epsilon), queries)
    return float(acc.get_epsilon(delta))


@dataclass(frozen=True)
class Composition:
    """The total epsilon of ``queries`` answers at per-query ``epsilon`` by each method."""

    epsilon: float
    queries: int
    delta: float
    basic: float
    advanced: float
    pld: float
    seed_formula: float
    pld_interval: float

    @property
    def best(self) -> float:
        """The smallest valid bound (basic and PLD hold at any delta; advanced at ``delta``)."""
        return min(self.basic, self.advanced, self.pld)

    def as_dict(self) -> dict:
        return {**asdict(self), "best": self.best}


def compose(epsilon: float, queries: int, delta: float = DEFAULT_DELTA) -> Composition:
    """All three bounds (and the published formula) for N answers."""
    iv = pld_interval(epsilon, queries)
    return Composition(epsilon=epsilon, queries=queries, delta=delta,
                       basic=basic(epsilon, queries), advanced=advanced(epsilon, queries, delta),
                       pld=pld(epsilon, queries, delta, iv), seed_formula=seed_formula(epsilon, queries, delta),
                       pld_interval=iv)


def total(epsilon: float, queries: int, delta: float, method: str) -> float:
    """The total epsilon by one method; advanced and PLD are capped by basic (always valid)."""
    if method not in METHODS:
        raise ValueError(f"unknown accounting method {method!r}: use one of {', '.join(METHODS)}")
    b = basic(epsilon, queries)
    if method == "basic":
        return b
    if method == "advanced":
        return min(b, advanced(epsilon, queries, delta))
    return min(b, pld(epsilon, queries, delta))


@dataclass(frozen=True)
class Plan:
    """The largest daily query count whose lifetime total stays within a target epsilon.

    ``daily_cap`` and ``lifetime_cap`` are what ``edgedp admin config`` takes (epsilon units,
    exact multiples of the device's micro-epsilon per-query charge)."""

    epsilon: float
    target_epsilon: float
    days: int
    delta: float
    method: str
    daily_queries: int
    total_queries: int
    achieved_epsilon: float
    daily_cap: float
    lifetime_cap: float

    def admin_command(self) -> str:
        return (f"edgedp admin config --epsilon {self.epsilon:g} --daily-cap {self.daily_cap:.6f} "
                f"--lifetime-cap {self.lifetime_cap:.6f}")

    def as_dict(self) -> dict:
        return {**asdict(self), "admin_config": {"epsilon": self.epsilon, "daily_cap": self.daily_cap,
                                                 "lifetime_cap": self.lifetime_cap},
                "command": self.admin_command() if self.daily_queries else None}


def plan_daily_queries(epsilon: float, target_epsilon: float, days: int, delta: float = DEFAULT_DELTA,
                       method: str = "pld") -> Plan:
    """Largest q such that q answers a day for ``days`` days compose to at most ``target_epsilon``.

    Bisection on q (the totals increase with N); q = 0 when even one answer a day is too much."""
    _check(epsilon, 0, delta)
    if days < 1:
        raise ValueError("days must be at least 1")
    if not target_epsilon > 0:
        raise ValueError("target epsilon must be > 0")

    def ok(q: int) -> bool:
        return total(epsilon, q * days, delta, method) <= target_epsilon

    lo = int(target_epsilon / (epsilon * days) * (1 + 1e-12))  # basic: always feasible
    while lo > 0 and not ok(lo):  # guard against float rounding at the boundary
        lo -= 1
    hi = max(lo, 1)
    while ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    q = lo
    eps_micro = to_micro(epsilon)
    return Plan(epsilon=epsilon, target_epsilon=target_epsilon, days=days, delta=delta, method=method,
                daily_queries=q, total_queries=q * days,
                achieved_epsilon=total(epsilon, q * days, delta, method) if q else 0.0,
                daily_cap=q * eps_micro / MICRO, lifetime_cap=q * days * eps_micro / MICRO)


def tpr_bound(epsilon: float, fpr: float, delta: float = 0.0) -> float:
    """Largest true positive rate of any membership test at false positive rate ``fpr``
    against an (eps, delta)-DP release (Kairouz et al. 2015)."""
    if math.isinf(epsilon):
        return 1.0
    e = math.exp(epsilon)
    return max(0.0, min(1.0, e * fpr + delta, 1.0 - (1.0 - delta - fpr) / e))


def auc_bound(epsilon: float) -> float:
    """Largest ROC AUC of any membership test against an eps-DP release (delta = 0)."""
    if math.isinf(epsilon):
        return 1.0
    e = math.exp(epsilon)
    a = 1.0 / (1.0 + e)  # where the two branches of the trade-off curve meet
    return e * a * a / 2.0 + (1.0 - a) - (1.0 - a) ** 2 / (2.0 * e)


def _check(epsilon: float, queries: int, delta: float | None = None) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError("per-query epsilon must be finite and > 0")
    if queries < 0:
        raise ValueError("number of queries must be >= 0")
    if delta is not None and not 0 < delta < 1:
        raise ValueError("delta must be in (0, 1)")
