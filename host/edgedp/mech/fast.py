"""Vectorised mechanism for large experiments: the device's distribution, NumPy's generator.

Same lattice, clamps, noise law (exact discrete Laplace with P(z) ~ exp(-|z|/t), drawn as
the difference of two geometric variables) and output modes as the firmware, but not
the device's random stream: use ``edgedp.mech.reference`` for bit-exact replay.
"""
from __future__ import annotations

import numpy as np

from . import modes
from .lattice import Lattice, make_lattice, quantize
from .modes import Mode


def dlap(inv_t: float, size, rng: np.random.Generator) -> np.ndarray:
    """Discrete Laplace noise with P(z) proportional to exp(-|z| * inv_t)."""
    p = -np.expm1(-inv_t)
    return rng.geometric(p, size=size).astype(np.int64) - rng.geometric(p, size=size)


def noisy_lattice(x: np.ndarray, epsilon: float, sensitivity: float = 2.0,
                  lo: float = 0.0, hi: float = 1.0, rng: np.random.Generator | None = None,
                  m: int | None = None) -> tuple[np.ndarray, Lattice]:
    """Noisy (not yet clamped) lattice vectors for rows x of shape (n, k) at per-query epsilon."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    if not np.all(np.isfinite(x)):
        raise ValueError("inputs contain NaN or Inf (the device answers ERR_BAD_VALUE)")
    rng = rng if rng is not None else np.random.default_rng()
    lat = make_lattice(x.shape[1], round(epsilon * 1e6), sensitivity, lo, hi, m)
    q = quantize(x, lat, lo, hi)
    return q + dlap(lat.inv_t, q.shape, rng), lat


def privatize(x: np.ndarray, epsilon: float, mode: Mode | str = "full", sensitivity: float = 2.0,
              lo: float = 0.0, hi: float = 1.0, rng: np.random.Generator | None = None) -> dict:
    """What the external interface releases for each row of x, decoded to host units.

    Returns a dict with ``label`` (n,) always, plus ``values`` (n, k) float for full,
    round and simplex; ``indices``/``values`` (n, K) for topk; ``level`` (n,) for bucket.
    epsilon = inf returns the un-noised (local-path) outputs through the same lattice."""
    mode = Mode.parse(mode) if isinstance(mode, str) else mode
    if np.isinf(epsilon):
        x2 = np.atleast_2d(np.asarray(x, dtype=np.float64))
        lat = make_lattice(x2.shape[1], 1_000_000, sensitivity, lo, hi)
        y = quantize(x2, lat, lo, hi)
    else:
        y, lat = noisy_lattice(x, epsilon, sensitivity, lo, hi, rng)
    return decode(y, lat, mode)


def decode(y: np.ndarray, lat: Lattice, mode: Mode) -> dict:
    """Apply an output mode to noisy lattice vectors and convert to floats as the host client does.

    ``label`` is the noisy argmax (what LABEL mode releases); for full/round/simplex a
    client only sees clamped values, so compute labels from ``values`` if you model that."""
    g = lat.granularity
    out: dict = {"label": modes.label(y)}
    if mode.kind == modes.MODE_FULL:
        out["values"] = modes.clamp(y, lat) * g
    elif mode.kind == modes.MODE_TOPK:
        idx, val = modes.topk(y, mode.arg, lat)
        out.update(indices=idx, values=val * g, label=idx[:, 0])
    elif mode.kind == modes.MODE_BUCKET:
        out["label"], out["level"] = modes.bucket(y, lat)
    elif mode.kind == modes.MODE_ROUND:
        out["values"] = modes.round_decimals(y, lat, mode.arg) / 10.0 ** mode.arg
    elif mode.kind == modes.MODE_SIMPLEX:
        out["values"] = modes.simplex(y, lat) * g
    return out
