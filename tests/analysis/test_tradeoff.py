"""The cost of epsilon: single-model softmax near chance at eps = 1, the ensemble far above."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from edgedp.analysis import tradeoff
from edgedp.analysis.protected_api import parse_modes
from edgedp.cli import main

MODES = parse_modes(["full", "label", "topk:3", "bucket"])
EPS = [0.1, 1.0, 10.0, math.inf]
REPEATS = 4


@pytest.fixture(scope="module")
def rows(world) -> list[dict]:
    p = world.pop
    return tradeoff.run(p.test_probs[0], world.split.y_test, MODES, EPS, REPEATS, 0, p.test_votes[0], p.teachers,
                        progress=False)


def pick(rows, mech, mode, eps):
    (r,) = [r for r in rows if r["mechanism"] == mech and r["mode"] == mode and r["epsilon"] == eps]
    return r


def slack(n: int) -> float:
    """4 binomial standard deviations (p <= 1/2) for a mean over n answers."""
    return 4 * math.sqrt(0.25 / n)


def test_rows_carry_the_fields(rows) -> None:
    assert {r["mechanism"] for r in rows} == {"softmax", "ensemble"}
    for r in rows:
        assert {"mechanism", "mode", "epsilon", "accuracy", "agreement"} <= set(r)
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["agreement"] <= 1


def test_no_noise_reproduces_the_model(world, rows) -> None:
    p, y = world.pop, world.split.y_test
    for mode in MODES:
        r = pick(rows, "softmax", str(mode), math.inf)
        assert r["agreement"] == 1.0
        assert r["accuracy"] == pytest.approx(float(np.mean(p.test_probs[0].argmax(1) == y)), abs=2 / len(y))
        assert pick(rows, "ensemble", str(mode), math.inf)["accuracy"] == pytest.approx(p.ensemble_test_accuracy,
                                                                                       abs=2 / len(y))


def test_single_model_softmax_is_near_chance_at_eps_1(world, rows) -> None:
    """With Delta = 2 every probability vector neighbours every other, so for any input x and a
    fixed reference input x0, P(label = j | x) <= e^eps P(label = j | x0). Hence the accuracy is
    at most e^eps times the best constant guess: the mathematics caps it near chance."""
    y = world.split.y_test
    chance = tradeoff.chance(y, world.split.classes)
    for mode in MODES:
        for eps in (0.1, 1.0):
            r = pick(rows, "softmax", str(mode), eps)
            assert r["accuracy"] <= math.exp(eps) * chance + slack(r["queries"])


def test_ensemble_is_far_above_chance_at_eps_1(world, rows) -> None:
    y = world.split.y_test
    chance = tradeoff.chance(y, world.split.classes)
    for mode in MODES:
        ens = pick(rows, "ensemble", str(mode), 1.0)
        sm = pick(rows, "softmax", str(mode), 1.0)
        # above what any single-model softmax answer at eps = 1 can reach
        assert ens["accuracy"] > math.exp(1.0) * chance + slack(ens["queries"])
        assert ens["accuracy"] > sm["accuracy"] + 0.5


def test_accuracy_grows_with_epsilon(rows) -> None:
    for mech in ("softmax", "ensemble"):
        for mode in MODES:
            acc = [pick(rows, mech, str(mode), e)["accuracy"] for e in EPS]
            n = pick(rows, mech, str(mode), 1.0)["queries"]
            assert all(b >= a - slack(n) for a, b in zip(acc, acc[1:]))
            assert acc[-1] > acc[0] + 0.3


def test_seeded_and_reproducible(world) -> None:
    p = world.pop
    a = tradeoff.run(p.test_probs[0], world.split.y_test, MODES[:1], [1.0], 2, 7, progress=False)
    b = tradeoff.run(p.test_probs[0], world.split.y_test, MODES[:1], [1.0], 2, 7, progress=False)
    c = tradeoff.run(p.test_probs[0], world.split.y_test, MODES[:1], [1.0], 2, 8, progress=False)
    assert a == b
    assert a != c


def test_cli_on_user_npz(tmp_path, world) -> None:
    p = world.pop
    f = tmp_path / "outputs.npz"
    np.savez(f, logits=np.log(np.clip(p.test_probs[0], 1e-12, 1)), labels=world.split.y_test,
             votes=p.test_votes[0])
    r = CliRunner().invoke(main, ["tradeoff", "--data", str(f), "--quick", "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["teachers"] == p.teachers
    rows = d["rows"]
    assert {r["mechanism"] for r in rows} == {"softmax", "ensemble"}
    assert {r["epsilon"] for r in rows} >= {"inf", 1.0}
    top = [r for r in rows if r["mechanism"] == "softmax" and r["epsilon"] == "inf"][0]
    assert top["accuracy"] == pytest.approx(d["test_accuracy"], abs=2 / len(world.split.y_test))


def test_cli_bad_npz_is_an_error(tmp_path) -> None:
    f = tmp_path / "bad.npz"
    np.savez(f, probs=np.full((4, 3), 1 / 3))
    r = CliRunner().invoke(main, ["tradeoff", "--data", str(f), "--json", "--no-progress"])
    assert r.exit_code != 0
    assert "labels" in json.loads(r.stdout)["message"]
