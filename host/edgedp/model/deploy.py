"""`edgedp deploy`: a trained model -> C data for the image, with what it costs and how it scores."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .. import models_io
from . import cgen, convert, digits, quantize, reference
from .spec import DeviceModel


@dataclass(frozen=True)
class Deployment:
    name: str
    source: str
    out: str
    head: str
    n_features: int
    n_classes: int
    nets: int
    weights: int
    flash_weight_bytes: int
    scratch_ram_bytes: int
    macs: int
    lo: float
    hi: float
    sensitivity: float
    input_range: tuple[float, float]   # every input is clamped to it on the device
    input_range_source: str            # "training data" or "given"
    sha256: str
    float_accuracy: float | None = None    # the float64 host model on the digits test set
    device_accuracy: float | None = None   # the device's float32 kernels (reference) on it
    agreement: float | None = None         # same label, device vs float model
    non_private: str | None = None         # why the trained model's ε does not hold (--allow-non-private)
    int8: bool = False                     # int8 kernels (--int8); the accuracies are then theirs

    def as_dict(self) -> dict:
        return asdict(self)


def build(source: str, seed: int = digits.SEED, teachers: int = 30, int8: bool = False,
          calibration: str | Path | None = None,
          input_range: tuple[float, float] | None = None) -> tuple[DeviceModel, dict]:
    """The device model for a built-in name or a model file, and accuracy figures when known.
    Built-ins declare the input range of their training data (the digits pool); ``input_range``
    overrides it. ``int8``: quantised (docs/model.md), the input scale from the input range,
    activation scales calibrated on ``calibration`` (.npy inputs; built-ins: their training inputs)."""
    if source in digits.BUILTIN:
        model, obj = digits.train(source, seed, teachers)
        s = digits.split(seed)
        model = replace(model, input_range=tuple(input_range) if input_range is not None
                        else (float(s.X_pool.min()), float(s.X_pool.max())))
        if int8:
            model = quantize.quantize(model, np_inputs(calibration, model.n_features) if calibration else s.X_pool)
        dev = reference.first_argmax(reference.run(model, s.X_test))
        flt = digits.float_predict(obj, s.X_test)
        return model, {"float_accuracy": float((flt == s.y_test).mean()),
                       "device_accuracy": float((dev == s.y_test).mean()),
                       "agreement": float((dev == flt).mean())}
    model = convert.load(source)
    if input_range is not None:
        model = replace(model, input_range=tuple(input_range))
    if model.input_range is None:
        raise ValueError(f"{source}: the model's input range is unknown (no training data): "
                         "pass --input-range LO HI")
    if not int8:
        return model, {}
    if calibration is None:
        raise ValueError("--int8 needs --calibration INPUTS.npy (e.g. the training inputs) for this model")
    return quantize.quantize(model, np_inputs(calibration, model.n_features)), {}


def deploy(source: str, out: str | Path, seed: int = digits.SEED, teachers: int = 30,
           allow_non_private: bool = False, input_range: tuple[float, float] | None = None,
           int8: bool = False, calibration: str | Path | None = None) -> Deployment:
    """Write ``source`` as C data.  An `edgedp train` model whose manifest does not say it is private
    (a seeded run) is refused unless ``allow_non_private``; then the C file, the manifest's
    deployment entry and the result say why it is not private. input_range overrides the model's
    declared one (the training data's for built-ins and `edgedp train` files); a model without
    either is refused."""
    reason = _non_private(Path(source), allow_non_private) if source.endswith(".npz") else None
    model, scores = build(source, seed, teachers, int8, calibration, input_range)
    origin = "training data" if input_range is None else "given"
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(cgen.generate(model, Path(source).name, f"not a private model: {reason}" if reason else None))
    d = Deployment(model.name, source, str(out), model.head, model.n_features, model.n_classes,
                   len(model.nets), model.n_weights, model.flash_bytes, model.scratch_bytes,
                   model.macs, model.lo, model.hi, model.sensitivity, model.input_range, origin,
                   cgen.digest(model), **scores, non_private=reason, int8=model.int8)
    if source.endswith(".npz"):
        _record_in_manifest(Path(source), d)
    return d


def _non_private(npz: Path, allow: bool) -> str | None:
    """Why the trained model is not private (None: private, or no manifest to say), refusing it
    unless ``allow``."""
    if not models_io.manifest_path(npz).exists():
        return None
    return models_io.private_or_refuse(npz, models_io.read_manifest(npz), allow)


def _record_in_manifest(npz: Path, d: Deployment) -> None:
    """Add the `deployment` entry (mechanism settings) to NAME.manifest.json when it exists."""
    manifest = npz.with_name(npz.name[: -len(".npz")] + ".manifest.json")
    if not manifest.exists():
        return
    doc = json.loads(manifest.read_text())
    doc["deployment"] = {"c_file": d.out, "head": d.head, "lo": d.lo, "hi": d.hi,
                         "sensitivity": d.sensitivity, "m": None, "input_range": list(d.input_range),
                         "weights_sha256": d.sha256}
    if d.non_private:
        doc["deployment"]["non_private"] = d.non_private
    manifest.write_text(json.dumps(doc, indent=2) + "\n")


def np_inputs(path: str | Path, n_features: int) -> np.ndarray:
    """Model inputs from .npy (n, n_features) float; a single row is accepted as (n_features,)."""
    x = np.load(path, allow_pickle=False)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != n_features:
        raise ValueError(f"{path}: inputs must have shape (n, {n_features}), got {x.shape}")
    return x.astype(np.float32)
