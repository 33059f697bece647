"""The model file that ``edgedp train`` writes and the rest of the tool reads.

``NAME.npz`` holds ``kind`` ("logreg" or "mlp"), ``n_features``, ``n_classes``, dense layers
``W0, b0, W1, b1, ...`` (float32, W_i of shape (in, out), ReLU between layers, the last layer's
outputs are the logits) and ``classes`` (the label value of each output).  ``NAME.manifest.json``
is the privacy manifest: ``model_sha256`` (SHA-256 of the npz bytes), ``training`` {private,
epsilon, delta, neighbouring, epsilon_add_remove, epsilon_replace_one, accountant, noise_multiplier,
clip_norm, sampling_rate, sampling, steps (the steps run), epochs, n_train, randomness, noise,
planned_steps, max_epsilon (null without ``--max-epsilon``), stopped_early, epoch_steps (the step at
which each epoch ended; the last entry is ``steps``) and epsilon_per_epoch (epsilon by the
accountant after each of those steps: a plain list of numbers whose last entry is ``epsilon``);
stop_reason when the run stopped before its planned steps; for a seeded run also
non_private_reason and seed, and every epsilon, epsilon_per_epoch included, is "not private"}, ``data`` {name, n_features, n_classes} and, once deployed,
``deployment`` {mechanism settings}.  ``private_or_refuse`` is the check that ``deploy`` and
``report`` make before using a model.
"""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KINDS = ("logreg", "mlp")
TRAINING_KEYS = ("private", "epsilon", "delta", "neighbouring", "epsilon_add_remove", "epsilon_replace_one",
                 "accountant", "noise_multiplier", "clip_norm", "sampling_rate", "sampling", "steps", "epochs",
                 "n_train", "randomness", "noise", "planned_steps", "max_epsilon", "stopped_early", "epoch_steps",
                 "epsilon_per_epoch")
OPTIONAL_TRAINING_KEYS = ("stop_reason", "non_private_reason", "seed")
DATA_KEYS = ("name", "n_features", "n_classes")
OPTIONAL_DATA_KEYS = ("input_range",)  # the training data's [min, max]: the device clamps inputs to it


class ModelFileError(ValueError):
    """A model file or manifest that is missing, malformed, or does not match."""


@dataclass(frozen=True)
class Model:
    kind: str
    layers: list[tuple[np.ndarray, np.ndarray]]
    classes: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.layers[0][0].shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.layers[-1][0].shape[1])

    def logits(self, X: np.ndarray) -> np.ndarray:
        h = np.asarray(X, np.float32)
        if h.ndim != 2 or h.shape[1] != self.n_features:
            raise ValueError(f"inputs must have shape (n, {self.n_features}), got {h.shape}")
        for w, b in self.layers[:-1]:
            h = np.maximum(h @ w + b, 0.0)
        w, b = self.layers[-1]
        return h @ w + b

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted label values (``classes[argmax logits]``)."""
        return self.classes[np.argmax(self.logits(X), axis=1)]


@dataclass(frozen=True)
class Manifest:
    model_sha256: str
    training: dict
    data: dict
    deployment: dict | None = field(default=None)

    def as_dict(self) -> dict:
        d = {"model_sha256": self.model_sha256, "training": self.training, "data": self.data}
        if self.deployment is not None:
            d["deployment"] = self.deployment
        return d


def manifest_path(model_path: str | Path) -> Path:
    p = Path(model_path)
    return p.with_name(p.name[:-4] + ".manifest.json" if p.name.endswith(".npz") else p.name + ".manifest.json")


def model_bytes(model: Model) -> bytes:
    if model.kind not in KINDS:
        raise ModelFileError(f"model kind must be one of {', '.join(KINDS)}, got {model.kind!r}")
    arrays: dict[str, np.ndarray] = {"kind": np.array(model.kind), "n_features": np.array(model.n_features),
                                     "n_classes": np.array(model.n_classes),
                                     "classes": np.asarray(model.classes, np.int64)}
    for i, (w, b) in enumerate(model.layers):
        arrays[f"W{i}"] = np.asarray(w, np.float32)
        arrays[f"b{i}"] = np.asarray(b, np.float32)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub: **kwds could fill allow_pickle: bool
    return buf.getvalue()


def save(path: str | Path, model: Model, training: dict, data: dict, deployment: dict | None = None) -> Manifest:
    """Write NAME.npz and NAME.manifest.json; returns the manifest."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ModelFileError(f"model file must end in .npz: {path}")
    missing = [k for k in TRAINING_KEYS if k not in training] + [k for k in DATA_KEYS if k not in data]
    if missing:
        raise ModelFileError(f"manifest is missing {', '.join(missing)}")
    raw = model_bytes(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    man = Manifest(hashlib.sha256(raw).hexdigest(),
                   {k: training[k] for k in TRAINING_KEYS + OPTIONAL_TRAINING_KEYS if k in training},
                   {k: data[k] for k in DATA_KEYS + OPTIONAL_DATA_KEYS if k in data}, deployment)
    manifest_path(path).write_text(json.dumps(man.as_dict(), indent=1) + "\n")
    return man


def load(path: str | Path) -> Model:
    """Read a model file (no manifest check; see ``load_checked``)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            kind = str(f["kind"])
            n_layers = sum(1 for k in f.files if k.startswith("W"))
            layers = [(np.asarray(f[f"W{i}"], np.float32), np.asarray(f[f"b{i}"], np.float32)) for i in range(n_layers)]
            classes = np.asarray(f["classes"]).astype(np.int64)
            n_features, n_classes = int(f["n_features"]), int(f["n_classes"])
    except KeyError as exc:
        raise ModelFileError(f"{path}: not an edgedp model file (missing {exc})") from None
    if kind not in KINDS or not layers:
        raise ModelFileError(f"{path}: not an edgedp model file (kind {kind!r}, {len(layers)} layers)")
    for i, (w, b) in enumerate(layers):
        if w.ndim != 2 or b.shape != (w.shape[1],) or (i and w.shape[0] != layers[i - 1][0].shape[1]):
            raise ModelFileError(f"{path}: layer {i} has inconsistent shapes W {w.shape}, b {b.shape}")
    model = Model(kind, layers, classes)
    if (model.n_features, model.n_classes) != (n_features, n_classes) or len(classes) != n_classes:
        raise ModelFileError(f"{path}: n_features/n_classes/classes disagree with the layers")
    return model


def read_manifest(path: str | Path) -> Manifest:
    mp = manifest_path(path)
    try:
        d = json.loads(mp.read_text())
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no privacy manifest {mp.name} beside it") from None
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{mp}: not JSON ({exc})") from None
    try:
        return Manifest(str(d["model_sha256"]), dict(d["training"]), dict(d["data"]), d.get("deployment"))
    except KeyError as exc:
        raise ModelFileError(f"{mp}: missing {exc}") from None


def load_checked(path: str | Path) -> tuple[Model, Manifest]:
    """The model and its manifest, after checking that the manifest's hash is the file's."""
    man = read_manifest(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != man.model_sha256:
        raise ModelFileError(f"{path}: sha256 {digest[:16]}… does not match its manifest "
                             f"({man.model_sha256[:16]}…): the model was changed after training")
    return load(path), man


def non_private_reason(man: Manifest) -> str | None:
    """Why the model's ε does not hold (None for a private run).  A manifest without ``private``
    predates the flag: its run was seeded (the seed replays it), so it is not private."""
    if man.training.get("private") is True:
        return None
    return str(man.training.get("non_private_reason")
               or "the manifest does not say the run was private (written before runs drew from the OS CSPRNG; "
                  f"seed {man.training.get('seed')!r} replays it)")


def private_or_refuse(path: str | Path, man: Manifest, allow_non_private: bool) -> str | None:
    """Refuse a non-private model unless allowed; returns the reason it is not private (or None)."""
    reason = non_private_reason(man)
    if reason and not allow_non_private:
        raise ModelFileError(f"{path}: not a private model ({reason}); pass --allow-non-private to use it anyway")
    return reason
