"""Where the project's build outputs live (the repository root holds the Makefile)."""
from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """EDGEDP_ROOT, else the checkout this package was installed from (editable install)."""
    env = os.environ.get("EDGEDP_ROOT")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    return project_root() / "build"


def test_key_path() -> Path:
    """The public HMAC key built into test images (never a production key)."""
    return project_root() / "tests" / "keys" / "test-device.key"
