"""`make provision` refuses the public test key (under any file name) and accepts a real key."""
from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest

from ..helpers import ROOT

TEST_KEY = ROOT / "tests/keys/test-device.key"
KEY_BIN = ROOT / "build/stm32f4/edp_key.bin"
PROVISIONED = ROOT / "build/stm32f4/edgedp-provisioned.elf"


def provision(key: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-C", str(ROOT), "provision", f"KEY={key}"], capture_output=True, text=True)


@pytest.mark.parametrize("where", ["the test key file", "a copy in upper case"])
def test_provision_refuses_the_public_test_key(tmp_path: Path, where: str) -> None:
    key = TEST_KEY
    if where != "the test key file":
        key = tmp_path / "device.key"
        key.write_text(TEST_KEY.read_text().strip().upper() + "\n")
    KEY_BIN.unlink(missing_ok=True)
    PROVISIONED.unlink(missing_ok=True)
    r = provision(key)
    assert r.returncode != 0
    assert "refusing the public test key" in r.stderr
    assert not KEY_BIN.exists() and not PROVISIONED.exists()


def test_provision_accepts_a_fresh_key(tmp_path: Path) -> None:
    secret = secrets.token_bytes(32)
    key = tmp_path / "device.key"
    key.write_text(secret.hex() + "\n")
    r = provision(key)
    assert r.returncode == 0, r.stderr
    assert KEY_BIN.read_bytes() == secret
    out = tmp_path / "key.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".edp_key", str(PROVISIONED), str(out)],
                   check=True)
    assert out.read_bytes() == secret
