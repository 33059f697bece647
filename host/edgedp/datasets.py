"""The data of the project in one place: the records models are trained on (scikit-learn's digits,
or a user's ``.npz`` of features ``X`` (n, d) and integer labels ``y`` (n,)), read once and split
once by a seed for the analysis, training and benchmarks alike; and a user's model outputs on
labelled held-out inputs (``Outputs``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

TEST_FRACTION = 1 / 3


def seeded_split(n: int, seed: int, test_fraction: float = TEST_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """(test rows, pool rows) of n records, shuffled by ``seed``."""
    perm = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED])).permutation(n)
    n_test = max(1, int(round(n * test_fraction)))
    return perm[:n_test], perm[n_test:]


@dataclass(frozen=True)
class Split:
    """Digits split once: a pool (the population models are trained from and the attacker
    queries) and a held-out test set (accuracy, agreement). Pixels scaled to [0, 1]. Every
    record has an id (its row in scikit-learn's array) that the teacher partition hashes."""

    X_pool: np.ndarray
    y_pool: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: int
    ids_pool: np.ndarray     # each pool record's id: its row in the original data set
    source: str = "digits"

    @property
    def name(self) -> str:
        return self.source


@dataclass(frozen=True)
class TrainData:
    name: str
    X_train: np.ndarray
    y_train: np.ndarray    # class indices 0..k-1
    X_test: np.ndarray
    y_test: np.ndarray
    classes: np.ndarray    # label value of each class index
    ids_train: np.ndarray  # each training record's row in the original data (its id)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_features(self) -> int:
        return int(self.X_train.shape[1])


def digits_split(seed: int, test_fraction: float = TEST_FRACTION) -> Split:
    """scikit-learn's digits (1,797 8x8 images, 10 classes), pixels scaled to [0, 1], split by ``seed``."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float64) / 16.0
    test, pool = seeded_split(len(y), seed, test_fraction)
    return Split(X_pool=X[pool], y_pool=y[pool], X_test=X[test], y_test=y[test], classes=10, ids_pool=pool)


def digits(seed: int) -> TrainData:
    s = digits_split(seed)
    return TrainData("digits", s.X_pool, s.y_pool, s.X_test, s.y_test, np.arange(10), s.ids_pool)


def load_npz(path: str | Path, seed: int, test_fraction: float = TEST_FRACTION) -> TrainData:
    """Features X and labels y from an .npz; labels may be any integers (mapped to indices)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            if "X" not in f.files or "y" not in f.files:
                raise ValueError(f"{path}: needs arrays X (features) and y (labels), has {sorted(f.files)}")
            X = np.asarray(f["X"], dtype=np.float64)
            y_raw = np.asarray(f["y"]).ravel()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    if X.ndim != 2 or len(X) != len(y_raw):
        raise ValueError(f"{path}: X must be (n, d) with one label per row (X {X.shape}, y {y_raw.shape})")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{path}: X contains NaN or Inf")
    if not np.issubdtype(y_raw.dtype, np.integer) and not np.all(np.equal(np.mod(y_raw, 1), 0)):
        raise ValueError(f"{path}: labels y must be integers")
    classes, y = np.unique(y_raw.astype(np.int64), return_inverse=True)
    if len(classes) < 2:
        raise ValueError(f"{path}: needs at least two classes")
    if len(y) < 10:
        raise ValueError(f"{path}: needs at least 10 records")
    test, train = seeded_split(len(y), seed, test_fraction)
    return TrainData(Path(path).name, X[train], y[train], X[test], y[test], classes, train)


def load(spec: str, seed: int) -> TrainData:
    """digits, or an .npz with X and y."""
    return digits(seed) if spec == "digits" else load_npz(spec, seed)


def features_split(path: str | Path, seed: int, test_fraction: float = TEST_FRACTION) -> Split:
    """A user's .npz of features ``X`` (n, d) and integer labels ``y`` (n,), split like digits.

    Features are used as they are: scale them to a fixed range yourself (scaling by the data's
    own statistics is a release about the training data that no epsilon here covers)."""
    td = load_npz(path, seed, test_fraction)
    return Split(X_pool=td.X_train, y_pool=td.y_train, X_test=td.X_test, y_test=td.y_test,
                 classes=td.n_classes, ids_pool=td.ids_train, source=str(path))


def has_features(path: str | Path) -> bool:
    with np.load(path, allow_pickle=False) as f:
        return "X" in f.files


def load_split(spec: str, seed: int) -> Split:
    """digits, or an .npz with X and y."""
    return digits_split(seed) if spec == "digits" else features_split(spec, seed)


def duplicate_count(X: np.ndarray) -> int:
    """Rows of X that repeat an earlier row exactly (a privacy audit checklist asks about duplicates)."""
    _, counts = np.unique(np.ascontiguousarray(X), axis=0, return_counts=True)
    return int((counts - 1).sum())


@dataclass(frozen=True)
class Outputs:
    """A user's model outputs on labelled held-out inputs.

    ``probs`` (n, k) in [0, 1]; ``votes`` (n, k) teacher vote counts and ``teachers`` T when the
    file carries an ensemble's histogram."""

    probs: np.ndarray
    labels: np.ndarray
    votes: np.ndarray | None = None
    teachers: int | None = None
    source: str = ""


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def load_outputs(path: str | Path) -> Outputs:
    """Read ``probs`` (or ``probabilities``) or ``logits``, and ``labels`` (or ``y``), shape (n, k)
    and (n,); optionally ``votes`` (n, k) non-negative teacher counts (T = largest row sum).

    Logits are turned into probabilities with a softmax, as the device's softmax range [0, 1]
    and Delta = 2 assume."""
    with np.load(path, allow_pickle=False) as f:
        keys = set(f.files)
        if "probs" in keys or "probabilities" in keys:
            probs = np.asarray(f["probs" if "probs" in keys else "probabilities"], dtype=np.float64)
            if probs.ndim != 2 or probs.min() < -1e-6 or probs.max() > 1 + 1e-6:
                raise ValueError(f"{path}: probabilities must be an (n, k) array in [0, 1]")
        elif "logits" in keys:
            logits = np.asarray(f["logits"], dtype=np.float64)
            if logits.ndim != 2:
                raise ValueError(f"{path}: logits must be an (n, k) array")
            probs = softmax(logits)
        else:
            raise ValueError(f"{path}: needs an array named probs, probabilities or logits (has {sorted(keys)})")
        if "labels" not in keys and "y" not in keys:
            raise ValueError(f"{path}: needs an array named labels (or y)")
        labels = np.asarray(f["labels" if "labels" in keys else "y"]).astype(np.int64).ravel()
        votes = np.asarray(f["votes"], dtype=np.float64) if "votes" in keys else None
    n, k = probs.shape
    if len(labels) != n:
        raise ValueError(f"{path}: {len(labels)} labels for {n} rows")
    if labels.min() < 0 or labels.max() >= k:
        raise ValueError(f"{path}: labels must be class indices 0..{k - 1}")
    if not np.all(np.isfinite(probs)):
        raise ValueError(f"{path}: outputs contain NaN or Inf")
    teachers = None
    if votes is not None:
        if votes.shape != probs.shape or votes.min() < 0:
            raise ValueError(f"{path}: votes must be non-negative counts of shape {probs.shape}")
        teachers = int(round(votes.sum(axis=1).max()))
    return Outputs(probs=np.clip(probs, 0.0, 1.0), labels=labels, votes=votes, teachers=teachers,
                   source=str(path))
