"""Model kernels, converters and the C generator, host only (the device side: tests/hil)."""
from __future__ import annotations

import re

import json
import zlib
from dataclasses import replace
from pathlib import Path

from ..helpers import require

require("sklearn", "joblib")  # the models converted

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from edgedp.datasets import digits_split
from edgedp.model.learners import Constant
from edgedp.model import cgen, convert, reference
from edgedp.model.spec import Dense, DeviceModel, Net

S = digits_split(0)
X, Y = S.X_pool[:300], S.y_pool[:300]


def test_exp32_is_within_two_ulps_of_exp() -> None:
    x = -np.linspace(0, 87, 400_001).astype(np.float32)
    rel = np.abs(reference.exp32(x) - np.exp(x.astype(np.float64))) / np.exp(x.astype(np.float64))
    assert rel.max() < 2 * 2.0 ** -24
    assert reference.exp32(np.float32([-88.0, np.nan]))[0] == 0.0
    assert reference.exp32(np.float32([np.nan]))[0] == 0.0


def test_dense_accumulates_in_input_order_not_blas_order() -> None:
    w = np.float32([[1e8], [1.0], [-1e8]])
    layer = Dense(w, np.float32([0.0]))
    x = np.float32([[1.0, 1.0, 1.0]])
    # ((0 + 1e8) + 1) - 1e8 = 0 in float32; a pairwise/BLAS order may give 1.
    assert reference.dense(layer, x)[0, 0] == np.float32(0.0)


@pytest.mark.parametrize("kind", ["logreg", "mlp", "binary"])
def test_converted_sklearn_models_match_predict_proba(kind: str) -> None:
    y = Y if kind != "binary" else (Y > 4).astype(int)
    m = (MLPClassifier(hidden_layer_sizes=(16,), max_iter=200, random_state=0) if kind == "mlp"
         else LogisticRegression(max_iter=500)).fit(X, y)
    dm = convert.from_sklearn(m, "t")
    out = reference.run(dm, S.X_test)
    assert np.abs(out - m.predict_proba(S.X_test)).max() < 1e-5
    assert np.array_equal(reference.first_argmax(out), m.predict(S.X_test))


def test_teacher_votes_count_each_teachers_label() -> None:
    teachers = [LogisticRegression(max_iter=500).fit(X[i::3], Y[i::3]) for i in range(3)] + [Constant(7)]
    dm = convert.from_teachers(teachers, 10, 64, "ens")
    v = reference.run(dm, S.X_test)
    assert (dm.lo, dm.hi, dm.sensitivity) == (0.0, 4.0, 2.0)
    want = np.zeros_like(v)
    for t in teachers:
        want[np.arange(len(v)), t.predict(S.X_test)] += 1
    assert np.array_equal(v, want)


def test_generated_c_reads_back_identically(tmp_path: Path) -> None:
    m = MLPClassifier(hidden_layer_sizes=(8, 6), max_iter=50, random_state=1).fit(X, Y)
    dm = replace(convert.from_sklearn(m, "mlp2"), input_range=(0.0, 1.0))
    path = tmp_path / "m.c"
    path.write_text(cgen.generate(dm))
    back = cgen.read(path)
    assert cgen.digest(back) == cgen.digest(dm)
    assert np.array_equal(reference.run(back, S.X_test).view(np.uint32), reference.run(dm, S.X_test).view(np.uint32))


@pytest.mark.parametrize("name", ["digits_logreg", "digits_mlp_int8"])
def test_model_file_declares_the_scratch_sizes_the_wipe_zeroes(name: str, tmp_path: Path) -> None:
    """edp_model_wipe zeroes the sizes the model file declares (edp_model_t.scratch_floats,
    edp_model_s8_t.xp_words): a file whose sizes are not its arrays' is refused, and one without
    them (written before the fields) does not compile."""
    import shutil
    import subprocess
    root = Path(__file__).resolve().parents[2]
    text = (root / "firmware/model" / f"{name}.c").read_text()
    model = cgen.read(root / "firmware/model" / f"{name}.c")
    declared = f"    {'&s8' if model.int8 else 'NULL'}, {model.scratch_floats},\n"
    assert declared in text
    for bad in (text.replace(declared, declared.replace(f" {model.scratch_floats},", " 3,")),
                text.replace(f"static float scratch[{model.scratch_floats}];", "static float scratch[3];"),
                text.replace(", act, xp, 32, NULL};", ", act, xp, 2, NULL};")):
        if bad == text:
            continue
        (tmp_path / "bad.c").write_text(bad)
        with pytest.raises(ValueError, match="scratch sizes"):
            cgen.read(tmp_path / "bad.c")
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed: the stale file's compile is not checked")
    # written before the field (and before the identity fields after it, edp_model_t.in_rank...)
    stale = re.sub(r"(    (?:NULL|&s8),) \d+,\n    \d+, \{[\d, ]+\},\n    \{[0-9a-fx, ]+\},\n", r"\1\n", text)
    assert stale != text
    (tmp_path / "stale.c").write_text(stale)
    r = subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-std=c99", "-Wall", "-Wextra", "-Werror",
                        f"-I{root}/firmware/core/include", "-fsyntax-only", str(tmp_path / "stale.c")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "scratch_floats" in r.stderr


def test_signed_zero_and_extremes_survive_c_literals(tmp_path: Path) -> None:
    w = np.float32([[-0.0, 3.4028235e38, 1e-45, -1.17549435e-38]])
    dm = DeviceModel("z", "softmax", 4, (Net((Dense(w, np.zeros(4)),), np.arange(4)),), 0.0, 1.0,
                     input_range=(-1.0, 1.0))
    path = tmp_path / "z.c"
    path.write_text(cgen.generate(dm))
    assert cgen.read(path).nets[0].layers[0].w.tobytes() == w.tobytes()


def test_train_npz_and_joblib_files_load(tmp_path: Path) -> None:
    from edgedp.train import model_file as models_io

    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(64, 5)), np.zeros(5)), (rng.normal(size=(5, 10)), np.zeros(10))]
    models_io.save(tmp_path / "dp.npz", models_io.Model("mlp", layers, np.arange(10)),
                   dict.fromkeys(models_io.TRAINING_KEYS, 0), {"name": "x", "n_features": 64, "n_classes": 10})
    dm = convert.load(tmp_path / "dp.npz")
    assert (dm.head, dm.n_features, dm.n_classes, len(dm.nets[0].layers)) == ("softmax", 64, 10, 2)
    teachers = [LogisticRegression(max_iter=300).fit(X[i::2], Y[i::2]) for i in range(2)]
    joblib.dump(teachers, tmp_path / "ens.joblib")
    assert convert.load(tmp_path / "ens.joblib").head == "votes"
    with pytest.raises(ValueError, match="only ReLU"):
        convert.from_sklearn(MLPClassifier(activation="tanh", max_iter=20).fit(X, Y), "x")


def test_crc_of_raw_outputs_is_zlib_over_float32_bytes() -> None:
    dm = cgen.read(Path(__file__).resolve().parents[2] / "firmware/model/digits_ensemble.c")
    out = reference.run(dm, S.X_test[:1])[0]
    assert zlib.crc32(out.astype("<f4").tobytes()) == zlib.crc32(out.tobytes())
    assert out.sum() == len(dm.nets)


def test_deploy_command_writes_c_that_reads_back(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from edgedp.cli import main

    m = LogisticRegression(max_iter=300).fit(X, Y)
    joblib.dump(m, tmp_path / "lr.joblib")
    out = tmp_path / "lr.c"
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--out", str(out)])
    assert r.exit_code != 0 and "--input-range" in r.output  # a joblib file carries no data range
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--out", str(out), "--json",
                                  "--input-range", "0", "1"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["input_range"] == [0.0, 1.0]
    back = cgen.read(out)
    assert back.input_range == (0.0, 1.0)
    lr = replace(convert.from_sklearn(m, "lr"), input_range=(0.0, 1.0))
    assert np.array_equal(reference.run(back, S.X_test), reference.run(lr, S.X_test))
    # the device clamps: out-of-range inputs give the output of the clipped ones
    wild = S.X_test[:5] * 40.0 - 20.0
    assert np.array_equal(reference.run(back, wild), reference.run(back, np.clip(wild, 0.0, 1.0)))
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "missing.joblib"), "--out", str(out)])
    assert r.exit_code != 0 and "error" in r.output


def test_deploy_refuses_bad_models_and_outputs_with_one_line(tmp_path: Path) -> None:
    """Issue 20.5: not a model, an unfitted MLP, an .npz without manifest, an unknown built-in name,
    a non-.c --out and an unwritable --out (checked before the model is built) each give one clear line."""
    from click.testing import CliRunner
    from sklearn.neural_network import MLPClassifier

    from edgedp.cli import main

    (tmp_path / "text.joblib").write_text("not a model\n")
    joblib.dump(MLPClassifier(), tmp_path / "unfit.joblib")
    np.savez(tmp_path / "data.npz", X=S.X_test, y=S.y_test)
    lr = tmp_path / "lr.joblib"
    joblib.dump(LogisticRegression(max_iter=300).fit(X, Y), lr)
    out = str(tmp_path / "m.c")
    cases = [
        ([str(tmp_path / "text.joblib"), "--out", out], "not a model file"),
        ([str(tmp_path / "unfit.joblib"), "--out", out], "not fitted"),
        ([str(tmp_path / "data.npz"), "--out", out], "no privacy manifest"),
        (["digits-cnn", "--out", out], "digits-ensemble, digits-logreg, digits-mlp"),
        ([str(lr), "--out", str(tmp_path / "x.txt")], "name it FILE.c"),
        (["digits-ensemble", "--out", "/proc/edgedp-nope/m.c"], "cannot write there"),  # before 30 teachers train
        ([str(lr), "--input-range", "0", "16", "--out", out, "--data", str(tmp_path / "lr.joblib")], "give an .npz"),
    ]
    for args, want in cases:
        r = CliRunner().invoke(main, ["deploy", *args])
        assert r.exit_code != 0 and want in r.output, (args, r.output)
        assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), args
    assert not (tmp_path / "m.c").exists() and not (tmp_path / "x.txt").exists()


def test_deploy_data_scores_device_kernels_on_the_users_data(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from edgedp.cli import main

    m = LogisticRegression(max_iter=300).fit(X, Y + 5)  # label values 5..14: the device's class c is classes_[c]
    joblib.dump(m, tmp_path / "lr.joblib")
    np.savez(tmp_path / "mine.npz", X=S.X_test, y=S.y_test + 5)
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--out", str(tmp_path / "lr.c"),
                                  "--input-range", "0", "16", "--data", str(tmp_path / "mine.npz"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    want = float((m.predict(S.X_test) == S.y_test + 5).mean())
    assert d["scored_on"] == str(tmp_path / "mine.npz") and d["scored_records"] == len(S.y_test)
    assert d["float_accuracy"] == pytest.approx(want) and d["device_accuracy"] > 0.9 and d["agreement"] > 0.99
    np.savez(tmp_path / "wide.npz", X=np.zeros((3, 65)), y=np.zeros(3))
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "lr.joblib"), "--out", str(tmp_path / "lr.c"),
                                  "--input-range", "0", "16", "--data", str(tmp_path / "wide.npz")])
    assert r.exit_code != 0 and "(n, 64)" in r.output and "65" in r.output


def test_target_model_reads_the_images_copy_and_knows_a_session_image_is_stale(tmp_path: Path) -> None:
    import os
    from types import SimpleNamespace

    from edgedp.model.image import UnknownModel, target_model

    image = tmp_path / "qemu" / "edgedp.elf"
    image.parent.mkdir()
    dm = DeviceModel("mine", "softmax", 3, (Net((Dense(np.ones((5, 3)), np.zeros(3)),), np.arange(3)),), 0.0, 1.0,
                     input_range=(0.0, 1.0))
    (image.parent / "model.c").write_text(cgen.generate(dm))
    assert target_model(SimpleNamespace(image=image)).n_features == 5
    with pytest.raises(UnknownModel, match="serial link"):
        target_model(SimpleNamespace(image=None, name="socket://x"))
    mtime = (image.parent / "model.c").stat().st_mtime
    assert target_model(SimpleNamespace(image=image, image_started=mtime + 1)).name == "mine"
    os.utime(image.parent / "model.c", (mtime + 10, mtime + 10))  # rebuilt after the session started
    with pytest.raises(UnknownModel, match="device stop"):
        target_model(SimpleNamespace(image=image, image_started=mtime + 1))
    (image.parent / "model.c").write_text('#include "edgedp/model.h"\nconst edp_model_t *const edp_app_model = 0;\n')
    assert target_model(SimpleNamespace(image=image)) is None
