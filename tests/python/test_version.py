"""One version: EDP_FIRMWARE_VERSION in firmware/core/include/edgedp/options.h. The host package
(edgedp.__version__, and pyproject.toml's dynamic version) reads it through the generated schema,
CMake parses it from the header, and library.json (a format that cannot read a file) carries a copy
kept equal here."""
from __future__ import annotations

import json
import re
import tomllib

import edgedp
from edgedp import schema as S
from tests.helpers import ROOT

CORE = ROOT / "firmware" / "core"


def header_version() -> str:
    m = re.search(r'^#define EDP_FIRMWARE_VERSION "([^"]*)"', (CORE / "include/edgedp/options.h").read_text(), re.M)
    assert m, "options.h defines no EDP_FIRMWARE_VERSION"
    return m.group(1)


def test_the_package_version_is_the_firmwares() -> None:
    assert edgedp.__version__ == S.FIRMWARE_VERSION == header_version()


def test_pyproject_takes_the_version_from_the_schema() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "edgedp.schema.FIRMWARE_VERSION"}


def test_library_json_carries_the_version() -> None:
    assert json.loads((CORE / "library.json").read_text())["version"] == header_version()


def test_cmake_states_no_version_of_its_own() -> None:
    """CMakeLists.txt names no version but CMake's own minimum (tests/native/test_vendor_build.py
    configures it and reads the header's)."""
    text = (CORE / "CMakeLists.txt").read_text()
    assert re.findall(r"\d+\.\d+\.\d+", text) == [], "CMakeLists.txt states a version: read options.h"
