"""`admin set-time` refuses a clock past 9999-12-31 before anything is sent (issue 39 item 7):
the device does not check the range (300000000000 was accepted, a larger value wraps its day)."""
from __future__ import annotations

import pytest

from edgedp.device.client import Device
from edgedp.device.protocol import MAX_UNIX_TIME

from ..helpers import run_cli


@pytest.mark.parametrize("unix", ["300000000000", "371085174374400", str(MAX_UNIX_TIME + 1)])
def test_set_time_past_year_9999_is_a_usage_error(unix: str) -> None:
    r = run_cli("admin", "set-time", "--unix", unix, "--key-file", "tests/keys/test-device.key",
                "--target", "socket://127.0.0.1:9")  # nothing listens there: a refusal must come first
    assert r.returncode == 2 and f"0<=x<={MAX_UNIX_TIME}" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_api_refuses_it_too() -> None:
    dev = Device(link=None, timeout=1)  # type: ignore[arg-type]  # nothing may be sent
    with pytest.raises(ValueError, match="9999-12-31"):
        dev.set_time(bytes(32), 300_000_000_000)
