"""verify replays a test image's noise bit for bit, so it refuses firmware whose keystream the
reference does not generate: before 0.3.0 the DRBG was ChaCha20 (docs/privacy.md section 3)."""
from __future__ import annotations

from edgedp import __version__
from edgedp.device.client import REPLAYS_FROM, parse_version


def test_versions_parse() -> None:
    assert parse_version("0.3.0") == (0, 3, 0) and parse_version("0.3") == (0, 3, 0)
    assert parse_version("12.0.7") == (12, 0, 7)
    for bad in ("dev", "v0.3.0", "0.3.0-rc1", "0.3.0+dirty", "", "0..1"):
        assert parse_version(bad) is None, bad


def test_this_version_replays_and_the_chacha20_ones_do_not() -> None:
    assert parse_version(__version__) >= REPLAYS_FROM
    assert parse_version("0.2.0") < REPLAYS_FROM and parse_version("0.1.0") < REPLAYS_FROM
