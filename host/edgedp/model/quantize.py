"""Float32 DeviceModel -> int8 DeviceModel (`edgedp deploy --int8`, docs/model.md "int8 models"):
post-training quantisation as TFLite / CMSIS-NN s8 do it. Weights symmetric per output channel,
activations asymmetric int8 with scales calibrated on data (the training data), int32 biases
and accumulators, a fixed-point multiplier and shift per output channel. The reference
(edgedp.model.reference) then computes what the device computes, bit for bit."""
from __future__ import annotations

import numpy as np

from .spec import Dense, Dense8, DeviceModel, InputQuant, Net

INT32_MAX = 2**31 - 1


def input_quant(lo: float, hi: float) -> tuple[InputQuant, float, int]:
    """Input quantisation mapping [lo, hi] (widened to contain 0) onto -128..127: (the device's
    parameters, the scale they realise, the zero point)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo <= 0:
        raise ValueError("int8: the calibration inputs must span a finite, non-empty range")
    mul = float(np.float32(255.0 / (hi - lo)))
    zp = int(np.clip(round(-128 - lo * mul), -128, 127))
    return InputQuant(mul, zp + 128.5), 1.0 / mul, zp


def multiplier(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Real multipliers m > 0 as (mult, shift S) with m ~ mult 2^-S: mult in [2^30, 2^31) (31
    bits) when m < 1/4; larger m keep S = 33 (the device's fast requantisation) with fewer bits."""
    f, e = np.frexp(m)
    mult = np.round(f * 2.0**31).astype(np.int64)
    up = mult == 2**31
    mult[up], e[up] = 2**30, e[up] + 1
    shift = 31 - e.astype(np.int64)
    short = shift < 33
    mult[short] = np.round(m[short] * 2.0**33).astype(np.int64)
    shift[short] = 33
    if shift.max() > 62 or mult.min() < 1 or mult.max() >= 2**31:
        raise ValueError("int8: a requantisation multiplier is out of range (a layer's scales are degenerate)")
    return mult, shift


def _weights(layer: Dense) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-output-channel int8 weights and their scales (an all-zero channel: scale 1)."""
    w = layer.w.astype(np.float64)
    amax = np.abs(w).max(axis=0)
    s = np.where(amax > 0, amax / 127.0, 1.0)
    return np.clip(np.round(w / s), -127, 127).astype(np.int64), s


def _bias(b: np.ndarray, wq: np.ndarray, s_acc: np.ndarray, zp: int) -> np.ndarray:
    """int32 bias at the accumulator's scale with the input zero point folded in, so that
    acc = b' + sum_i q_i w_ij; refused if any int8 input could overflow the int32 sum."""
    bq = np.round(b.astype(np.float64) / s_acc).astype(np.int64) - zp * wq.sum(axis=0)
    worst = np.abs(bq) + 128 * np.abs(wq).sum(axis=0)
    if worst.max() > INT32_MAX:
        raise ValueError("int8: a bias is too large for the int32 accumulator at these scales")
    return bq


def quantize_net(net: Net, x: np.ndarray, s_in: float, zp_in: int) -> Net:
    """One net, calibrated on its float inputs x (N, in): each hidden layer's output scale maps
    the largest activation seen onto 255 steps above the zero point -128."""
    layers = []
    s_x, zp = s_in, zp_in
    for i, layer in enumerate(net.layers):
        assert isinstance(layer, Dense), "quantize_net takes a float32 net"
        wq, s_w = _weights(layer)
        b = _bias(layer.b, wq, s_x * s_w, zp)
        if i + 1 == len(net.layers):
            layers.append(Dense8(wq, b, scale=(s_x * s_w).astype(np.float32)))
            break
        x = np.maximum(x @ layer.w.astype(np.float64) + layer.b, 0.0)
        top = float(x.max())
        s_y = top / 255.0 if top > 0 else 1.0
        mult, shift = multiplier(s_x * s_w / s_y)
        layers.append(Dense8(wq, b, mult, shift))
        s_x, zp = s_y, -128
    return Net(tuple(layers), net.classes)


def quantize(model: DeviceModel, calibration: np.ndarray) -> DeviceModel:
    """The int8 version of a float model, activation scales calibrated on ``calibration`` (N,
    n_features), e.g. the training inputs; the input scale maps the model's declared input
    range (else the calibration inputs' range) onto int8."""
    if model.int8:
        return model
    X = np.asarray(calibration, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != model.n_features or not len(X) or not np.all(np.isfinite(X)):
        raise ValueError(f"int8: calibration inputs must be finite, of shape (n, {model.n_features})")
    if model.input_range is not None:  # the device clamps to it: calibrate on clamped inputs
        X = np.clip(X, *model.input_range)
    q, s_in, zp = input_quant(*(model.input_range or (X.min(), X.max())))
    nets = tuple(quantize_net(n, X, s_in, zp) for n in model.nets)
    return DeviceModel(model.name, model.head, model.n_classes, nets, model.lo, model.hi,
                       model.sensitivity, model.m, model.input_range, q, model.input_shape)
