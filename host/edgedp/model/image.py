"""The model inside a built image, and a reference device that replays INFER answers."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..paths import build_dir, project_root
from ..device.protocol import MechConfig, QueryResult
from ..mech.reference import TEST_SEED, ReferenceDevice
from . import cgen
from .reference import run
from .spec import DeviceModel

DEFAULT_MODEL = "firmware/model/digits_ensemble.c"


def image_model_path() -> Path:
    """The C model the last `make firmware` linked (build/gen/model.txt), else the default."""
    stamp = build_dir() / "gen" / "model.txt"
    name = stamp.read_text().strip() if stamp.exists() else DEFAULT_MODEL
    path = Path(name)
    return path if path.is_absolute() else project_root() / path


def image_model() -> DeviceModel:
    path = image_model_path()
    if path.name == "none.c":
        raise ValueError("the image was built without a model (MODEL=firmware/model/none.c)")
    return cgen.read(path)


class InferReference:
    """Replays a test-build device's INFER answers: the model's raw output (bit-exact float32
    kernels) through the mechanism configured with the model's range and sensitivity."""

    def __init__(self, model: DeviceModel, seed: bytes = TEST_SEED, epsilon_micro: int = 1_000_000):
        self.model = model
        self.device = ReferenceDevice(MechConfig(epsilon_micro, model.lo, model.hi, model.sensitivity, model.m), seed)

    def raw(self, X: np.ndarray) -> np.ndarray:
        return run(self.model, np.atleast_2d(X))

    def infer(self, x: np.ndarray, mode: str = "full") -> QueryResult:
        return self.device.query(self.raw(x)[0], mode)
