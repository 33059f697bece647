"""Model extraction: agreement rises with the query budget; DP on answers does not stop it."""
from __future__ import annotations

import math

import pytest

from edgedp.analysis import extraction
from edgedp.analysis.protected_api import parse_modes

EPS = [1.0, 10.0, math.inf]


@pytest.fixture(scope="module")
def rows(world) -> list[dict]:
    budgets = extraction.budgets_for(len(world.split.y_pool), quick=True)
    return extraction.run(world.split, world.pop, parse_modes(["full", "label"]), EPS, budgets, 0, jobs=2,
                          progress=False)


def curve(rows, mech, mode, eps):
    return sorted(((r["queries"], r["agreement"]) for r in rows
                   if (r["mechanism"], r["mode"], r["epsilon"]) == (mech, mode, eps)))


def test_rows_carry_the_fields(rows, world) -> None:
    for r in rows:
        assert {"mode", "epsilon", "queries", "agreement", "accuracy"} <= set(r)
    assert max(r["queries"] for r in rows) == len(world.split.y_pool)
    assert min(r["queries"] for r in rows) == 100


@pytest.mark.slow
def test_agreement_rises_with_query_budget(rows, world) -> None:
    n = len(world.split.y_test)
    se = math.sqrt(0.25 / n)
    for mech in ("softmax",):
        for mode in ("full", "label"):
            for eps in EPS:
                c = curve(rows, mech, mode, eps)
                assert c[-1][1] > c[0][1] - 2 * se  # never meaningfully worse with more answers
    # where the answers carry information, more of them copy more of the model
    for mode, eps in (("full", 1.0), ("full", 10.0), ("label", 10.0), ("full", math.inf)):
        c = curve(rows, "softmax", mode, eps)
        assert c[-1][1] > c[0][1] + 3 * se


def test_unprotected_api_is_copied_almost_exactly(rows, world) -> None:
    """With no noise, the surrogate matches the victim nearly as often as the victim is right."""
    best = curve(rows, "softmax", "full", math.inf)[-1][1]
    assert best > world.pop.test_accuracy - 0.05
