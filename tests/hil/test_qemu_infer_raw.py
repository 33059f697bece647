"""The digits MLP's raw output on the emulated board against the host reference, bit for bit."""
from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from edgedp.device.client import Device
from edgedp.model import cgen, reference

from ..conftest import ROOT
from .test_qemu_infer import inputs_1000, mlp_device

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module")
def mlp_dev(test_key: bytes) -> Iterator[Device]:
    yield from mlp_device(test_key)


def test_raw_model_output_is_bit_exact_for_1000_inputs(mlp_dev: Device) -> None:
    model = cgen.read(ROOT / "firmware/model/digits_mlp.c")
    X = inputs_1000()
    raw = reference.run(model, X)
    bad = [i for i, x in enumerate(X)
           if mlp_dev.infer_local(x) != (int(reference.first_argmax(raw[i:i + 1])[0]),
                                         zlib.crc32(raw[i].astype("<f4").tobytes()))]
    assert not bad, f"{len(bad)} mismatches, first row {bad[0]}"
