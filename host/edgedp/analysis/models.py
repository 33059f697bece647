"""Models trained here: the target, the attacker's shadow models, and teacher ensembles.

A *population* is M = shadows + 1 models, each trained on a random half of the pool (model 0
is the target the API serves; the others are the attacker's shadows, and in the leave-one-out
evaluation every model takes a turn as the target).  Every model comes with a teacher
ensemble: T logistic regressions on T disjoint parts of the same half (a record's part is
SHA-256(seed, record id) mod T, see ``teacher_of``), whose vote histogram
is the ensemble mechanism's input (range [0, T], Delta = 2: one record changes one teacher's
vote).
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits

from .data import Split
from .parallel import int_seed, pmap, rng_for


@dataclass(frozen=True)
class ModelSpec:
    """The single model: an MLP trained to zero training error (it memorises; that is the point)."""

    hidden: tuple[int, ...] = (64,)
    alpha: float = 1e-5
    max_iter: int = 300
    teachers: int = 30
    teacher_c: float = 10.0


def train_mlp(X: np.ndarray, y: np.ndarray, seed: int, spec: ModelSpec) -> MLPClassifier:
    model = MLPClassifier(hidden_layer_sizes=spec.hidden, alpha=spec.alpha, max_iter=spec.max_iter,
                          random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def proba(model, X: np.ndarray, k: int) -> np.ndarray:
    """predict_proba with a column for every class 0..k-1 (zeros for classes never seen)."""
    out = np.zeros((len(X), k))
    out[:, model.classes_.astype(int)] = model.predict_proba(X)
    return out


class Constant:
    """A classifier that always answers one class (a teacher or surrogate that saw one class)."""

    def __init__(self, c: int):
        self.c = c

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), self.c)


def teacher_of(ids: np.ndarray, T: int, seed: int) -> np.ndarray:
    """The teacher of each record: SHA-256(seed, record id) mod T.

    A data-independent function of the record's id alone: adding or removing one record changes
    exactly one teacher's training set and no other record's teacher (a permutation of the data
    set would move other records between teachers)."""
    key = int(seed).to_bytes(8, "little", signed=True)
    return np.array([int.from_bytes(hashlib.sha256(key + int(i).to_bytes(8, "little", signed=True)).digest()[:8],
                                    "little") % T for i in ids], dtype=np.int64)


class Abstain:
    """A teacher whose part is empty: it casts no vote."""


def train_teachers(X: np.ndarray, y: np.ndarray, T: int, seed: int, c: float = 10.0,
                   ids: np.ndarray | None = None) -> list:
    """T logistic regressions on the T disjoint parts {records with teacher_of(id) = j}.

    ``ids`` default to the row numbers (then the partition is still per-id, for callers whose
    rows are their ids)."""
    if T < 1 or T > len(y):
        raise ValueError(f"need 1 <= teachers <= {len(y)} training records, got {T}")
    owner = teacher_of(np.arange(len(y)) if ids is None else np.asarray(ids), T, seed)
    teachers: list = []
    for j in range(T):
        p = np.flatnonzero(owner == j)
        if len(p) == 0:
            teachers.append(Abstain())
            continue
        if len(np.unique(y[p])) < 2:
            teachers.append(Constant(int(y[p][0])))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            teachers.append(LogisticRegression(C=c, max_iter=1000).fit(X[p], y[p]))
    return teachers


def votes(teachers: list, X: np.ndarray, k: int) -> np.ndarray:
    """Vote histogram (n, k): how many teachers predict each class."""
    out = np.zeros((len(X), k))
    rows = np.arange(len(X))
    for t in teachers:
        if not isinstance(t, Abstain):
            np.add.at(out, (rows, t.predict(X).astype(int)), 1.0)
    return out


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
                                if ensemble else None))
