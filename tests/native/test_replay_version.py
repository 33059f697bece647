"""The commands that replay a test image's noise (verify, bench) refuse firmware whose keystream the
reference does not generate: before 0.3.0 the DRBG was ChaCha20 (docs/privacy.md section 3)."""
from __future__ import annotations

import dataclasses

import pytest

from edgedp import __version__
from edgedp.device.errors import EdgeDPError
from edgedp.mech import chacha


def test_replays_only_from_the_first_chacha12_firmware() -> None:
    assert chacha.replays(chacha.FIRST_FIRMWARE) and chacha.replays(__version__) and chacha.replays("1.0.0")
    assert not chacha.replays("0.2.0") and not chacha.replays("0.1.0") and not chacha.replays("dev")


def test_a_replay_of_older_firmware_is_refused_at_once(host_device, monkeypatch) -> None:
    dev = host_device.start()
    info = dev.require_test_build("verify")
    assert info.firmware_version == __version__  # this tree's image replays
    monkeypatch.setattr(dev, "info", lambda: dataclasses.replace(info, firmware_version="0.2.0"))
    with pytest.raises(EdgeDPError, match=r"ChaCha12 .*firmware 0\.2\.0"):
        dev.require_test_build("verify")
