"""What a deployed model is: dense float32 (or int8) nets and a head (softmax or teacher votes)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import schema as S
from .graph import Graph

HEADS = tuple(h.name.lower() for h in S.ModelHead)
"""Index = the C enum edp_model_head: ("softmax", "votes")."""
MAX_RANK = S.MODEL_MAX_RANK
"""Most dims of a model's input shape (EDP_MODEL_MAX_RANK)."""


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

    layers: tuple[Dense | Dense8, ...]   # all of one kind in a DeviceModel
    classes: np.ndarray

    def __post_init__(self) -> None:
        for a, b in zip(self.layers, self.layers[1:]):
            if a.w.shape[1] != b.w.shape[0]:
                raise ValueError(f"layer sizes {a.w.shape} then {b.w.shape} do not chain")
        if any(isinstance(l, Dense8) and l.hidden != (i + 1 < len(self.layers)) for i, l in enumerate(self.layers)):
            raise ValueError("an int8 net requantises after every layer but the last, which dequantises")
        if len(self.classes) != self.layers[-1].w.shape[1]:
            raise ValueError("one class index per output of the last layer")
        object.__setattr__(self, "classes", np.asarray(self.classes, dtype=np.int64))

    @property
    def n_features(self) -> int:
        return int(self.layers[0].w.shape[0])


def row4(n: int) -> int:
    """An int8 weight row's length in flash: the inputs rounded up to a multiple of 4 (zeros)."""
    return (n + 3) // 4 * 4


@dataclass(frozen=True)
class Dense8:
    """One int8 layer (docs/model.md, "int8 models"): acc_j = b_j + sum_i x_i w_ij in int32, x the
    int8 input; W of shape (in, out), symmetric per output channel; b int32 with the input's zero
    point folded in. A hidden layer requantises acc to int8 with mult (in [1, 2^31)) and shift
    S (33..62): y = clamp(((acc mult + 2^(S-1)) >> S) - 128, -128, 127), zero point -128, so the
    lower clamp is the ReLU. The last layer dequantises instead: logit_j = float32(acc_j) scale_j."""

    w: np.ndarray
    b: np.ndarray
    mult: np.ndarray | None = None
    shift: np.ndarray | None = None
    scale: np.ndarray | None = None

    def __post_init__(self) -> None:
        out = self.w.shape[1] if self.w.ndim == 2 else -1
        if self.w.ndim != 2 or self.b.shape != (out,):
            raise ValueError(f"int8 layer shapes {self.w.shape} and {self.b.shape} do not match")
        hidden = self.mult is not None and self.shift is not None and self.scale is None
        if not hidden and not (self.scale is not None and self.mult is None and self.shift is None):
            raise ValueError("an int8 layer has a multiplier and shift (hidden) or a scale (last)")
        object.__setattr__(self, "w", np.ascontiguousarray(self.w, dtype=np.int8))
        object.__setattr__(self, "b", np.ascontiguousarray(self.b, dtype=np.int32))
        if hidden:
            mult, shift = np.asarray(self.mult, dtype=np.int64), np.asarray(self.shift, dtype=np.int64)
            if mult.shape != (out,) or shift.shape != (out,) or mult.min() < 1 or mult.max() >= 2**31 \
                    or shift.min() < 33 or shift.max() > 62:
                raise ValueError("multipliers must lie in [1, 2^31) and shifts in 33..62, one per output")
            object.__setattr__(self, "mult", mult.astype(np.int32))
            object.__setattr__(self, "shift", shift.astype(np.uint8))
        else:
            scale = np.asarray(self.scale, dtype=np.float32)
            if scale.shape != (out,) or not np.all(np.isfinite(scale)) or scale.min() <= 0:
                raise ValueError("dequantisation scales must be finite and positive, one per output")
            object.__setattr__(self, "scale", scale)

    @property
    def hidden(self) -> bool:
        return self.scale is None


@dataclass(frozen=True)
class InputQuant:
    """The int8 input of an int8 model: q_i = clamp(floor(float32(float32(x_i mul) + add)), 0, 255) - 128,
    every operation in float32 (add = zero point + 128.5: round to nearest, halves up)."""

    mul: float
    add: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mul", float(np.float32(self.mul)))
        object.__setattr__(self, "add", float(np.float32(self.add)))
        if not (np.isfinite(self.mul) and self.mul > 0 and np.isfinite(self.add)):
            raise ValueError("input quantisation: a finite positive multiplier and a finite offset")


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
    quant: InputQuant | None = None   # int8 nets (Dense8 layers) need it; float nets none
    input_shape: tuple[int, ...] | None = None
    """The input's shape (C order, at most MAX_RANK dims, their product n_features) as INFO reports
    it; None: flat, (n_features,)."""
    graph: Graph | None = None
    """An imported int8 graph (graph.py; `edgedp deploy model.tflite`) instead of nets (then ()):
    one net's worth, a softmax head over its outputs."""

    def __post_init__(self) -> None:
        if self.graph is not None:
            if self.nets or self.quant is not None or self.head != "softmax":
                raise ValueError("a graph model has no dense nets and no dense input quantisation, and a softmax head")
            if self.graph.n_outputs != self.n_classes:
                raise ValueError(f"the graph has {self.graph.n_outputs} outputs, the model {self.n_classes} classes")
            self._check_common()
            return
        kinds = {isinstance(l, Dense8) for n in self.nets for l in n.layers}
        if len(kinds) > 1 or (kinds == {True}) != (self.quant is not None):
            raise ValueError("a model is all float32 or all int8 (with its input quantisation)")
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
        self._check_common()

    def _check_common(self) -> None:
        if self.input_range is not None:
            lo, hi = (float(np.float32(v)) for v in self.input_range)
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise ValueError(f"input range must be finite with lo <= hi, got {self.input_range}")
            object.__setattr__(self, "input_range", (lo, hi))
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}")
        if self.input_shape is not None:
            shape = tuple(int(d) for d in self.input_shape)
            if not 1 <= len(shape) <= MAX_RANK or not all(1 <= d <= 0xFFFF for d in shape) or \
                    int(np.prod(shape)) != self.n_features:
                raise ValueError(f"input shape {shape}: 1 to {MAX_RANK} dims of 1..65535 whose product is the "
                                 f"model's {self.n_features} inputs")
            object.__setattr__(self, "input_shape", shape)

    @property
    def n_features(self) -> int:
        return self.graph.n_features if self.graph is not None else self.nets[0].n_features

    @property
    def shape(self) -> tuple[int, ...]:
        """The input's shape (input_shape, or flat)."""
        return self.input_shape or (self.n_features,)

    @property
    def int8(self) -> bool:
        return self.quant is not None or self.graph is not None

    @property
    def n_weights(self) -> int:
        if self.graph is not None:
            return self.graph.n_weights
        return sum(l.w.size + l.b.size for n in self.nets for l in n.layers)

    @property
    def scratch_floats(self) -> int:
        """Float RAM the kernels need: the output plus a ping-pong pair of the widest layer (int8
        models: the output and the widest net's logits; a graph: the output and its logits)."""
        if self.graph is not None:
            return 2 * self.n_classes
        if self.int8:
            return self.n_classes + max(n.layers[-1].w.shape[1] for n in self.nets)
        return self.n_classes + 2 * max(l.w.shape[1] for n in self.nets for l in n.layers)

    @property
    def act_bytes(self) -> int:
        """int8 models: the int8 input and a ping-pong pair of the widest hidden layer (rows of 4)."""
        hidden = [row4(l.w.shape[1]) for n in self.nets for l in n.layers[:-1]]
        return row4(self.n_features) + 2 * max(hidden, default=0) if self.quant is not None else 0

    @property
    def xp_words(self) -> int:
        """int8 models: the widest layer input widened to int16 pairs (two per 32-bit word)."""
        return max(row4(l.w.shape[0]) for n in self.nets for l in n.layers) // 2 if self.quant is not None else 0

    @property
    def scratch_bytes(self) -> int:
        """RAM of the model's buffers: the floats, and the int8 activations (a graph: its arena)."""
        arena = self.graph.arena_bytes if self.graph is not None else 0
        return 4 * self.scratch_floats + self.act_bytes + 4 * self.xp_words + arena

    @property
    def flash_bytes(self) -> int:
        """Bytes of parameters in flash: 4 per float32 weight or bias; int8 models 1 per weight,
        4 per bias, multiplier and dequantisation scale, 1 per shift (a graph: Graph.flash_bytes)."""
        if self.graph is not None:
            return self.graph.flash_bytes
        if not self.int8:
            return 4 * self.n_weights
        return sum(l.w.shape[1] * (row4(l.w.shape[0]) + (9 if isinstance(l, Dense8) and l.hidden else 8))
                   for n in self.nets for l in n.layers)

    @property
    def macs(self) -> int:
        """Multiply-accumulates per inference."""
        if self.graph is not None:
            return self.graph.macs
        return sum(l.w.size for n in self.nets for l in n.layers)
