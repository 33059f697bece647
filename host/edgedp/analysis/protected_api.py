"""The protected API as the outside sees it: the device's mechanism (``edgedp.mech.fast``) on either a
single model's softmax or a teacher ensemble's vote histogram, and what each output mode
lets an attacker compute.

What an attacker can score per mode (one answer, true label y known to the attacker):

* full, round:D, simplex: the released vector v; score = log(v_y + c) - log(sum_{j != y} v_j + c),
  the logit-scaled confidence of Carlini et al. (2022) on released values (c = range/4096
  keeps zeros finite);
* topk:K: the same with unreleased classes counted as 0 (they are at most the K-th value);
* label: only whether the released label is y (a bit; label, topk and bucket rank the
  unclamped noisy vector on the device, so their label is the noisy argmax itself);
* bucket: -1 if the label is not y, else its confidence level 0 (low), 1 (medium), 2 (high).

label and bucket give discrete scores; the attacks treat them with per-example frequencies
instead of Gaussians (``mia``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..mech import fast
from ..mech.modes import MODE_BUCKET, MODE_FULL, MODE_LABEL, MODE_ROUND, MODE_SIMPLEX, MODE_TOPK, Mode

EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, math.inf)
MODES: tuple[str, ...] = ("full", "topk:3", "label", "bucket", "round:2", "simplex")
QUICK_EPSILONS: tuple[float, ...] = (0.1, 1.0, 10.0, math.inf)


@dataclass(frozen=True)
class Mechanism:
    """Inputs to the device mechanism: range [lo, hi] and L1 sensitivity."""

    name: str
    lo: float
    hi: float
    sensitivity: float = 2.0

    def release(self, x: np.ndarray, epsilon: float, mode: Mode, rng: np.random.Generator) -> dict:
        """One answer per row of x (any leading shape, last axis k), fresh noise each."""
        shape = x.shape
        out = fast.privatize(x.reshape(-1, shape[-1]), epsilon, mode, self.sensitivity, self.lo, self.hi, rng)
        return {key: v.reshape(*shape[:-1], *v.shape[1:]) for key, v in out.items()}


SOFTMAX = Mechanism("softmax", 0.0, 1.0)


def ensemble(teachers: int) -> Mechanism:
    return Mechanism("ensemble", 0.0, float(teachers))


def parse_modes(texts: tuple[str, ...] | list[str]) -> list[Mode]:
    return [Mode.parse(t) for t in texts]


def parse_epsilon(text: str) -> float:
    t = text.strip().lower()
    if t in ("inf", "infinity", "none", "oo"):
        return math.inf
    v = float(t)
    if not v > 0:
        raise ValueError(f"epsilon must be > 0 (or inf), got {text!r}")
    return v


def is_discrete(mode: Mode) -> bool:
    return mode.kind in (MODE_LABEL, MODE_BUCKET)


def visible_label(release: dict, mode: Mode) -> np.ndarray:
    """The top-1 class a client reads from one answer.

    label, bucket and topk rank the unclamped noisy vector on the device and send the winner;
    full, round and simplex send (clamped, rounded or projected) values only, so the client's
    label is their argmax, lowest index on ties, as ``edgedp.device.protocol.parse_query`` does."""
    if mode.kind in (MODE_FULL, MODE_ROUND, MODE_SIMPLEX):
        return np.argmax(release["values"], axis=-1)
    return release["label"]


def dense_values(release: dict, mode: Mode, k: int) -> np.ndarray | None:
    """The released values as a (..., k) array (topk: unreleased classes 0); None for label/bucket."""
    if "values" not in release:
        return None
    if mode.kind != MODE_TOPK:
        return release["values"]
    idx, val = release["indices"], release["values"]
    out = np.zeros((*idx.shape[:-1], k))
    np.put_along_axis(out, idx, val, axis=-1)
    return out


def membership_score(release: dict, y: np.ndarray, mode: Mode, mech: Mechanism, k: int) -> np.ndarray:
    """What one answer tells the attacker about the true label y (higher = more confident)."""
    hit = visible_label(release, mode) == y
    if mode.kind == MODE_LABEL:
        return hit.astype(np.float64)
    if mode.kind == MODE_BUCKET:
        return np.where(hit, release["level"], -1).astype(np.float64)
    dense = dense_values(release, mode, k)
    assert dense is not None  # full, round, simplex and topk release values
    v = dense - mech.lo
    v = np.maximum(v, 0.0)
    c = (mech.hi - mech.lo) / 4096.0
    vy = np.take_along_axis(v, np.broadcast_to(y, v.shape[:-1])[..., None].astype(np.int64), axis=-1)[..., 0]
    return np.log(vy + c) - np.log(v.sum(axis=-1) - vy + c)


def soft_targets(release: dict, mode: Mode, k: int) -> np.ndarray | None:
    """Released values clipped at 0 and normalised (a distillation target); None for label/bucket."""
    v = dense_values(release, mode, k)
    if v is None:
        return None
    v = np.maximum(v, 0.0)
    s = v.sum(axis=-1, keepdims=True)
    return np.where(s > 0, v / np.where(s > 0, s, 1.0), 1.0 / k)
