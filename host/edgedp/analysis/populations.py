"""Populations of models trained here: the target, the attacker's shadow models, and their teacher
ensembles (the learners themselves: edgedp.model.learners).

A *population* is M = shadows + 1 models, each trained on a random half of the pool (model 0
is the target the API serves; the others are the attacker's shadows, and in the leave-one-out
evaluation every model takes a turn as the target).  Every model comes with a teacher
ensemble: T logistic regressions on T disjoint parts of the same half (a record's part is
SHA-256(seed, record id) mod T, see ``teacher_of``), whose vote histogram
is the ensemble mechanism's input (range [0, T], Delta = 2: one record changes one teacher's
vote).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..datasets import Split
from ..model.learners import Abstain, Constant, ModelSpec, proba, teacher_of, train_mlp, train_teachers, votes
from .parallel import int_seed, pmap, rng_for

__all__ = ["Abstain", "Constant", "ModelSpec", "Population", "build_population", "half_masks", "proba",
           "teacher_of", "train_mlp", "train_teachers", "votes"]


@dataclass(frozen=True)
class Population:
    """Outputs of M models (and their ensembles) on the pool and the test set."""

    masks: np.ndarray        # (M, n_pool) bool: training membership
    pool_probs: np.ndarray   # (M, n_pool, k)
    test_probs: np.ndarray   # (M, n_test, k)
    pool_votes: np.ndarray | None   # (M, n_pool, k) or None
    test_votes: np.ndarray | None
    teachers: int
    train_accuracy: float    # target model on its own training half
    test_accuracy: float     # target model on the test set
    ensemble_test_accuracy: float | None

    @property
    def size(self) -> int:
        return len(self.masks)

    @property
    def ensemble_test_votes(self) -> np.ndarray:
        """``test_votes`` of a population built with ``ensemble=True``."""
        if self.test_votes is None:
            raise ValueError("this population has no ensembles (built with ensemble=False)")
        return self.test_votes


def half_masks(n: int, models: int, seed: int) -> np.ndarray:
    """Independent random halves of the pool, one per model."""
    masks = np.zeros((models, n), dtype=bool)
    for i in range(models):
        masks[i, rng_for(seed, "half", i).permutation(n)[: n // 2]] = True
    return masks


def _train_one(split: Split, mask: np.ndarray, seed: int, index: int, spec: ModelSpec,
               ensemble: bool) -> tuple:
    with threadpool_limits(limits=1):  # small matrices: one BLAS thread per worker is fastest
        return _train_one_inner(split, mask, seed, index, spec, ensemble)


def _train_one_inner(split: Split, mask: np.ndarray, seed: int, index: int, spec: ModelSpec,
                     ensemble: bool) -> tuple:
    X, y, k = split.X_pool[mask], split.y_pool[mask], split.classes
    ids = split.ids_pool[mask]
    mlp = train_mlp(X, y, int_seed(seed, "mlp", index), spec)
    pp, tp = proba(mlp, split.X_pool, k), proba(mlp, split.X_test, k)
    if not ensemble:
        return pp, tp, None, None
    teachers = train_teachers(X, y, spec.teachers, int_seed(seed, "teachers", index), spec.teacher_c, ids)
    return pp, tp, votes(teachers, split.X_pool, k), votes(teachers, split.X_test, k)


def build_population(split: Split, models: int, seed: int, spec: ModelSpec = ModelSpec(),
                     ensemble: bool = True, jobs: int = 1, progress: bool = True) -> Population:
    """Train ``models`` MLPs (and ensembles) on random halves of the pool; model 0 is the target."""
    masks = half_masks(len(split.y_pool), models, seed)
    res = pmap(_train_one, [(split, masks[i], seed, i, spec, ensemble) for i in range(models)],
               jobs=jobs, desc="training models", progress=progress, star=True)
    pool_probs = np.stack([r[0] for r in res])
    test_probs = np.stack([r[1] for r in res])
    pool_votes = np.stack([r[2] for r in res]) if ensemble else None
    test_votes = np.stack([r[3] for r in res]) if ensemble else None
    m0 = masks[0]
    return Population(
        masks=masks, pool_probs=pool_probs, test_probs=test_probs, pool_votes=pool_votes,
        test_votes=test_votes, teachers=spec.teachers,
        train_accuracy=float((pool_probs[0][m0].argmax(1) == split.y_pool[m0]).mean()),
        test_accuracy=float((test_probs[0].argmax(1) == split.y_test).mean()),
        ensemble_test_accuracy=(float((test_votes[0].argmax(1) == split.y_test).mean())
                                if test_votes is not None else None))
