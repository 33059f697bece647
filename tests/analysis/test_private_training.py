"""The DP-SGD deployment beside the output-noise ones: rows for tradeoff and MIA, the choice
table (at many answers DP-SGD must win), and the report's manifest check."""
from __future__ import annotations

import math

import numpy as np
import pytest

from edgedp.train import model_file as models_io
from edgedp.analysis import populations as models, private_training
from edgedp.datasets import digits_split
from edgedp.analysis import report as report_mod
from edgedp.analysis.report import trained_model
from edgedp.mech.modes import Mode


@pytest.fixture(scope="module")
def setting():
    split = digits_split(0)
    masks = models.half_masks(len(split.y_pool), 3, 0)
    dp = private_training.build(split, masks, [1.0, math.inf], 0, progress=False)
    return split, masks, dp


def test_dpsgd_population_and_rows(setting) -> None:
    split, masks, dp = setting
    assert dp.epsilons == (1.0,) and dp.pool_probs.shape == (1, 3, len(split.y_pool), 10)
    assert dp.test_accuracy[0] > 0.5
    modes = [Mode.parse("full"), Mode.parse("label")]
    rows = private_training.tradeoff_rows(dp, split.y_test, dp.test_probs[0, 0].argmax(1), modes)
    assert {r["mode"] for r in rows} == {"full", "label"} and all(r["agreement"] == 1.0 for r in rows)
    mrows, rocs = private_training.mia_rows(dp, masks, split.y_pool, modes, 0)
    assert len(mrows) == 6 and all(r["mechanism"] == "dpsgd" and r["auc"] <= r["auc_bound"] for r in mrows)


def test_dpsgd_wins_at_many_answers(setting) -> None:
    split, masks, dp = setting
    probs = np.eye(10)[split.y_test] * 0.9 + 0.01      # a near-perfect single model
    rows = private_training.choice(dp, probs, None, None, split.y_test, Mode.parse("label"), 0,
                                   volumes=(1, 10_000))
    one, many = rows
    assert one["per_query_epsilon"] == 1.0 and many["per_query_epsilon"] < 0.01
    assert many["winner"] == "dpsgd"
    assert private_training.per_query_epsilon(1.0, 10_000, 1e-5) > 1.0 / 10_000   # better than basic


def test_report_checks_the_manifest_hash(tmp_path) -> None:
    split = digits_split(0)
    layers = [(np.zeros((64, 10), np.float32), np.arange(10, dtype=np.float32))]
    training = {"private": True, "epsilon": 1.0, "delta": 1e-5, "neighbouring": "add/remove",
                "epsilon_add_remove": 1.0, "epsilon_replace_one": 2.0, "accountant": "pld", "noise_multiplier": 7.0,
                "clip_norm": 1.0, "sampling_rate": 0.25, "sampling": "poisson", "steps": 60, "epochs": 15,
                "n_train": 1198, "randomness": "os.urandom", "noise": "Gaussian", "planned_steps": 60,
                "max_epsilon": None, "stopped_early": False, "epoch_steps": [4 * e for e in range(1, 16)],
                "epsilon_per_epoch": [1.0 * e / 15 for e in range(1, 16)]}
    path = tmp_path / "m.npz"
    models_io.save(path, models_io.Model("logreg", layers, np.arange(10)), training,
                   {"name": "digits", "n_features": 64, "n_classes": 10})
    doc = trained_model(path, split)
    assert doc["hash_matches_manifest"] and doc["test_accuracy_here"] == pytest.approx(np.mean(split.y_test == 9))
    models_io.save(tmp_path / "other.npz", models_io.Model("logreg", [(layers[0][0] + 1, layers[0][1])],
                                                           np.arange(10)), training,
                   {"name": "digits", "n_features": 64, "n_classes": 10})
    path.write_bytes((tmp_path / "other.npz").read_bytes())      # model replaced, manifest kept
    with pytest.raises(models_io.ModelFileError, match="does not match"):
        trained_model(path, split)
    seeded = tmp_path / "seeded.npz"
    models_io.save(seeded, models_io.Model("logreg", layers, np.arange(10)),
                   {**training, "private": False, "non_private_reason": "--seed 3: replayable", "seed": 3},
                   {"name": "digits", "n_features": 64, "n_classes": 10})
    with pytest.raises(models_io.ModelFileError, match="not a private model.*--allow-non-private"):
        trained_model(seeded, split)
    doc = trained_model(seeded, split, allow_non_private=True)
    assert doc["non_private"] == "--seed 3: replayable"
    text = "\n".join(report_mod._deployments({"config": {"mode": "full"}, "trained_model": doc}))
    assert "Not a private model" in text and "--seed 3: replayable" in text
