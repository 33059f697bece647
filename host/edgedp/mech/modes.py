"""Output modes: post-processing of the noisy lattice vector (mirrors firmware mech.c).

Every function takes ``y``: the noisy integer lattice values of shape (n, k), not yet
clamped, and returns integers, so device and reference agree bit for bit. Values that
are released are clamped to [lat.lo, lat.hi]; rankings (label, topk, bucket's label)
use the unclamped noisy values so that clamping creates no ties. Post-processing costs
no privacy budget.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schema import MAX_ROUND_DIGITS, MAX_TOPK, OutputMode
from .lattice import Lattice

MODE_FULL, MODE_TOPK, MODE_LABEL = OutputMode.FULL, OutputMode.TOPK, OutputMode.LABEL
MODE_BUCKET, MODE_ROUND, MODE_SIMPLEX = OutputMode.BUCKET, OutputMode.ROUND, OutputMode.SIMPLEX
MODE_NAMES: dict[int, str] = {m: m.name.lower() for m in OutputMode}
BUCKET_NAMES = ("low", "medium", "high")


@dataclass(frozen=True)
class Mode:
    """An output mode and its argument (K for topk, decimals for round)."""

    kind: int
    arg: int = 0

    @classmethod
    def parse(cls, text: str) -> "Mode":
        name, _, arg = text.strip().lower().partition(":")
        kinds = {v: k for k, v in MODE_NAMES.items()}
        if name not in kinds:
            raise ValueError(f"unknown mode {text!r}: use full, topk:K, label, bucket, round:D or simplex")
        kind = kinds[name]
        if kind in (MODE_TOPK, MODE_ROUND):
            if not arg.isdigit():
                raise ValueError(f"mode {name} needs a number, e.g. {name}:3")
            n = int(arg)
            if kind == MODE_TOPK and not 1 <= n <= MAX_TOPK:
                raise ValueError(f"topk:K needs 1 <= K <= {MAX_TOPK}")
            if kind == MODE_ROUND and not 0 <= n <= MAX_ROUND_DIGITS:
                raise ValueError(f"round:D needs 0 <= D <= {MAX_ROUND_DIGITS}")
            return cls(kind, n)
        if arg:
            raise ValueError(f"mode {name} takes no argument")
        return cls(kind)

    def __str__(self) -> str:
        name = MODE_NAMES[self.kind]
        return f"{name}:{self.arg}" if self.kind in (MODE_TOPK, MODE_ROUND) else name

    @property
    def sends_values(self) -> bool:
        """True for the modes that send one integer per class (full, round, simplex)."""
        return self.kind in VECTOR_MODES

    def values(self, lattice: np.ndarray, m: int) -> np.ndarray:
        """Released integers in host units: lattice steps 2^-m, or 10^-D for round:D."""
        if self.kind == MODE_ROUND:
            return lattice / 10.0 ** self.arg
        return lattice * 2.0 ** -m


VECTOR_MODES = (MODE_FULL, MODE_ROUND, MODE_SIMPLEX)


@dataclass
class Released:
    """What one output mode releases for n noisy vectors, as the integers the device sends.

    ``lattice``: (n, k) for full, round and simplex, (n, K) for topk, else None;
    ``indices``: (n, K) for topk; ``label``: (n,) for topk, label and bucket (the noisy
    argmax; the vector modes send no label); ``level``: (n,) for bucket."""

    lattice: np.ndarray | None = None
    indices: np.ndarray | None = None
    label: np.ndarray | None = None
    level: np.ndarray | None = None


def release(y: np.ndarray, lat: Lattice, mode: Mode) -> Released:
    """Apply ``mode`` to noisy lattice vectors y (n, k): the one dispatch over output modes."""
    if mode.kind == MODE_FULL:
        return Released(lattice=clamp(y, lat))
    if mode.kind == MODE_ROUND:
        return Released(lattice=round_decimals(y, lat, mode.arg))
    if mode.kind == MODE_SIMPLEX:
        return Released(lattice=simplex(y, lat))
    if mode.kind == MODE_TOPK:
        idx, val = topk(y, mode.arg, lat)
        return Released(lattice=val, indices=idx, label=idx[:, 0])
    if mode.kind == MODE_LABEL:
        return Released(label=label(y))
    lab, level = bucket(y, lat)
    return Released(label=lab, level=level)


def clamp(y: np.ndarray, lat: Lattice) -> np.ndarray:
    return np.clip(y, lat.lo, lat.hi)


def label(y: np.ndarray) -> np.ndarray:
    """Noisy argmax, lowest index on ties."""
    return np.argmax(y, axis=1)


def topk(y: np.ndarray, K: int, lat: Lattice) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the K largest noisy values (index ascending on ties) and their clamped values."""
    K = min(K, y.shape[1])
    order = np.lexsort((np.broadcast_to(np.arange(y.shape[1]), y.shape), -y), axis=1)[:, :K]
    return order, clamp(np.take_along_axis(y, order, axis=1), lat)


def bucket(y: np.ndarray, lat: Lattice) -> tuple[np.ndarray, np.ndarray]:
    """Label and confidence level of its value: 2 high (top third of the range), 1 medium, 0 low."""
    lab = label(y)
    top = clamp(y[np.arange(len(y)), lab], lat) - lat.lo
    span = lat.hi - lat.lo
    level = np.where(3 * top >= 2 * span, 2, np.where(3 * top >= span, 1, 0))
    return lab, level


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
"""The wire carries ROUND values as int32."""


def _round_int(num: int, m: int) -> int:
    return num << -m if m <= 0 else (num + (1 << (m - 1))) >> m


def round_fits(lat: Lattice, digits: int) -> bool:
    """True iff round(y * g, digits) in units of 10^-digits fits int32 for every y in [lo, hi]
    (monotone in y: the two ends decide). Mirrors edp_mech_mode_fits."""
    ends = [_round_int(v * 10 ** digits, lat.m) for v in (lat.lo, lat.hi)]
    return INT32_MIN <= min(ends) and max(ends) <= INT32_MAX


def check_fits(lat: Lattice, mode: Mode) -> None:
    """Raise ValueError where the device refuses the mode for this lattice (ERR_BAD_VALUE,
    before any noise is drawn or budget charged): SIMPLEX with a step above 1, ROUND:D whose
    values overflow int32."""
    if mode.kind == MODE_SIMPLEX and lat.m < 0:
        raise ValueError("simplex mode needs a lattice step of at most 1")
    if mode.kind == MODE_ROUND and not round_fits(lat, mode.arg):
        raise ValueError(f"round:{mode.arg} values of the range [{lat.lo * lat.granularity:g}, "
                         f"{lat.hi * lat.granularity:g}] overflow int32: use fewer decimals")


def round_decimals(y: np.ndarray, lat: Lattice, digits: int) -> np.ndarray:
    """round(y * g, digits) as integers in units of 10^-digits (half rounds up).

    Raises ValueError where the values would not fit int32 (round_fits)."""
    if not round_fits(lat, digits):
        raise ValueError(f"round:{digits} values overflow int32 for this range and lattice")
    num = clamp(y, lat).astype(np.int64) * (10 ** digits)
    if lat.m <= 0:
        return num << (-lat.m)
    return (num + (1 << (lat.m - 1))) >> lat.m


def simplex(y: np.ndarray, lat: Lattice) -> np.ndarray:
    """Integer projection onto the probability simplex: sum == 2^m lattice steps (1.0).

    theta is the largest integer with sum(max(y - theta, 0)) >= 2^m, found by bisection;
    the excess is removed one step at a time from the lowest-index positive coordinates."""
    if lat.m < 0:
        raise ValueError("simplex mode needs a lattice step of at most 1")
    one = 1 << lat.m
    out = np.empty_like(y, dtype=np.int64)
    for i, row in enumerate(clamp(np.asarray(y, dtype=np.int64), lat)):
        lo, hi = int(row.min()) - one, int(row.max())
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if int(np.maximum(row - mid, 0).sum()) >= one:
                lo = mid
            else:
                hi = mid - 1
        p = np.maximum(row - lo, 0)
        excess = int(p.sum()) - one
        pos = np.flatnonzero(p > 0)[:excess]
        p[pos] -= 1
        out[i] = p
    return out
