"""Robot Framework keywords for an edgedp device, built on edgedp.device.client.

Import in a suite as ``Library    robot_keywords.EdgedpKeywords`` with this folder on the
Python path (``robot --pythonpath tests/robot``; pytest adds it through pyproject.toml).
tests/robot/edgedp.robot runs them against QEMU (``make test``);
renode/edgedp.robot runs them inside Renode's ``renode-test``, where Renode
owns the emulator and the suite connects to its console socket.

Keywords return plain dictionaries (``${info}[board]``), numbers and strings.
Epsilon values are in epsilon; the device's budget fields are in micro-epsilon.
"""
from __future__ import annotations

import dataclasses
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from edgedp import __version__
from edgedp.device import frames, protocol as P
from edgedp.device.client import Device, connect, load_key
from edgedp.device.errors import DeviceError, ErrorCode, TransportError
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.targets import Target, UrlTarget, start_target
from edgedp.device.targets.renode import PrefixLink, read_banner
from edgedp.device.verify import replay
from edgedp.mech.lattice import to_micro

def _key(key_file: str | None) -> bytes:
    return load_key(key_file or None)


def _vector(values: tuple) -> np.ndarray:
    if not values:
        raise ValueError("give at least one value")
    return np.array([float(v) for v in values], dtype=np.float32)


class EdgedpKeywords:
    """Start or connect to an edgedp device and exercise its protocol.

    One device per library instance (suite scope): ``Start Emulator`` or
    ``Connect To Device`` in a test setup, ``Stop Emulator`` in its teardown.
    """

    ROBOT_LIBRARY_SCOPE = "SUITE"
    ROBOT_LIBRARY_VERSION = __version__

    def __init__(self, timeout: float = 10.0):
        self.timeout = float(timeout)
        self._target: Target | None = None
        self._device: Device | None = None
        self._banner: str | None = None

    # ---- lifecycle ----------------------------------------------------------
    def start_emulator(self, target: str = "qemu", timeout: float | None = None) -> str:
        """Start ``target`` (qemu, qemu:stm32f4, posix, renode or a pyserial URL), read the
        boot banner, synchronise with a PING. Returns the banner line."""
        self.stop_emulator()
        t = start_target(target)
        try:
            link = t.link()
            banner = getattr(t, "banner", None)
            if banner is None:
                banner, rest = read_banner(link, timeout or self.timeout)
                link = PrefixLink(link, rest)
            self._open(t, link, timeout)
            self._banner = banner
        except BaseException:
            t.close()
            self._target = self._device = None
            raise
        return banner

    def connect_to_device(self, url: str, timeout: float | None = None) -> None:
        """Connect to a device already running behind a pyserial URL (``socket://host:port``,
        ``/dev/ttyACM0``) and synchronise with a PING. The banner is not read."""
        self.stop_emulator()
        t = UrlTarget(url)
        try:
            self._open(t, t.link(), timeout)
        except BaseException:
            t.close()
            self._target = self._device = None
            raise

    def _open(self, t: Target, link, timeout: float | None) -> None:
        self._target = t
        self._device = connect(t, float(timeout or self.timeout), link=link)

    def stop_emulator(self) -> None:
        """Close the connection and stop the emulator started by ``Start Emulator`` (no-op if none)."""
        t, self._target, self._device, self._banner = self._target, None, None, None
        if t is not None:
            t.close()

    def disconnect_from_device(self) -> None:
        """Same as ``Stop Emulator``: for suites that only connected."""
        self.stop_emulator()

    def reset_device(self) -> None:
        """Reset the emulated MCU (QEMU system_reset, Renode machine Reset) and resynchronise."""
        self._dev()
        assert self._target is not None
        self._target.reset()
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._dev().sync()
                return
            except TransportError:
                if time.monotonic() > deadline:
                    raise

    def _dev(self) -> Device:
        if self._device is None:
            raise AssertionError("no device: use Start Emulator or Connect To Device first")
        return self._device

    # ---- boot ---------------------------------------------------------------
    def boot_banner(self) -> str:
        """The banner line read by ``Start Emulator``."""
        if self._banner is None:
            raise AssertionError("no boot banner was read (Connect To Device does not read it)")
        return self._banner

    def boot_banner_should_match(self, pattern: str) -> None:
        """Fail unless the boot banner matches the regular expression ``pattern`` (anchored)."""
        banner = self.boot_banner()
        if not re.fullmatch(pattern, banner):
            raise AssertionError(f"boot banner {banner!r} does not match {pattern!r}")

    # ---- status -------------------------------------------------------------
    def device_should_respond(self) -> None:
        """PING the device and check the echo."""
        payload = b"robot"
        echo = self._dev().ping(payload)
        if echo != payload:
            raise AssertionError(f"PING echoed {echo!r}, expected {payload!r}")

    def device_info(self) -> dict:
        """INFO as a dictionary: board, build, firmware_version, entropy (ok when every source is),
        noise_entropy, nonce_entropy, store, time_ok, tick_kind, rx_buffer, model, ..."""
        info = self._dev().info()
        return {**dataclasses.asdict(info), "entropy": info.entropy}

    def budget(self) -> dict:
        """BUDGET as a dictionary (micro-epsilon): daily_cap, daily_spent, remaining, auth_counter, ..."""
        return dataclasses.asdict(self._dev().budget())

    # ---- queries ------------------------------------------------------------
    def query(self, *values: float, mode: str = "full") -> dict:
        """One external DP query of ``values``. Returns values, lattice, label, remaining
        (micro-epsilon left today), ticks (of the DP step) and m (lattice exponent)."""
        r = self._dev().query(_vector(values), mode)
        return {
            "values": [] if r.values is None else [float(v) for v in r.values],
            "lattice": [int(v) for v in r.lattice],
            "indices": None if r.indices is None else [int(i) for i in r.indices],
            "label": int(r.label),
            "level": r.level,
            "remaining": int(r.remaining_micro),
            "ticks": int(r.ticks),
            "m": int(r.m),
            "k": int(r.k),
        }

    def query_should_fail_with(self, error: str, *values: float, mode: str = "full") -> None:
        """Fail unless a query of ``values`` is refused with device error ``error`` (e.g. ERR_BUDGET)."""
        expected = ErrorCode[error]
        try:
            self._dev().query(_vector(values), mode)
        except DeviceError as exc:
            if exc.error != expected:
                raise AssertionError(f"query refused with {exc.error.name}, expected {expected.name}") from None
            return
        raise AssertionError(f"query answered, expected {expected.name}")

    def exhaust_budget(self, *values: float, max_queries: int = 1000) -> int:
        """Query ``values`` (default 0.5 0.5) until the device answers ERR_BUDGET.

        Returns the number of queries answered before the refusal; fails if none
        is refused within ``max_queries`` or another error comes back."""
        x = _vector(values or (0.5, 0.5))
        for answered in range(int(max_queries) + 1):
            try:
                self._dev().query(x)
            except DeviceError as exc:
                if exc.error != ErrorCode.ERR_BUDGET:
                    raise AssertionError(f"query {answered + 1} refused with {exc.error.name}") from None
                return answered
        raise AssertionError(f"budget not exhausted after {max_queries} queries")

    def replay_against_reference(self, queries: int = 100, seed: int = 0, key_file: str | None = None) -> dict:
        """Re-key a test image's DRBG (TEST_SEED) and compare ``queries`` varied queries bit for
        bit with the NumPy reference (edgedp.device.verify.replay, what ``edgedp verify`` runs).

        Returns queries, mismatches and first_mismatch (None when every answer matched)."""
        res = replay(self._dev(), _key(key_file), int(queries), int(seed), progress=False)
        return {"queries": res.queries, "mismatches": res.mismatches, "first_mismatch": res.first_mismatch}

    # ---- untrusted input ----------------------------------------------------
    def send_garbage(self, length: int = 200, seed: int = 1) -> int:
        """Send ``length`` random bytes, a frame with a wrong CRC and a truncated frame, each
        ended by 0x00; then drain what the device answers for half a second.

        Returns the number of error frames received (the device may answer or stay quiet;
        it must stay alive -- check with ``Device Should Respond``)."""
        dev = self._dev()
        rng = random.Random(int(seed))
        junk = bytes(rng.randrange(256) for _ in range(int(length)))
        good = frames.encode(P.PING, 0x7FFF, b"garbage")
        raw = bytearray(good[:-1])
        raw[len(raw) // 2] ^= 0x55  # corrupt the COBS body: CRC (or COBS) check fails
        dev.send_raw(junk + b"\x00" + bytes(raw) + b"\x00" + good[: len(good) // 2] + b"\x00")
        errors = 0
        while True:
            try:
                f = dev.receive(timeout=0.5)
            except TransportError:
                return errors
            errors += f.type == P.ERROR

    # ---- authenticated administration (needs the device key) ----------------
    def set_device_time(self, unix_seconds: int | None = None, key_file: str | None = None) -> None:
        """Set the device clock (default: now) with an authenticated SET_TIME.

        ``key_file`` defaults to tests/keys/test-device.key, the key of test images."""
        self._dev().set_time(_key(key_file), int(time.time() if unix_seconds is None else unix_seconds))

    def configure_budget(self, epsilon: float, daily_cap: float, lifetime_cap: float | None = None,
                         key_file: str | None = None) -> None:
        """Set the per-query epsilon and the daily (and lifetime) cap with an authenticated CONFIG."""
        lifetime = 0 if lifetime_cap in (None, "", "None") else to_micro(float(lifetime_cap))
        self._dev().configure(_key(key_file), MechConfig(to_micro(float(epsilon))),
                              Caps(to_micro(float(daily_cap)), lifetime))

    # ---- provisioning (production images) -----------------------------------
    def provision_elf(self, elf: str, output: str, key_file: str | None = None,
                      section: str = ".edp_key") -> str:
        """Write a copy of ``elf`` with the key of ``key_file`` (64 hex digits, default the
        test key) in ``section``, as ``arm-none-eabi-objcopy --update-section`` does for a
        production device. Returns the output path."""
        objcopy = shutil.which("arm-none-eabi-objcopy")
        if not objcopy:
            raise AssertionError("arm-none-eabi-objcopy not found (install gcc-arm-none-eabi)")
        size = _section_size(elf, section)
        key = _key(key_file)
        if size != len(key):
            raise AssertionError(f"{elf}: section {section} holds {size} bytes, the key {len(key)}")
        out = Path(output)
        out.parent.mkdir(parents=True, exist_ok=True)
        key_bin = out.with_suffix(".key.bin")
        key_bin.write_bytes(key)
        try:
            r = subprocess.run([objcopy, "--update-section", f"{section}={key_bin}", str(elf), str(out)],
                               capture_output=True, text=True)
        finally:
            key_bin.unlink()
        if r.returncode != 0:
            raise AssertionError(f"objcopy failed: {r.stderr.strip()}")
        return str(out)


def _section_size(elf: str, section: str) -> int:
    """Size in bytes of ``section`` in an ELF file (AssertionError if absent)."""
    from edgedp.device.elf import sections

    try:
        found = sections(Path(elf)).get(section)
    except ValueError as exc:
        raise AssertionError(str(exc)) from None
    if found is None:
        raise AssertionError(f"{elf} has no section {section}")
    return found.size
