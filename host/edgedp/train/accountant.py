"""Privacy accounting of DP-SGD with ``dp_accounting``: ``steps`` compositions of the Poisson
subsampled Gaussian mechanism (sampling rate q, noise multiplier sigma/C), for either
neighbouring relation: ``add_remove`` (add or remove one record, the denominator n*q public) or
``replace_one`` (replace one record by another: the clipped sum moves by up to 2C).  Two
accountants:

* ``rdp``: Rényi DP (Mironov 2017; Mironov, Talwar, Zhang 2019) over a grid of orders, converted
  to (eps, delta) with the optimal order;
* ``pld``: privacy loss distributions (Koskela et al.; Doroshenko et al. 2022), numerically
  tight, pessimistic at the discretisation interval.

Both are upper bounds; PLD is the tighter and is the default.  ``calibrate`` finds the smallest
noise multiplier whose epsilon is at most a target (dp_accounting's bisection); ``max_steps``
the most steps whose epsilon stays within a cap (``train --max-epsilon``), ``epsilon_curve``
epsilon at the end of every epoch (the manifest's ``epsilon_per_epoch``).

Other samplings (``audit-config``): fixed-size batches drawn without replacement (RDP,
replace-one, Wang, Balle, Kasiviswanathan 2019), shuffled batches without amplification
(replace-one: each epoch is one Gaussian mechanism of sensitivity 2C on the record's batch),
Laplace noise (PLD of the Poisson-subsampled Laplace), and RDP at a given grid of orders.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
from dp_accounting import pld, rdp

ACCOUNTANTS = ("pld", "rdp")
RELATIONS = {"add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
             "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE}
PLD_INTERVAL = 1e-3
# Integer orders: their RDP is computed exactly and fast (fractional orders need a slowly converging series).
RDP_ORDERS = tuple(list(range(2, 64)) + [80, 96, 128, 192, 256, 512, 1024])


def event(noise_multiplier: float, sampling_rate: float, steps: int) -> dp_accounting.DpEvent:
    """The DP event of DP-SGD: ``steps`` Poisson-subsampled Gaussian steps."""
    if not noise_multiplier > 0:
        raise ValueError("noise multiplier must be > 0")
    if not 0 < sampling_rate <= 1:
        raise ValueError("sampling rate must be in (0, 1]")
    if steps < 1:
        raise ValueError("steps must be >= 1")
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)


def make_accountant(name: str, relation: str = "add_remove") -> dp_accounting.PrivacyAccountant:
    if relation not in RELATIONS:
        raise ValueError(f"unknown neighbouring relation {relation!r}: use one of {', '.join(RELATIONS)}")
    if name == "pld":
        return pld.PLDAccountant(RELATIONS[relation], value_discretization_interval=PLD_INTERVAL)
    if name == "rdp":
        return rdp.RdpAccountant(list(RDP_ORDERS), RELATIONS[relation])
    raise ValueError(f"unknown accountant {name!r}: use one of {', '.join(ACCOUNTANTS)}")


def epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, accountant: str = "pld",
            relation: str = "add_remove") -> float:
    """Epsilon at ``delta`` of DP-SGD by one accountant, for one neighbouring relation."""
    acc = make_accountant(accountant, relation)
    acc.compose(event(noise_multiplier, sampling_rate, steps))
    return float(acc.get_epsilon(delta))


def rdp_epsilon_at_orders(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                          orders: tuple[float, ...]) -> float:
    """(eps, delta) of Poisson DP-SGD by RDP optimised only over the given orders."""
    acc = rdp.RdpAccountant([float(a) for a in orders])
    acc.compose(event(noise_multiplier, sampling_rate, steps))
    return float(acc.get_epsilon(delta))


def without_replacement_epsilon(noise_multiplier: float, n: int, batch: int, steps: int, delta: float,
                                orders: tuple[float, ...] = RDP_ORDERS) -> float:
    """Fixed-size batches of ``batch`` of ``n`` records drawn without replacement each step: RDP
    under replace-one (dp_accounting has no add/remove analysis of this sampler)."""
    acc = rdp.RdpAccountant([float(a) for a in orders], RELATIONS["replace_one"])
    acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(
        n, batch, dp_accounting.GaussianDpEvent(noise_multiplier)), steps))
    return float(acc.get_epsilon(delta))


def shuffle_epsilon(noise_multiplier: float, epochs: int, delta: float) -> float:
    """Shuffled fixed-size batches, no amplification, replace-one: each record is in one batch per
    epoch, whose clipped sum a replacement moves by up to 2C; so each epoch is one Gaussian
    mechanism at multiplier sigma/(2C), composed over the epochs (PLD)."""
    return gaussian_epsilon(noise_multiplier / 2.0, epochs, delta)


def laplace_epsilon(scale_over_sensitivity: float, sampling_rate: float, steps: int, delta: float) -> float:
    """Poisson-subsampled Laplace noise of scale b per coordinate, ``scale_over_sensitivity`` =
    b / (L1 sensitivity), composed over the steps (PLD, add/remove)."""
    acc = make_accountant("pld")
    acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
        sampling_rate, dp_accounting.LaplaceDpEvent(scale_over_sensitivity)), steps))
    return float(acc.get_epsilon(delta))


def gaussian_rdp_epsilon(noise_multiplier: float, compositions: int, delta: float,
                         orders: tuple[float, ...] = RDP_ORDERS) -> float:
    """Epsilon of ``compositions`` Gaussian mechanisms without subsampling by RDP at ``orders``."""
    acc = rdp.RdpAccountant([float(a) for a in orders])
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier), compositions)
    return float(acc.get_epsilon(delta))


def gaussian_epsilon(noise_multiplier: float, compositions: int, delta: float) -> float:
    """Epsilon of ``compositions`` Gaussian mechanisms without subsampling (PLD)."""
    acc = make_accountant("pld")
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier), compositions)
    return float(acc.get_epsilon(delta))


def calibrate(target_epsilon: float, sampling_rate: float, steps: int, delta: float,
              accountant: str = "pld") -> float:
    """Smallest noise multiplier (to 0.1%) with epsilon <= target_epsilon at ``delta``.

    The bracket is found by doubling from 1 (never evaluating tiny multipliers, whose PLD is
    slow), then dp_accounting bisects inside it."""
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError("target epsilon must be finite and > 0")
    hi = 1.0
    while epsilon(hi, sampling_rate, steps, delta, accountant) > target_epsilon:
        hi *= 2.0
        if hi > 1e6:
            raise ValueError(f"no noise multiplier reaches ε = {target_epsilon:g} at δ = {delta:g}")
    lo = hi / 2.0
    if hi == 1.0:
        while lo > 1e-2 and epsilon(lo, sampling_rate, steps, delta, accountant) <= target_epsilon:
            hi, lo = lo, lo / 2.0
    nm = dp_accounting.calibrate_dp_mechanism(
        lambda: make_accountant(accountant), lambda s: event(s, sampling_rate, steps), target_epsilon, delta,
        bracket_interval=dp_accounting.ExplicitBracketInterval(lo, hi), tol=1e-3 * hi)
    return float(nm)


def epsilon_curve(noise_multiplier: float, sampling_rate: float, steps: list[int], delta: float,
                  accountant: str = "pld") -> list[float]:
    """Epsilon after each step count of ``steps`` (the end of every epoch): one accountant run per
    entry, each the same computation as ``epsilon``, so the last entry of a run's curve is its ε."""
    return [epsilon(noise_multiplier, sampling_rate, s, delta, accountant) for s in steps]


@dataclass(frozen=True)
class StepCap:
    """The most steps of DP-SGD whose epsilon stays within a cap."""

    steps: int                   # 0 when a single step already exceeds the cap
    epsilon: float               # epsilon after ``steps`` (0 for none)
    epsilon_next: float | None   # epsilon after one more step (> the cap); None when every step asked for fits


def max_steps(noise_multiplier: float, sampling_rate: float, delta: float, max_epsilon: float, upper: int,
              accountant: str = "pld") -> StepCap:
    """The largest step count T <= ``upper`` with epsilon(T) <= ``max_epsilon``, found before
    training by bisection over T (epsilon grows with the steps): about log2(upper) accountant
    runs, never one per step."""
    if not (math.isfinite(max_epsilon) and max_epsilon > 0):
        raise ValueError("the maximum epsilon must be finite and > 0")
    if upper < 1:
        raise ValueError("steps must be >= 1")
    eps_upper = epsilon(noise_multiplier, sampling_rate, upper, delta, accountant)
    if eps_upper <= max_epsilon:
        return StepCap(upper, eps_upper, None)
    lo, eps_lo, hi, eps_hi = 0, 0.0, upper, eps_upper   # epsilon(lo) <= cap < epsilon(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        e = epsilon(noise_multiplier, sampling_rate, mid, delta, accountant)
        if e <= max_epsilon:
            lo, eps_lo = mid, e
        else:
            hi, eps_hi = mid, e
    return StepCap(lo, eps_lo, eps_hi)


@dataclass(frozen=True)
class Guarantee:
    """What a DP-SGD run satisfies, by both accountants (add/remove) and under replace-one (PLD)."""

    noise_multiplier: float
    sampling_rate: float
    steps: int
    delta: float
    epsilon_pld: float
    epsilon_rdp: float
    epsilon_replace_one: float

    def epsilon(self, accountant: str) -> float:
        return self.epsilon_pld if accountant == "pld" else self.epsilon_rdp


def guarantee(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> Guarantee:
    return Guarantee(noise_multiplier, sampling_rate, steps, delta,
                     epsilon(noise_multiplier, sampling_rate, steps, delta, "pld"),
                     epsilon(noise_multiplier, sampling_rate, steps, delta, "rdp"),
                     epsilon(noise_multiplier, sampling_rate, steps, delta, "pld", "replace_one"))
