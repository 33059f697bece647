"""Route a sample of trade-off queries through a real or emulated device and check that its
answers follow the same law as the fast sampler used for the analysis.

The device's noise comes from its own DRBG, so answers are compared in distribution, at the
device's configured epsilon, sensitivity, range and lattice.  The queries use the full mode
(every other mode is post-processing of that vector):

1. values: each released lattice value y = clamp(q + Z, L, H) has a known law (q the
   quantised input, Z discrete Laplace of scale t).  Its randomised probability integral
   transform is Uniform(0, 1) exactly when the law is right; a Kolmogorov-Smirnov test on
   all n*k transforms catches a wrong epsilon, sensitivity, lattice or clamp;
2. labels: the fraction of answers whose argmax (what a client reads in full mode) equals the
   non-private label, against the fast sampler's rate on the same inputs (two-sided exact
   binomial test).

Pass: both p-values at least alpha/2.  Bit-exact replay is ``edgedp verify``'s job.

The configuration compared against is the authenticated STATE's when a key is given, else the
unauthenticated BUDGET's (a man in the middle can rewrite it): the result says which."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, kstest
from tqdm import tqdm

from ..device.client import open_device
from ..device.errors import DeviceError, EdgeDPError
from ..mech import dlap, fast
from ..mech.lattice import make_lattice, quantize, to_epsilon
from ..mech.modes import Mode

ALPHA = 1e-3
SIMULATIONS = 2000
FULL = Mode.parse("full")


@dataclass
class Sent:
    """The device check's charged queries so far, counted as they are answered (what a caller
    still knows when the link fails during the check)."""
    planned: int = 0
    answered: int = 0
    epsilon: float = 0.0  # charged for each, from the device's configuration


def interrupted(target: str | None, authenticated: bool, sent: Sent) -> dict:
    """The result of a check that ended before its last query: what was charged, no test."""
    return {"target": target or "default", "mode": str(FULL), "authenticated": authenticated,
            "epsilon": sent.epsilon, "queries": sent.answered, "epsilon_spent": sent.answered * sent.epsilon,
            "ok": False, "interrupted": True,
            "reason": f"interrupted after {sent.answered} of {sent.planned} queries"}


def pit(y: np.ndarray, q: np.ndarray, lo: int, hi: int, inv_t: float, rng: np.random.Generator) -> np.ndarray:
    """Randomised PIT of clamped lattice answers y given quantised inputs q: U(0,1) under the law."""
    below = np.where(y <= lo, 0.0, dlap.cdf(y - 1 - q, inv_t))   # P(Y < y)
    upto = np.where(y >= hi, 1.0, dlap.cdf(y - q, inv_t))        # P(Y <= y)
    return below + rng.random(y.shape) * (upto - below)


def compare(x: np.ndarray, lattice: np.ndarray, eps_micro: int, sens: float, lo: float, hi: float,
            m: int | None, rng: np.random.Generator) -> dict:
    """Test the device's full-mode lattice answers (n, k) for inputs x (n, k)."""
    n, k = x.shape
    eps = to_epsilon(eps_micro)
    lat = make_lattice(k, eps_micro, sens, lo, hi, m)
    q = quantize(x, lat, lo, hi)
    if lattice.shape != q.shape or lattice.min() < lat.lo or lattice.max() > lat.hi:
        return {"epsilon": eps, "queries": int(n), "ok": False,
                "reason": "answers outside the configured range or of the wrong shape"}
    p_values = float(kstest(pit(lattice, q, lat.lo, lat.hi, lat.inv_t, rng).ravel(), "uniform").pvalue)
    ref = np.argmax(np.clip(q, lat.lo, lat.hi), axis=1)
    got = np.argmax(lattice, axis=1)
    hits_sim, per = 0, max(1, 200_000 // (n * k))
    for done in range(0, SIMULATIONS, per):
        reps = min(per, SIMULATIONS - done)
        y = fast.noisy_lattice(np.tile(x, (reps, 1)), eps, sens, lo, hi, rng, m)[0]
        hits_sim += int(np.sum(np.argmax(np.clip(y, lat.lo, lat.hi), axis=1) == np.tile(ref, reps)))
    p = float(np.clip(hits_sim / (SIMULATIONS * n), 1e-9, 1 - 1e-9))
    hits = int(np.sum(got == ref))
    p_labels = float(binomtest(hits, n, p).pvalue)
    return {"epsilon": eps, "sensitivity": sens, "range": [lo, hi], "lattice_exponent": lat.m, "queries": int(n),
            "values_checked": int(n * k), "pvalue_values": p_values,
            "device_agreement": hits / n, "reference_agreement": p, "pvalue_labels": p_labels,
            "alpha": ALPHA, "ok": min(p_values, p_labels) >= ALPHA / 2}


def check(target: str | None, probs: np.ndarray, queries: int, seed: int, progress: bool = True,
          key: bytes | None = None, stop: Callable[[], bool] | None = None, sent: Sent | None = None) -> dict:
    """Send ``queries`` test rows through the device (full mode); compare with the fast sampler at
    the device's configuration: from STATE authenticated with ``key``, or without one from BUDGET
    (``authenticated`` in the result says which). If ``stop()`` holds before a query, none is sent
    after it: the result has ``interrupted``, the queries answered and the ε they spent, no test.
    A ``stop()`` that becomes true later (during the last query, the test or the device's close)
    changes nothing here: the caller reads it after this returns. ``sent``: counts the queries as
    they are answered (for a caller whose check ended in a link error)."""
    sent = Sent() if sent is None else sent
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xDE1CE]))
    idx = rng.choice(len(probs), size=min(queries, len(probs)), replace=False)
    x = probs[idx].astype(np.float32).astype(np.float64)  # what the wire carries
    sent.planned = len(x)
    with open_device(target) as dev:
        b = dev.state(key).budget if key is not None else dev.budget()
        eps = sent.epsilon = to_epsilon(b.epsilon_micro)
        if (b.lo, b.hi) != (0.0, 1.0):
            raise ValueError(f"the device is configured for range [{b.lo:g}, {b.hi:g}]; the trade-off check sends "
                             "softmax probabilities: configure range 0 1 (edgedp admin config --range 0 1)")
        if b.remaining < len(x) * b.epsilon_micro:
            raise ValueError(f"the device has {to_epsilon(b.remaining):g} of today's budget left; {len(x)} queries at "
                             f"ε = {eps:g} need {len(x) * eps:g} (edgedp admin reset-budget, or fewer --target-queries)")
        rows: list[np.ndarray] = []
        ms: set[int] = set()
        for row in tqdm(x, desc="device queries", disable=not progress, leave=False):
            if stop and stop():
                break
            try:
                r = dev.query(row.astype(np.float32), FULL)
            except DeviceError as exc:
                raise EdgeDPError(f"device refused a query after {len(rows)}: {exc}", exc.error.name) from None
            rows.append(r.lattice)
            sent.answered += 1
            ms.add(r.m)
    if len(rows) < len(x):
        return interrupted(target, key is not None, sent)
    base = {"target": target or "default", "mode": str(FULL), "authenticated": key is not None}
    if len(ms) != 1:
        raise ValueError(f"the device changed its lattice during the check ({sorted(ms)})")
    return {**base, **compare(x, np.stack(rows), b.epsilon_micro, float(b.sensitivity), float(b.lo), float(b.hi),
                      ms.pop(), rng)}
