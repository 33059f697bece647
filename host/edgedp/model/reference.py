"""Bit-exact NumPy replay of firmware/core/src/model.c: every float32 operation in the
device's order (no BLAS, whose summation order differs), so outputs match bit for bit; int8
models (model_s8.c) and imported graphs (model_graph.c, graph_ref.py) in integer arithmetic, exact
whatever the order, then the same head."""
from __future__ import annotations

import numpy as np

from . import graph_ref
from .spec import Dense, Dense8, DeviceModel, InputQuant, Net

F = np.float32
_LN2_HI = F(float.fromhex("0x1.62e400p-1"))
_LN2_LO = F(float.fromhex("0x1.7f7d1cp-20"))
_LOG2E = F(float.fromhex("0x1.715476p+0"))
_POLY = [F(float.fromhex(h)) for h in ("0x1.a01a02p-13", "0x1.6c16c2p-10", "0x1.111112p-7",
                                         "0x1.555556p-5", "0x1.555556p-3", "0x1p-1", "0x1p+0", "0x1p+0")]


def exp32(x: np.ndarray) -> np.ndarray:
    """edp_model_exp: exp(x) for x <= 0 in float32, 0 below -87 (and for NaN)."""
    x = np.asarray(x, dtype=F)
    ok = x >= F(-87.0)
    xs = np.where(ok, x, F(0.0))
    n = (xs * _LOG2E - F(0.5)).astype(np.int32)
    nf = n.astype(F)
    r = (xs - nf * _LN2_HI) - nf * _LN2_LO
    p = np.full_like(r, _POLY[0])
    for c in _POLY[1:]:
        p = p * r + c
    two_n = ((n + 127).astype(np.uint32) << np.uint32(23)).view(F)
    return np.where(ok, p * two_n, F(0.0))


def dense(layer: Dense, x: np.ndarray) -> np.ndarray:
    """(N, in) -> (N, out): b, then + x_i W_i for i in input order, each product rounded."""
    y = np.repeat(layer.b[None, :], len(x), axis=0)
    for i in range(layer.w.shape[0]):
        y = y + x[:, i:i + 1] * layer.w[i]
    return y


def quantize_input(q: InputQuant, x: np.ndarray) -> np.ndarray:
    """(N, in) float32 -> int8 values (as int64): floor(x mul + add) clamped to 0..255, - 128."""
    t = x.astype(F) * F(q.mul) + F(q.add)
    t = np.where(t >= F(0.0), t, F(0.0))  # NaN too
    return np.minimum(np.floor(t), F(255.0)).astype(np.int64) - 128


def dense8(layer: Dense8, x: np.ndarray) -> np.ndarray:
    """(N, in) int8 values -> (N, out): the int32 accumulators (exact in int64: no wrap-around
    for any int8 input, checked at quantisation), requantised to int8 for a hidden layer."""
    acc = layer.b.astype(np.int64) + x @ layer.w.astype(np.int64)
    if not layer.hidden:
        return acc
    assert layer.mult is not None and layer.shift is not None  # a hidden layer has both (Dense8)
    s = layer.shift.astype(np.int64)
    y = ((acc * layer.mult.astype(np.int64) + (np.int64(1) << (s - 1))) >> s) - 128
    return np.clip(y, -128, 127)


def logits8(net: Net, x: np.ndarray) -> np.ndarray:
    for layer in net.layers:
        assert isinstance(layer, Dense8), "logits8 runs int8 nets"
        x = dense8(layer, x)
    last = net.layers[-1]
    assert isinstance(last, Dense8) and last.scale is not None  # the last layer dequantises (Net)
    return x.astype(np.int32).astype(F) * last.scale


def logits(net: Net, x: np.ndarray) -> np.ndarray:
    for i, layer in enumerate(net.layers):
        assert isinstance(layer, Dense), "logits runs float32 nets"
        x = dense(layer, x)
        if i + 1 < len(net.layers):
            x = np.where(x > F(0.0), x, F(0.0))
    return x


def first_argmax(z: np.ndarray) -> np.ndarray:
    """Index of the first maximum per row, comparing with > as the device does (NaN never wins)."""
    best = np.zeros(len(z), dtype=np.int64)
    top = z[:, 0].copy()
    for j in range(1, z.shape[1]):
        win = z[:, j] > top
        best[win] = j
        top[win] = z[win, j]
    return best


def run(model: DeviceModel, X: np.ndarray) -> np.ndarray:
    """The device's raw model output for each row of X: (N, n_classes) float32, the inputs
    clamped to the model's declared input range first (edp_model_clamp)."""
    x = np.asarray(X, dtype=F)
    if x.ndim != 2 or x.shape[1] != model.n_features:
        raise ValueError(f"inputs must have shape (n, {model.n_features}), got {x.shape}")
    if model.input_range is not None:
        lo, hi = (F(v) for v in model.input_range)
        x = np.where(x < lo, lo, np.where(x > hi, hi, x))
    with np.errstate(over="ignore", invalid="ignore"):  # the device reports non-finite outputs
        return _run(model, x)


def _softmax(z: np.ndarray) -> np.ndarray:
    """edp_model_head's softmax of each row of logits."""
    rows = np.arange(len(z))
    e = exp32(z - z[rows, first_argmax(z)][:, None])
    s = np.zeros(len(z), dtype=F)
    for j in range(e.shape[1]):
        s = s + e[:, j]
    return e / s[:, None]


def _run(model: DeviceModel, x: np.ndarray) -> np.ndarray:
    if model.graph is not None:  # an imported graph: its logits, the softmax head
        return _softmax(graph_ref.logits(model.graph, x))
    out = np.zeros((len(x), model.n_classes), dtype=F)
    rows = np.arange(len(x))
    xq = quantize_input(model.quant, x) if model.quant is not None else x
    for net in model.nets:
        z = logits8(net, xq) if model.quant is not None else logits(net, x)
        if model.head == "votes":
            np.add.at(out, (rows, net.classes[first_argmax(z)]), F(1.0))
            continue
        out[:, net.classes] = _softmax(z)
    return out
