"""The pre-release report renders with its plots, from the computed numbers."""
from __future__ import annotations

import json
import math

import matplotlib.image as mpimg
import pytest
from click.testing import CliRunner

from edgedp.analysis import accounting
from edgedp.cli import main


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    r = CliRunner().invoke(main, ["report", "--out", str(out), "--quick", "--mode", "label", "--epsilon", "1",
                                  "--daily-cap", "20", "--lifetime-cap", "500", "--days", "100", "--shadows", "4", "--jobs", "2",
                                  "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    return out, json.loads(r.stdout)


@pytest.mark.slow
def test_report_files_and_plots(report_dir) -> None:
    out, summary = report_dir
    md = (out / "report.md").read_text()
    doc = json.loads((out / "report.json").read_text())
    assert summary["plots"] == doc["plots"]
    for name in doc["plots"].values():
        img = mpimg.imread(out / name)
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 200
        assert f"]({name})" in md


@pytest.mark.slow
def test_report_numbers_come_from_the_computation(report_dir) -> None:
    out, _ = report_dir
    doc = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    cfg = doc["config"]
    assert (cfg["daily_queries"], cfg["lifetime_queries"], cfg["horizon_queries"]) == (20, 500, 500)
    day = doc["accounting"]["daily"]
    assert day["pld"] == pytest.approx(accounting.pld(1.0, 20, cfg["delta"]))
    assert doc["accounting"]["lifetime"]["basic"] == pytest.approx(500.0)
    m = doc["membership_inference"]["configured"]
    assert (m["mode"], m["epsilon"], m["mechanism"]) == ("label", 1.0, "softmax")
    rows = [r for r in doc["membership_inference"]["rows"]
            if (r["mode"], r["epsilon"], r["mechanism"]) == ("label", 1.0, "softmax")]
    assert m["tpr_at_1pct_fpr"] == max(r["tpr_at_1pct_fpr"] for r in rows)
    assert f"AUC {m['auc']:.3f}" in md
    e = doc["extraction"]["configured"]
    assert e["queries"] == max(doc["extraction"]["budgets"])
    assert f"{100 * e['agreement']:.1f}%" in md
    assert doc["output_granularity"]["class"] == "label-only"
    assert doc["training_data"]["declared_sensitivity"] == "high"
    assert any(r["epsilon"] == "inf" for r in doc["tradeoff"])


@pytest.mark.slow
def test_report_says_what_epsilon_means(report_dir) -> None:
    out, summary = report_dir
    text = summary["meaning"]
    assert "ε = 1 per answer" in text
    assert f"{100 * accounting.tpr_bound(1.0, 0.01):.1f}%" in text
    assert "copied" in text
    assert "What this ε means" in (out / "report.md").read_text()


def test_report_rejects_a_cap_below_one_query(tmp_path) -> None:
    r = CliRunner().invoke(main, ["report", "--out", str(tmp_path), "--epsilon", "2", "--daily-cap", "1",
                                  "--json", "--no-progress"])
    assert r.exit_code != 0
    assert "daily cap" in json.loads(r.stdout)["message"]


def test_inf_is_written_as_a_string(report_dir) -> None:
    out, _ = report_dir
    text = (out / "report.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    rows = json.loads(text)["tradeoff"]
    assert any(math.isinf(float(r["epsilon"])) for r in rows)
    assert {r["mechanism"] for r in rows} == {"softmax", "ensemble", "dpsgd"}     # the three deployments
