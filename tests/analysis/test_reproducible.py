"""Seeded results do not depend on the number of worker processes."""
from __future__ import annotations

import numpy as np

from edgedp import datasets as data
from edgedp.analysis import populations as models


def test_population_same_with_one_or_two_jobs() -> None:
    split = data.digits_split(3)
    spec = models.ModelSpec(max_iter=50, teachers=5)
    a = models.build_population(split, 2, 3, spec, jobs=1, progress=False)
    b = models.build_population(split, 2, 3, spec, jobs=2, progress=False)
    assert np.array_equal(a.masks, b.masks)
    assert np.array_equal(a.pool_probs, b.pool_probs)
    assert np.array_equal(a.test_votes, b.test_votes)
