"""``edgedp audit-dp``: an empirical epsilon lower bound for the device's mechanism, measured from
outside on worst-case neighbouring inputs (docs/privacy.md §1 states the relation: inputs clamped
to [lo, hi] whose L1 distance is at most the sensitivity).

The neighbouring pairs audited (``neighbour_pairs``):

* ``extremes``: two classes at opposite ends of the range swap places (by the sensitivity / 2 each,
  or the whole range), so the output clamp piles mass on the range ends, where the privacy loss of
  one answer is largest;
* ``tie`` (when the range is wider than that move, as a vote histogram's): two classes in the
  middle of the range swap the lead, the worst case of the ranking modes (label, topk);
* ``boundary``: the extremes pair, with every other class on a lattice rounding boundary (half a step:
  rounded up in one world, the float32 just below it rounded down in the other), so that the
  lattice inputs differ by k - 2 steps more at an L1 distance that still equals the sensitivity:
  the slack the lattice's Δ' = Δ + k·g has to cover.

Each world answers ``trials`` times (fresh noise); ``epsilon_lower_bound.lower_bound`` turns the two
samples into a bound at the stated confidence (Bonferroni over the pairs and, within a pair, over
its statistics: the projection on the pair's direction, every coordinate, the argmax; ``scores``). A correct mechanism
gives a bound below its epsilon with probability at least the confidence; one that is not ε-DP
at the stated ε shows a bound above it once the trials suffice.

Answers come from a ``Releaser``: the vectorised sampler (``reference_releaser``, the device's
lattice, noise law and output modes on NumPy's generator) or a device (``device_releaser``, a test
image: its noise stream is re-seeded through TEST_SEED so that the audit replays).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..mech import fast, modes
from ..mech.lattice import Lattice, make_lattice, to_epsilon, to_micro
from .accounting import CAP_DELTA
from ..mech.modes import MODE_BUCKET, MODE_LABEL, MODE_TOPK, Mode
from . import epsilon_lower_bound

Releaser = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]
"""answers(x, n, rng): n answers for the input vector x (k,), as features (n, k): the released
integers for full/round/simplex, topk's values at their indices (unreleased classes below the
range), a one-hot label (times the bucket level + 1 for bucket)."""

DEFAULT_CONFIDENCE = 0.95
DEFAULT_TRIALS = 100_000
MAX_PAIRS = 3   # extremes, tie, boundary


@dataclass(frozen=True)
class Mechanism:
    """What the audit needs to know about the mechanism: the claim and the input domain."""

    epsilon: float        # the stated per-answer epsilon
    k: int
    lo: float = 0.0
    hi: float = 1.0
    sensitivity: float = 2.0
    m: int | None = None  # lattice exponent (None: automatic, as the device)

    @property
    def lattice(self) -> Lattice:
        return make_lattice(self.k, to_micro(self.epsilon), self.sensitivity, self.lo, self.hi, self.m)

    @property
    def delta(self) -> float:
        """The implementation's delta per answer (docs/privacy.md §2)."""
        return self.k * CAP_DELTA


@dataclass(frozen=True)
class Pair:
    name: str
    a: np.ndarray   # float32 inputs (k,)
    b: np.ndarray

    def as_dict(self) -> dict:
        return {"name": self.name, "a": self.a.astype(float).tolist(), "b": self.b.astype(float).tolist(),
                "l1": float(np.abs(self.a.astype(np.float64) - self.b.astype(np.float64)).sum())}


def neighbour_pairs(mech: Mechanism) -> list[Pair]:
    """The worst-case neighbouring pairs (module docstring); every pair has L1 distance <= Δ."""
    f = np.float32
    k, lo, hi = mech.k, f(mech.lo), f(mech.hi)
    g = 2.0 ** -mech.lattice.m
    if k == 1:
        d = f(min(float(mech.sensitivity), float(hi - lo)))
        return [Pair("extremes", np.array([hi], f), np.array([hi - d], f))]
    d = f(min(float(mech.sensitivity) / 2.0, float(hi - lo)))
    a = np.full(k, lo, f)
    b = a.copy()
    a[0], b[0] = hi, hi - d
    a[1], b[1] = lo, lo + d
    pairs = [Pair("extremes", a, b)]
    if float(hi - lo) > float(d):
        # a near tie in the middle of the range, the two classes swapping the lead: the worst case of
        # the ranking modes (label, topk) when the range is wider than the move (a vote histogram)
        c = f(np.round((float(lo) + float(hi)) / 2.0 / g) * g)
        t_a = np.full(k, lo, f)
        t_a[0], t_a[1] = c + d / 2, c - d / 2
        t_b = t_a.copy()
        t_b[0], t_b[1] = t_a[1], t_a[0]
        pairs.append(Pair("tie", t_a, t_b))
    if k > 2:
        mid = f(np.round((float(lo) + float(hi)) / 2.0 / g) * g + g / 2.0)   # exactly half a step: rounds up
        below = np.nextafter(mid, f(-np.inf), dtype=f)                        # rounds down
        a2, b2 = a.copy(), b.copy()
        a2[2:], b2[2:] = mid, below
        slack = float(np.sum(a2[2:].astype(np.float64) - b2[2:].astype(np.float64)))
        # keep the L1 distance at Δ: the second class moves by d - slack (still rounds to lo + d)
        b2[1] = f(float(b2[1]) - slack)
        while float(np.abs(a2.astype(np.float64) - b2.astype(np.float64)).sum()) > float(mech.sensitivity):
            b2[1] = np.nextafter(b2[1], f(-np.inf), dtype=f)
        pairs.append(Pair("boundary", a2, b2))
    return pairs


def features(mode: Mode, k: int, lattice: np.ndarray | None, indices: np.ndarray | None, label: np.ndarray | None,
             level: np.ndarray | None, below: float) -> np.ndarray:
    """Released answers (n of them) as the (n, k) features ``Releaser`` describes."""
    if mode.kind == MODE_TOPK:
        assert indices is not None and lattice is not None  # a topk release: its classes and values
        out = np.full((len(indices), k), below)
        np.put_along_axis(out, indices, lattice.astype(np.float64), axis=1)
        return out
    if mode.kind in (MODE_LABEL, MODE_BUCKET):
        assert label is not None  # label and bucket release the noisy argmax
        out = np.zeros((len(label), k))
        out[np.arange(len(label)), label] = 1.0 if level is None else level + 1.0
        return out
    assert lattice is not None  # full, round, simplex: the vector
    return lattice.astype(np.float64)


def reference_releaser(mech: Mechanism, mode: Mode) -> Releaser:
    """The vectorised sampler (``edgedp.mech.fast``) at the mechanism's configuration."""
    def answers(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        y, lat = fast.noisy_lattice(np.tile(x, (n, 1)), mech.epsilon, mech.sensitivity, mech.lo, mech.hi, rng,
                                    mech.m)
        r = modes.release(y, lat, mode)
        return features(mode, mech.k, r.lattice, r.indices, r.label, r.level, lat.lo - 1.0)
    return answers


def scores(feats: np.ndarray, pair: Pair) -> dict[str, np.ndarray]:
    """The statistics of each answer the audit scores (the confidence is split over them,
    ``epsilon_lower_bound.lower_bound``): the projection on the direction from b to a; every
    coordinate on its own (a class whose noise is wrong shows there, where a projection dilutes
    it among the others' noise, even when the pair moves it by one rounding step only); and the
    argmax, scored by the direction its class moved (+1 up in world a, -1 down, 0 unmoved)."""
    diff = pair.a.astype(np.float64) - pair.b.astype(np.float64)
    w = np.sign(diff)
    out = {"projection": feats @ w, "argmax": w[np.argmax(feats, axis=1)]}
    for i in range(feats.shape[1]):
        out[f"class{i}"] = feats[:, i]
    return out


@dataclass
class PairResult:
    pair: Pair
    bound: epsilon_lower_bound.Bound

    def as_dict(self) -> dict:
        return {**self.pair.as_dict(), **self.bound.as_dict()}


@dataclass
class AuditResult:
    mechanism: Mechanism
    mode: Mode
    trials: int
    confidence: float
    pairs: list[PairResult] = field(default_factory=list)
    target: str = "reference"

    @property
    def epsilon_lower_bound(self) -> float:
        return max(p.bound.epsilon_lower_bound for p in self.pairs)

    @property
    def passed(self) -> bool:
        return self.epsilon_lower_bound <= self.mechanism.epsilon

    def as_dict(self) -> dict:
        m = self.mechanism
        return {"epsilon_lower_bound": self.epsilon_lower_bound, "epsilon_stated": m.epsilon,
                "passed": self.passed, "target": self.target, "mode": str(self.mode), "trials": self.trials,
                "confidence": self.confidence, "classes": m.k, "range": [m.lo, m.hi], "sensitivity": m.sensitivity,
                "lattice_exponent": m.lattice.m, "delta": m.delta,
                "method": "event chosen on half of each world's answers, one-sided Clopper-Pearson limits on the "
                          "other half, Bonferroni over the pairs and over each pair's statistics (projection, every "
                          "coordinate, argmax)",
                "pairs": [p.as_dict() for p in self.pairs]}


def audit(release: Releaser, mech: Mechanism, mode: Mode, trials: int = DEFAULT_TRIALS,
          confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, target: str = "reference",
          pairs: list[Pair] | None = None) -> AuditResult:
    """The lower bound over the worst-case pairs, each world answering ``trials`` times."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if trials < 8:
        raise ValueError("trials must be >= 8")
    pairs = neighbour_pairs(mech) if pairs is None else pairs
    alpha = (1.0 - confidence) / len(pairs)
    res = AuditResult(mech, mode, trials, confidence, target=target)
    for i, p in enumerate(pairs):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0xA0D, i]))
        fa = release(p.a, trials, rng)
        fb = release(p.b, trials, rng)
        b = epsilon_lower_bound.lower_bound(scores(fa, p), scores(fb, p), alpha, rng, mech.delta)
        res.pairs.append(PairResult(p, b))
    return res


def seed_bytes(seed: int) -> bytes:
    """The 32-byte TEST_SEED of an audit with this seed."""
    return np.random.SeedSequence([seed, 0xA0D]).generate_state(8, np.uint32).tobytes()


class Stopped(Exception):
    """The device releaser was asked to stop: no query was sent after; ``answers`` were charged."""

    def __init__(self, answers: int):
        super().__init__(f"stopped after {answers} device answers")
        self.answers = answers


def device_releaser(dev, mode: Mode, k: int, below: float, progress: Callable[[int], None] | None = None,
                    stop: Callable[[], bool] | None = None) -> Releaser:
    """Answers from a device (``edgedp.device.client.Device``), one QUERY each (charged). Raises
    Stopped, before the next query, once ``stop()`` holds."""
    from ..device.errors import DeviceError, EdgeDPError
    sent = 0

    def answers(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        nonlocal sent
        lat, idx, lab, lev = [], [], [], []
        for i in range(n):
            if stop and stop():
                raise Stopped(sent)
            try:
                r = dev.query(x.astype(np.float32), mode)
            except DeviceError as exc:
                raise EdgeDPError(f"the device refused answer {i + 1} of {n}: {exc}", exc.error.name) from None
            sent += 1
            lat.append(r.lattice)
            idx.append(r.indices)
            lab.append(r.label)
            lev.append(r.level)
            if progress:
                progress(1)
        return features(mode, k, np.asarray(lat) if mode.kind not in (MODE_LABEL, MODE_BUCKET) else None,
                        np.asarray(idx) if mode.kind == MODE_TOPK else None, np.asarray(lab),
                        np.asarray(lev) if mode.kind == MODE_BUCKET else None, below)
    return answers


def prepare_device(dev, key: bytes, k: int, spend_micro: int, epsilon: float | None, seed: int) -> Mechanism:
    """Configure a test image for the audit: per-answer epsilon (when given), a daily cap that covers
    the audit's answers, today's spend reset, and the noise stream seeded from ``seed``.

    Needs the device key (the public test key for test images); raises ValueError (a lifetime cap
    too low for the audit) or EdgeDPError (the device refused, with its ERR_ name) with the reason.
    What it signs and the mechanism it returns come from the authenticated state (STATE), never
    from the unauthenticated BUDGET answer."""
    from ..device.errors import DeviceError, EdgeDPError
    from ..device.protocol import Caps, MechConfig

    b = dev.state(key).budget
    eps_micro = b.epsilon_micro if epsilon is None else to_micro(epsilon)
    need = spend_micro * eps_micro
    try:
        if epsilon is not None or b.daily_cap < need:
            dev.configure(key, MechConfig(eps_micro, b.lo, b.hi, b.sensitivity, b.m),
                          Caps(daily=max(b.daily_cap, need), lifetime=b.lifetime_cap))
        if b.lifetime_cap and b.lifetime_cap - b.lifetime_spent < need:
            raise ValueError(f"the device's lifetime cap leaves {to_epsilon(b.lifetime_cap - b.lifetime_spent):g} "
                             f"and the audit spends {to_epsilon(need):g}")
        dev.reset_budget(key)
        dev.test_seed(key, seed_bytes(seed))
    except DeviceError as exc:
        raise EdgeDPError(f"the device refused the audit's set-up ({exc}); audit-dp needs a test image and its "
                          f"key (--key)", exc.error.name) from None
    b = dev.state(key).budget
    return Mechanism(to_epsilon(b.epsilon_micro), k, float(b.lo), float(b.hi), float(b.sensitivity), b.m)
