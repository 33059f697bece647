"""The parallel steps on a Dask cluster (a LocalCluster of two worker processes on loopback) give
the same results as local processes for the same seeds: shadow models and audit trainings, the
latter through the real CLI's --dask."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgedp import datasets as data
from edgedp.analysis import populations as models, parallel
from edgedp.analysis.settings import Settings
from edgedp.cli import main

from ..helpers import require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]   # about 40 s of CPU; room for a loaded machine

AUDIT = """[audit-train]
method = "two-world"
clipping = "per-batch"
n_train = 200
steps = 10
trainings = 8
"""


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    distributed = require("dask", "distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    try:
        assert len(cluster.workers) == 2
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_shadow_models_match_local_processes(scheduler: str) -> None:
    s = Settings.make(quick=True, seed=0)
    split = data.digits_split(0)
    local = models.build_population(split, 2, 0, s.model, ensemble=False, jobs=1, progress=False)
    with parallel.backend(scheduler):
        remote = models.build_population(split, 2, 0, s.model, ensemble=False, jobs=1, progress=False)
    assert np.array_equal(local.masks, remote.masks)
    assert np.array_equal(local.test_probs, remote.test_probs)
    assert np.array_equal(local.pool_probs, remote.pool_probs)


def test_audit_train_on_dask_matches_local(scheduler: str, tmp_path: Path) -> None:
    cfg = tmp_path / "audit.toml"
    cfg.write_text(AUDIT)
    docs = []
    for extra in ([], ["--dask", scheduler]):
        r = CliRunner().invoke(main, ["audit-train", str(cfg), "--json", "--no-progress", *extra])
        assert r.exit_code in (0, 1), r.output
        docs.append(json.loads(r.output.splitlines()[-1]))
    assert docs[0] == docs[1]
    assert [t["canary"] for t in docs[0]["tests"]] == ["dirac", "ood"]


def test_unreachable_scheduler_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        with parallel.backend("tcp://127.0.0.1:9", timeout=1):
            pass
