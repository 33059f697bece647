"""Membership inference: clearly above 0.5 on the unprotected model, toward 0.5 as eps falls,
never above what eps-DP allows; the attack machinery on synthetic data; averaging."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from edgedp.analysis import accounting, mia
from edgedp.analysis.protected_api import SOFTMAX, ensemble, parse_modes

EPS = [0.1, 1.0, 10.0, math.inf]


def auc_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Hanley & McNeil (1982) standard error of an AUC estimate."""
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    return math.sqrt((auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc))
                     / (n_pos * n_neg))


@pytest.fixture(scope="module")
def result(world) -> mia.MiaResult:
    return mia.run(world.pop, world.split.y_pool, parse_modes(["full", "label"]), EPS, 0, jobs=2, progress=False)


def pick(rows, mech, attack, mode, eps):
    (r,) = [r for r in rows if (r["mechanism"], r["attack"], r["mode"], r["epsilon"]) == (mech, attack, mode, eps)]
    return r


def test_rows_carry_the_fields(result) -> None:
    for r in result.rows:
        assert {"attack", "mode", "epsilon", "auc", "tpr_at_1pct_fpr", "tpr_at_0_1pct_fpr"} <= set(r)
    assert {r["attack"] for r in result.rows} == set(mia.ATTACKS)
    assert {r["mechanism"] for r in result.rows} == {"softmax", "ensemble"}


@pytest.mark.slow
def test_unprotected_model_leaks_membership(result) -> None:
    r = max((pick(result.rows, "softmax", a, "full", math.inf) for a in ("lira_online", "lira_offline")),
            key=lambda r: r["auc"])
    se = auc_se(0.5, r["members"], r["nonmembers"])
    assert r["auc"] > 0.5 + 5 * se
    assert r["tpr_at_1pct_fpr"] > 0.01  # better than guessing at the low-FPR end


@pytest.mark.slow
def test_auc_falls_toward_half_as_epsilon_falls(result) -> None:
    for attack in ("lira_online", "lira_offline"):
        top = pick(result.rows, "softmax", attack, "full", math.inf)
        low = pick(result.rows, "softmax", attack, "full", 0.1)
        se = auc_se(0.5, low["members"], low["nonmembers"])
        assert low["auc"] < top["auc"]
        assert abs(low["auc"] - 0.5) < 4 * se


@pytest.mark.slow
def test_never_above_the_dp_bound(result) -> None:
    for r in result.rows:
        if math.isfinite(r["epsilon"]):
            se = auc_se(min(r["auc"], 0.99), r["members"], r["nonmembers"])
            assert r["auc"] <= accounting.auc_bound(r["epsilon"]) + 4 * se


def test_lira_recovers_a_known_gaussian_separation() -> None:
    """Synthetic: 'in' scores ~ N(mu_j + d, 1), 'out' ~ N(mu_j, 1) with per-example mu_j.
    The optimal test is the per-example LR; its AUC is Phi(d / sqrt 2)."""
    rng = np.random.default_rng(1)
    n, N, d = 4000, 64, 1.0
    mu = rng.normal(0, 3, n)
    inside = rng.random((N + 1, n)) < 0.5
    s = mu + d * inside + rng.normal(0, 1, (N + 1, n))
    pooled = mia.attack_scores(s, inside, discrete=False, targets=[0, 1, 2])
    expected = norm.cdf(d / math.sqrt(2))
    for a in ("lira_online", "lira_offline"):
        sc, mem = pooled[a]
        assert roc_auc_score(mem, sc) == pytest.approx(expected, abs=0.03)
    sc, mem = pooled["threshold"]  # per-example offsets hide the signal from a global threshold
    assert roc_auc_score(mem, sc) < expected - 0.1


def test_discrete_lira_on_known_rates() -> None:
    rng = np.random.default_rng(2)
    n, N = 4000, 32
    p_out = rng.uniform(0.2, 0.8, n)
    p_in = np.clip(p_out + 0.2, 0, 1)
    inside = rng.random((N + 1, n)) < 0.5
    s = (rng.random((N + 1, n)) < np.where(inside, p_in, p_out)).astype(float)
    pooled = mia.attack_scores(s, inside, discrete=True, targets=[0, 1])
    sc, mem = pooled["lira_online"]
    # optimal AUC for a binary observation: 0.5 + (p_in - p_out) / 2 on average
    assert roc_auc_score(mem, sc) == pytest.approx(0.5 + 0.1, abs=0.03)


def test_clamped_mean_matches_the_device_mechanism() -> None:
    """The attacker's debiasing model E[clamp(x + Z)] against the mechanism's own answers."""
    from edgedp.mech.lattice import make_lattice
    from edgedp.mech.modes import Mode
    rng = np.random.default_rng(3)
    x = np.array([[0.05, 0.9, 0.3, 0.5, 0.0, 0.0, 0.1, 0.7, 1.0, 0.2]])
    eps = 1.0
    lat = make_lattice(10, 1_000_000, 2.0, 0.0, 1.0)
    b = lat.t * lat.granularity
    draws = SOFTMAX.release(np.repeat(x, 200_000, axis=0), eps, Mode.parse("full"), rng)["values"]
    assert draws.mean(axis=0) == pytest.approx(mia.clamped_mean(x[0], b, 0.0, 1.0), abs=0.004)
    assert mia.debias(mia.clamped_mean(x[0], b, 0.0, 1.0), b, 0.0, 1.0) == pytest.approx(x[0], abs=1e-6)


def test_averaging_gets_closer_with_more_answers(world) -> None:
    x = world.pop.test_probs[0][:100]
    small = mia.averaging(x, SOFTMAX, [1.0], daily_cap=2.0, seed=0)[0]
    large = mia.averaging(x, SOFTMAX, [1.0], daily_cap=200.0, seed=0)[0]
    assert (small["queries"], large["queries"]) == (2, 200)
    assert large["mae_debiased"] < small["mae_debiased"]
    assert large["agreement_debiased"] > small["agreement_debiased"]
    assert large["epsilon_pld"] <= large["epsilon_basic"] == pytest.approx(200.0)
    ens = mia.averaging(world.pop.test_votes[0][:100], ensemble(world.pop.teachers), [1.0], 2.0, 0)[0]
    assert ens["agreement_debiased"] > small["agreement_debiased"]
