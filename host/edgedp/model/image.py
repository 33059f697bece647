"""The model inside a built image, and a reference device that replays INFER answers."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..paths import build_dir
from ..device.protocol import MechConfig, QueryResult
from ..mech.lattice import MICRO
from ..mech.reference import TEST_SEED, ReferenceDevice
from . import cgen
from .reference import run
from .spec import DeviceModel

NO_MODEL = "edp_app_model = 0"


class UnknownModel(ValueError):
    """The model of an image cannot be told (no copy of its model data beside it, or not one
    written by `edgedp deploy`)."""


def default_image() -> Path:
    return build_dir() / "qemu" / "edgedp.elf"


def image_model(image: Path | None = None) -> DeviceModel | None:
    """The model an image holds (default: build/qemu/edgedp.elf), read from the copy of its model
    data the build keeps beside it (build/<image>/model.c); None for an image built without one
    (MODEL=firmware/model/none.c). UnknownModel when that cannot be told."""
    image = default_image() if image is None else Path(image)
    src = image.parent / "model.c"
    try:
        text = src.read_text()
    except OSError:
        raise UnknownModel(f"the model of {image} is not known ({src.name} is not beside it: rebuild the image "
                           "with `edgedp build` or `make firmware`)") from None
    if NO_MODEL in text:
        return None
    try:
        return cgen.read(src)
    except ValueError:
        raise UnknownModel(f"the model of {image} is not known ({src} was not written by `edgedp deploy`)") from None


def target_model(target: object) -> DeviceModel | None:
    """The model of the image a started target runs; UnknownModel if it runs no known image (a
    serial link)."""
    image = getattr(target, "image", None)
    if image is None:
        raise UnknownModel(f"the model of {getattr(target, 'name', 'this device')} is not known "
                           "(a serial link does not say which image it runs)")
    started = getattr(target, "image_started", None)  # a device session: QEMU loaded the image then
    src = Path(image).parent / "model.c"
    if started is not None and src.exists() and src.stat().st_mtime > started:
        raise UnknownModel(f"{image} was rebuilt after the device session started, which still runs the old "
                           "image: `edgedp device stop` and `edgedp device start` run the new one")
    return image_model(image)


def model_dict(model: DeviceModel | None) -> dict | None:
    """What `edgedp info` shows of a model."""
    if model is None:
        return None
    return {"name": model.name, "sha256": cgen.digest(model), "n_features": model.n_features,
            "n_classes": model.n_classes, "head": model.head, "nets": len(model.nets),
            "range": [model.lo, model.hi], "sensitivity": model.sensitivity}


def check_inputs(model: DeviceModel | None, width: int) -> None:
    """ValueError, naming both widths, unless rows of ``width`` values are inputs of ``model``."""
    if model is None:
        raise ValueError("the image has no model (built with MODEL=firmware/model/none.c): build one with "
                         "`edgedp build --model FILE.c`")
    if width != model.n_features:
        raise ValueError(f"the rows have {width} values but the device's model {model.name!r} takes "
                         f"{model.n_features} inputs: nothing was sent")


def describe_target_model(target: object) -> dict | str | None:
    """What `edgedp info` shows: the model dict, None for no model, a sentence when not known."""
    try:
        return model_dict(target_model(target))
    except UnknownModel as exc:
        return f"unknown: {exc}"


def check_target_inputs(target: object, width: int) -> None:
    """Refuse (before any row is sent) model inputs whose width is not the target's model's; a
    target whose model is not known checks the width itself (ERR_LEN)."""
    try:
        model = target_model(target)
    except UnknownModel:
        return
    check_inputs(model, width)


class InferReference:
    """Replays a test-build device's INFER answers: the model's raw output (bit-exact float32
    kernels) through the mechanism configured with the model's range and sensitivity."""

    def __init__(self, model: DeviceModel, seed: bytes = TEST_SEED, epsilon_micro: int = MICRO):
        self.model = model
        self.device = ReferenceDevice(MechConfig(epsilon_micro, model.lo, model.hi, model.sensitivity, model.m), seed)

    def raw(self, X: np.ndarray) -> np.ndarray:
        return run(self.model, np.atleast_2d(X))

    def infer(self, x: np.ndarray, mode: str = "full") -> QueryResult:
        return self.device.query(self.raw(x)[0], mode)
