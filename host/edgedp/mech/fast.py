"""Vectorised mechanism for large experiments: the device's distribution, NumPy's generator.

Same lattice, clamps, noise law (exact discrete Laplace with P(z) ~ exp(-|z|/t), drawn as
the difference of two geometric variables) and output modes as the firmware, but not
the device's random stream: use ``edgedp.mech.reference`` for bit-exact replay.
"""
from __future__ import annotations

import numpy as np

from . import dlap, modes
from .lattice import MICRO, Lattice, make_lattice, quantize, to_micro
from .modes import Mode


def noisy_lattice(x: np.ndarray, epsilon: float, sensitivity: float = 2.0,
                  lo: float = 0.0, hi: float = 1.0, rng: np.random.Generator | None = None,
                  m: int | None = None) -> tuple[np.ndarray, Lattice]:
    """Noisy (not yet clamped) lattice vectors for rows x of shape (n, k) at per-query epsilon."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    if not np.all(np.isfinite(x)):
        raise ValueError("inputs contain NaN or Inf (the device answers ERR_BAD_VALUE)")
    rng = rng if rng is not None else np.random.default_rng()
    lat = make_lattice(x.shape[1], to_micro(epsilon), sensitivity, lo, hi, m)
    q = quantize(x, lat, lo, hi)
    return q + dlap.sample(lat.inv_t, q.shape, rng), lat


def privatize(x: np.ndarray, epsilon: float, mode: Mode | str = "full", sensitivity: float = 2.0,
              lo: float = 0.0, hi: float = 1.0, rng: np.random.Generator | None = None) -> dict:
    """What the external interface releases for each row of x, decoded to host units.

    Returns a dict with ``label`` (n,) always, plus ``values`` (n, k) float for full,
    round and simplex; ``indices``/``values`` (n, K) for topk; ``level`` (n,) for bucket.
    epsilon = inf returns the un-noised (local-path) outputs through the same lattice."""
    mode = Mode.parse(mode) if isinstance(mode, str) else mode
    if np.isinf(epsilon):
        x2 = np.atleast_2d(np.asarray(x, dtype=np.float64))
        lat = make_lattice(x2.shape[1], MICRO, sensitivity, lo, hi)
        y = quantize(x2, lat, lo, hi)
    else:
        y, lat = noisy_lattice(x, epsilon, sensitivity, lo, hi, rng)
    return decode(y, lat, mode)


def decode(y: np.ndarray, lat: Lattice, mode: Mode) -> dict:
    """Apply an output mode to noisy lattice vectors and convert to floats as the host client does.

    ``label`` is the noisy argmax (what LABEL mode releases); for full/round/simplex a
    client only sees clamped values, so compute labels from ``values`` if you model that."""
    r = modes.release(y, lat, mode)
    out: dict = {"label": modes.label(y) if r.label is None else r.label}
    if r.lattice is not None:
        out["values"] = mode.values(r.lattice, lat.m)
    if r.indices is not None:
        out["indices"] = r.indices
    if r.level is not None:
        out["level"] = r.level
    return out
