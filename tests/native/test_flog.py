"""Power-loss replay of the flash high-water log (firmware/core/src/flog.c) on the RAM NOR model.

Builds tests/native/test_flog.c with flog.c and the model under ASan/UBSan; the program cuts
power at every flash operation (and again at every operation of the recovery) and checks that
no acknowledged mark (nor rate limit) is ever lost, and that the spare sector is erased ahead of
need (edp_flog_prepare), never inside a write; and that a log in the old layout still reads."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from ..helpers import ROOT

pytestmark = pytest.mark.native
OUT = ROOT / "build/native/test_flog"
SRCS = ["tests/native/test_flog.c", "firmware/core/src/flog.c", "firmware/core/src/crc32.c",
        "firmware/ports/common/ramflash.c"]


@pytest.fixture(scope="module")
def output() -> str:
    cc = shutil.which("gcc") or "cc"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([cc, "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                            "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                            "-I", str(ROOT / "firmware/core/include"), "-I", str(ROOT / "firmware/core/src"), "-I", str(ROOT / "firmware/ports/common"),
                            *(str(ROOT / s) for s in SRCS), "-o", str(OUT)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(OUT)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run.stdout


def test_no_acknowledged_mark_is_lost_at_any_cut(output: str) -> None:
    assert "not ok" not in output
    for script in ("marks", "mixed"):
        for group in ("uncut run and no-op writes", "power cut at each of", "a second power cut during recovery",
                      "repeated tears until the sector fills"):
            assert f"ok {script}: {group}" in output
    checked = re.search(r"# checked (\d+) cut points, 0 failures", output)
    assert checked and int(checked.group(1)) > 10000


def _stats(output: str, script: str) -> tuple[int, ...]:
    s = re.search(rf"stats {script} writes (\d+) rate_writes (\d+) word_programs (\d+) erases (\d+) "
                  r"slots_per_sector (\d+) erases_in_write (\d+)", output)
    assert s, output
    return tuple(map(int, s.groups()))


def test_one_record_per_raise_and_one_erase_per_sector(output: str) -> None:
    """A log of marks only (as firmware before rate records wrote it) copies nothing."""
    writes, rates, programs, erases, slots, in_write = _stats(output, "marks")
    assert rates == 0
    assert programs == writes * 9  # 36-byte record = 9 word programs
    assert erases == (writes - 1) // slots
    assert in_write == 0, "a sector erase ran inside a raise (inside an answer's release window)"


def test_rate_limits_are_copied_across_sector_switches(output: str) -> None:
    """Marks with a RATE every eleventh write (rarer than a sector fills): each switch copies the
    newest record of the other kind into the new sector, one record more per switch at most, and
    the spare is still erased ahead of need; a log in the old layout opens to its mark."""
    writes, rates, programs, erases, slots, in_write = _stats(output, "mixed")
    assert rates == 4 and in_write == 0
    records = programs // 9
    assert writes < records <= writes + erases + 1
    assert erases <= (writes - 1) // (slots - 1)  # the wear bound of flog.h
    assert "ok old-layout log read, rate limit kept across switches" in output


def test_a_record_reported_failed_never_ties_with_its_retry(output: str) -> None:
    """A rate record that landed but was reported failed, then the RATE retried at the same counter:
    the retry's limit after a reboot; two rate records of one seq: the stricter limit."""
    assert "ok seq per slot programmed, ties to the stricter limit" in output


def test_a_rate_record_with_nonzero_reserved_words_is_no_record(output: str) -> None:
    """The reserved words sit where a mark keeps its lifetime: no mark that spent anything can
    ever read as a rate record, whatever its check word."""
    assert "ok a rate record's reserved words must be zero" in output
