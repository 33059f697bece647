"""Model extraction through the protected API: train a surrogate on the API's answers.

The attacker holds unlabelled inputs from the same distribution (the pool, in a random
order) and spends Q queries on the first Q of them, one answer each.  The surrogate is a
multinomial logistic regression:

* label, bucket: trained on the released labels;
* full, topk:K, round:D, simplex: trained on the released values as soft labels (clipped at
  0 and normalised; each input contributes k weighted rows), i.e. distillation.  Noise with
  a clamped range keeps E[answer] increasing in the true score, so averaging over many
  inputs recovers the decision regions even at small epsilon.

Reported on the held-out test inputs: agreement of the surrogate with the victim's
non-private prediction, and the surrogate's own accuracy.  DP on the answers bounds what
they reveal about *training records*; it does not stop the *model* from being copied, and
these numbers show how fast it is.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from ..mech.modes import Mode
from ..datasets import Split
from .protected_api import SOFTMAX, Mechanism, ensemble, soft_targets
from .populations import Constant, Population
from .parallel import pmap, rng_for

SURROGATE_C = 1.0


def budgets_for(pool_size: int, quick: bool = False) -> list[int]:
    """100, 200, 400, ... up to the pool size (quick: 100, 400 and the pool size)."""
    steps = [100, 400] if quick else [100, 200, 400, 800]
    return [b for b in steps if b < pool_size] + [pool_size]


def fit_surrogate(X: np.ndarray, labels: np.ndarray, soft: np.ndarray | None):
    """Logistic regression on hard labels, or on soft labels via per-class weighted rows."""
    if soft is not None:
        k = soft.shape[1]
        Xr = np.repeat(X, k, axis=0)
        yr = np.tile(np.arange(k), len(X))
        w = soft.ravel()
        keep = w > 0
        Xr, yr, w = Xr[keep], yr[keep], w[keep]
    else:
        Xr, yr, w = X, labels, None
    if len(np.unique(yr)) < 2:
        return Constant(int(yr[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=SURROGATE_C, max_iter=300).fit(Xr, yr, sample_weight=w)


def _cell(X_query: np.ndarray, x_query: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
          victim_test: np.ndarray, mech: Mechanism, mode: Mode, epsilon: float, budgets: list[int],
          seed: int) -> list[dict]:
    with threadpool_limits(limits=1):
        k = x_query.shape[1]
        rel = mech.release(x_query, epsilon, mode, rng_for(seed, "extract", mech.name, str(mode), str(epsilon)))
        soft = soft_targets(rel, mode, k)
        rows = []
        for q in budgets:
            sur = fit_surrogate(X_query[:q], rel["label"][:q], None if soft is None else soft[:q])
            pred = sur.predict(X_test)
            rows.append({"mechanism": mech.name, "mode": str(mode), "epsilon": epsilon, "queries": int(q),
                         "agreement": float(np.mean(pred == victim_test)),
                         "accuracy": float(np.mean(pred == y_test)),
                         "epsilon_spent": q * epsilon if math.isfinite(epsilon) else math.inf,
                         "targets": "soft" if soft is not None else "labels"})
        return rows


def run(split: Split, pop: Population, modes: list[Mode], epsilons: list[float], budgets: list[int],
        seed: int, jobs: int = 1, progress: bool = True, include_ensemble: bool = True) -> list[dict]:
    """Rows {mechanism, mode, epsilon, queries, agreement, accuracy, epsilon_spent} against model 0."""
    order = rng_for(seed, "extract-order").permutation(len(split.y_pool))
    Xq = split.X_pool[order]
    mechs = [(SOFTMAX, pop.pool_probs[0][order], pop.test_probs[0])]
    if include_ensemble and pop.pool_votes is not None and pop.test_votes is not None:
        mechs.append((ensemble(pop.teachers), pop.pool_votes[0][order], pop.test_votes[0]))
    tasks = []
    for mech, xq, xt in mechs:
        victim = mech.release(xt, math.inf, Mode.parse("label"), rng_for(seed))["label"]
        tasks += [(Xq, xq, split.X_test, split.y_test, victim, mech, mode, eps, budgets, seed)
                  for mode in modes for eps in epsilons]
    rows: list[dict] = []
    for r in pmap(_cell, tasks, jobs=jobs, desc="model extraction", progress=progress, star=True):
        rows += r
    return rows
