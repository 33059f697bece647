"""INFER on the emulated board: the model runs on the device, only the private release leaves.

Three test images: the default (bundled digits teacher ensemble), one with the bundled
digits MLP (softmax head: the most rounding-sensitive output; its two 1,000-input replays are
test_qemu_infer_raw.py and test_qemu_infer_release.py) and one without a model."""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from ..helpers import ROOT, TEST_EPOCH, make, require

require("sklearn", "joblib")  # the digits split and the models

from edgedp.datasets import digits_split
from edgedp.device import protocol as P
from edgedp.device.client import Device
from edgedp.device.errors import DeviceError, ErrorCode
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.targets.qemu import QemuTarget
from edgedp.mech import fast
from edgedp.mech.modes import Mode
from edgedp.model import cgen, reference
from edgedp.model.image import InferReference


pytestmark = pytest.mark.hil
SPLIT = digits_split(0)
MODES = ["full", "topk:3", "label", "bucket", "round:2", "simplex"]


def prepare(dev: Device, key: bytes, cap: int = 5000) -> Device:
    dev.sync()
    dev.set_time(key, TEST_EPOCH + 400 * 86400)
    dev.configure(key, MechConfig(), Caps(cap * 1_000_000))
    dev.reset_budget(key)
    return dev


def model_target(name: str) -> QemuTarget:
    make(f"build/qemu-model-{name}/edgedp.elf")
    return QemuTarget(ROOT / f"build/qemu-model-{name}/edgedp.elf", 1, f"qemu-model-{name}")


def mlp_device(key: bytes) -> Iterator[Device]:
    """The image with the bundled digits MLP, prepared; for a module fixture
    (test_qemu_infer_raw.py and test_qemu_infer_release.py: one file per long replay, so
    pytest-xdist's --dist loadfile can run them on two workers)."""
    t = model_target("digits_mlp")
    try:
        yield prepare(Device(t.link(), timeout=20, target=t), key)
    finally:
        t.close()


def inputs_1000() -> np.ndarray:
    """The 599 test images, 301 pool images and 100 random vectors far outside the pixel range."""
    rnd = np.random.default_rng(3).normal(0, 4, size=(100, 64))
    return np.vstack([SPLIT.X_test, SPLIT.X_pool[:301], rnd]).astype(np.float32)


def raw_mismatches(dev: Device, model: cgen.DeviceModel, X: np.ndarray) -> list[int]:
    """The rows whose INFER_LOCAL answer (label, CRC-32 of the raw f32 output; requests pipelined)
    is not the host reference's for ``model`` (a refusal or a lost answer is a mismatch)."""
    raw = reference.run(model, X)
    return [i for i, got in enumerate(dev.infer_local_many(X))
            if got != (int(reference.first_argmax(raw[i:i + 1])[0]), zlib.crc32(raw[i].astype("<f4").tobytes()))]


def test_ensemble_on_device_reaches_host_accuracy_at_epsilon_1(qemu: Device, test_key: bytes) -> None:
    model = cgen.read(ROOT / "firmware/model/digits_ensemble.c")
    seed = bytes(range(7, 39))
    qemu.test_seed(test_key, seed)
    ref = InferReference(model, seed)
    labels = []
    for x, r in zip(SPLIT.X_test, qemu.infer_many(SPLIT.X_test, "label"), strict=True):
        assert isinstance(r, P.QueryResult) and r.same_answer(ref.infer(x, "label")), r
        labels.append(r.label)
    acc = float(np.mean(np.array(labels) == SPLIT.y_test))
    votes = reference.run(model, SPLIT.X_test)
    rng = np.random.default_rng(0)
    host = np.mean([np.mean(fast.privatize(votes, 1.0, "label", 2.0, 0.0, 30.0, rng)["label"] == SPLIT.y_test)
                    for _ in range(200)])
    sd = np.sqrt(host * (1 - host) / len(labels))
    print(f"\nensemble at epsilon 1 on {len(labels)} digits test images: device {acc:.4f}, host {host:.4f}")
    assert abs(acc - host) < 4 * sd


BAD = {
    "short body": (b"\x00\x00", ErrorCode.ERR_LEN),
    "length field disagrees": (struct.pack("<BBH", 0, 0, 64) + bytes(4 * 63), ErrorCode.ERR_LEN),
    "wrong input length": (struct.pack("<BBH", 0, 0, 10) + bytes(40), ErrorCode.ERR_LEN),
    "NaN input": (P.pack_vector(np.r_[np.full(63, 0.5), np.nan], Mode(0)), ErrorCode.ERR_BAD_VALUE),
    "Inf input": (P.pack_vector(np.r_[np.inf, np.zeros(63)], Mode(0)), ErrorCode.ERR_BAD_VALUE),
    "bad mode": (P.pack_vector(np.zeros(64), Mode(9)), ErrorCode.ERR_BAD_VALUE),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_get_clear_errors_and_charge_nothing(qemu: Device, case: str) -> None:
    body, code = BAD[case]
    before = qemu.budget()
    for t in (P.INFER, P.INFER_LOCAL):
        with pytest.raises(DeviceError) as e:
            qemu.request(t, body)
        assert e.value.error == code
    after = qemu.budget()
    assert (after.daily_spent, after.lifetime_spent) == (before.daily_spent, before.lifetime_spent)


def test_budget_exhaustion_refuses_infer_but_not_the_local_path(qemu: Device, test_key: bytes) -> None:
    qemu.configure(test_key, MechConfig(), Caps(2_000_000))
    x = SPLIT.X_test[0]
    for _ in range(2):
        qemu.infer(x, "label")
    with pytest.raises(DeviceError) as e:
        qemu.infer(x, "label")
    assert e.value.error == ErrorCode.ERR_BUDGET
    label, _ = qemu.infer_local(x)
    model = cgen.read(ROOT / "firmware/model/digits_ensemble.c")
    assert label == reference.first_argmax(reference.run(model, x[None]))[0]
    assert qemu.budget().daily_spent == 2_000_000


def test_image_without_model_answers_no_model_and_charges_nothing(test_key: bytes) -> None:
    t = model_target("none")
    try:
        dev = prepare(Device(t.link(), timeout=20, target=t), test_key)
        for call in (lambda: dev.infer(SPLIT.X_test[0]), lambda: dev.infer_local(SPLIT.X_test[0])):
            with pytest.raises(DeviceError) as e:
                call()
            assert e.value.error == ErrorCode.ERR_NO_MODEL
        assert dev.budget().daily_spent == 0
        assert dev.query(np.array([0.2, 0.8]), "label").k == 2   # QUERY still works
    finally:
        t.close()
