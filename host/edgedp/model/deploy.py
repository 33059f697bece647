"""`edgedp deploy`: a trained model -> C data for the image, with what it costs and how it scores."""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..train import model_file as models_io
from ..datasets import Outputs
from . import cgen, convert, digits, memory, quantize, reference, tflite_import
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
    float_accuracy: float | None = None    # the float host model on the scored data
    device_accuracy: float | None = None   # the device's float32 kernels (reference) on it
    agreement: float | None = None         # same label, device vs float model
    scored_on: str | None = None           # which data: the digits test set, or the user's --data file
    scored_records: int | None = None
    non_private: str | None = None         # why the trained model's ε does not hold (--allow-non-private)
    int8: bool = False                     # int8 kernels (--int8); the device figures are theirs
    graph_ops: int | None = None           # an imported graph: its operators
    arena_bytes: int | None = None         # and its planned arena (part of scratch_ram_bytes)
    flash_free: int = memory.IMAGE_FLASH - memory.CORE_FLASH   # what the STM32F4 image leaves
    ram_free: int = memory.IMAGE_RAM - memory.CORE_RAM - memory.MIN_STACK

    def as_dict(self) -> dict:
        return asdict(self)


def scores(device: np.ndarray, flt: np.ndarray, y: np.ndarray, on: str) -> dict:
    return {"float_accuracy": float((flt == y).mean()), "device_accuracy": float((device == y).mean()),
            "agreement": float((device == flt).mean()), "scored_on": on, "scored_records": int(len(y))}


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
        model = replace(model, input_range=input_range if input_range is not None
                        else (float(s.X_pool.min()), float(s.X_pool.max())))
        if int8:
            model = quantize.quantize(model, np_inputs(calibration, model.n_features) if calibration else s.X_pool)
        dev = reference.first_argmax(reference.run(model, s.X_test))
        return model, scores(dev, digits.float_predict(obj, s.X_test), s.y_test, "the digits test set")
    if not Path(source).exists():
        if Path(source).suffix in ("", ".") or source.startswith("digits"):
            raise ValueError(f"{source!r} is neither a model file nor a built-in model (built-in: "
                             f"{', '.join(digits.BUILTIN)})")
        raise ValueError(f"{source}: no such file")
    if Path(source).suffix == ".tflite":
        if int8:
            raise ValueError(f"{source}: --int8 quantises a float model; this TFLite model is imported as it is")
        return tflite_import.device_model(source, input_range), {}
    model = convert.load(source)
    if input_range is not None:
        model = replace(model, input_range=input_range)
    if model.input_range is None:
        raise ValueError(f"{source}: the model's input range is unknown (no training data): "
                         "pass --input-range LO HI")
    if not int8:
        return model, {}
    if calibration is None:
        raise ValueError("--int8 needs --calibration INPUTS.npy (e.g. the training inputs) for this model")
    return quantize.quantize(model, np_inputs(calibration, model.n_features)), {}


def check_data_path(data: str | Path) -> None:
    if Path(data).suffix != ".npz":
        raise ValueError(f"--data {data}: give an .npz with arrays X (features) and y (labels), e.g. "
                         "np.savez('data.npz', X=X, y=y)")


def labelled_data(data: str | Path, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) from the user's .npz (arrays X, y), checked against a model of ``n_features`` inputs."""
    check_data_path(data)
    try:
        with np.load(data, allow_pickle=False) as f:
            if "X" not in f.files or "y" not in f.files:
                raise ValueError(f"{data}: needs arrays X (features) and y (labels), has {sorted(f.files)}")
            X, y = np.asarray(f["X"], np.float64), np.asarray(f["y"]).ravel()
    except (OSError, EOFError) as exc:
        raise ValueError(f"{data}: cannot read it as an .npz ({exc})") from None
    if X.ndim != 2 or X.shape[1] != n_features or len(X) != len(y) or not len(X):
        raise ValueError(f"{data}: X must be (n, {n_features}) for this model's {n_features} inputs with one label "
                         f"per row (X {X.shape}, y {y.shape})")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{data}: X contains NaN or Inf")
    return X, y


def check_on_data(source: str, data: str | Path, model: DeviceModel | None = None) -> dict:
    """The device kernels (of ``model``, e.g. its int8 version; default: the file's) against the
    float model on the user's labelled data (.npz with X, y): accuracy of both and how often they
    agree."""
    loaded = convert.load_file(source)
    X, y = labelled_data(data, loaded.model.n_features)
    dev = loaded.labels[reference.first_argmax(reference.run(model or loaded.model, X))]
    return scores(dev, np.asarray(loaded.predict(X)), y, str(data))


def device_outputs(loaded: convert.Loaded, source: str, X: np.ndarray, y: np.ndarray, name: str) -> Outputs:
    """What the deployed model's raw output is on labelled inputs (the device kernels, bit for bit):
    class probabilities (softmax head) or teacher votes (votes head, probs = votes / T), and the
    labels as the model's class indices. ``loaded`` is the model file ``source`` (convert.load_file)."""
    if X.shape[1] != loaded.model.n_features:
        raise ValueError(f"{name}: {X.shape[1]} features, the model {source} takes {loaded.model.n_features}")
    index = {int(v): i for i, v in enumerate(loaded.labels)}
    unknown = sorted({int(v) for v in y} - index.keys())
    if unknown:
        raise ValueError(f"{name}: labels {unknown[:5]} are not classes of the model {source} "
                         f"({[int(v) for v in loaded.labels][:10]})")
    out = reference.run(loaded.model, X).astype(np.float64)
    labels = np.array([index[int(v)] for v in y], dtype=np.int64)
    if loaded.model.head == "votes":
        T = len(loaded.model.nets)
        return Outputs(probs=out / T, labels=labels, votes=out, teachers=T, source=name)
    return Outputs(probs=out, labels=labels, source=name)


def deployed_model_doc(loaded: convert.Loaded, source: str, X_test: np.ndarray, y_test: np.ndarray) -> dict:
    """What `edgedp report --model` says of a deployed model that has no privacy manifest: what it
    is and, when it takes these inputs, the device kernels' accuracy on the report's test set.
    ``loaded`` is the model file ``source`` (convert.load_file)."""
    m = loaded.model
    doc: dict[str, str | float] = {
        "path": str(source), "kind": f"{m.head} head, {len(m.nets)} net(s), {m.n_features} inputs -> "
        f"{m.n_classes} classes", "name": m.name, "sha256": cgen.digest(m)}
    try:
        out = device_outputs(loaded, source, X_test, y_test, "the test set")
    except ValueError as exc:
        doc["not_scored"] = str(exc)
    else:
        doc["test_accuracy_here"] = float((out.probs.argmax(1) == out.labels).mean())
    return doc


def probe_writable(out: Path) -> None:
    """ValueError now (before the model is built) unless ``out`` can be written: a .c file in a
    folder where a file can be created."""
    if out.suffix != ".c":
        raise ValueError(f"--out {out}: the model is C source: name it FILE.c (e.g. firmware/model/mine.c)")
    if out.is_dir():
        raise ValueError(f"--out {out}: is a directory")
    folder = out.parent
    while not folder.exists():
        folder = folder.parent
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".edgedp-probe-"):
            pass
        if out.exists():
            with open(out, "r+b"):
                pass
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


def deploy(source: str, out: str | Path, seed: int = digits.SEED, teachers: int = 30,
           data: str | Path | None = None, allow_non_private: bool = False,
           input_range: tuple[float, float] | None = None, int8: bool = False,
           calibration: str | Path | None = None) -> Deployment:
    """Write ``source`` as C data (``out`` checked first), scored on ``data`` when given.  An `edgedp
    train` model whose manifest does not say it is private (a seeded run) is refused unless
    ``allow_non_private``; then the C file, the manifest's deployment entry and the result say why
    it is not private. input_range overrides the model's declared one (the training data's for
    built-ins and `edgedp train` files); a model without either is refused."""
    out = Path(out)
    probe_writable(out)
    if data is not None and source in digits.BUILTIN:
        raise ValueError("--data checks a model file on your data; the built-in models are scored on digits")
    if data is not None:
        check_data_path(data)  # before the model is built (and its input range checked)
    reason = _non_private(Path(source), allow_non_private) if source.endswith(".npz") else None
    model, score = build(source, seed, teachers, int8, calibration, input_range)
    memory.check_fits(model)  # before anything is written
    origin = ("given" if input_range is not None else
              "the model's input quantisation" if model.graph is not None else "training data")
    if data is not None:
        score = check_on_data(source, data, model)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(cgen.generate(model, Path(source).name, f"not a private model: {reason}" if reason else None))
    assert model.input_range is not None  # cgen.generate refuses a model without one
    d = Deployment(model.name, source, str(out), model.head, model.n_features, model.n_classes,
                   len(model.nets), model.n_weights, model.flash_bytes, model.scratch_bytes,
                   model.macs, model.lo, model.hi, model.sensitivity, model.input_range, origin,
                   cgen.digest(model), **score, non_private=reason, int8=model.int8,
                   graph_ops=len(model.graph.ops) if model.graph is not None else None,
                   arena_bytes=model.graph.arena_bytes if model.graph is not None else None)
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
