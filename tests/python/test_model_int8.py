"""int8 models on the host (issue 22 item 4): quantiser, integer reference, C data, deploy --int8.
The device side (bit-exact against this reference in QEMU) is tests/hil/test_qemu_int8.py."""
from __future__ import annotations

import json
from pathlib import Path

from ..helpers import require

require("sklearn", "joblib")  # the models converted

import joblib
import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.linear_model import LogisticRegression

from edgedp.datasets import digits_split
from edgedp.cli import main
from edgedp.model import cgen, quantize, reference
from edgedp.model.spec import Dense, Dense8, DeviceModel, Net

ROOT = Path(__file__).resolve().parents[2]
S = digits_split(0)


def accuracy(model: DeviceModel) -> float:
    return float(np.mean(reference.first_argmax(reference.run(model, S.X_test)) == S.y_test))


@pytest.mark.parametrize("name", ["digits_mlp", "digits_ensemble"])
def test_int8_keeps_accuracy_within_half_a_point_in_at_most_half_the_flash(name: str) -> None:
    flt = cgen.read(ROOT / f"firmware/model/{name}.c")
    q = quantize.quantize(flt, S.X_pool)
    print(f"\n{name}: float {accuracy(flt):.4f} ({flt.flash_bytes} B), int8 {accuracy(q):.4f} ({q.flash_bytes} B)")
    assert abs(accuracy(q) - accuracy(flt)) <= 0.005
    assert q.flash_bytes <= flt.flash_bytes / 2
    assert q.head == flt.head and (q.lo, q.hi, q.sensitivity) == (flt.lo, flt.hi, flt.sensitivity)


@pytest.mark.parametrize("name", ["digits_logreg", "digits_mlp", "digits_ensemble"])
def test_bundled_int8_models_are_the_quantised_bundled_models(name: str) -> None:
    q = quantize.quantize(cgen.read(ROOT / f"firmware/model/{name}.c"), S.X_pool)
    assert cgen.digest(cgen.read(ROOT / f"firmware/model/{name}_int8.c")) == cgen.digest(q)


def _python_ints(model: DeviceModel, x: np.ndarray) -> np.ndarray:
    """The first net's logits in Python integers (the model.h contract written out again)."""
    q = []
    for v in x.astype(np.float32):
        t = np.float32(np.float32(v * np.float32(model.quant.mul)) + np.float32(model.quant.add))
        q.append(min(max(int(np.floor(t)), 0), 255) - 128 if t >= 0 else -128)
    layers = model.nets[0].layers
    for layer in layers[:-1]:
        nxt = []
        for j in range(layer.w.shape[1]):
            acc = int(layer.b[j]) + sum(int(a) * int(w) for a, w in zip(q, layer.w[:, j]))
            s = int(layer.shift[j])
            nxt.append(min(max(((acc * int(layer.mult[j]) + (1 << (s - 1))) >> s) - 128, -128), 127))
        q = nxt
    last = layers[-1]
    acc = [int(last.b[j]) + sum(int(a) * int(w) for a, w in zip(q, last.w[:, j])) for j in range(last.w.shape[1])]
    return np.float32(acc) * last.scale


def test_reference_is_the_integer_contract() -> None:
    q = cgen.read(ROOT / "firmware/model/digits_mlp_int8.c")
    X = np.vstack([S.X_test[:3], np.random.default_rng(1).normal(0, 3, (2, 64))]).astype(np.float32)
    xq = reference.quantize_input(q.quant, X)
    assert xq.min() == -128 and xq.max() == 127  # the random rows saturate at both ends
    for x, xi in zip(X, xq):
        assert np.array_equal(reference.logits8(q.nets[0], xi[None])[0], _python_ints(q, x))


def test_c_data_round_trips_with_padded_rows_and_an_odd_output(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 2, (200, 5))
    net = Net((Dense(rng.normal(size=(5, 7)), rng.normal(size=7)), Dense(rng.normal(size=(7, 3)), rng.normal(size=3))),
              np.arange(3))
    q = quantize.quantize(DeviceModel("odd", "softmax", 3, (net,), 0.0, 1.0, input_range=(-1.0, 2.0)), X)
    path = tmp_path / "odd.c"
    path.write_text(cgen.generate(q))
    back = cgen.read(path)
    assert back.int8 and cgen.digest(back) == cgen.digest(q)
    assert np.array_equal(reference.run(back, X.astype(np.float32)), reference.run(q, X.astype(np.float32)))
    text = path.read_text()
    head = "static const int8_t w0_0[56] = {\n    "  # 7 rows of 8: 5 inputs and 3 zeros
    i = text.index(head) + len(head)
    vals = text[i:].split(",")
    assert vals[5:8] == [" 0"] * 3
    vals[5] = " 1"  # row 0, the first padding byte
    path.write_text(text[:i] + ",".join(vals))
    with pytest.raises(ValueError, match="padding"):
        cgen.read(path)


def test_int8_layer_contract_is_checked() -> None:
    w, b = np.zeros((4, 2), np.int8), np.zeros(2, np.int32)
    with pytest.raises(ValueError, match="multiplier and shift"):
        Dense8(w, b)
    with pytest.raises(ValueError, match="33..62"):
        Dense8(w, b, np.full(2, 2**30), np.full(2, 31))
    with pytest.raises(ValueError, match="all float32 or all int8"):
        DeviceModel("x", "softmax", 2, (Net((Dense8(w, b, scale=np.ones(2)),), np.arange(2)),), 0.0, 1.0)


def test_deploy_int8_cli(tmp_path: Path) -> None:
    m = LogisticRegression(max_iter=300).fit(S.X_pool[:400], S.y_pool[:400])
    joblib.dump(m, tmp_path / "lr.joblib")
    np.save(tmp_path / "calib.npy", S.X_pool[:400])
    out = tmp_path / "lr8.c"
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--int8", "--calibration",
                                  str(tmp_path / "calib.npy"), "--input-range", "0", "1", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["int8"] and d["flash_weight_bytes"] == cgen.read(out).flash_bytes < 4 * d["weights"] / 2
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--int8", "--input-range", "0", "1",
                                  "--out", str(out)])
    assert r.exit_code != 0 and "--calibration" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--calibration",
                                  str(tmp_path / "calib.npy"), "--out", str(out)])
    assert r.exit_code != 0 and "only applies with --int8" in r.output
