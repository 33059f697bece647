"""Trained models -> DeviceModel: scikit-learn LogisticRegression / MLPClassifier (joblib), a
teacher ensemble (list of them), and the `edgedp train` model file (NAME.npz + manifest)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import joblib
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from ..analysis.models import Constant
from .spec import Dense, DeviceModel, Net

SOFTMAX_RANGE = (0.0, 1.0)


def _int_classes(classes: np.ndarray) -> np.ndarray:
    c = np.asarray(classes)
    if c.dtype.kind not in "iu" and not np.all(np.equal(np.mod(c, 1), 0)):
        raise ValueError(f"class labels must be integers 0..k-1 for an ensemble, got {c[:5]}")
    return c.astype(np.int64)


def _binary_head(w: np.ndarray, b: np.ndarray) -> Dense:
    """A one-output binary layer z as two logits [0, z]: softmax = (1 - sigmoid, sigmoid), and
    the argmax is class 1 iff z > 0, as scikit-learn predicts."""
    return Dense(np.concatenate([np.zeros_like(w), w], axis=1), np.concatenate([np.zeros_like(b), b]))


def logreg_net(m: LogisticRegression, classes: np.ndarray) -> Net:
    w, b = m.coef_.T, m.intercept_
    layer = _binary_head(w, b) if w.shape[1] == 1 else Dense(w, b)
    return Net((layer,), classes)


def mlp_net(m: MLPClassifier, classes: np.ndarray) -> Net:
    if m.activation != "relu":
        raise ValueError(f"only ReLU MLPs deploy (this one uses {m.activation!r})")
    if m.out_activation_ not in ("softmax", "logistic") or len(m.classes_) < 2:
        raise ValueError("only single-label classifiers deploy")
    layers = [Dense(w, b) for w, b in zip(m.coefs_, m.intercepts_)]
    if m.out_activation_ == "logistic":
        layers[-1] = _binary_head(layers[-1].w, layers[-1].b)
    return Net(tuple(layers), classes)


def sklearn_net(m: object, classes: np.ndarray, n_features: int) -> Net:
    if isinstance(m, LogisticRegression):
        return logreg_net(m, classes)
    if isinstance(m, MLPClassifier):
        return mlp_net(m, classes)
    if isinstance(m, Constant):  # a teacher that saw one class: one output, always the winner
        return Net((Dense(np.zeros((n_features, 1)), np.zeros(1)),), np.array([m.c]))
    raise ValueError(f"cannot deploy a {type(m).__name__} (LogisticRegression or MLPClassifier)")


def from_sklearn(m: object, name: str) -> DeviceModel:
    """One classifier, softmax head; the device's class c is ``m.classes_[c]``."""
    k = len(m.classes_)  # type: ignore[attr-defined]
    net = sklearn_net(m, np.arange(k), int(m.n_features_in_))  # type: ignore[attr-defined]
    return DeviceModel(name, "softmax", k, (net,), *SOFTMAX_RANGE)


def from_teachers(teachers: Sequence[object], n_classes: int, n_features: int, name: str) -> DeviceModel:
    """A teacher ensemble: the vote histogram, range [0, T], Delta = 2 (one record changes one
    teacher's vote). Teachers' class labels are the class indices 0..n_classes-1."""
    nets = tuple(sklearn_net(t, _int_classes(t.classes_) if hasattr(t, "classes_") else np.array([0]),
                             n_features) for t in teachers)
    return DeviceModel(name, "votes", n_classes, nets, 0.0, float(len(nets)))


def from_npz(path: Path) -> DeviceModel:
    """The `edgedp train` model file: kind, n_features, n_classes, W0, b0, W1, b1, ... (float32,
    W_i of shape (in, out), ReLU between layers, logits last) and classes; NAME.manifest.json
    beside it (its model_sha256 must match; its data.input_range, the training data's range,
    becomes the model's input range)."""
    import hashlib

    manifest = path.with_name(path.name[: -len(".npz")] + ".manifest.json")
    input_range = None
    if manifest.exists():
        doc = json.loads(manifest.read_text())
        want = doc.get("model_sha256")
        if want and want != hashlib.sha256(path.read_bytes()).hexdigest():
            raise ValueError(f"{path}: sha256 differs from {manifest.name} (model_sha256)")
        rng = doc.get("data", {}).get("input_range")
        input_range = (float(rng[0]), float(rng[1])) if rng else None
    with np.load(path, allow_pickle=False) as z:
        kind = str(z["kind"])
        if kind not in ("logreg", "mlp"):
            raise ValueError(f"{path}: kind must be 'logreg' or 'mlp', got {kind!r}")
        n_layers = sum(1 for key in z.files if key.startswith("W"))
        layers = tuple(Dense(z[f"W{i}"], z[f"b{i}"]) for i in range(n_layers))
        k, n = int(z["n_classes"]), int(z["n_features"])
    if not layers or layers[0].w.shape[0] != n or layers[-1].w.shape[1] != k:
        raise ValueError(f"{path}: layers do not map {n} features to {k} classes")
    return DeviceModel(path.stem, "softmax", k, (Net(layers, np.arange(k)),), *SOFTMAX_RANGE,
                       input_range=input_range)


def load(path: str | Path) -> DeviceModel:
    """A model file: .npz (`edgedp train`), or .joblib holding a classifier or a list of them
    (a teacher ensemble)."""
    path = Path(path)
    if path.suffix == ".npz":
        return from_npz(path)
    obj = joblib.load(path)
    name = path.stem
    if isinstance(obj, (list, tuple)):
        n_features = next(int(t.n_features_in_) for t in obj if hasattr(t, "n_features_in_"))
        k = 1 + max(int(np.max(t.classes_)) if hasattr(t, "classes_") else t.c for t in obj)
        return from_teachers(obj, k, n_features, name)
    return from_sklearn(obj, name)
