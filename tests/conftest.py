"""Shared fixtures (builds, the test key, a native device, one QEMU per session) and the
markers every test gets from the folder it is in (CONTRIBUTING.md says which folder a test
goes in)."""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgedp.device.client import Device, connect, load_key
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.targets.posix import PosixTarget
from edgedp.device.targets.qemu import QemuTarget, qmp
from edgedp.mech.lattice import MICRO

from .helpers import DAY, ROOT, TEST_EPOCH, make

TESTS = ROOT / "tests"


# Folder -> what its tests need; the folder's name is also the marker (pyproject.toml lists them).
FOLDERS = {
    "python": "Python only: no compiler, no firmware, no emulator",
    "docs": "the documentation against the code",
    "native": "the C core built natively (host gcc, ASan/UBSan)",
    "firmware": "the ARM images (arm-none-eabi-gcc), run in Unicorn or inspected; no emulator",
    "hil": "the firmware in an emulator (QEMU; Renode where installed) over a TCP serial link",
    "analysis": "analysis and training (scikit-learn, JAX, dp-accounting)",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
        if len(parts) < 2 or parts[0] not in FOLDERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in one of tests/{{{','.join(FOLDERS)}}}/ "
                                    "(CONTRIBUTING.md)")
        item.add_marker(parts[0])


@pytest.fixture(scope="session")
def empty_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edgedp-state")


@pytest.fixture(autouse=True)
def no_device_session(empty_state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands and APIs that name no target use a running `edgedp device` session: point
    them at an empty state directory so a developer's session never stands in for a test's.
    Likewise no edgedp.toml of the developer's (project or user config dir) gives defaults."""
    monkeypatch.setenv("EDGEDP_STATE_DIR", str(empty_state_dir))
    monkeypatch.setenv("EDGEDP_CONFIG", os.devnull)
    # Nor the developer's fleet registry and keystore (edgedp.fleet): a test names its own.
    monkeypatch.setenv("EDGEDP_REGISTRY", f"sqlite:///{empty_state_dir / 'registry.sqlite'}")
    monkeypatch.setenv("EDGEDP_KEYSTORE", str(empty_state_dir / "keys"))


NUMPY_ERRORS = np.geterr()


@pytest.fixture(autouse=True)
def numpy_error_state_kept() -> Iterator[None]:
    """No test, and no library a test module imports, may leave numpy's floating-point error
    handling changed: emlearn's import once set it to raise for the whole worker, and every
    later underflow in unrelated tests became an error. Compared with the state when this file
    was loaded (before any test module), so a change at collection fails the next test too."""
    assert np.geterr() == NUMPY_ERRORS, f"numpy's error handling was changed to {np.geterr()}"
    yield
    after = np.geterr()
    np.seterr(**NUMPY_ERRORS)
    assert after == NUMPY_ERRORS, f"numpy's error handling changed from {NUMPY_ERRORS} to {after}"


@pytest.fixture(scope="session")
def test_key() -> bytes:
    return load_key()


@pytest.fixture(scope="session")
def native_builds() -> None:
    make("build/posix/edgedp", "build/posix-san/edgedp", "build/native/test_core")


class PosixDevice:
    """Start/stop the sanitized native build on one store file, like power cycles."""

    def __init__(self, store: Path, env: dict[str, str] | None = None):
        self.store = store
        self.env = {"EDP_STORE_FILE": str(store), "EDP_POSIX_TIME": str(TEST_EPOCH), **(env or {})}
        self.target: PosixTarget | None = None

    def start(self, **env: str) -> Device:
        self.stop()
        self.target = PosixTarget(sanitized=True, env={**self.env, **env})
        return connect(self.target, timeout=10)

    def stop(self) -> int | None:
        if self.target is None:
            return None
        self.target.close()
        code = self.target.link().proc.returncode  # type: ignore[attr-defined]
        self.target = None
        return code


@pytest.fixture
def posix_device(native_builds: None, tmp_path: Path) -> Iterator[PosixDevice]:
    h = PosixDevice(tmp_path / "store.bin")
    yield h
    code = h.stop()
    assert code in (None, 0), f"native device exited with {code} (sanitizer report above?)"


@pytest.fixture(scope="session")
def qemu_elf() -> Path:
    """The QEMU test image (also what Unicorn runs in tests/firmware)."""
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (make setup)")
    from edgedp.device.targets.qemu import ensure_image
    return ensure_image("qemu")


@pytest.fixture
def emulator(qemu_elf: Path):
    """A freshly booted Unicorn copy of the QEMU test image (tests/firmware, and tests/hil's
    comparisons of QEMU with the trace)."""
    from edgedp.bench.trace import Emulator
    return Emulator(qemu_elf)


@pytest.fixture(scope="session")
def qemu_target() -> Iterator[QemuTarget]:
    """One QEMU per worker, paused between the tests that use it (``qemu``): nothing runs
    meanwhile, the virtual clock included (it stops with the VM)."""
    make("build/qemu/edgedp.elf")
    t = QemuTarget.from_spec("qemu")
    yield t
    t.close()


_epochs = iter(range(TEST_EPOCH + 10 * DAY, 2**40, 10 * DAY))


@pytest.fixture
def qemu(qemu_target: QemuTarget, test_key: bytes) -> Iterator[Device]:
    """The QEMU device after a warm reset with a known configuration, paused again after the
    test (qemu_target).

    The store survives resets, and days never go back, so each test starts ten days
    after the previous one: ``dev.epoch`` is its clock at the start."""
    qmp(qemu_target.qmp_path, "cont")
    qemu_target.reset()
    dev = Device(qemu_target.link(), timeout=20, target=qemu_target)
    dev.sync()
    dev.epoch = next(_epochs)  # type: ignore[attr-defined]
    dev.set_time(test_key, dev.epoch)  # type: ignore[attr-defined]
    dev.configure(test_key, MechConfig(), Caps(daily=1000 * MICRO))
    dev.reset_budget(test_key)
    yield dev
    qmp(qemu_target.qmp_path, "stop")
