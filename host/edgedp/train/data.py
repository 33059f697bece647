"""Training data: scikit-learn's digits (the analysis split: pool for training, held-out test), or
a user's ``.npz`` with features ``X`` (n, d) and labels ``y`` (n,), split once by the seed."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..analysis.data import TEST_FRACTION, digits_split


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
    perm = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED])).permutation(len(y))
    n_test = max(1, int(round(len(y) * test_fraction)))
    test, train = perm[:n_test], perm[n_test:]
    return TrainData(Path(path).name, X[train], y[train], X[test], y[test], classes, train)


def load(spec: str, seed: int) -> TrainData:
    return digits(seed) if spec == "digits" else load_npz(spec, seed)
