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


def test_attack_mia_on_the_deployed_model(user: Path, tmp_path: Path) -> None:
    """Members from --data, non-members from --holdout; the threshold attack on the model's device outputs
    is near perfect without noise for a model that memorised its members, and bounded at a small ε."""
    rng = np.random.default_rng(2)
    Xm, Xn = rng.normal(size=(60, 20)), rng.normal(size=(60, 20))
    ym, yn = rng.integers(0, 4, 60), rng.integers(0, 4, 60)  # random labels: only memorisation fits them
    joblib.dump(MLPClassifier((64,), max_iter=2000, random_state=0).fit(Xm, ym), tmp_path / "memo.joblib")
    np.savez(tmp_path / "members.npz", X=Xm, y=ym)
    np.savez(tmp_path / "others.npz", X=Xn, y=yn)
    doc = json.loads(invoke("attack", "mia", "--model", str(tmp_path / "memo.joblib"), "--data",
                            str(tmp_path / "members.npz"), "--holdout", str(tmp_path / "others.npz"),
                            "--epsilons", "0.1,inf", "--modes", "full", "--json", "--no-progress"))
    rows = {r["epsilon"]: r for r in doc["rows"]}
    assert doc["train_accuracy"] > 0.95 and rows["inf"]["auc"] > 0.9
    assert rows[0.1]["auc"] < 0.75 and rows[0.1]["members"] == rows[0.1]["nonmembers"] == 60
    r = CliRunner().invoke(main, ["attack", "mia", "--model", str(tmp_path / "memo.joblib")])
    assert r.exit_code != 0 and "--holdout" in r.output


@pytest.mark.parametrize("command", ["tradeoff", "attack mia", "report"])
def test_each_command_reads_the_model_file_once(user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                command: str) -> None:
    """The model file is loaded once per command and passed down (device outputs, the report's model
    section), not read again for each use."""
    from edgedp.model import convert
    loads: list[str] = []
    real = convert.load_file

    def counting(path):
        loads.append(str(path))
        return real(path)

    monkeypatch.setattr(convert, "load_file", counting)
    model, data = str(user / "mine.joblib"), str(user / "mydata.npz")
    args = {"tradeoff": ["tradeoff", "--data", data, "--quick", "--modes", "label"],
            "attack mia": ["attack", "mia", "--data", data, "--holdout", data, "--epsilons", "inf", "--modes", "full"],
            "report": ["report", "--out", str(tmp_path / "rep"), "--quick", "--data", data, "--no-dpsgd",
                       "--shadows", "2", "--jobs", "1"]}[command]
    invoke(*args, "--model", model, "--no-progress")
    assert loads == [model]
