"""INFER releases of the digits MLP on the emulated board against the host reference, bit for bit."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from edgedp.device.client import Device
from edgedp.model import cgen
from edgedp.model.image import InferReference

from ..helpers import ROOT
from .test_qemu_infer import MODES, inputs_1000, mlp_device

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module")
def mlp_dev(test_key: bytes) -> Iterator[Device]:
    yield from mlp_device(test_key)


def test_infer_release_is_bit_exact_for_1000_inputs(mlp_dev: Device, test_key: bytes) -> None:
    model = cgen.read(ROOT / "firmware/model/digits_mlp.c")
    seed = bytes(range(100, 132))
    mlp_dev.test_seed(test_key, seed)
    ref = InferReference(model, seed)
    X = inputs_1000()
    spent0 = mlp_dev.budget().lifetime_spent
    for i, x in enumerate(X):
        mode = MODES[i % len(MODES)]
        r, ticks = mlp_dev.infer(x, mode)
        assert r.same_answer(ref.infer(x, mode)), (i, mode)
        assert ticks > 0 and r.k == 10
    assert mlp_dev.budget().lifetime_spent - spent0 == 1000 * 1_000_000
