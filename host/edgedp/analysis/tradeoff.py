"""What a privacy setting costs in accuracy: top-1 accuracy and agreement with the non-private
prediction of the released label, for every epsilon and output mode, for the single model's
softmax and for the teacher ensemble's vote histogram.

Modes are post-processing of one noisy vector, but the label a client reads differs: label,
topk and bucket send the argmax of the unclamped noisy vector; full, round and simplex send
clamped (rounded, projected) values whose argmax breaks ties at the top of the range toward
the lowest index.  At small epsilon many coordinates clamp to the top, so the value modes lose
accuracy that the ranking modes keep (``mechanism.visible_label``)."""
from __future__ import annotations

import math

import numpy as np
from tqdm import tqdm

from ..mech.modes import Mode
from .protected_api import SOFTMAX, Mechanism, ensemble, visible_label
from .parallel import rng_for


def evaluate(x: np.ndarray, labels: np.ndarray, mech: Mechanism, modes: list[Mode], epsilons: list[float],
             repeats: int, seed: int, progress: bool = True) -> list[dict]:
    """Rows {mechanism, mode, epsilon, accuracy, agreement, *_std, queries, repeats}.

    Each of ``repeats`` passes answers every row of x once with fresh noise."""
    reference = mech.release(x, math.inf, Mode.parse("label"), rng_for(seed))["label"]
    rows = []
    cells = [(m, e) for m in modes for e in epsilons]
    for mode, eps in tqdm(cells, desc=f"trade-off ({mech.name})", disable=not progress, leave=False):
        acc, agr = [], []
        for r in range(repeats if math.isfinite(eps) else 1):
            rel = mech.release(x, eps, mode, rng_for(seed, "tradeoff", mech.name, str(mode), str(eps), r))
            lab = visible_label(rel, mode)
            acc.append(float(np.mean(lab == labels)))
            agr.append(float(np.mean(lab == reference)))
        rows.append({"mechanism": mech.name, "mode": str(mode), "epsilon": eps,
                     "accuracy": float(np.mean(acc)), "agreement": float(np.mean(agr)),
                     "accuracy_std": float(np.std(acc)), "agreement_std": float(np.std(agr)),
                     "queries": int(len(x) * len(acc)), "repeats": len(acc)})
    return rows


def run(probs: np.ndarray, labels: np.ndarray, modes: list[Mode], epsilons: list[float], repeats: int,
        seed: int, votes: np.ndarray | None = None, teachers: int | None = None,
        progress: bool = True) -> list[dict]:
    """Softmax rows, then ensemble rows when a vote histogram is given."""
    rows = evaluate(probs, labels, SOFTMAX, modes, epsilons, repeats, seed, progress)
    if votes is not None and teachers:
        rows += evaluate(votes, labels, ensemble(teachers), modes, epsilons, repeats, seed, progress)
    return rows


def chance(labels: np.ndarray, k: int) -> float:
    """Accuracy of the best constant guess (the majority class share), the 'chance' level."""
    return float(np.bincount(labels, minlength=k).max() / len(labels))
