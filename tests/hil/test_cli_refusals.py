"""Rows the device would refuse are explained through the real CLI: qemu:stm32f4 lacks the RNG and RTC."""
from __future__ import annotations

import json

import pytest

from ..helpers import make, run_cli

pytestmark = pytest.mark.hil


def test_stm32f4_on_qemu_refuses_once_and_says_why() -> None:
    make("build/stm32f4/edgedp.elf")
    r = run_cli("query", "--target", "qemu:stm32f4", "--json", "-", stdin="0.2,0.8\n" * 20)
    assert r.returncode == 8, r.stderr  # cli/exit_codes.py REFUSED
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    # the stream stops at the first refusal: only the rows already on the wire (pipelined) follow it
    assert 1 <= len(recs) < 20 and len({x["status"] for x in recs}) == 1
    err = recs[0]["status"]
    assert err in ("ERR_ENTROPY", "ERR_TIME")  # no RNG, no RTC in QEMU's STM32 model
    reason, *rest = r.stderr.splitlines()
    assert f"{err} is expected on QEMU" in reason
    # and, since no key was given, that the host cannot check what the refused rows cost
    assert len(rest) == 1 and "without --key-file this host cannot check" in rest[0], r.stderr
    assert "QEMU has no model of it" in r.stderr and "--target qemu" in r.stderr


def test_stm32f4_on_qemu_without_a_key_refuses_an_epsilon_before_any_row() -> None:
    """A production image does not authenticate its state with the test images' key: `query -e`
    without --key-file ends in the one-line NEEDS_KEY error (exit 8) before any row is sent, also
    for the ε the device already has (its unauthenticated BUDGET says 1; the old host believed it
    and sent the rows)."""
    make("build/stm32f4/edgedp.elf")
    r = run_cli("query", "--target", "qemu:stm32f4", "-e", "1", "--json", "-", stdin="0.2,0.8\n" * 3)
    assert r.returncode == 8, r.stderr
    [err] = [json.loads(x) for x in r.stdout.splitlines()]  # no row record: nothing was sent
    assert err["error"] == "ERR_AUTH" and "pass --key-file" in err["message"] and err["exit_code"] == 8
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
