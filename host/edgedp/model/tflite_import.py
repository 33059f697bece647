"""A .tflite file -> Graph (graph.py), parsed with the `tflite` package (the flatbuffers schema's
generated reader). Fully-int8 models: int8 activations, int8 weights (per channel or per tensor),
int32 biases. Every operator the graph's output depends on must be supported; anything else is
refused before anything is built, naming the operator, its node and the supported list."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import tflite

from .graph import Graph, Op, Tensor, quantize_multiplier, round_away
from .spec import DeviceModel

SUPPORTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN",
             "PAD", "ADD", "RESHAPE", "SOFTMAX (last)", "QUANTIZE (first)", "DEQUANTIZE (last)")
"""What an int8 .tflite may hold on the path to its output (docs/model.md's table)."""

_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_INT8, _INT32, _FLOAT32 = tflite.TensorType.INT8, tflite.TensorType.INT32, tflite.TensorType.FLOAT32
_ACT = tflite.ActivationFunctionType


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        buf = path.read_bytes()
        try:
            self.model = tflite.Model.GetRootAsModel(buf, 0)
            if self.model.SubgraphsLength() != 1:
                raise ValueError(f"{path}: {self.model.SubgraphsLength()} subgraphs; one is supported")
            self.g = self.model.Subgraphs(0)
            self.ops = [self.g.Operators(i) for i in range(self.g.OperatorsLength())]
        except (IndexError, TypeError, AttributeError) as exc:  # a truncated or foreign flatbuffer
            raise ValueError(f"{path}: not a TFLite model ({exc})") from None

    def name(self, i: int) -> str:
        oc = self.model.OperatorCodes(self.ops[i].OpcodeIndex())
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        return _NAMES.get(code, f"builtin {code}") if code != tflite.BuiltinOperator.CUSTOM else \
            f"CUSTOM {oc.CustomCode().decode(errors='replace')}"

    def node(self, i: int) -> str:
        return f"node {i} ({self.name(i)})"

    def inputs(self, i: int) -> list[int]:
        return [int(v) for v in self.ops[i].InputsAsNumpy()] if self.ops[i].InputsLength() else []

    def output(self, i: int) -> int:
        return int(self.ops[i].Outputs(0))

    def tensor(self, t: int):
        return self.g.Tensors(t)

    def shape(self, t: int) -> tuple[int, ...]:
        s = self.tensor(t).ShapeAsNumpy()
        return tuple(int(v) for v in s) if isinstance(s, np.ndarray) else ()

    def const(self, t: int) -> np.ndarray | None:
        """A tensor's constant data (None: an activation)."""
        T = self.tensor(t)
        b = self.model.Buffers(T.Buffer())
        if b is None or b.DataLength() == 0:
            return None
        dtype = {_INT8: np.int8, _INT32: np.int32, _FLOAT32: np.float32}.get(T.Type())
        if dtype is None:
            raise ValueError(f"{self.path}: constant tensor {self.tname(t)} of type {T.Type()} is not supported")
        return np.frombuffer(b.DataAsNumpy().tobytes(), dtype=np.dtype(dtype).newbyteorder("<")).reshape(self.shape(t))

    def tname(self, t: int) -> str:
        n = self.tensor(t).Name()
        return repr(n.decode(errors="replace")) if n else f"#{t}"

    def quant(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        q = self.tensor(t).Quantization()
        if q is None or q.ScaleLength() == 0:
            raise ValueError(f"{self.path}: tensor {self.tname(t)} is not quantised (a fully-int8 model is needed)")
        return q.ScaleAsNumpy().astype(np.float64), q.ZeroPointAsNumpy().astype(np.int64)

    def options(self, i: int, cls):
        o = cls()
        t = self.ops[i].BuiltinOptions()
        if t is None:
            raise ValueError(f"{self.path}: {self.node(i)} has no options")
        o.Init(t.Bytes, t.Pos)
        return o


def _hwc(shape: tuple[int, ...], what: str) -> tuple[int, int, int]:
    if not shape or shape[0] != 1 or len(shape) > 4:
        raise ValueError(f"{what}: shape {list(shape)}: batch 1 and at most 4 dims are supported")
    s = shape[1:]
    return (1, 1, 1) if not s else ((1, 1) + s if len(s) == 1 else ((1,) + s if len(s) == 2 else s))  # type: ignore[return-value]


def _pad(in_size: int, out_size: int, k: int, stride: int, dil: int, same: bool) -> int:
    """TFLite's ComputePaddingWithOffset: the padding before (the smaller half for SAME)."""
    if not same:
        return 0
    eff = (k - 1) * dil + 1
    return max((out_size - 1) * stride + eff - in_size, 0) // 2


def _act(fn: int, t: Tensor, where: str) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation as a clamp in the output's int8."""
    def q(v: float) -> int:
        return t.zp + round_away(float(np.float32(v) / np.float32(t.scale)))
    if fn == _ACT.NONE:
        return -128, 127
    if fn == _ACT.RELU:
        return max(-128, q(0.0)), 127
    if fn == _ACT.RELU6:
        return max(-128, q(0.0)), min(127, q(6.0))
    if fn == _ACT.RELU_N1_TO_1:
        return max(-128, q(-1.0)), min(127, q(1.0))
    raise ValueError(f"{where}: fused activation {fn} is not supported (NONE, RELU, RELU6, RELU_N1_TO_1)")


def load(path: str | Path) -> Graph:
    """The int8 graph of a fully-int8 .tflite (its single subgraph, batch 1)."""
    r = _Reader(Path(path))
    producer = {r.output(i): i for i in range(len(r.ops))}
    outs = [int(v) for v in r.g.OutputsAsNumpy()]
    ins = [int(v) for v in r.g.InputsAsNumpy()]
    if len(outs) != 1 or len(ins) != 1:
        raise ValueError(f"{path}: {len(ins)} inputs and {len(outs)} outputs; one of each is supported")
    # The edges: a trailing DEQUANTIZE and SOFTMAX (the device's head replaces it), a leading QUANTIZE.
    out = outs[0]
    while out in producer and r.name(producer[out]) in ("DEQUANTIZE", "SOFTMAX"):
        out = r.inputs(producer[out])[0]
    inp = ins[0]
    starts = [i for i in range(len(r.ops)) if r.name(i) == "QUANTIZE" and r.inputs(i)[0] == inp]
    if r.tensor(inp).Type() == _FLOAT32 and len(starts) == 1:
        inp = r.output(starts[0])
    # The operators the output depends on (a RESHAPE's shape operand is not data: the constant
    # subgraph computing it, SHAPE / STRIDED_SLICE / PACK, folds away with it).
    live: list[int] = []
    todo, seen = [out], set()
    while todo:
        t = todo.pop()
        if t in seen or t == inp or t not in producer:
            continue
        seen.add(t)
        i = producer[t]
        live.append(i)
        data = r.inputs(i)[:1] if r.name(i) in ("RESHAPE", "MEAN", "PAD") else r.inputs(i)
        todo.extend(v for v in data if v >= 0 and r.const(v) is None)
    live.sort()
    handlers = {"CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "FULLY_CONNECTED": _fc, "AVERAGE_POOL_2D": _pool,
                "MAX_POOL_2D": _pool, "MEAN": _mean, "PAD": _pad_op, "ADD": _add, "RESHAPE": None}
    for i in live:
        if r.name(i) not in handlers:
            raise ValueError(f"{path}: {r.node(i)} is not supported; supported: {', '.join(SUPPORTED)}")
    for t in (inp, out):
        if r.tensor(t).Type() != _INT8:
            raise ValueError(f"{path}: tensor {r.tname(t)} is not int8: float32 .tflite models are not "
                             "supported yet (convert with full-integer quantisation)")
    b = _Builder(r)
    b.tensor(inp)
    ops: list[Op] = []
    for i in live:
        if r.name(i) == "RESHAPE":
            b.alias(r.output(i), r.inputs(i)[0])
            continue
        handler = handlers[r.name(i)]
        assert handler is not None
        ops.append(handler(r, i, b))
    if out not in b.index:
        raise ValueError(f"{path}: the output does not depend on the input")
    return Graph(tuple(b.tensors), tuple(ops), b.index[inp], b.index[out])


class _Builder:
    """The graph's tensors: each TFLite activation once, a RESHAPE's output as an alias of its
    input's bytes (a new shape for the same C-order data, no copy)."""

    def __init__(self, r: _Reader) -> None:
        self.r = r
        self.index: dict[int, int] = {}
        self.tensors: list[Tensor] = []

    def tensor(self, t: int) -> int:
        r = self.r
        if t not in self.index:
            if r.tensor(t).Type() != _INT8:
                raise ValueError(f"{r.path}: activation {r.tname(t)} is not int8")
            s, z = r.quant(t)
            if len(s) != 1:
                raise ValueError(f"{r.path}: activation {r.tname(t)} has per-channel scales")
            self.index[t] = len(self.tensors)
            self.tensors.append(Tensor(_hwc(r.shape(t), f"{r.path}: tensor {r.tname(t)}"), float(s[0]), int(z[0])))
        return self.index[t]

    def get(self, t: int) -> Tensor:
        return self.tensors[self.tensor(t)]

    def alias(self, y: int, a: int) -> None:
        src = self.tensor(a)
        shape = _hwc(self.r.shape(y), f"{self.r.path}: tensor {self.r.tname(y)}")
        root = self.tensors[src].alias if self.tensors[src].alias >= 0 else src
        if shape == self.tensors[src].shape:
            self.index[y] = src
            return
        self.index[y] = len(self.tensors)
        self.tensors.append(Tensor(shape, self.tensors[src].scale, self.tensors[src].zp, alias=root))


def _weights(r: _Reader, i: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    w = r.const(t)
    if w is None or r.tensor(t).Type() != _INT8:
        raise ValueError(f"{r.path}: {r.node(i)}: its weights must be constant int8")
    s, z = r.quant(t)
    if np.any(z != 0):
        raise ValueError(f"{r.path}: {r.node(i)}: weights with a non-zero zero point are not supported")
    return w, s


def _bias(r: _Reader, i: int, t: int, n: int) -> np.ndarray:
    if t < 0:
        return np.zeros(n, np.int32)
    b = r.const(t)
    if b is None or b.dtype != np.int32 or b.shape != (n,):
        raise ValueError(f"{r.path}: {r.node(i)}: its bias must be constant int32 of {n}")
    return b.astype(np.int32)


def _multipliers(real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ms = [quantize_multiplier(float(v)) for v in real]
    return np.array([m for m, _ in ms], np.int32), np.array([s for _, s in ms], np.int8)


def _conv(r: _Reader, i: int, b: _Builder) -> Op:
    ins = r.inputs(i)
    a, y = b.tensor(ins[0]), b.tensor(r.output(i))
    ta, ty = b.get(ins[0]), b.get(r.output(i))
    w, ws = _weights(r, i, ins[1])
    dw = r.name(i) == "DEPTHWISE_CONV_2D"
    o = r.options(i, tflite.DepthwiseConv2DOptions if dw else tflite.Conv2DOptions)
    if dw:
        if w.shape[0] != 1 or w.shape[3] != ty.shape[2] or ty.shape[2] % ta.shape[2]:
            raise ValueError(f"{r.path}: {r.node(i)}: filter {list(w.shape)} does not fit its tensors")
        kh, kw = w.shape[1], w.shape[2]
        w = np.ascontiguousarray(w[0])
    else:
        if w.shape[3] != ta.shape[2] or w.shape[0] != ty.shape[2]:
            raise ValueError(f"{r.path}: {r.node(i)}: filter {list(w.shape)} does not fit its tensors")
        kh, kw = w.shape[1], w.shape[2]
    oc = ty.shape[2]
    if len(ws) not in (1, oc):
        raise ValueError(f"{r.path}: {r.node(i)}: {len(ws)} weight scales for {oc} channels")
    mult, shift = _multipliers(ta.scale * ws / ty.scale)  # per channel, or one per tensor
    same = o.Padding() == tflite.Padding.SAME
    sh, sw, dh, dwd = o.StrideH(), o.StrideW(), o.DilationHFactor(), o.DilationWFactor()
    pads = (_pad(ta.shape[0], ty.shape[0], kh, sh, dh, same), _pad(ta.shape[1], ty.shape[1], kw, sw, dwd, same))
    return Op("dwconv" if dw else "conv", a, y, r.node(i), kernel=(kh, kw), stride=(sh, sw), dilation=(dh, dwd),
              pad=pads, act=_act(o.FusedActivationFunction(), ty, r.node(i)), w=w,
              bias=_bias(r, i, ins[2] if len(ins) > 2 else -1, oc), mult=mult, shift=shift)


def _fc(r: _Reader, i: int, b: _Builder) -> Op:
    ins = r.inputs(i)
    ta, ty = b.get(ins[0]), b.get(r.output(i))
    w, ws = _weights(r, i, ins[1])
    if w.ndim != 2 or w.shape[1] != ta.size or w.shape[0] != ty.size:
        raise ValueError(f"{r.path}: {r.node(i)}: weights {list(w.shape)} do not fit {ta.size} inputs, {ty.size} outputs")
    if len(ws) not in (1, w.shape[0]):
        raise ValueError(f"{r.path}: {r.node(i)}: {len(ws)} weight scales for {w.shape[0]} outputs")
    o = r.options(i, tflite.FullyConnectedOptions)
    mult, shift = _multipliers(ta.scale * ws / ty.scale)  # per channel, or one per tensor
    return Op("fc", b.tensor(ins[0]), b.tensor(r.output(i)), r.node(i), act=_act(o.FusedActivationFunction(), ty, r.node(i)),
              w=np.ascontiguousarray(w), bias=_bias(r, i, ins[2] if len(ins) > 2 else -1, w.shape[0]),
              mult=mult, shift=shift, single_round=True)


def _same_quant(r: _Reader, i: int, ta: Tensor, ty: Tensor) -> None:
    if (ta.scale, ta.zp) != (ty.scale, ty.zp):
        raise ValueError(f"{r.path}: {r.node(i)}: input and output quantisation differ "
                         f"({ta.scale:g}/{ta.zp} vs {ty.scale:g}/{ty.zp}); TFLite requires them equal")


def _pool(r: _Reader, i: int, b: _Builder) -> Op:
    a = r.inputs(i)[0]
    ta, ty = b.get(a), b.get(r.output(i))
    _same_quant(r, i, ta, ty)
    o = r.options(i, tflite.Pool2DOptions)
    kh, kw, sh, sw = o.FilterHeight(), o.FilterWidth(), o.StrideH(), o.StrideW()
    same = o.Padding() == tflite.Padding.SAME
    pads = (_pad(ta.shape[0], ty.shape[0], kh, sh, 1, same), _pad(ta.shape[1], ty.shape[1], kw, sw, 1, same))
    return Op("avgpool" if r.name(i) == "AVERAGE_POOL_2D" else "maxpool", b.tensor(a), b.tensor(r.output(i)), r.node(i),
              kernel=(kh, kw), stride=(sh, sw), pad=pads, act=_act(o.FusedActivationFunction(), ty, r.node(i)))


def _mean(r: _Reader, i: int, b: _Builder) -> Op:
    a, ax = r.inputs(i)[:2]
    ta, ty = b.get(a), b.get(r.output(i))
    axes = r.const(ax)
    if len(r.shape(a)) != 4 or axes is None or sorted(int(v) for v in axes.ravel()) != [1, 2]:
        raise ValueError(f"{r.path}: {r.node(i)}: MEAN over the height and width of a 4-D tensor only "
                         f"(axes {None if axes is None else axes.tolist()})")
    m, s = quantize_multiplier(ta.scale / (ta.shape[0] * ta.shape[1] * ty.scale))
    return Op("mean", b.tensor(a), b.tensor(r.output(i)), r.node(i), kernel=ta.shape[:2],
              mult=np.array([m], np.int32), shift=np.array([s], np.int8))


def _pad_op(r: _Reader, i: int, b: _Builder) -> Op:
    a, p = r.inputs(i)[:2]
    ta, ty = b.get(a), b.get(r.output(i))
    _same_quant(r, i, ta, ty)
    pads = r.const(p)
    if pads is None or pads.shape != (4, 2) or pads[0].any() or pads[3].any() or pads.min() < 0:
        raise ValueError(f"{r.path}: {r.node(i)}: PAD of height and width only, by constants")
    return Op("pad", b.tensor(a), b.tensor(r.output(i)), r.node(i), pad=(int(pads[1, 0]), int(pads[2, 0])))


def _add(r: _Reader, i: int, b: _Builder) -> Op:
    a, a2 = r.inputs(i)[:2]
    if r.const(a) is not None or r.const(a2) is not None:
        raise ValueError(f"{r.path}: {r.node(i)}: ADD of a constant is not supported")
    ta, tb, ty = b.get(a), b.get(a2), b.get(r.output(i))
    if ta.shape != tb.shape:
        raise ValueError(f"{r.path}: {r.node(i)}: ADD of shapes {ta.shape} and {tb.shape} (no broadcasting)")
    twice = 2.0 * max(ta.scale, tb.scale)
    real = np.array([ta.scale / twice, tb.scale / twice, twice / ((1 << 20) * ty.scale)])
    mult, shift = _multipliers(real)
    return Op("add", b.tensor(a), b.tensor(r.output(i)), r.node(i), b=b.tensor(a2),
              act=_act(r.options(i, tflite.AddOptions).FusedActivationFunction(), ty, r.node(i)),
              mult=mult, shift=shift)


def device_model(path: str | Path, input_range: tuple[float, float] | None = None) -> DeviceModel:
    """The DeviceModel of an int8 .tflite: its graph, a softmax head over its outputs (output range
    [0, 1], L1 sensitivity 2), the input's shape (H, W, C) and, unless given, the input range its int8
    input can represent, scale (-128 - zp) .. scale (127 - zp)."""
    path = Path(path)
    g = load(path)
    t = g.tensors[g.input]
    rng = input_range if input_range is not None else \
        (float(np.float32(t.scale * (-128 - t.zp))), float(np.float32(t.scale * (127 - t.zp))))
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", path.stem)[:32] or "model"
    shape = tuple(d for d in t.shape) if t.shape[:2] != (1, 1) else (t.shape[2],)
    return DeviceModel(name, "softmax", g.n_outputs, (), 0.0, 1.0, input_range=rng, input_shape=shape, graph=g)


def runtime_outputs(path: str | Path, X: np.ndarray) -> np.ndarray:
    """The LiteRT reference interpreter's (BUILTIN_REF) int8 values of the tensor the device's
    head reads (the input of a trailing SOFTMAX, else the output) for float inputs X (N, n_features),
    quantised as the device does (graph_ref.quantize_input). Needs `ai-edge-litert`."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # heavy: only when asked
    from . import graph_ref
    g = load(path)
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    r = _Reader(Path(path))
    out = int(r.g.Outputs(0))
    producer = {r.output(i): i for i in range(len(r.ops))}
    while out in producer and r.name(producer[out]) in ("DEQUANTIZE", "SOFTMAX"):
        out = r.inputs(producer[out])[0]
    xq = graph_ref.quantize_input(g, X)
    rows = []
    for x in xq:
        it.set_tensor(inp["index"], x.astype(np.int8).reshape(inp["shape"]))
        it.invoke()
        rows.append(it.get_tensor(out).astype(np.int64).ravel())
    return np.array(rows)
