"""The user's own model and data in the analysis commands (issue 20.5): `tradeoff --model` runs on
the deployed model's device outputs, and the report names the user's data, how it was split and
the user's model."""
from __future__ import annotations

import json
from pathlib import Path

import joblib
import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.neural_network import MLPClassifier

from edgedp.cli import main


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("user")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 20))
    y = (X[:, 0] > 0) + 2 * (X[:, 1] > 0)
    joblib.dump(MLPClassifier((8,), max_iter=400, random_state=0).fit(X, y), d / "mine.joblib")
    np.savez(d / "mydata.npz", X=X, y=y)
    return d


def invoke(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_tradeoff_on_the_deployed_models_outputs(user: Path) -> None:
    model = joblib.load(user / "mine.joblib")
    with np.load(user / "mydata.npz") as f:
        X, y = f["X"], f["y"]
    doc = json.loads(invoke("tradeoff", "--model", str(user / "mine.joblib"), "--data", str(user / "mydata.npz"),
                            "--quick", "--modes", "label", "--json", "--no-progress"))
    assert doc["model"] == str(user / "mine.joblib") and doc["test"] == 150
    assert doc["test_accuracy"] == pytest.approx(float((model.predict(X) == y).mean()), abs=0.01)
    exact = next(r for r in doc["rows"] if r["mode"] == "label" and r["epsilon"] == "inf")
    assert exact["accuracy"] == pytest.approx(doc["test_accuracy"])
    r = CliRunner().invoke(main, ["tradeoff", "--model", str(user / "mine.joblib"), "--quick"])  # digits: 64 wide
    assert r.exit_code != 0 and "64 features" in r.output and "takes 20" in r.output


def test_report_names_the_users_data_split_and_model(user: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    invoke("report", "--out", str(out), "--quick", "--data", str(user / "mydata.npz"), "--model",
           str(user / "mine.joblib"), "--no-dpsgd", "--shadows", "2", "--jobs", "1", "--no-progress")
    md = (out / "report.md").read_text()
    assert "digits records" not in md, md[md.index("digits records") - 300:][:400]
    assert f"records of {user / 'mydata.npz'}" in md
    assert "of its 150 records, 50 are held out for testing and each model trains on a random half of the other 100" in md
    assert "## Your model" in md and "`" + str(user / "mine.joblib") + "` (mine, softmax head" in md
