"""Accounting: agrees with a direct dp_accounting computation and with the closed forms."""
from __future__ import annotations

import json
import math

import resource
import time

import dp_accounting
import numpy as np
import pytest
from click.testing import CliRunner
from dp_accounting.pld import PLDAccountant, privacy_loss_distribution
from scipy.special import comb

from edgedp.analysis import accounting as acc
from edgedp.cli import main


S_SOFTMAX = 2 * 2 ** 11 + 10   # Delta * 2^m + k lattice steps for k = 10, Delta = 2 (g = 2^-11)


def direct_pld(eps: float, n: int, delta: float) -> float:
    """dp_accounting's discrete Laplace PLD at the device's lattice scale, its default interval."""
    d = privacy_loss_distribution.from_discrete_laplace_mechanism(eps / S_SOFTMAX, sensitivity=S_SOFTMAX)
    return d.self_compose(n).get_epsilon_for_delta(delta)


def kov_delta(eps: float, k: int, eps_total: float) -> float:
    """Exact delta of the optimal k-fold composition of eps-DP mechanisms at eps_total
    (Kairouz, Oh, Viswanath 2015, Thm 3.3): an upper bound for any eps-DP mechanism."""
    e = math.exp(eps)
    total = 0.0
    for i in range(k + 1):
        # number of "bad" coordinates i: privacy loss eps*(k - 2i)
        term = math.exp(eps * (k - i)) - math.exp(eps_total + eps * i)
        if term > 0:
            total += comb(k, i, exact=True) * term
    return total / (1 + e) ** k


def kov_epsilon(eps: float, k: int, delta: float) -> float:
    lo, hi = 0.0, eps * k
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if kov_delta(eps, k, mid) <= delta else (mid, hi)
    return hi


@pytest.mark.parametrize("eps,n", [(0.1, 50), (0.5, 20), (1.0, 10), (2.0, 3)])
def test_pld_equals_direct_dp_accounting(eps: float, n: int) -> None:
    assert acc.lattice_sensitivity(eps) == (eps / S_SOFTMAX, S_SOFTMAX)
    assert acc.pld(eps, n, 1e-6) == pytest.approx(direct_pld(eps, n, 1e-6), rel=1e-9)


def test_continuous_laplace_pld_is_not_an_upper_bound_for_the_device() -> None:
    """Issue 9.8: at eps = 10 the discrete Laplace of the device has a larger delta(eps') than
    the continuous Laplace of the same eps at some eps' < eps, so accounting must use the former."""
    eps = 10.0
    disc = privacy_loss_distribution.from_discrete_laplace_mechanism(eps / S_SOFTMAX, sensitivity=S_SOFTMAX)
    cont = privacy_loss_distribution.from_laplace_mechanism(1.0 / eps)
    grid = np.linspace(0.5, 9.5, 19)
    dd = np.array(disc.get_delta_for_epsilon(grid))
    dc = np.array(cont.get_delta_for_epsilon(grid))
    assert np.any(dd > dc * (1 + 1e-6))


@pytest.mark.parametrize("split", [1, S_SOFTMAX // 3, S_SOFTMAX // 2])
def test_whole_sensitivity_on_one_coordinate_is_the_worst_split(split: int) -> None:
    """The vector answer is accounted as one coordinate shifted by all of S: two coordinates
    shifted by a and S - a (same noise) have a smaller delta at every eps'."""
    eps = 1.0
    inv_t = eps / S_SOFTMAX
    one = privacy_loss_distribution.from_discrete_laplace_mechanism(inv_t, sensitivity=S_SOFTMAX)
    a = privacy_loss_distribution.from_discrete_laplace_mechanism(inv_t, sensitivity=split)
    b = privacy_loss_distribution.from_discrete_laplace_mechanism(inv_t, sensitivity=S_SOFTMAX - split)
    two = a.compose(b)
    grid = np.linspace(0.05, 0.95, 10)
    assert np.all(np.array(two.get_delta_for_epsilon(grid)) <= np.array(one.get_delta_for_epsilon(grid)) + 1e-9)


@pytest.mark.parametrize("eps,n", [(0.5, 10), (1.0, 8), (0.1, 60), (0.3, 25)])
def test_optimal_pure_composition_matches_the_exact_sum(eps: float, n: int) -> None:
    """The O(1) binomial-CDF form equals the explicit Kairouz-Oh-Viswanath sum."""
    assert acc.optimal_pure_composition(eps, n, 1e-6) == pytest.approx(kov_epsilon(eps, n, 1e-6), rel=1e-6)


def test_account_1e8_is_fast_and_small() -> None:
    """`account -n 1e8` (issue 12): the work does not grow with N above PLD_MAX_QUERIES.  Generous
    limits (a benchmark-style check, not a timing test): 20 s and 300 MB more peak memory."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.process_time()
    r = CliRunner().invoke(main, ["account", "-e", "0.1", "-n", "1e8", "--json"])
    used = time.process_time() - t
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["queries"] == 10 ** 8
    # N eps^2 / 2 is the mean privacy loss: the total must exceed it and be far below basic
    assert 0.5 * 1e8 * 0.01 < d["pld"] < 0.1 * d["basic"]
    assert used < 20 and grown_mb < 300


def test_closed_forms() -> None:
    for eps, n, d in [(0.1, 1000, 1e-5), (1.0, 10, 1e-6), (0.01, 12345, 1e-9)]:
        c = acc.compose(eps, n, d)
        assert c.basic == pytest.approx(n * eps)
        first = eps * math.sqrt(2 * n * math.log(1 / d))
        assert c.advanced_composition_first_term == pytest.approx(first)
        assert c.advanced == pytest.approx(first + n * eps * (math.exp(eps) - 1))
        assert c.advanced - c.advanced_composition_first_term == pytest.approx(n * eps * math.expm1(eps))


@pytest.mark.parametrize("eps,n", [(0.5, 10), (1.0, 8), (0.1, 60)])
def test_pld_below_optimal_composition_of_any_eps_dp_mechanism(eps: float, n: int) -> None:
    """Laplace is one eps-DP mechanism, so its tight PLD total cannot exceed the optimal
    composition bound for all eps-DP mechanisms, which itself beats advanced composition."""
    d = 1e-6
    kov = kov_epsilon(eps, n, d)
    p = acc.pld(eps, n, d)
    assert p <= kov + 1e-3
    assert kov <= min(acc.basic(eps, n), acc.advanced(eps, n, d)) + 1e-9


def test_single_answer_costs_epsilon() -> None:
    for eps in (0.1, 1.0, 3.0):
        assert acc.pld(eps, 1, 1e-6) == pytest.approx(eps, abs=1e-3)


def test_seed_claim_is_not_a_bound() -> None:
    """Seed 000: 1000 answers at eps 0.1 'cost about 4.5'. Every valid accounting says far more."""
    c = acc.compose(0.1, 1000, 1e-5)
    assert c.pld > 3 * 4.5
    assert c.advanced_composition_first_term < c.advanced
    assert c.pld < c.advanced < c.basic


def test_long_composition_interval_is_bounded_and_close() -> None:
    eps, n, d = 1.0, 5000, 1e-6
    coarse = acc.pld(eps, n, d)
    fine = acc.pld(eps, n, d, interval=acc.pld_interval(eps, n) / 4)
    assert coarse >= fine - 1e-9  # pessimistic: a coarser grid never reports less
    assert coarse == pytest.approx(fine, rel=0.01)


def test_plan_is_largest_feasible() -> None:
    plans = {}
    for method in acc.METHODS:
        p = acc.plan_daily_queries(0.2, 8.0, 10, 1e-6, method)
        assert p.daily_queries > 0
        assert acc.total(0.2, p.daily_queries * 10, 1e-6, method) <= 8.0
        assert acc.total(0.2, (p.daily_queries + 1) * 10, 1e-6, method) > 8.0
        assert p.daily_cap == pytest.approx(p.daily_queries * 0.2)
        assert p.lifetime_cap == pytest.approx(p.daily_queries * 10 * 0.2)
        plans[method] = p.daily_queries
    assert plans["pld"] > plans["basic"]


def test_plan_zero_when_impossible() -> None:
    assert acc.plan_daily_queries(1.0, 0.5, 10).daily_queries == 0


def test_hypothesis_testing_bounds() -> None:
    assert acc.auc_bound(1e-9) == pytest.approx(0.5, abs=1e-6)
    grid = np.linspace(0, 1, 200001)
    for eps in (0.1, 1.0, 3.0):
        curve = np.array([acc.tpr_bound(eps, a) for a in grid])
        assert acc.auc_bound(eps) == pytest.approx(np.trapezoid(curve, grid), abs=1e-6)
        assert acc.tpr_bound(eps, 0.01) == pytest.approx(min(1.0, math.exp(eps) * 0.01))
    assert acc.auc_bound(0.5) < acc.auc_bound(1.0) < acc.auc_bound(2.0) < 1


def test_cli_account_json_matches_library() -> None:
    r = CliRunner().invoke(main, ["account", "--epsilon", "0.2", "--queries", "100", "--delta", "1e-5", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    slack = 100 * 10 * 2.0 ** -36
    assert d["basic"] == 100 * (0.2 + 10 * 2.0 ** -36) and d["slack_epsilon"] == slack
    assert d["advanced"] == pytest.approx(acc.advanced(0.2 + 10 * 2.0 ** -36, 100, 1e-5), rel=1e-12)
    assert d["pld"] == pytest.approx(direct_pld(0.2, 100, 1e-5 * math.exp(-slack)) + slack, rel=1e-12)
    assert d["pld"] > direct_pld(0.2, 100, 1e-5)
    assert d["total_delta"] == pytest.approx(1e-5 + 100 * (10 * 2.0 ** -66 + 2.0 ** -40), rel=1e-12)
    # the published formula is no bound: the JSON says so, as the text output does
    assert d["advanced_composition_first_term"] < d["advanced"]
    assert d["advanced_composition_first_term_note"].startswith("not a bound")


def test_cli_account_inverse_gives_admin_config() -> None:
    r = CliRunner().invoke(main, ["account", "-e", "0.1", "--target-epsilon", "10", "--days", "30", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    q = d["daily_queries"]
    assert acc.total(0.1, q * 30, d["delta"], "pld") <= 10 < acc.total(0.1, (q + 1) * 30, d["delta"], "pld")
    assert d["total_delta"] == pytest.approx(d["delta"] + q * 30 * (10 * 2.0 ** -66 + 2.0 ** -40))
    assert d["admin_config"]["daily_cap"] == pytest.approx(q * 0.1)
    assert d["command"].startswith("edgedp admin config --epsilon 0.1 --daily-cap")


def test_cli_account_error_is_one_json_line() -> None:
    r = CliRunner().invoke(main, ["account", "-e", "0.1", "--json"])
    assert r.exit_code != 0
    d = json.loads(r.stdout)
    assert set(d) == {"error", "message", "exit_code"} and d["exit_code"] == r.exit_code == 2


def test_account_takes_the_device_configuration_and_every_per_answer_term() -> None:
    """Issue 18.4: k, Δ and the lattice change the PLD total; the slack and timing terms are rows."""
    def run(*extra: str) -> dict:
        r = CliRunner().invoke(main, ["account", "-e", "4", "-n", "100", "--json", *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)
    k1, k10 = run("-k", "1"), run()
    assert k1["pld"] == pytest.approx(364.7754, abs=1e-3) and k10["pld"] == pytest.approx(364.7713, abs=1e-3)
    assert (k1["classes"], k1["exponent"], k1["lattice_steps"]) == (1, 7, 257)
    coarse = run("-k", "1", "--lattice-exponent", "4")          # S = 2*16 + 1 = 33 steps: a coarser lattice
    assert coarse["lattice_steps"] == 33 and coarse["pld"] > k1["pld"]
    assert coarse["pld"] == pytest.approx(acc.compose(4, 100, 1e-6, acc.Mechanism(1, 2.0, 4)).pld)
    r = CliRunner().invoke(main, ["account", "-e", "1", "-n", "1e8"])
    assert r.exit_code == 0, r.output
    rows = {line.split("  ")[1].strip(): line for line in r.output.splitlines()[1:] if line.startswith("  ")}
    assert {"table slack", "+ tail cap", "+ timing", "= total δ"} <= set(rows)
    assert "9.09e-05" in rows["+ timing"] and "§6" in rows["+ timing"]           # 91× the requested δ
    c = acc.compose(1.0, 10 ** 8, 1e-6)
    assert c.timing_delta == pytest.approx(10 ** 8 * 2.0 ** -40) and c.timing_delta > 90 * 1e-6
    assert c.slack_epsilon == pytest.approx(10 ** 8 * 10 * 2.0 ** -36)
    assert c.pld == acc.optimal_pure_composition(1.0 + 10 * 2.0 ** -36, 10 ** 8, 1e-6)

