"""One small, seeded world (digits, quick settings) shared by the analysis tests, which need the
analysis extra (the tests of DP-SGD the train extra too: they require it)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from ..helpers import require

require("sklearn", "joblib", "threadpoolctl", "dp_accounting", "matplotlib")

from edgedp import datasets as data
from edgedp.analysis import populations as models
from edgedp.analysis.settings import Settings

JOBS = 2


@dataclass(frozen=True)
class World:
    settings: Settings
    split: data.Split
    pop: models.Population


@pytest.fixture(scope="session")
def world() -> World:
    s = Settings.make(quick=True, seed=0)
    split = data.digits_split(s.seed)
    pop = models.build_population(split, s.shadows + 1, s.seed, s.model, ensemble=True, jobs=JOBS, progress=False)
    return World(s, split, pop)
