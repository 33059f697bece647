"""`edgedp verify` refuses, at once and with the reason, a test image whose firmware predates the
reference's keystream, or whose version it cannot read; this tree's image replays."""
from __future__ import annotations

import dataclasses

import pytest

from edgedp import __version__
from edgedp.device.errors import EdgeDPError


def test_verify_refuses_older_or_unreadable_firmware(posix_device, monkeypatch) -> None:
    dev = posix_device.start()
    info = dev.require_replayable("verify")
    assert info.firmware_version == __version__
    monkeypatch.setattr(dev, "info", lambda: dataclasses.replace(info, firmware_version="0.2.0"))
    with pytest.raises(EdgeDPError, match=r"ChaCha12, the keystream of firmware 0\.3\.0 and later.*0\.2\.0.*ChaCha20"):
        dev.require_replayable("verify")
    dev.require_test_build("bench")  # bench replays its frames on the local ELF, not the keystream
    monkeypatch.setattr(dev, "info", lambda: dataclasses.replace(info, firmware_version="0.3.0-rc1"))
    with pytest.raises(EdgeDPError, match="cannot read"):
        dev.require_replayable("verify")
