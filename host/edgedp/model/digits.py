"""Models trained here on scikit-learn's digits (the split of edgedp.analysis): what the
bundled image carries and what `edgedp deploy digits-*` builds."""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from ..datasets import Split, digits_split
from .learners import ModelSpec, train_mlp, train_teachers
from .convert import from_sklearn, from_teachers
from .spec import DeviceModel

BUILTIN = ("digits-ensemble", "digits-logreg", "digits-mlp")
SEED = 0


def split(seed: int = SEED) -> Split:
    return digits_split(seed)


def train(name: str, seed: int = SEED, teachers: int = ModelSpec().teachers) -> tuple[DeviceModel, object]:
    """(device model, the trained scikit-learn object or teacher list) for a built-in name."""
    s = split(seed)
    if name == "digits-ensemble":
        t = train_teachers(s.X_pool, s.y_pool, teachers, seed)
        return from_teachers(t, s.classes, s.X_pool.shape[1], name), t
    if name == "digits-logreg":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m = LogisticRegression(C=10.0, max_iter=2000).fit(s.X_pool, s.y_pool)
        return from_sklearn(m, name), m
    if name == "digits-mlp":
        m = train_mlp(s.X_pool, s.y_pool, seed, ModelSpec())
        return from_sklearn(m, name), m
    raise ValueError(f"unknown built-in model {name!r} (one of {', '.join(BUILTIN)})")


def float_predict(obj: object, X: np.ndarray) -> np.ndarray:
    """The float64 host model's labels (teacher lists: the plain vote argmax)."""
    if isinstance(obj, list):
        votes = np.zeros((len(X), 10))
        for t in obj:
            votes[np.arange(len(X)), t.predict(X).astype(int)] += 1
        return votes.argmax(1)
    return obj.predict(X)  # type: ignore[attr-defined]  # a fitted scikit-learn classifier (untyped)
