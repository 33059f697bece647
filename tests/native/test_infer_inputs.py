"""INFER's answers depend on the model only through the charged, noised release (issue 17.3).

The attack: huge finite inputs overflowed a softmax model's logits and the device answered
ERR_BAD_VALUE, un-noised, uncharged and even after the budget was spent, so ERR_BAD_VALUE versus
ERR_BUDGET was an oracle on the weights. Now every model declares its input range, the device
clamps inputs to it before the model runs, every refusal comes before the model runs, and a
non-finite output is released as a fixed in-range vector through the charged, noised path.
Checked on the posix port and on QEMU with the bundled logistic-regression model (digits-logreg),
and with a model whose logits overflow even on clamped inputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgedp.device.client import Device
from edgedp.device.errors import DeviceError
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.targets.qemu import QemuTarget
from edgedp.device.transport import ProcessLink

from ..helpers import ROOT, TEST_EPOCH, make, overflow_model_source

EPS = 1_000_000
CFG = MechConfig(EPS, 0.0, 1.0, 2.0, None)   # the model's own output settings: INFER's plan = QUERY's
PIXELS = (0, 9, 27, 36, 63)


def huge_inputs() -> list[np.ndarray]:
    """The attack's probes: one pixel at +-3e38 (the rest 0), and every pixel at once."""
    out = []
    for j in PIXELS:
        for v in (3e38, -3e38):
            x = np.zeros(64, np.float32)
            x[j] = v
            out.append(x)
    return out + [np.full(64, 3e38, np.float32), np.full(64, -3e38, np.float32)]


def code_of(call) -> str:
    try:
        call()
    except DeviceError as e:
        return e.code
    return "answered"


def check_no_model_dependent_error(dev: Device, key: bytes) -> None:
    """Under budget every probe is answered and charged once; spent, every INFER (huge or not)
    is ERR_BUDGET: the two refusals the attack told apart are one."""
    probes = huge_inputs()
    dev.configure(key, CFG, Caps(daily=10**12, lifetime=(len(probes) + 1) * EPS))
    before = dev.budget().remaining
    for i, x in enumerate(probes):
        r, _ = dev.infer(x, "full")
        assert r.remaining_micro == before - (i + 1) * EPS, "every answer is charged"
        # the model saw the clamped input: its raw output is that of the clipped vector
        assert dev.infer_local(x) == dev.infer_local(np.clip(x, 0.0, 1.0))
    dev.query(np.zeros(10, np.float32))           # the last epsilon
    assert dev.budget().remaining == 0
    normal = np.linspace(0.0, 1.0, 64, dtype=np.float32)
    codes = {code_of(lambda x=x: dev.infer(x, "full")) for x in probes + [normal]}
    assert codes == {"ERR_BUDGET"}, codes


@pytest.fixture(scope="module")
def logreg_host() -> Path:
    make("build/posix-model-digits_logreg/edgedp")
    return ROOT / "build/posix-model-digits_logreg/edgedp"


def posix_device(exe: Path, tmp_path: Path) -> Device:
    link = ProcessLink([str(exe)], {"EDP_STORE_FILE": str(tmp_path / "store.bin"),
                                    "EDP_POSIX_TIME": str(TEST_EPOCH)})
    dev = Device(link, timeout=20)
    dev.sync(10)
    return dev


def test_host_port_softmax_model_has_no_error_oracle(logreg_host: Path, tmp_path: Path, test_key: bytes) -> None:
    dev = posix_device(logreg_host, tmp_path)
    try:
        check_no_model_dependent_error(dev, test_key)
    finally:
        dev.link.close()


def test_non_finite_output_is_released_as_the_fixed_vector(tmp_path: Path, test_key: bytes) -> None:
    """Weights of 3e38: two clamped pixels at 1 overflow a logit to Inf, the softmax gives NaN.
    The answer is charged and is, noise for noise (same test seed), the QUERY of the fixed
    vector lo + (hi - lo) / n_classes = 0.1 in every class."""
    overflow_model_source(tmp_path)
    make("build/posix-model-overflow/edgedp")
    dev = posix_device(ROOT / "build/posix-model-overflow/edgedp", tmp_path)
    try:
        dev.configure(test_key, CFG, Caps(daily=10**12))
        x = np.zeros(64, np.float32)
        x[:2] = 5.0                                   # clamped to 1: 3e38 + 3e38 = Inf
        with pytest.raises(DeviceError, match="ERR_BAD_VALUE"):
            dev.infer_local(x)                        # the raw output is not finite
        seed = bytes(range(7, 39))
        dev.test_seed(test_key, seed)
        fixed = dev.query(np.full(10, 0.1, np.float32), "full")
        dev.test_seed(test_key, seed)
        spent = dev.budget().lifetime_spent
        released, _ = dev.infer(x, "full")
        assert dev.budget().lifetime_spent == spent + EPS
        assert np.array_equal(released.lattice, fixed.lattice)
    finally:
        dev.link.close()


@pytest.mark.hil
def test_qemu_softmax_model_has_no_error_oracle(test_key: bytes) -> None:
    make("build/qemu-model-digits_logreg/edgedp.elf")
    t = QemuTarget(ROOT / "build/qemu-model-digits_logreg/edgedp.elf", 1, "qemu-model-digits_logreg")
    try:
        dev = Device(t.link(), timeout=30, target=t)
        dev.sync(30)
        check_no_model_dependent_error(dev, test_key)
    finally:
        t.close()
