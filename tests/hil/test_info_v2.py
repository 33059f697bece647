"""INFO version 2 from the QEMU test image: the model's identity, each randomness source's
health, and the nonce source failing alone (QEMU started without the host's nonce key material:
INFO must say so, as CHALLENGE's ERR_ENTROPY does)."""
from __future__ import annotations

import pytest

from edgedp.device.client import connect
from edgedp.device.errors import DeviceError
from edgedp.device.targets.qemu import HOST_ENTROPY, QemuTarget, ensure_image
from edgedp.model import cgen

from ..helpers import ROOT

pytestmark = pytest.mark.hil


def test_info_v2_reports_the_model_and_healthy_sources(qemu) -> None:
    i = qemu.info()
    assert (i.noise_entropy, i.nonce_entropy, i.entropy) == ("ok", "ok", "ok")
    assert i.rx_buffer == 0  # the qemu port polls its USART: QEMU's socket holds the bytes
    want = cgen.read(ROOT / "firmware/model/digits_ensemble.c")
    assert i.model is not None
    assert (i.model.name, i.model.kind, i.model.head, i.model.input_shape, i.model.classes, i.model.sha256) == \
        (want.name, "float32", "votes", (64,), 10, cgen.digest(want))


def test_info_reports_the_nonce_source_failing_alone(test_key: bytes) -> None:
    zeros = [a for k in range(4) for a in ("-device", f"loader,addr={HOST_ENTROPY + 8 * k:#x},data=0x0,data-len=8")]
    target = QemuTarget(ensure_image("qemu"), extra_args=zeros)
    try:
        dev = connect(target, timeout=20)
        i = dev.info()
        assert (i.noise_entropy, i.nonce_entropy, i.entropy) == ("ok", "failed", "failed")
        with pytest.raises(DeviceError) as e:
            dev.challenge(test_key)
        assert e.value.code == "ERR_ENTROPY"
    finally:
        target.close()
