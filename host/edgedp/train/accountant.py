"""Privacy accounting of DP-SGD with ``dp_accounting``: ``steps`` compositions of the Poisson
subsampled Gaussian mechanism (sampling rate q, noise multiplier sigma/C), add/remove-one
neighbouring relation.  Two accountants:

* ``rdp``: Rényi DP (Mironov 2017; Mironov, Talwar, Zhang 2019) over a grid of orders, converted
  to (eps, delta) with the optimal order;
* ``pld``: privacy loss distributions (Koskela et al.; Doroshenko et al. 2022), numerically
  tight, pessimistic at the discretisation interval.

Both are upper bounds; PLD is the tighter and is the default.  ``calibrate`` finds the smallest
noise multiplier whose epsilon is at most a target (dp_accounting's bisection).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
from dp_accounting import pld, rdp

ACCOUNTANTS = ("pld", "rdp")
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


def make_accountant(name: str) -> dp_accounting.PrivacyAccountant:
    if name == "pld":
        return pld.PLDAccountant(value_discretization_interval=PLD_INTERVAL)
    if name == "rdp":
        return rdp.RdpAccountant(list(RDP_ORDERS))
    raise ValueError(f"unknown accountant {name!r}: use one of {', '.join(ACCOUNTANTS)}")


def epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, accountant: str = "pld") -> float:
    """Epsilon at ``delta`` of DP-SGD by one accountant."""
    acc = make_accountant(accountant)
    acc.compose(event(noise_multiplier, sampling_rate, steps))
    return float(acc.get_epsilon(delta))


def rdp_epsilon_at_order(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                         order: float) -> float:
    """(eps, delta) from the RDP curve at one fixed order alpha (eps_RDP(alpha) + log(1/delta)/(alpha-1)),
    the conversion that skips the optimisation over alpha."""
    acc = rdp.RdpAccountant([float(order)])
    acc.compose(event(noise_multiplier, sampling_rate, steps))
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


@dataclass(frozen=True)
class Guarantee:
    """What a DP-SGD run satisfies, by both accountants."""

    noise_multiplier: float
    sampling_rate: float
    steps: int
    delta: float
    epsilon_pld: float
    epsilon_rdp: float

    def epsilon(self, accountant: str) -> float:
        return self.epsilon_pld if accountant == "pld" else self.epsilon_rdp


def guarantee(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> Guarantee:
    return Guarantee(noise_multiplier, sampling_rate, steps, delta,
                     epsilon(noise_multiplier, sampling_rate, steps, delta, "pld"),
                     epsilon(noise_multiplier, sampling_rate, steps, delta, "rdp"))
