"""What a deployed model is: dense float32 nets and a head (softmax or teacher votes)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HEADS = ("softmax", "votes")
"""Index = the C enum edp_model_head."""


@dataclass(frozen=True)
class Dense:
    """One layer: y = b + x W, W of shape (in, out), float32."""

    w: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        if self.w.ndim != 2 or self.b.shape != (self.w.shape[1],):
            raise ValueError(f"dense layer shapes {self.w.shape} and {self.b.shape} do not match")
        if not (np.all(np.isfinite(self.w)) and np.all(np.isfinite(self.b))):
            raise ValueError("weights must be finite")
        object.__setattr__(self, "w", np.ascontiguousarray(self.w, dtype=np.float32))
        object.__setattr__(self, "b", np.ascontiguousarray(self.b, dtype=np.float32))


@dataclass(frozen=True)
class Net:
    """Layers with ReLU between them; the last layer's output j scores class ``classes[j]``."""

    layers: tuple[Dense, ...]
    classes: np.ndarray

    def __post_init__(self) -> None:
        for a, b in zip(self.layers, self.layers[1:]):
            if a.w.shape[1] != b.w.shape[0]:
                raise ValueError(f"layer sizes {a.w.shape} then {b.w.shape} do not chain")
        if len(self.classes) != self.layers[-1].w.shape[1]:
            raise ValueError("one class index per output of the last layer")
        object.__setattr__(self, "classes", np.asarray(self.classes, dtype=np.int64))

    @property
    def n_features(self) -> int:
        return int(self.layers[0].w.shape[0])


@dataclass(frozen=True)
class DeviceModel:
    """A model as compiled into the image, with the mechanism settings of its output."""

    name: str
    head: str
    n_classes: int
    nets: tuple[Net, ...]
    lo: float
    hi: float
    sensitivity: float = 2.0
    m: int | None = None
    input_range: tuple[float, float] | None = None
    """[in_lo, in_hi]: the device clamps every input to it before the model runs (None: not yet
    declared; `edgedp deploy` requires one)."""

    def __post_init__(self) -> None:
        if self.input_range is not None:
            lo, hi = (float(np.float32(v)) for v in self.input_range)
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise ValueError(f"input range must be finite with lo <= hi, got {self.input_range}")
            object.__setattr__(self, "input_range", (lo, hi))
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}")
        if not self.nets or (self.head == "softmax" and len(self.nets) != 1):
            raise ValueError("a softmax model has one net, a vote ensemble at least one")
        if len({n.n_features for n in self.nets}) != 1:
            raise ValueError("every net of an ensemble must take the same inputs")
        for n in self.nets:
            if n.classes.min() < 0 or n.classes.max() >= self.n_classes:
                raise ValueError(f"class indices must lie in 0..{self.n_classes - 1}")
            if self.head == "softmax" and len(np.unique(n.classes)) != len(n.classes):
                raise ValueError("a softmax net scores each class once")

    @property
    def n_features(self) -> int:
        return self.nets[0].n_features

    @property
    def n_weights(self) -> int:
        return sum(l.w.size + l.b.size for n in self.nets for l in n.layers)

    @property
    def scratch_floats(self) -> int:
        """RAM the kernels need: the output plus a ping-pong pair of the widest layer."""
        return self.n_classes + 2 * max(l.w.shape[1] for n in self.nets for l in n.layers)

    @property
    def macs(self) -> int:
        """Multiply-accumulates per inference."""
        return sum(l.w.size for n in self.nets for l in n.layers)
