"""The stm32f4 test image (build/stm32f4-test/edgedp.elf) next to the production image.

What `edgedp --target renode` runs. It is never confusable with the production image: the
banner and INFO say build=test, and the test commands exist in it alone. QEMU's
netduinoplus2 has no RNG, RTC or backup SRAM, so here it can only show what needs none of
them (banner, INFO, the local model path); on Renode the same image answers DP queries bit
for bit as the reference (renode/edgedp.robot, `edgedp verify --target renode`). And
`edgedp verify` / `edgedp bench` refuse a production image at once, with the reason."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgedp.device.client import Device, connect
from edgedp.device.targets.qemu import QemuTarget, ensure_image

from ..helpers import ROOT, run_cli

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module")
def test_image() -> Iterator[QemuTarget]:
    target = QemuTarget(ensure_image("stm32f4-test"), usart=2, name="qemu")
    try:
        yield target
    finally:
        target.close()


def test_test_image_says_test_in_banner_and_info(test_image: QemuTarget) -> None:
    from edgedp.device.targets.renode import read_banner

    banner, rest = read_banner(test_image.link(), 30.0)
    assert banner.startswith("edgedp ") and banner.endswith(" board=stm32f4 build=test")
    dev = connect(test_image, timeout=20)
    info = dev.info()
    assert (info.board, info.build) == ("stm32f4", "test")


def test_test_image_has_the_test_commands(test_image: QemuTarget) -> None:
    dev = Device(test_image.link(), timeout=20, target=test_image)
    dev.sync()
    label, _ = dev.infer_local(np.zeros(64, dtype=np.float32))   # INFER_LOCAL: test builds only
    assert 0 <= label < 10


@pytest.mark.parametrize("command", [["verify", "-n", "5"], ["bench", "--quick"]])
def test_verify_and_bench_refuse_a_production_image_at_once(command: list[str]) -> None:
    # refused after QEMU's start and one INFO (120 s: a liveness bound, not a measurement)
    r = run_cli(*command, "--target", "qemu:stm32f4", cwd=ROOT, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"edgedp: error: {command[0]} needs a test image: qemu:stm32f4 runs a production image" in r.stderr
    assert "Traceback" not in r.stderr
