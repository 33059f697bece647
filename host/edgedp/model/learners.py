"""The scikit-learn learners of the deployable models: the single MLP, and the teacher ensemble's
logistic regressions on disjoint parts chosen by a hash of each record's id (its vote histogram
is the ensemble mechanism's input: range [0, T], Delta = 2, one record changes one teacher's vote)."""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier


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
