"""The third deployment: a model trained with DP-SGD (``edgedp.train``), whose answers are
post-processing of a private model and cost no budget at all.

Beside the single model with output noise and the teacher ensemble, for each training epsilon:
the population's models (same random halves as the others) are trained with DP-SGD at that
epsilon (delta = ``DELTA``, PLD accounting, the trainer's defaults: logistic regression, q = 0.25,
15 epochs); the trade-off and membership inference see their exact softmax in every mode.

``choice`` answers the deployment question: for a per-record lifetime budget E and N answers,
the output-noise mechanisms may spend per answer only the largest eps whose N-fold composition
stays within E (optimal pure-DP composition, any N); DP-SGD spends E once, in training.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..mech.modes import Mode
from . import accounting, mia
from ..datasets import Split
from .protected_api import SOFTMAX, Mechanism, is_discrete, membership_score, visible_label
from .parallel import int_seed, pmap, rng_for

DELTA = 1e-5
QUERY_VOLUMES = (1, 10, 100, 1_000, 10_000, 1_000_000)


@dataclass(frozen=True)
class DpsgdPopulation:
    epsilons: tuple[float, ...]
    pool_probs: np.ndarray        # (E, M, n_pool, k)
    test_probs: np.ndarray        # (E, M, n_test, k)
    noise_multipliers: tuple[float, ...]
    test_accuracy: tuple[float, ...]   # model 0 per epsilon
    delta: float
    steps: int
    sampling_rate: float
    n_train: int


@functools.lru_cache(maxsize=64)
def _noise(eps: float, q: float, steps: int, delta: float) -> float:
    from ..train import accountant
    return accountant.calibrate(eps, q, steps, delta, "pld")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _train_model(split: Split, mask: np.ndarray, nm: float, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One DP-SGD model on split.X_pool[mask]: its softmax on the pool and on the test set."""
    from ..train import dpsgd
    hyper = dpsgd.Hyper()
    out = dpsgd.train(split.X_pool[mask], split.y_pool[mask], split.classes, nm, 1.0, steps, hyper, seed)
    return (_softmax(dpsgd.predict_logits(out.params, split.X_pool)),
            _softmax(dpsgd.predict_logits(out.params, split.X_test)))


def build(split: Split, masks: np.ndarray, epsilons: list[float], seed: int,
          progress: bool = True, jobs: int = 1) -> DpsgdPopulation:
    """DP-SGD models for every (finite epsilon, model); model i trains on split.X_pool[masks[i]].
    The models are trained through ``parallel.pmap``: in this process by default (JAX compiles once),
    on ``jobs`` processes, or on the Dask cluster of an active ``parallel.backend``."""
    try:
        from ..train import dpsgd
    except ImportError as exc:
        raise ValueError(f"DP-SGD needs JAX ({exc}): pip install 'edgedp[train]', or pass --no-dpsgd") from None
    eps_list = tuple(e for e in epsilons if math.isfinite(e))
    hyper = dpsgd.Hyper()
    sizes = masks.sum(axis=1)
    if len(set(sizes.tolist())) != 1:
        raise ValueError("DP-SGD population needs equal-size training sets")
    n = int(sizes[0])
    if DELTA >= 1.0 / n:
        raise ValueError(f"DP-SGD at δ = {DELTA:g} needs more than {int(1 / DELTA)} training records, got {n}")
    steps = dpsgd.steps_for(hyper.epochs, hyper.sampling_rate)
    M = len(masks)
    nms = tuple(_noise(eps, hyper.sampling_rate, steps, DELTA) for eps in eps_list)
    tasks = [(split, masks[i], nms[e], steps, int_seed(seed, "dpsgd", i, str(eps)))
             for e, eps in enumerate(eps_list) for i in range(M)]
    out = pmap(_train_model, tasks, jobs=jobs, desc="DP-SGD models", progress=progress, star=True)
    E, k = len(eps_list), split.classes
    pool = np.array([p for p, _ in out]).reshape(E, M, len(split.y_pool), k)
    test = np.array([t for _, t in out]).reshape(E, M, len(split.y_test), k)
    acc = tuple(float((test[e, 0].argmax(1) == split.y_test).mean()) for e in range(len(eps_list)))
    return DpsgdPopulation(eps_list, pool, test, nms, acc, DELTA, steps, hyper.sampling_rate, n)


def tradeoff_rows(dp: DpsgdPopulation, labels: np.ndarray, reference: np.ndarray, modes: list[Mode]) -> list[dict]:
    """Accuracy and agreement (with the non-private single model's label) of the DP-SGD target
    model; its answers carry no output noise, so every mode gives the argmax of its softmax."""
    rows = []
    for e, eps in enumerate(dp.epsilons):
        lab = dp.test_probs[e, 0].argmax(1)
        for mode in modes:
            rows.append({"mechanism": "dpsgd", "mode": str(mode), "epsilon": eps,
                         "accuracy": float(np.mean(lab == labels)), "agreement": float(np.mean(lab == reference)),
                         "accuracy_std": 0.0, "agreement_std": 0.0, "queries": int(len(labels)), "repeats": 1,
                         "delta": dp.delta, "noise_multiplier": dp.noise_multipliers[e]})
    return rows


def mia_rows(dp: DpsgdPopulation, masks: np.ndarray, y_pool: np.ndarray, modes: list[Mode], seed: int,
             targets: int | None = None) -> tuple[list[dict], dict]:
    """Threshold and LiRA (online, offline) against the DP-SGD models' exact answers, leave-one-out."""
    tl = list(range(min(targets or len(masks), len(masks))))
    k = dp.pool_probs.shape[-1]
    rows, rocs = [], {}
    for e, eps in enumerate(dp.epsilons):
        for mode in modes:
            rel = SOFTMAX.release(dp.pool_probs[e], math.inf, mode, rng_for(seed, "mia-dpsgd"))
            s = membership_score(rel, y_pool[None, :], mode, SOFTMAX, k)
            for attack, (sc, mem) in mia.attack_scores(s, masks, is_discrete(mode), tl).items():
                summary, roc = mia.summarize(sc, mem)
                rows.append({"mechanism": "dpsgd", "attack": attack, "mode": str(mode), "epsilon": eps, **summary,
                             "auc_bound": accounting.auc_bound(eps),
                             "tpr_bound_at_1pct_fpr": accounting.tpr_bound(eps, 0.01, dp.delta),
                             "tpr_bound_at_0_1pct_fpr": accounting.tpr_bound(eps, 0.001, dp.delta),
                             "members": int(mem.sum()), "nonmembers": int((~mem).sum()),
                             "targets": len(tl), "shadows": len(masks) - 1, "delta": dp.delta})
                rocs[("dpsgd", attack, str(mode), eps)] = roc
    return rows, rocs


def per_query_epsilon(total: float, queries: int, delta: float) -> float:
    """Largest per-answer eps whose N-fold composition is within ``total`` at ``delta``
    (optimal pure-DP composition, which holds for the device's answers at any N)."""
    if queries <= 1:
        return total
    lo, hi = total / queries, total   # basic composition is always feasible
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if accounting.optimal_pure_composition(mid, queries, delta) <= total else (lo, mid)
    return lo


def choice(dp: DpsgdPopulation, probs: np.ndarray, votes: np.ndarray | None, teachers: int | None,
           labels: np.ndarray, mode: Mode, seed: int, volumes: tuple[int, ...] = QUERY_VOLUMES,
           repeats: int = 2) -> list[dict]:
    """For every DP-SGD epsilon E (as a per-record lifetime budget) and query volume N: accuracy
    of each deployment within E, and the winner (none when every accuracy is within 5 points of
    chance)."""
    mechs: list[tuple[Mechanism, np.ndarray]] = [(SOFTMAX, probs)]
    if votes is not None and teachers:
        from .protected_api import ensemble
        mechs.append((ensemble(teachers), votes))
    rows = []
    chance = float(np.bincount(labels).max() / len(labels))
    for e, E in enumerate(dp.epsilons):
        dp_acc = float(np.mean(dp.test_probs[e, 0].argmax(1) == labels))
        for N in volumes:
            eq = per_query_epsilon(E, N, dp.delta)
            row: dict[str, object] = {"total_epsilon": E, "delta": dp.delta, "queries": N, "per_query_epsilon": eq,
                                      "mode": str(mode), "dpsgd": dp_acc}
            acc = {"dpsgd": dp_acc}   # the deployments that answered
            for mech, x in mechs:
                try:
                    accs = [float(np.mean(visible_label(mech.release(x, eq, mode, rng_for(
                        seed, "choice", mech.name, str(E), N, r)), mode) == labels)) for r in range(repeats)]
                    row[mech.name] = acc[mech.name] = float(np.mean(accs))
                except ValueError:   # the device refuses this small an epsilon (noise scale beyond 2^25 steps)
                    row[mech.name] = None
            best = max((m for m in ("softmax", "ensemble", "dpsgd") if m in acc), key=acc.__getitem__)
            # within 5 points of the majority-class share, nobody wins: all answers are about noise
            row["winner"] = best if acc[best] >= chance + 0.05 else "none (all near chance)"
            rows.append(row)
    return rows
