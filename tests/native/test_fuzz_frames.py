"""Mutation fuzzing of the frame loop under ASan/UBSan (tests/native/fuzz_frames.c states the invariants)."""
from __future__ import annotations

import subprocess

import pytest

from ..helpers import ROOT, make

pytestmark = pytest.mark.native


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_frame_loop_invariants_hold_under_mutation(seed: int) -> None:
    make("build/native/fuzz_frames")
    r = subprocess.run([str(ROOT / "build/native/fuzz_frames"), str(seed), "500000"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    words = r.stdout.split()
    assert words[0] == "ok" and int(words[1]) == 500000
    assert int(words[5]) > 1000  # valid queries got through and were answered
    assert int(words[8]) > 1000 and int(words[12]) > 1000  # signed admin frames, valid and mutated
