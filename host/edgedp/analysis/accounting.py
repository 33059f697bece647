"""What N answers cost: composition of per-query epsilon-DP Laplace answers, and budget planning.

Three bounds on the total privacy loss of N answers, each epsilon-DP (pure, delta = 0):

* basic composition: N * eps (exact for pure DP at delta = 0, and what the device charges);
* advanced composition (Dwork, Rothblum, Vadhan 2010): for any delta' > 0,
  eps * sqrt(2 N ln(1/delta')) + N * eps * (e^eps - 1), at delta = delta'.
  A published design note quotes only the first term; without the second the "bound" is not one;
* privacy loss distributions: the tight numerical (eps, delta) for N-fold composition of the
  device's own noise, the discrete Laplace on its lattice (``dp_accounting.pld``
  ``from_discrete_laplace_mechanism`` with parameter 1/t and the integer sensitivity
  S = Delta * 2^m + k lattice steps, so that S/t = eps).  A continuous-Laplace PLD is not an
  upper bound for the discrete one (off by up to 3e-5 relative at eps = 10), so it is not used.
  The PLD is pessimistic (an upper bound) at any discretisation interval; the interval is
  chosen from (eps, N) to keep time and memory bounded and is reported.  Its cost grows with N,
  so above ``PLD_MAX_QUERIES`` answers (and as a second bound below it) the optimal
  composition of N pure eps-DP mechanisms (Kairouz, Oh, Viswanath 2015) is used: N-fold
  randomised response, whose delta(eps_total) is a difference of two binomial CDFs, O(1) work
  for any N.  It holds for every eps-DP mechanism, the device's included, and is within 2-20%
  of the PLD (looser at larger eps).  ``pld`` returns the smaller of the bounds it computed.

The vector answer is modelled as one discrete Laplace coordinate shifted by the whole L1
sensitivity S (the worst split of S over coordinates; tests/analysis compare splits).

Every total is for the device's mechanism (``Mechanism``: k classes, sensitivity Delta, lattice
2^-m; ``edgedp account --from-device`` reads Delta and m from a target) and includes the
per-answer terms of docs/privacy.md: one answer is (eps + k*2^-36, k*2^-66)-DP (§2, the tables'
rounding and the tail cap), plus 2^-40 of delta per answer against an observer of its timing
(§6).  Basic, advanced and the optimal pure composition are evaluated at eps' = eps + k*2^-36
(theorems for any eps'-DP mechanism); the discrete Laplace PLD is the ideal lattice mechanism's,
to which the realised one's privacy loss adds at most k*2^-36 per answer pointwise, so N*k*2^-36
is added to its epsilon and it is evaluated at delta * e^(-N*k*2^-36) (the realised law is within
that factor of the ideal one).  The deltas add: the totals hold at delta + N*(k*2^-66 + 2^-40)
(``Composition.total_delta``).

Also here: what an (eps, delta) guarantee means as a hypothesis test (the largest true
positive rate any membership test can have at a given false positive rate, and the AUC bound).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dp_accounting.pld import privacy_loss_distribution
from scipy.stats import binom

from ..mech.lattice import DELTA_BITS, SLACK_BITS, auto_exponent, to_epsilon, to_micro

DEFAULT_DELTA = 1e-6
DEFAULT_CLASSES = 10        # the softmax / ensemble mechanisms of the analysis: k = 10, Delta = 2
DEFAULT_SENSITIVITY = 2.0
PLD_MAX_QUERIES = 100_000   # above: the O(1) optimal pure-DP composition bound only
METHODS = ("basic", "advanced", "pld")
TABLE_SLACK = 2.0 ** -SLACK_BITS  # epsilon per coordinate of one answer: the sampler's table rounding (privacy.md §2)
CAP_DELTA = 2.0 ** -DELTA_BITS  # delta per coordinate of one answer: the sampler's tail cap (privacy.md §2)
TIMING_DELTA = 2.0 ** -40   # delta per answer: a deadline overrun seen in the answer's timing (privacy.md §6)


@dataclass(frozen=True)
class Mechanism:
    """The device's configuration that the accounting depends on: k classes per answer, L1
    sensitivity Delta, lattice exponent m (step 2^-m; None: the device's automatic choice)."""

    classes: int = DEFAULT_CLASSES
    sensitivity: float = DEFAULT_SENSITIVITY
    exponent: int | None = None

    def __post_init__(self) -> None:
        if self.classes < 1:
            raise ValueError("classes (k) must be >= 1")
        if not (math.isfinite(self.sensitivity) and self.sensitivity > 0):
            raise ValueError("sensitivity must be finite and > 0")

    @property
    def m(self) -> int:
        return auto_exponent(self.classes, self.sensitivity) if self.exponent is None else self.exponent

    @property
    def lattice_steps(self) -> int:
        """S = Delta * 2^m + k: the L1 sensitivity in lattice steps, rounding slack included."""
        S = self.sensitivity * 2.0 ** self.m + self.classes
        if S != round(S):
            raise ValueError(f"sensitivity {self.sensitivity:g} is not a whole number of lattice steps 2^-{self.m}")
        return int(round(S))

    def answer_epsilon(self, epsilon: float) -> float:
        """What one answer at configured eps is: eps + k*2^-36."""
        return epsilon + self.classes * TABLE_SLACK

    def answer_delta(self) -> float:
        """delta of one answer: k*2^-66 (tail cap) + 2^-40 (timing)."""
        return self.classes * CAP_DELTA + TIMING_DELTA


DEVICE = Mechanism()


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


FIRST_TERM_NOTE = ("not a bound: ε·√(2N ln(1/δ)), advanced composition without its Nε(e^ε−1) term, "
                   "the formula the source documents publish; it understates the total")


def advanced_composition_first_term(epsilon: float, queries: int, delta: float = DEFAULT_DELTA) -> float:
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


def lattice_sensitivity(epsilon: float, classes: int = DEFAULT_CLASSES,
                        sensitivity: float = DEFAULT_SENSITIVITY, exponent: int | None = None) -> tuple[float, int]:
    """The device's discrete Laplace for one answer: (1/t, S) with S = Delta * 2^m + k lattice steps
    (m given, or ``edgedp.mech.lattice``'s automatic exponent) and 1/t = eps / S."""
    S = Mechanism(classes, sensitivity, exponent).lattice_steps
    return epsilon / S, S


def pld_discrete_laplace(epsilon: float, queries: int, delta: float = DEFAULT_DELTA,
                         interval: float | None = None, classes: int = DEFAULT_CLASSES,
                         sensitivity: float = DEFAULT_SENSITIVITY, exponent: int | None = None) -> float:
    """Total epsilon at ``delta`` of N answers by the PLD of the ideal discrete Laplace on the
    device's lattice (no per-answer terms: ``compose`` adds them)."""
    _check(epsilon, queries, delta)
    if queries == 0:
        return 0.0
    inv_t, S = lattice_sensitivity(epsilon, classes, sensitivity, exponent)
    dist = privacy_loss_distribution.from_discrete_laplace_mechanism(
        inv_t, sensitivity=S, value_discretization_interval=interval or pld_interval(epsilon, queries))
    return float(dist.self_compose(queries).get_epsilon_for_delta(delta))


def optimal_pure_composition(epsilon: float, queries: int, delta: float = DEFAULT_DELTA) -> float:
    """Smallest total epsilon at ``delta`` that holds for N eps-DP mechanisms (Kairouz et al. 2015):
    N-fold randomised response, privacy loss eps*(N - 2I) with I ~ Bin(N, 1-p), p = e^eps/(1+e^eps);
    delta(E) = P[I <= i*] - e^E * P'[I <= i*] with I ~ Bin(N, 1 - p) under P and Bin(N, p) under P'.
    Where the second term underflows it is dropped, which only overstates delta.  Bisection on E."""
    _check(epsilon, queries, delta)
    if queries == 0:
        return 0.0
    N = queries
    p = 1.0 / (1.0 + math.exp(-epsilon))

    def delta_at(E: float) -> float:
        i = math.ceil((N - E / epsilon) / 2.0) - 1   # largest i with eps*(N - 2i) > E
        if i < 0:
            return 0.0
        a = float(binom.cdf(i, N, 1.0 - p))
        lb = float(binom.logcdf(i, N, p)) + E
        return max(0.0, a - (math.exp(lb) if lb > -745.0 else 0.0))

    lo, hi = 0.0, N * epsilon
    for _ in range(200):
        if hi - lo <= 1e-9 * max(hi, 1.0):
            break
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if delta_at(mid) <= delta else (mid, hi)
    return hi


def pld(epsilon: float, queries: int, delta: float = DEFAULT_DELTA, interval: float | None = None,
        classes: int = DEFAULT_CLASSES, sensitivity: float = DEFAULT_SENSITIVITY) -> float:
    """Total epsilon at ``delta`` of N ideal answers: the smaller of the discrete Laplace PLD (N up
    to ``PLD_MAX_QUERIES``) and the optimal pure-DP composition bound (any N, O(1) work)."""
    _check(epsilon, queries, delta)
    if queries == 0:
        return 0.0
    best = optimal_pure_composition(epsilon, queries, delta)
    if queries <= PLD_MAX_QUERIES:
        best = min(best, pld_discrete_laplace(epsilon, queries, delta, interval, classes, sensitivity))
    return best


def device_pld(epsilon: float, queries: int, delta: float, mech: Mechanism = DEVICE,
               interval: float | None = None) -> float:
    """Total epsilon at ``delta`` (before the per-answer deltas) of N answers of the realised
    mechanism: the optimal composition at eps + k*2^-36, or the ideal discrete Laplace PLD at
    delta * e^(-slack) plus slack = N*k*2^-36, whichever is smaller."""
    _check(epsilon, queries, delta)
    if queries == 0:
        return 0.0
    best = optimal_pure_composition(mech.answer_epsilon(epsilon), queries, delta)
    if queries <= PLD_MAX_QUERIES:
        slack = queries * mech.classes * TABLE_SLACK
        best = min(best, slack + pld_discrete_laplace(epsilon, queries, delta * math.exp(-slack), interval,
                                                      mech.classes, mech.sensitivity, mech.exponent))
    return best


@dataclass(frozen=True)
class Composition:
    """The total epsilon of ``queries`` answers at configured per-query ``epsilon`` by each method,
    for the device's mechanism with every per-answer term: each total holds at ``total_delta``.

    ``slack_epsilon`` (N*k*2^-36, in every total), ``cap_delta`` (N*k*2^-66) and ``timing_delta``
    (N*2^-40) are the per-answer terms summed over the answers."""

    epsilon: float
    queries: int
    delta: float
    basic: float
    advanced: float
    pld: float
    advanced_composition_first_term: float
    pld_interval: float
    classes: int
    sensitivity: float
    exponent: int
    lattice_steps: int
    answer_epsilon: float
    slack_epsilon: float
    cap_delta: float
    timing_delta: float

    @property
    def total_delta(self) -> float:
        """The delta at which the totals hold: the composition's, the tail cap's and the timing's."""
        return self.delta + self.cap_delta + self.timing_delta

    @property
    def best(self) -> float:
        """The smallest valid bound (basic and PLD hold at any delta; advanced at ``delta``)."""
        return min(self.basic, self.advanced, self.pld)

    def as_dict(self) -> dict:
        return {**asdict(self), "best": self.best, "total_delta": self.total_delta,
                "advanced_composition_first_term_note": FIRST_TERM_NOTE}


def compose(epsilon: float, queries: int, delta: float = DEFAULT_DELTA, mech: Mechanism = DEVICE) -> Composition:
    """All three bounds (and the published formula) for N answers of the device's mechanism."""
    _check(epsilon, queries, delta)
    iv = pld_interval(epsilon, queries)
    e1 = mech.answer_epsilon(epsilon)
    return Composition(epsilon=epsilon, queries=queries, delta=delta,
                       basic=basic(e1, queries), advanced=advanced(e1, queries, delta),
                       pld=device_pld(epsilon, queries, delta, mech, iv),
                       advanced_composition_first_term=advanced_composition_first_term(epsilon, queries, delta), pld_interval=iv,
                       classes=mech.classes, sensitivity=mech.sensitivity, exponent=mech.m,
                       lattice_steps=mech.lattice_steps, answer_epsilon=e1,
                       slack_epsilon=queries * mech.classes * TABLE_SLACK,
                       cap_delta=queries * mech.classes * CAP_DELTA, timing_delta=queries * TIMING_DELTA)


def total(epsilon: float, queries: int, delta: float, method: str, mech: Mechanism = DEVICE) -> float:
    """The total epsilon by one method, per-answer terms included (at delta + N * the answer's
    delta); advanced and PLD are capped by basic (always valid)."""
    if method not in METHODS:
        raise ValueError(f"unknown accounting method {method!r}: use one of {', '.join(METHODS)}")
    e1 = mech.answer_epsilon(epsilon)
    b = basic(e1, queries)
    if method == "basic":
        return b
    if method == "advanced":
        return min(b, advanced(e1, queries, delta))
    return min(b, device_pld(epsilon, queries, delta, mech))


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
                       method: str = "pld", mech: Mechanism = DEVICE) -> Plan:
    """Largest q such that q answers a day for ``days`` days compose to at most ``target_epsilon``
    (per-answer terms included; the total holds at delta + N * the answer's delta).

    Bisection on q (the totals increase with N); q = 0 when even one answer a day is too much."""
    _check(epsilon, 0, delta)
    if days < 1:
        raise ValueError("days must be at least 1")
    if not target_epsilon > 0:
        raise ValueError("target epsilon must be > 0")

    def ok(q: int) -> bool:
        return total(epsilon, q * days, delta, method, mech) <= target_epsilon

    lo = int(target_epsilon / (mech.answer_epsilon(epsilon) * days))  # basic: always feasible
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
                achieved_epsilon=total(epsilon, q * days, delta, method, mech) if q else 0.0,
                daily_cap=to_epsilon(q * eps_micro), lifetime_cap=to_epsilon(q * days * eps_micro))


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
