"""The digits MLP's raw output on the emulated board against the host reference, bit for bit."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from edgedp.device.client import Device
from edgedp.model import cgen

from ..helpers import ROOT
from .test_qemu_infer import inputs_1000, mlp_device, raw_mismatches

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module")
def mlp_dev(test_key: bytes) -> Iterator[Device]:
    yield from mlp_device(test_key)


def test_raw_model_output_is_bit_exact_for_1000_inputs(mlp_dev: Device) -> None:
    model = cgen.read(ROOT / "firmware/model/digits_mlp.c")
    bad = raw_mismatches(mlp_dev, model, inputs_1000())
    assert not bad, f"{len(bad)} mismatches, first row {bad[0]}"
