"""Imported models as the device runs them: a graph of int8 operators on NHWC tensors in one static
arena (docs/model.md, "Imported graphs"; the C side is edp_graph_s8_t in edgedp/model.h, the kernels
model_graph.c, the NumPy reference graph_ref.py).

Arithmetic is TFLite's reference kernels' (tensorflow/lite/kernels/internal/reference/integer_ops):
int32 sums of (x - input zero point) * w, per-channel fixed-point multipliers with TFLite's double
rounding (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT), the fused activation as a clamp
in the output's int8 domain.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

OPS = ("conv", "dwconv", "fc", "avgpool", "maxpool", "mean", "pad", "add")
"""Index = the C enum edp_op (model.h)."""


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: real = m 2^(shift - 31), m in [2^30, 2^31) (0 for real 0), the
    mantissa rounded half away from zero; shift is a left shift when positive."""
    if real == 0.0:
        return 0, 0
    frac, shift = math.frexp(real)
    q = int(math.floor(abs(frac) * (1 << 31) + 0.5)) * (1 if frac > 0 else -1)
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise ValueError(f"a requantisation multiplier of {real:g} is too large for int32 arithmetic")
    return q, shift


def round_away(x: float) -> int:
    """std::round: halves away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


@dataclass(frozen=True)
class Tensor:
    """An int8 activation: its NHWC shape without the batch (H, W, C; a vector is (1, 1, N)) and its
    affine quantisation real = scale (q - zp). An alias (a RESHAPE's output) names another tensor's
    bytes, read in C order with its own shape; it takes no arena space of its own."""

    shape: tuple[int, int, int]
    scale: float
    zp: int
    alias: int = -1

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1] * self.shape[2]


@dataclass(frozen=True)
class Op:
    """One operator: y = op(a[, b]) on tensor indices; the fields each kind uses (model.h's
    edp_op_s8_t says which). Weights: conv (OC, KH, KW, IC), dwconv (KH, KW, OC), fc (OC, IC), int8;
    bias int32 (OC,); mult/shift per output channel (length OC, or 1: per tensor), shift TFLite's
    exponent (> 0: left). add: mult/shift = [input a, input b, output] and left_shift 20.
    single_round: the requantisation rounds once, (acc m + 2^(30 - shift)) >> (31 - shift) in int64
    (what LiteRT's fully-connected kernel does, measured), instead of TFLite's double rounding."""

    kind: str
    a: int
    y: int
    node: str                       # where it came from ("node 3 (CONV_2D)"), for messages
    b: int = -1
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)   # before (top, left)
    act: tuple[int, int] = (-128, 127)
    w: np.ndarray | None = None
    bias: np.ndarray | None = None
    mult: np.ndarray | None = None
    shift: np.ndarray | None = None
    single_round: bool = False

    def __post_init__(self) -> None:
        if self.kind not in OPS:
            raise ValueError(f"operator kind {self.kind!r} is not one of {OPS}")
        lo, hi = self.act
        if not -128 <= lo <= hi <= 127:
            raise ValueError(f"{self.node}: activation range {self.act} is not within int8")
        if any(not 1 <= v <= 255 for v in self.kernel + self.stride + self.dilation) or \
                any(not 0 <= v <= 255 for v in self.pad):
            raise ValueError(f"{self.node}: kernel, stride, dilation 1..255 and padding 0..255 (device limits)")


@dataclass(frozen=True)
class Graph:
    """Operators in execution order over int8 tensors; tensor `input` is the model's input (the device
    quantises the float input into it: q = clamp(round(x / scale) + zp), halves away from zero, in
    float32), tensor `output` its logits (dequantised: z = float32(q - zp) * scale, before the head).
    `offsets` place every tensor in the arena (plan_arena)."""

    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    input: int
    output: int
    offsets: tuple[int, ...] = field(default=())
    arena_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError("a graph needs at least one operator")
        if not self.offsets:
            offsets, size = plan_arena(self)
            object.__setattr__(self, "offsets", offsets)
            object.__setattr__(self, "arena_bytes", size)

    @property
    def n_features(self) -> int:
        return self.tensors[self.input].size

    @property
    def n_outputs(self) -> int:
        return self.tensors[self.output].size

    @property
    def n_weights(self) -> int:
        return sum((o.w.size if o.w is not None else 0) + (o.bias.size if o.bias is not None else 0) for o in self.ops)

    @property
    def flash_bytes(self) -> int:
        """Parameters in flash: 1 per int8 weight, 4 per bias and multiplier, 1 per shift, plus each
        operator's descriptor (edp_op_s8_t, 68 bytes on a 32-bit target)."""
        n = 0
        for o in self.ops:
            n += 68 + (o.w.size if o.w is not None else 0) + 4 * (o.bias.size if o.bias is not None else 0)
            n += 5 * (o.mult.size if o.mult is not None else 0)
        return n

    @property
    def macs(self) -> int:
        """Multiply-accumulates per inference (conv, dwconv, fc)."""
        n = 0
        for o in self.ops:
            oh, ow, oc = self.tensors[o.y].shape
            if o.kind == "conv" and o.w is not None:
                n += oh * ow * oc * o.w.shape[1] * o.w.shape[2] * o.w.shape[3]
            elif o.kind == "dwconv":
                n += oh * ow * oc * o.kernel[0] * o.kernel[1]
            elif o.kind == "fc" and o.w is not None:
                n += o.w.size
        return n


def _align4(n: int) -> int:
    return (n + 3) // 4 * 4


def plan_arena(g: Graph) -> tuple[tuple[int, ...], int]:
    """Offsets of every tensor in one arena from the tensors' lifetimes (first op writing or the
    start, for the input, to the last op reading or the end, for the output): largest first, each at
    the lowest 4-aligned offset free of every tensor alive at the same time (TFLite Micro's greedy
    planner). A kernel never works in place: an op's inputs and output are alive together."""
    n = len(g.tensors)
    root = [t if g.tensors[t].alias < 0 else g.tensors[t].alias for t in range(n)]
    first = [len(g.ops)] * n
    last = [-1] * n
    first[root[g.input]] = -1
    for i, o in enumerate(g.ops):
        first[root[o.y]] = min(first[root[o.y]], i)
        for t in (o.a, o.b):
            if t >= 0:
                last[root[t]] = max(last[root[t]], i)
    last[root[g.output]] = len(g.ops)
    used = [t for t in range(n) if root[t] == t and last[t] >= first[t]]
    placed: list[tuple[int, int, int, int]] = []   # offset, end, first, last
    offsets = [0] * n
    for t in sorted(used, key=lambda t: (-g.tensors[t].size, t)):
        size = _align4(g.tensors[t].size)
        clash = sorted((lo, hi) for lo, hi, f, l in placed if not (l < first[t] or last[t] < f))
        off = 0
        for lo, hi in clash:
            if off + size <= lo:
                break
            off = max(off, hi)
        offsets[t] = off
        placed.append((off, off + size, first[t], last[t]))
    offsets = [offsets[root[t]] for t in range(n)]
    return tuple(offsets), max((e for _, e, _, _ in placed), default=0)


FIELDS = ("op", "single_round", "act_min", "act_max", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl",
          "ih", "iw", "ic", "oh", "ow", "oc", "a_zp", "b_zp", "y_zp", "a", "b", "y")
"""edp_op_s8_t's integer fields in order (model.h), before its arrays and n_q."""


def record(g: Graph, op: Op) -> tuple[int, ...]:
    """An operator as the device holds it: FIELDS' values."""
    ta, ty = g.tensors[op.a], g.tensors[op.y]
    b_zp, b_off = (g.tensors[op.b].zp, g.offsets[op.b]) if op.b >= 0 else (0, 0)
    return (OPS.index(op.kind), int(op.single_round), *op.act, *op.kernel, *op.stride, *op.dilation, *op.pad,
            *ta.shape, *ty.shape, ta.zp, b_zp, ty.zp, g.offsets[op.a], b_off, g.offsets[op.y])


def from_records(recs: list[tuple[tuple[int, ...], dict[str, np.ndarray | None]]], input_at: int,
                 output_at: int, in_q: tuple[float, int], out_q: tuple[float, int], arena_bytes: int) -> Graph:
    """The graph the device holds, from its operator records (FIELDS and the arrays w, bias, mult,
    shift) and its input and output: tensors are identified by the operator that last wrote their
    arena offset; a read with another shape is an alias. Scales of inner tensors are not on the
    device (0 here); the input's and output's are."""
    tensors: list[Tensor] = []
    offsets: list[int] = []
    writer: dict[int, int] = {}

    def read(off: int, shape: tuple[int, int, int], zp: int) -> int:
        t = writer[off]
        if tensors[t].shape == shape:
            return t
        root = tensors[t].alias if tensors[t].alias >= 0 else t
        tensors.append(Tensor(shape, tensors[t].scale, zp, alias=root))
        offsets.append(off)
        return len(tensors) - 1

    ops: list[Op] = []
    first = recs[0][0] if recs else None
    if first is None:
        raise ValueError("a graph needs at least one operator")
    f = dict(zip(FIELDS, first))
    tensors.append(Tensor((f["ih"], f["iw"], f["ic"]), in_q[0], in_q[1]))
    offsets.append(input_at)
    writer[input_at] = 0
    for vals, arrays in recs:
        f = dict(zip(FIELDS, vals))
        if f["op"] >= len(OPS):
            raise ValueError(f"operator kind {f['op']} is unknown")
        kind = OPS[f["op"]]
        if f["a"] not in writer or (kind == "add" and f["b"] not in writer):
            raise ValueError(f"operator {len(ops)} reads arena offset {f['a']} before anything wrote it")
        a = read(f["a"], (f["ih"], f["iw"], f["ic"]), f["a_zp"])
        b = read(f["b"], (f["oh"], f["ow"], f["oc"]), f["b_zp"]) if kind == "add" else -1
        tensors.append(Tensor((f["oh"], f["ow"], f["oc"]), 0.0, f["y_zp"]))
        offsets.append(f["y"])
        y = len(tensors) - 1
        writer[f["y"]] = y
        ops.append(Op(kind, a, y, f"operator {len(ops)}", b=b, kernel=(f["kh"], f["kw"]), stride=(f["sh"], f["sw"]),
                      dilation=(f["dh"], f["dw"]), pad=(f["pt"], f["pl"]), act=(f["act_min"], f["act_max"]),
                      single_round=bool(f["single_round"]), **arrays))
    out = writer.get(output_at)
    if out is None:
        raise ValueError(f"no operator writes the output's arena offset {output_at}")
    tensors[out] = Tensor(tensors[out].shape, out_q[0], out_q[1], tensors[out].alias)
    tensors[0] = Tensor(tensors[0].shape, in_q[0], in_q[1])
    return Graph(tuple(tensors), tuple(ops), 0, out, tuple(offsets), arena_bytes)
