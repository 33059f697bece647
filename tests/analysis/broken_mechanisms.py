"""Broken output mechanisms, for showing that ``edgedp audit-dp`` catches them (test-only: never
part of the package). Each is a ``audit_dp.Releaser`` at the same claimed configuration."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgedp.analysis.audit_dp import Mechanism, Releaser, features
from edgedp.mech import dlap, modes
from edgedp.mech.lattice import quantize
from edgedp.mech.modes import Mode


def float_clamped_laplace(mech: Mechanism, mode: Mode) -> Releaser:
    """The seed code's mechanism: float32 inverse-CDF Laplace noise b·log(2u) of scale b = Δ/ε, the
    noise (not the output) clamped to ±4b, added to the input, released unclamped (FULL: the k
    values; LABEL: their argmax)."""
    b = np.float32(mech.sensitivity / mech.epsilon)

    def answers(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((n, mech.k), dtype=np.float32) - np.float32(0.5)
        noise = -b * np.sign(u) * np.log(np.float32(1) - np.float32(2) * np.abs(u))
        y = np.clip(x.astype(np.float32) + np.clip(noise, -4 * b, 4 * b), -np.inf, np.inf)
        if mode.kind == modes.MODE_LABEL:
            return features(mode, mech.k, None, None, np.argmax(y, axis=1), None, 0.0)
        return y.astype(np.float64)
    return answers


def half_scale(mech: Mechanism, mode: Mode) -> Releaser:
    """The device's lattice, clamps and modes with the right noise law at half its scale t/2."""
    def answers(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        lat = mech.lattice
        q = quantize(np.tile(x, (n, 1)), lat, mech.lo, mech.hi)
        y = q + dlap.sample(2 * lat.inv_t, q.shape, rng)
        r = modes.release(y, lat, mode)
        return features(mode, mech.k, r.lattice, r.indices, r.label, r.level, lat.lo - 1.0)
    return answers


def one_class_unnoised(cls: int) -> Callable[[Mechanism, Mode], Releaser]:
    """The device's lattice, noise law, clamps and modes, except that class ``cls`` gets no noise:
    its lattice value is released as it is (a mechanism bug that a projection on the pair's
    direction dilutes among the other classes' noise)."""
    def releaser(mech: Mechanism, mode: Mode) -> Releaser:
        def answers(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
            lat = mech.lattice
            q = quantize(np.tile(x, (n, 1)), lat, mech.lo, mech.hi)
            y = q + dlap.sample(lat.inv_t, q.shape, rng)
            y[:, cls] = q[:, cls]
            r = modes.release(y, lat, mode)
            return features(mode, mech.k, r.lattice, r.indices, r.label, r.level, lat.lo - 1.0)
        return answers
    return releaser
