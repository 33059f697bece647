"""The portable C of the int8 kernels (model_s8.c without the DSP extension: the posix port)
against the integer NumPy reference, bit for bit; QEMU checks the Thumb-2 version
(tests/hil/test_qemu_int8.py)."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from edgedp.datasets import digits_split
from edgedp.device.client import Device
from edgedp.device.transport import ProcessLink
from edgedp.model import cgen, reference

from ..helpers import ROOT, TEST_EPOCH, make

pytestmark = pytest.mark.native


def test_host_port_int8_mlp_is_bit_exact(tmp_path: Path) -> None:
    make("build/posix-model-digits_mlp_int8/edgedp")
    link = ProcessLink([str(ROOT / "build/posix-model-digits_mlp_int8/edgedp")],
                       {"EDP_STORE_FILE": str(tmp_path / "store.bin"), "EDP_POSIX_TIME": str(TEST_EPOCH)})
    dev = Device(link, timeout=20)
    try:
        dev.sync(10)
        model = cgen.read(ROOT / "firmware/model/digits_mlp_int8.c")
        X = np.vstack([digits_split(0).X_test[:150], np.random.default_rng(9).normal(0, 4, (50, 64))])
        X = X.astype(np.float32)
        raw = reference.run(model, X)
        bad = [i for i, x in enumerate(X)
               if dev.infer_local(x) != (int(reference.first_argmax(raw[i:i + 1])[0]),
                                         zlib.crc32(raw[i].astype("<f4").tobytes()))]
        assert not bad, f"{len(bad)} mismatches, first row {bad[0]}"
    finally:
        link.close()
