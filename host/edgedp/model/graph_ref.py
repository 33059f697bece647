"""NumPy reference of the device's graph kernels (model_graph.c), in exact integer arithmetic: the
TFLite reference kernels' semantics (graph.py), so the int8 logits equal both the device's and the
LiteRT reference interpreter's bit for bit."""
from __future__ import annotations

import numpy as np

from .graph import Graph, Op

I64 = np.int64
F = np.float32


def _srdhm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int32 values held in int64: (a b + nudge) / 2^31
    truncated toward zero, nudge 2^30 (or 1 - 2^30 for a negative product)."""
    ab = a * b
    v = ab + np.where(ab >= 0, I64(1 << 30), I64(1 - (1 << 30)))
    q = np.where(v >= 0, v >> 31, -((-v) >> 31))
    return np.where((a == -(1 << 31)) & (b == -(1 << 31)), I64((1 << 31) - 1), q)


def _rdbpot(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT: x / 2^e rounded to nearest, halves away from zero."""
    mask = (I64(1) << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > thr)


def wrap32(x: np.ndarray) -> np.ndarray:
    """int32 wrap-around (the C kernels' int32 arithmetic)."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def requant(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """MultiplyByQuantizedMultiplier (double rounding) per element; mult and shift broadcast over the
    last axis (per channel) or are scalars."""
    m = np.asarray(mult, I64)
    s = np.asarray(shift, I64)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    return _rdbpot(_srdhm(wrap32(acc * (I64(1) << left)), m), right)


def requant1(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """The single-rounding requantisation: (acc m + 2^(30 - shift)) >> (31 - shift), exact in int64
    (|acc| < 2^31, m < 2^31, 31 - shift in 1..62: the sum fits)."""
    m = np.asarray(mult, I64)
    r = 31 - np.asarray(shift, I64)
    return (acc * m + (I64(1) << (r - 1))) >> r


def _windows(x: np.ndarray, op: Op, oh: int, ow: int, fill: int) -> tuple[np.ndarray, np.ndarray]:
    """Each kernel tap's input for every output position: (KH*KW, N, oh, ow, C) values (``fill``
    outside the input) and whether the tap lies inside, (KH*KW, oh, ow)."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = op.kernel, op.stride, op.dilation, op.pad
    ys = np.arange(oh)[:, None] * sh - pt + np.arange(kh)[None, :] * dh   # (oh, kh)
    xs = np.arange(ow)[:, None] * sw - pl + np.arange(kw)[None, :] * dw
    taps, inside = [], []
    for i in range(kh):
        for j in range(kw):
            yy, xx = ys[:, i], xs[:, j]
            ok = ((yy >= 0) & (yy < h))[:, None] & ((xx >= 0) & (xx < w))[None, :]
            v = x[:, np.clip(yy, 0, h - 1)][:, :, np.clip(xx, 0, w - 1)]
            taps.append(np.where(ok[None, :, :, None], v, I64(fill)))
            inside.append(ok)
    return np.stack(taps), np.stack(inside)


def _out(acc: np.ndarray, op: Op, zp: int) -> np.ndarray:
    assert op.mult is not None and op.shift is not None  # conv, dwconv, fc have them
    return np.clip((requant1 if op.single_round else requant)(acc, op.mult, op.shift) + zp, *op.act)


def run_op(g: Graph, op: Op, x: np.ndarray, x2: np.ndarray | None) -> np.ndarray:
    """One operator on a batch: x (N, H, W, C) int64 values -> (N, oh, ow, oc)."""
    ta, ty = g.tensors[op.a], g.tensors[op.y]
    oh, ow, oc = ty.shape
    n = len(x)
    if op.kind in ("conv", "dwconv"):
        taps, _ = _windows(x, op, oh, ow, ta.zp)
        taps = taps - ta.zp
        assert op.w is not None and op.bias is not None
        acc = np.zeros((n, oh, ow, oc), I64)
        w = op.w.astype(I64)
        for t in range(len(taps)):
            i, j = divmod(t, op.kernel[1])
            if op.kind == "conv":
                acc += taps[t] @ w[:, i, j, :].T
            else:
                acc += np.repeat(taps[t], oc // ta.shape[2], axis=-1) * w[i, j]
        return _out(acc + op.bias, op, ty.zp)
    if op.kind == "fc":
        assert op.w is not None and op.bias is not None
        acc = (x.reshape(n, -1) - ta.zp) @ op.w.astype(I64).T + op.bias
        return _out(acc, op, ty.zp).reshape(n, oh, ow, oc)
    if op.kind in ("avgpool", "maxpool"):
        taps, inside = _windows(x, op, oh, ow, -128)
        if op.kind == "maxpool":
            return np.clip(taps.max(axis=0), *op.act)
        count = inside.sum(axis=0).astype(I64)[None, :, :, None]
        s = taps.sum(axis=0, where=inside[:, None, :, :, None])
        return np.clip(_div_round(s, count), *op.act)
    if op.kind == "mean":
        assert op.mult is not None and op.shift is not None
        acc = (x - ta.zp).sum(axis=(1, 2), keepdims=True)
        return np.clip(requant(acc, op.mult, op.shift) + ty.zp, -128, 127)
    if op.kind == "pad":
        (pt, pl) = op.pad
        out = np.full((n, oh, ow, oc), ty.zp, I64)
        out[:, pt:pt + ta.shape[0], pl:pl + ta.shape[1], :] = x
        return out
    if op.kind == "add":
        assert x2 is not None and op.mult is not None and op.shift is not None
        tb = g.tensors[op.b]
        m, s = op.mult.astype(I64), op.shift.astype(I64)
        a = requant((x - ta.zp) << 20, m[0], s[0])
        b = requant((x2 - tb.zp) << 20, m[1], s[1])
        return np.clip(requant(a + b, m[2], s[2]) + ty.zp, *op.act)
    raise AssertionError(op.kind)


def _div_round(s: np.ndarray, count: np.ndarray) -> np.ndarray:
    """TFLite's rounded integer division: (s + count/2) / count for s > 0, (s - count/2) / count
    otherwise, C division (toward zero)."""
    half = count // 2
    num = np.where(s > 0, s + half, s - half)
    q = np.abs(num) // count
    return np.where(num >= 0, q, -q)


def quantize_input(g: Graph, x: np.ndarray) -> np.ndarray:
    """(N, n_features) float32 -> int8 values (int64): round(x / scale) + zp, halves away from zero,
    clamped, every operation in float32 (TFLite's Quantize)."""
    t = g.tensors[g.input]
    v = np.asarray(x, F) / F(t.scale)
    v = np.clip(v, F(-256.0), F(256.0))
    r = np.trunc(v)
    r = r + np.where(v - r >= F(0.5), F(1.0), F(0.0)) - np.where(v - r <= F(-0.5), F(1.0), F(0.0))
    return np.clip(r.astype(I64) + t.zp, -128, 127)


def logits_q(g: Graph, xq: np.ndarray) -> np.ndarray:
    """(N, n_features) int8 input values -> (N, n_outputs) int8 output values of the graph."""
    n = len(xq)
    vals: dict[int, np.ndarray] = {}

    def root(t: int) -> int:
        return g.tensors[t].alias if g.tensors[t].alias >= 0 else t

    def get(t: int) -> np.ndarray:
        return vals[root(t)].reshape((n,) + g.tensors[t].shape)

    vals[root(g.input)] = np.asarray(xq, I64)
    for op in g.ops:
        vals[root(op.y)] = run_op(g, op, get(op.a), get(op.b) if op.b >= 0 else None)
    return get(g.output).reshape(n, -1)


def logits(g: Graph, x: np.ndarray) -> np.ndarray:
    """Float32 logits the device's head sees: float32(q - zp) * scale of the graph's output."""
    t = g.tensors[g.output]
    return (logits_q(g, quantize_input(g, x)) - t.zp).astype(np.int32).astype(F) * F(t.scale)
