"""The production stm32f4 image (build/stm32f4/edgedp.elf) in QEMU netduinoplus2.

QEMU models the USART but not RCC, PWR, RTC, RNG, DWT or backup SRAM: the
clock falls back to HSI, the RNG never becomes ready, the calendar is
unavailable and the store cannot be enabled. The image must still boot
quickly, answer status requests, and refuse every external answer -- never
fall back to a weaker entropy source, never hang."""
from __future__ import annotations

import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgedp.device import frames, protocol as P
from edgedp.device.client import Device
from edgedp.device.errors import DeviceError, ErrorCode
from edgedp.device.protocol import Caps, MechConfig, SampleRequest
from edgedp.device.targets.qemu import QemuTarget
from edgedp.mech.lattice import MICRO
from edgedp.mech.modes import Mode

from ..helpers import ROOT

pytestmark = pytest.mark.hil

BOOT_LIMIT_S = 2.0       # connect -> banner (the image's own boot), -icount shift=3
# QEMU models no RTC: the clock is the first thing a charge checks (before the reseed, whose
# position in the keystream must not show in a refusal's timing), so every external answer is
# refused with ERR_TIME; the RNG's failure shows in INFO and in every admin command.
REFUSAL = ErrorCode.ERR_TIME


class Booted:
    def __init__(self, target: QemuTarget, start_s: float, boot_s: float, banner: bytes):
        self.target = target
        self.start_s = start_s
        self.boot_s = boot_s
        self.banner = banner
        self.dev = Device(target.link(), timeout=20, target=target)


def read_banner(target: QemuTarget, limit_s: float = 30.0) -> tuple[float, bytes]:
    """Seconds until the boot banner line arrived on the console, and the line."""
    t0 = time.monotonic()
    buf = b""
    while b"\r\n" not in buf:
        if time.monotonic() - t0 > limit_s:
            raise AssertionError(f"no boot banner within {limit_s} s: {buf!r}")
        buf += target.link().read(0.05)
    return time.monotonic() - t0, buf


@pytest.fixture(scope="module")
def booted() -> Iterator[Booted]:
    t0 = time.monotonic()
    target = QemuTarget.from_spec("qemu:stm32f4")   # builds the image if needed
    started = time.monotonic() - t0
    try:
        boot_s, banner = read_banner(target)
        b = Booted(target, started, boot_s, banner)
        b.dev.sync()
        yield b
    finally:
        target.close()


@pytest.fixture
def dev(booted: Booted) -> Device:
    booted.dev.sync()
    return booted.dev


def test_boots_within_limit_with_production_banner(booted: Booted) -> None:
    print(f"\nqemu:stm32f4 boot: {booted.boot_s * 1000:.0f} ms to banner "
          f"(QEMU start + connect {booted.start_s * 1000:.0f} ms)")
    assert b"board=stm32f4 build=production" in booted.banner
    assert booted.boot_s < BOOT_LIMIT_S


def test_info_reports_production_and_failed_entropy(dev: Device) -> None:
    info = dev.info()
    assert info.build == "production"
    assert info.entropy == "failed"
    assert info.board == "stm32f4"
    assert info.time_ok is False
    assert info.store == "failed" and info.store_ok is False
    assert info.tick_kind == "systick"        # no DWT in QEMU
    assert info.tick_hz == 16_000_000         # RCC reads 0: HSI fallback is what the port reports


def test_budget_answers_without_clock_or_store(dev: Device) -> None:
    b = dev.budget()
    assert b.day is None
    assert b.store == "failed" and b.store_ok is False
    assert b.remaining == 0


MODES = ["full", "topk:1", "topk:3", "label", "bucket", "round:2", "simplex"]


@pytest.mark.parametrize("k", [1, 3, 10, 100, 1024])
@pytest.mark.parametrize("mode", MODES)
def test_every_query_is_refused(dev: Device, mode: str, k: int) -> None:
    m = Mode.parse(mode)  # topk:K with K > k is valid (K is capped at k), so it is refused too
    x = np.random.default_rng(k).dirichlet(np.ones(k)).astype(np.float32)
    t0 = time.monotonic()
    with pytest.raises(DeviceError) as e:
        dev.query(x, m)
    assert e.value.error == REFUSAL, e.value.error
    assert time.monotonic() - t0 < 5.0


def test_repeated_queries_stay_refused(dev: Device) -> None:
    x = np.array([0.2, 0.8], dtype=np.float32)
    for _ in range(20):
        with pytest.raises(DeviceError) as e:
            dev.query(x, "label")
        assert e.value.error == REFUSAL


@pytest.mark.parametrize("mode", MODES)
def test_every_infer_is_refused_and_the_model_never_answers(dev: Device, mode: str) -> None:
    x = np.random.default_rng(1).random(64).astype(np.float32)  # the bundled model's 64 inputs
    with pytest.raises(DeviceError) as e:
        dev.infer(x, mode)
    assert e.value.error == REFUSAL, e.value.error
    with pytest.raises(DeviceError) as e:
        dev.infer_local(x)  # test builds only
    assert e.value.error == ErrorCode.ERR_UNKNOWN


def test_test_commands_do_not_exist(dev: Device, test_key: bytes) -> None:
    x = np.array([0.5, 0.5], dtype=np.float32)
    calls = {
        "local": lambda: dev.local(x),
        "sample": lambda: dev.sample(SampleRequest(MICRO, 2.0, 10, 16)),
        "naive": lambda: dev.naive(x, 2.0),
        "test_seed": lambda: dev.test_seed(test_key, bytes(32)),
    }
    # TEST_SEED is an admin frame: its tag is checked first, and an unprovisioned image has no key.
    expected = {"local": ErrorCode.ERR_UNKNOWN, "sample": ErrorCode.ERR_UNKNOWN,
                "naive": ErrorCode.ERR_UNKNOWN, "test_seed": ErrorCode.ERR_AUTH}
    for name, call in calls.items():
        with pytest.raises(DeviceError) as e:
            call()
        assert e.value.error == expected[name], (name, e.value.error)


@pytest.mark.parametrize("cmd", ["config", "set_time", "reset_budget"])
def test_admin_refused_without_provisioned_key(dev: Device, test_key: bytes, cmd: str) -> None:
    calls = {
        "config": lambda: dev.configure(test_key, MechConfig(), Caps(daily=100 * MICRO)),
        "set_time": lambda: dev.set_time(test_key, 1767225600),
        "reset_budget": lambda: dev.reset_budget(test_key),
    }
    with pytest.raises(DeviceError) as e:
        calls[cmd]()
    assert e.value.error == ErrorCode.ERR_AUTH   # .edp_key is erased (all 0xFF)


def test_garbage_gets_error_replies_and_ping_still_works(dev: Device) -> None:
    rng = np.random.default_rng(7)
    garbage = rng.integers(0, 256, 600, dtype=np.uint8).tobytes()
    garbage += b"\x00" + frames.encode(P.PING, 0x1234, b"x", version=9)           # bad version
    garbage += b"\x01\x02\x03\x00"                                                # too short
    bad_crc = bytearray(frames.encode(P.INFO, 0x2345))
    bad_crc[2] ^= 0x40
    garbage += bytes(bad_crc)
    garbage += b"\x55" * 6000 + b"\x00"                                           # overlong
    dev.send_raw(garbage)
    errors = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            f = dev.receive(timeout=1.0)
        except Exception:
            break
        if f.type == P.ERROR:
            errors.append((ErrorCode(f.body[0]), f.seq))
    codes = {c for c, _ in errors}
    assert errors, "no error replies to garbage"
    assert ErrorCode.ERR_VERSION in codes and ErrorCode.ERR_LEN in codes
    assert ErrorCode.ERR_CRC in codes
    assert dev.ping(b"still alive") == b"still alive"
    assert dev.info().board == "stm32f4"


def test_wrong_body_lengths_are_refused(dev: Device) -> None:
    with pytest.raises(DeviceError) as e:
        dev.request(P.INFO, b"\x00")
    assert e.value.error == ErrorCode.ERR_LEN
    with pytest.raises(DeviceError) as e:
        dev.request(P.QUERY, struct.pack("<BBH", 0, 0, 4) + b"\x00" * 8)
    assert e.value.error == ErrorCode.ERR_LEN


def test_warm_reset_boots_again_quickly(booted: Booted) -> None:
    # Drain, reset, and time the second boot to the banner.
    booted.target.link().read(0.1)
    booted.target.reset()
    boot_s, banner = read_banner(booted.target)
    print(f"\nqemu:stm32f4 warm reset: {boot_s * 1000:.0f} ms to banner")
    assert b"build=production" in banner
    assert boot_s < BOOT_LIMIT_S
    booted.dev.sync()
    assert booted.dev.info().entropy == "failed"


@pytest.fixture(scope="module")
def provisioned_elf(booted: Booted, test_key: bytes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the production image with the test key in .edp_key (the provisioning recipe)."""
    objcopy = shutil.which("arm-none-eabi-objcopy")
    if objcopy is None:
        pytest.skip("arm-none-eabi-objcopy not installed")
    d = tmp_path_factory.mktemp("provisioned")
    (d / "key.bin").write_bytes(test_key)
    out = d / "edgedp.elf"
    subprocess.run([objcopy, "--update-section", f".edp_key={d / 'key.bin'}",
                    str(ROOT / "build/stm32f4/edgedp.elf"), str(out)], check=True)
    return out


def test_provisioned_key_is_read_from_flash(provisioned_elf: Path, test_key: bytes) -> None:
    """With a key in sector 11, CHALLENGE passes the key check and then needs the nonce generator,
    which QEMU's missing RNG cannot key: every admin command is refused with ERR_ENTROPY (fail
    closed: no fresh nonce, no admin). Production still has no TEST_SEED."""
    target = QemuTarget(provisioned_elf, 2, "qemu:stm32f4-provisioned")
    try:
        dev = Device(target.link(), timeout=20, target=target)
        dev.sync()
        for call in (lambda: dev.set_time(bytes(range(32)), 1767225600),
                     lambda: dev.configure(test_key, MechConfig(), Caps(daily=100 * MICRO)),
                     lambda: dev.test_seed(test_key, bytes(32))):
            with pytest.raises(DeviceError) as e:
                call()
            assert e.value.error == ErrorCode.ERR_ENTROPY
        with pytest.raises(DeviceError) as e:
            dev.query(np.array([0.3, 0.7], dtype=np.float32), "full")
        assert e.value.error == REFUSAL
    finally:
        target.close()
