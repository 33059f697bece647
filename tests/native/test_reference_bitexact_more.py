"""The second half of the native build's 10,000-query replay against the NumPy reference
(the first half is in test_reference_bitexact.py; one file is one pytest-xdist unit)."""
from __future__ import annotations

import pytest

from edgedp.device.verify import replay

pytestmark = pytest.mark.native


@pytest.mark.slow  # 5,000 sanitized round trips
def test_another_five_thousand_varied_queries_bit_exact(posix_device, test_key: bytes) -> None:
    """Another stream seed and another sequence of configurations (about 51 re-configurations
    and every mode), bit for bit."""
    dev = posix_device.start()
    res = replay(dev, test_key, 5_000, seed=8, progress=False)
    assert res.queries == 5_000
    assert res.mismatches == 0, res.first_mismatch
    assert len(res.by_mode) == 8  # every mode exercised
