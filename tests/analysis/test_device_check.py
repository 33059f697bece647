"""tradeoff --target: device answers are checked in distribution against the fast sampler."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgedp.analysis import device_check
from edgedp.cli import main
from edgedp.mech import fast

EPS1 = 1_000_000  # micro-epsilon


@pytest.fixture(scope="module")
def x(world) -> np.ndarray:
    return world.pop.test_probs[0][:300]


def answers(x: np.ndarray, eps: float, seed: int, sensitivity: float = 2.0) -> np.ndarray:
    """Full-mode lattice answers as the device sends them (clamped to the range)."""
    y, lat = fast.noisy_lattice(x, eps, sensitivity, 0.0, 1.0, np.random.default_rng(seed))
    return np.clip(y, lat.lo, lat.hi)


def run(x, lattice) -> dict:
    return device_check.compare(x, lattice, EPS1, 2.0, 0.0, 1.0, None, np.random.default_rng(9))


def test_pit_is_uniform_under_the_law(x) -> None:
    from edgedp.mech.lattice import make_lattice, quantize
    lat = make_lattice(10, EPS1, 2.0, 0.0, 1.0)
    y = answers(x, 1.0, 5)
    u = device_check.pit(y, quantize(x, lat, 0.0, 1.0), lat.lo, lat.hi, lat.inv_t, np.random.default_rng(0))
    assert u.min() >= 0 and u.max() <= 1
    hist = np.histogram(u, bins=10, range=(0, 1))[0] / u.size
    assert np.all(np.abs(hist - 0.1) < 0.02)


def test_same_law_passes(x) -> None:
    for seed in (1, 2, 3):
        r = run(x, answers(x, 1.0, seed))
        assert r["ok"], r


def test_wrong_law_fails(x) -> None:
    """More or less noise than configured, a wrong sensitivity, or no noise at all."""
    for bad in (answers(x, 0.5, 1), answers(x, 2.0, 1), answers(x, 1.0, 1, sensitivity=3.0),
                answers(x, 1000.0, 1)):
        r = run(x, bad)
        assert not r["ok"], r


@pytest.mark.native
def test_native_device_agrees_with_the_fast_sampler() -> None:
    r = CliRunner().invoke(main, ["tradeoff", "--quick", "--modes", "label", "--target", "posix",
                                  "--target-queries", "150", "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["device_check"]
    assert d["ok"] and d["queries"] == 150 and d["target"] == "posix"
