"""Trained models -> DeviceModel: scikit-learn LogisticRegression / MLPClassifier (joblib), a
teacher ensemble (list of them), and the `edgedp train` model file (NAME.npz + manifest)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import joblib
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from ..train import model_file as models_io
from .learners import Constant
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
    k = len(m.classes_)  # type: ignore[attr-defined]  # a fitted scikit-learn classifier (untyped)
    net = sklearn_net(m, np.arange(k), int(m.n_features_in_))  # type: ignore[attr-defined]  # as above
    return DeviceModel(name, "softmax", k, (net,), *SOFTMAX_RANGE)


def from_teachers(teachers: Sequence[object], n_classes: int, n_features: int, name: str) -> DeviceModel:
    """A teacher ensemble: the vote histogram, range [0, T], Delta = 2 (one record changes one
    teacher's vote). Teachers' class labels are the class indices 0..n_classes-1."""
    nets = tuple(sklearn_net(t, _int_classes(t.classes_) if hasattr(t, "classes_") else np.array([0]),
                             n_features) for t in teachers)
    return DeviceModel(name, "votes", n_classes, nets, 0.0, float(len(nets)))


@dataclass(frozen=True)
class Loaded:
    """A model file as deployed (``model``) and as trained: ``predict`` gives the float host
    model's label values, ``labels[c]`` the label value of the device's class index c."""

    model: DeviceModel
    labels: np.ndarray
    predict: Callable[[np.ndarray], np.ndarray]


def _fitted(m: object, path: Path) -> None:
    if isinstance(m, (LogisticRegression, MLPClassifier)) and not hasattr(m, "classes_"):
        raise ValueError(f"{path}: the {type(m).__name__} is not fitted: call fit(X, y) before saving it")


def _votes_predict(teachers: Sequence[object], k: int) -> Callable[[np.ndarray], np.ndarray]:
    def predict(X: np.ndarray) -> np.ndarray:
        votes = np.zeros((len(X), k))
        for t in teachers:
            # a teacher is a Constant or a fitted scikit-learn classifier (untyped)
            pred = np.full(len(X), t.c) if isinstance(t, Constant) else t.predict(X)  # type: ignore[attr-defined]
            votes[np.arange(len(X)), np.asarray(pred).astype(int)] += 1
        return votes.argmax(1)
    return predict


def load_file(path: str | Path) -> Loaded:
    """A model file: .npz (`edgedp train`, with its manifest), or .joblib holding a fitted
    LogisticRegression / MLPClassifier or a list of them (a teacher ensemble). ValueError with
    the reason for anything else."""
    path = Path(path)
    if path.suffix == ".npz":
        try:
            m, man = models_io.load_checked(path)
        except FileNotFoundError:
            raise ValueError(f"{path}: no such file") from None
        except models_io.ModelFileError as exc:
            raise models_io.ModelFileError(f"{exc} (deploy takes the model file `edgedp train` writes: NAME.npz "
                                           "with NAME.manifest.json)") from None
        except Exception as exc:  # not a zip of arrays: np.load fails in several ways
            raise ValueError(f"{path}: not an `edgedp train` model file ({type(exc).__name__}: {exc})") from None
        net = Net(tuple(Dense(w, b) for w, b in m.layers), np.arange(m.n_classes))
        rng = man.data.get("input_range")  # the training data's range: the device clamps inputs to it
        input_range = (float(rng[0]), float(rng[1])) if rng else None
        return Loaded(DeviceModel(path.stem, "softmax", m.n_classes, (net,), *SOFTMAX_RANGE, input_range=input_range),
                      m.classes, m.predict)
    try:
        obj = joblib.load(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except Exception as exc:  # a file that is not a joblib/pickle dump fails in many ways (KeyError, EOF, ...)
        raise ValueError(f"{path}: not a model file that joblib can read ({type(exc).__name__}: {exc}); "
                         "save a fitted scikit-learn classifier with joblib.dump(model, FILE)") from None
    name = path.stem
    if isinstance(obj, (list, tuple)):
        if not obj:
            raise ValueError(f"{path}: an empty list of teachers")
        for t in obj:
            _fitted(t, path)
            if not isinstance(t, (LogisticRegression, MLPClassifier, Constant)):
                raise ValueError(f"{path}: cannot deploy a {type(t).__name__} teacher (LogisticRegression or "
                                 "MLPClassifier)")
        n_features = next((int(t.n_features_in_) for t in obj if hasattr(t, "n_features_in_")), None)
        if n_features is None:
            raise ValueError(f"{path}: no teacher says how many inputs it takes")
        k = 1 + max(int(np.max(t.classes_)) if hasattr(t, "classes_") else t.c for t in obj)
        return Loaded(from_teachers(obj, k, n_features, name), np.arange(k), _votes_predict(obj, k))
    _fitted(obj, path)
    if not isinstance(obj, (LogisticRegression, MLPClassifier)):
        raise ValueError(f"{path}: cannot deploy a {type(obj).__name__} (a fitted LogisticRegression or "
                         "MLPClassifier, a list of them, or an `edgedp train` .npz)")
    return Loaded(from_sklearn(obj, name), np.asarray(obj.classes_), obj.predict)


def load(path: str | Path) -> DeviceModel:
    """The device model of a model file (see ``load_file``)."""
    return load_file(path).model
