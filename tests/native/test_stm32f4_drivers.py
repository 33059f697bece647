"""The stm32f4 port's drivers natively (ASan/UBSan) against fake register blocks.

Builds tests/native/test_stm32f4_drivers.c with the driver sources
(firmware/ports/stm32f4/{clock,uart,rng,rtc,bkpsram,cycles,flash}.c) and the core's
store and COBS, runs it, and checks its TAP-like output; the RTC's date arithmetic and
BCD encoding are compared with Python's datetime."""
from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ..helpers import ROOT

pytestmark = pytest.mark.native

SRC = ROOT / "tests/native/test_stm32f4_drivers.c"
DRIVERS = [ROOT / f"firmware/ports/stm32f4/{n}.c" for n in ("clock", "uart", "rng", "rtc", "bkpsram", "cycles", "flash")]
CORE = [ROOT / f"firmware/core/src/{n}.c" for n in ("store", "crc32", "flog", "cobs")]
OUT = ROOT / "build/native/test_stm32f4_drivers"
CC = shutil.which("gcc") or "cc"
CFLAGS = ["-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-DEDP_STM32_REG_HOOK",
          "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
          "-I", str(ROOT / "firmware/core/include"), "-I", str(ROOT / "firmware/core/src"), "-I", str(ROOT / "firmware/ports/stm32f4"),
          "-I", str(ROOT / "firmware/ports")]
EPOCH = dt.date(1970, 1, 1)


@pytest.fixture(scope="module")
def output() -> str:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([CC, *CFLAGS, str(SRC), *map(str, DRIVERS + CORE), "-o", str(OUT)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(OUT)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "runtime error" not in run.stderr and "AddressSanitizer" not in run.stderr, run.stderr
    return run.stdout


def test_every_check_passes(output: str) -> None:
    failed = [line for line in output.splitlines() if line.startswith("not ok")]
    assert not failed, "\n".join(failed)
    plan = re.search(r"^1\.\.(\d+)$", output, re.M)
    assert plan, "no plan line: the program stopped early"
    oks = [line for line in output.splitlines() if line.startswith("ok ")]
    assert len(oks) == int(plan.group(1)) >= 100
    assert f"# passed {len(oks)} failed 0" in output


@pytest.mark.parametrize("topic", ["clock:", "uart:", "rng:", "rtc:", "bkpsram:", "cycles:", "flash:"])
def test_each_driver_is_covered(output: str, topic: str) -> None:
    assert sum(f" {topic} " in line for line in output.splitlines() if line.startswith("ok ")) >= 3


@pytest.mark.parametrize("behaviour", [
    "DRDY never set -> ERR_ENTROPY", "SECS set -> ERR_ENTROPY", "CECS set -> ERR_ENTROPY",
    "two identical consecutive words -> ERR_ENTROPY", "good words -> OK, first word discarded",
    "INITS = 0", "INITF never set -> ERR_TIME", "backup regulator never ready -> ERR_STORE",
    "commit/load round trip", "rolled-back backup SRAM", "HSE never ready -> HSI 16 MHz fallback",
    "CYCCNT standing still -> SysTick fallback", "keys refused (LOCK stays) -> ERR_STORE",
    "WRPERR -> ERR_STORE, relocked", "BSY never clears -> ERR_STORE", "high-water log on the driver",
    "a full ring of 4096 bytes is kept", "an overrun (ORE) at any byte of a frame",
    "a framing error (FE) at any byte of a frame", "the invalid frame is invalid COBS after every prefix state",
    "work + (L / T + 1) x c fits the window L at 168, 84 and 16 MHz, 115200 to 921600 baud",
    "EDP_ERR_TIMING for T <= c", "saturates, and the largest it takes does not wrap", "every slot read is wiped",
])
def test_required_behaviour_checked(output: str, behaviour: str) -> None:
    assert any(line.startswith("ok ") and behaviour in line for line in output.splitlines()), behaviour


@pytest.mark.parametrize("baud, builds", [(460800, True), (560311, True), (560312, False), (921600, False)])
def test_console_baud_is_checked_against_the_hsi_fallback(baud: int, builds: bool) -> None:
    """A build whose EDP_CONSOLE_BAUD leaves the RX interrupt no room between two bytes on the
    16 MHz HSI fallback (9 bit times <= EDP_STM32_RX_ISR_CYCLES = 256) does not compile."""
    r = subprocess.run([CC, *CFLAGS, "-fsyntax-only", f"-DEDP_CONSOLE_BAUD={baud}u",
                        str(ROOT / "firmware/ports/stm32f4/uart.c")], capture_output=True, text=True)
    assert (r.returncode == 0) == builds, r.stderr
    assert builds or "EDP_CONSOLE_BAUD too fast" in r.stderr


def test_rtc_day_index_matches_datetime(output: str) -> None:
    lines = re.findall(r"^rtcday (\d{4})-(\d\d)-(\d\d) (\S+)$", output, re.M)
    assert len(lines) > 99 * 4
    leap_days = 0
    for y, m, d, got in lines:
        date = dt.date(int(y), int(m), int(d))
        assert got == str((date - EPOCH).days), f"{date}: driver says {got}"
        leap_days += date.month == 2 and date.day == 29
    assert leap_days == 24  # 2004 .. 2096


def bcd(v: int) -> int:
    return (v // 10) << 4 | v % 10


def test_set_time_writes_datetime_bcd(output: str) -> None:
    lines = re.findall(r"^settime (\d+) ([0-9A-F]{6}) ([0-9A-F]{6})$", output, re.M)
    assert len(lines) >= 8
    for secs, tr, dr in lines:
        t = dt.datetime.fromtimestamp(int(secs), dt.timezone.utc)
        want_tr = bcd(t.hour) << 16 | bcd(t.minute) << 8 | bcd(t.second)
        want_dr = bcd(t.year - 2000) << 16 | t.isoweekday() << 13 | bcd(t.month) << 8 | bcd(t.day)
        assert (int(tr, 16), int(dr, 16)) == (want_tr, want_dr), f"{t.isoformat()}: TR={tr} DR={dr}"


def test_drivers_reference_no_fixed_addresses() -> None:
    """Drivers take their register blocks by pointer: only board.c may name an address."""
    for path in DRIVERS:
        text = path.read_text()
        assert not re.search(r"EDP_STM32_(RCC|FLASH|PWR|GPIO[AD]|USART[23]|RNG|RTC|BKPSRAM|DEMCR|DWT|IWDG)\b", text), path
        assert not re.search(r"0x[45]00[0-9A-Fa-f]{5}u?\b|0xE00[0-9A-Fa-f]{5}", text), path


def test_image_layout(tmp_path: Path) -> None:
    """The production ELF: vectors at 0x08000000, nothing in the flash log's sectors 9-10
    (0x080A0000-0x080DFFFF), erased 32-byte key at 0x080E0000 (own sector)."""
    objdump = shutil.which("arm-none-eabi-objdump")
    if objdump is None:
        pytest.skip("arm-none-eabi-objdump not installed")
    r = subprocess.run(["make", "-C", str(ROOT), "build/stm32f4/edgedp.elf"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    elf = ROOT / "build/stm32f4/edgedp.elf"
    heads = subprocess.run([objdump, "-h", str(elf)], capture_output=True, text=True, check=True).stdout
    sections = {m[0]: (int(m[1], 16), int(m[2], 16)) for m in
                re.findall(r"^\s*\d+\s+(\S+)\s+([0-9a-f]{8})\s+([0-9a-f]{8})", heads, re.M)}
    assert sections[".isr_vector"][1] == 0x08000000
    assert sections[".edp_key"] == (32, 0x080E0000)
    end_of_flash_use = max(vma + size for name, (size, vma) in sections.items()
                           if name in (".isr_vector", ".text", ".ARM.exidx"))
    assert end_of_flash_use <= 0x080A0000
    assert not [name for name, (size, vma) in sections.items() if size and 0x080A0000 <= vma < 0x080E0000]
    key = tmp_path / "key.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".edp_key", str(elf), str(key)], check=True)
    assert key.read_bytes() == b"\xff" * 32
    # Provisioning recipe: the key lands in the section, nothing else moves.
    new_key = bytes(range(1, 33))
    key.write_bytes(new_key)
    out = tmp_path / "provisioned.elf"
    subprocess.run(["arm-none-eabi-objcopy", f"--update-section=.edp_key={key}", str(elf), str(out)], check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".edp_key", str(out), str(key)], check=True)
    assert key.read_bytes() == new_key
