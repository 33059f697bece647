"""report --check: the README's CI job, run command for command (GitHub Actions and GitLab CI
list the same ones), passes its policy; stricter thresholds fail with one line each, in the
text output and in the JUnit XML."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from ..helpers import EDGEDP, ROOT, cli_env

README = (ROOT / "README.md").read_text()
BIN = str(EDGEDP.parent)
"""Where the installed `edgedp` is: first on the PATH of the README's commands."""


def block(first_line: str) -> str:
    """The fenced block of the README whose first line is first_line."""
    m = re.search(r"```\w*\n" + re.escape(first_line) + r"\n(.*?)```", README, re.S)
    assert m, f"README has no block starting {first_line!r}"
    return m.group(1)


def github_commands() -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\s*- run: (edgedp .*)$", block("# .github/workflows/privacy.yml"), re.M)]


def gitlab_commands() -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\s*- (edgedp .*)$", block("# .gitlab-ci.yml"), re.M)]


def sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**cli_env(), "PATH": BIN + os.pathsep + os.environ["PATH"]}
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def ci_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """A checkout with the README's privacy files, after the CI job's commands."""
    work = tmp_path_factory.mktemp("ci")
    (work / "privacy").mkdir()
    for name in ("policy.toml", "audit-train.toml"):  # the files README says to copy there
        shutil.copy(ROOT / "examples" / name, work / "privacy" / name)
    return work, [sh(c, work) for c in github_commands()]


def test_both_ci_snippets_run_the_same_commands() -> None:
    assert github_commands() == gitlab_commands()
    assert [c.split()[1] for c in github_commands()] == ["audit-dp", "audit-train", "report"]


@pytest.mark.slow
def test_readme_ci_job_passes_its_policy(ci_job) -> None:
    work, runs = ci_job
    assert all(r.returncode == 0 for r in runs), [(r.returncode, r.stderr[-500:]) for r in runs]
    for name in ("audit-dp.json", "audit-train.json"):
        d = json.loads((work / name).read_text())
        assert 0 <= d["epsilon_lower_bound"] <= d["epsilon_stated"] == 1.0, d
    assert "policy privacy/policy.toml: 6 of 6 thresholds met" in runs[-1].stdout
    suite = ET.parse(work / "privacy-junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "6" and suite.get("failures") == "0"
    assert {tc.get("name") for tc in suite.iter("testcase")} == {
        "max_epsilon_per_day", "max_epsilon_lifetime", "max_lira_auc", "max_tpr_at_0_1pct_fpr",
        "max_lower_bound_ratio", "min_accuracy"}
    assert (work / "privacy-report/report.md").is_file()


@pytest.mark.slow
def test_violations_fail_with_one_line_each(ci_job) -> None:
    work, _ = ci_job
    strict = work / "strict.toml"
    strict.write_text("max_lira_auc = 0.0\nmin_accuracy = 0.99\nmax_epsilon_per_day = 100\n"
                      "max_lower_bound_ratio = 1.0\n")
    r = sh("edgedp report --from privacy-report/report.json --audit audit-dp.json --check strict.toml "
           "--junit strict.xml", work)
    assert r.returncode == 1, r.stderr
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert [f.split(":")[0] for f in fails] == ["FAIL max_lira_auc", "FAIL min_accuracy"]
    suite = ET.parse(work / "strict.xml").getroot().find("testsuite")
    failed = [tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert failed == ["max_lira_auc", "min_accuracy"] and suite.get("tests") == "4"
    # a threshold that cannot be measured (no audit file) does not pass
    r = sh("edgedp report --from privacy-report/report.json --check strict.toml --json", work)
    d = json.loads(r.stdout)
    assert r.returncode == 1 and not d["policy"]["passed"]
    v = {x["threshold"]: x for x in d["policy"]["verdicts"]}
    assert v["max_lower_bound_ratio"]["measured"] is None and not v["max_lower_bound_ratio"]["passed"]
    assert v["max_epsilon_per_day"]["passed"]


def test_bad_policy_is_a_one_line_error(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text("max_lira_aucc = 0.6\n")
    r = sh(f"edgedp report --from nothing.json --check {p}", tmp_path)
    assert r.returncode == 4 and "unknown thresholds max_lira_aucc" in r.stderr and "Traceback" not in r.stderr
    r = sh("edgedp report --junit x.xml --out d", tmp_path)
    assert r.returncode == 4 and "go with --check" in r.stderr


def junit_cases(path: Path) -> dict[str, ET.Element]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {tc.get("name", ""): tc for tc in suite.iter("testcase")}


@pytest.mark.slow
def test_an_audit_that_did_not_run_cleanly_fails_the_gate_with_its_message(ci_job) -> None:
    """Issue 39.17: empty, missing and error audit files each fail the gate (exit 1) with a JUnit
    error case carrying the audit's own message; the good audit's threshold is still judged."""
    work, _ = ci_job
    (work / "empty.json").write_text("")
    r = sh("edgedp audit-dp --target reference --epsilon 1 --trials -5 --json > failed.json || true", work)
    failed = json.loads((work / "failed.json").read_text())
    assert "error" in failed, failed
    r = sh("edgedp report --from privacy-report/report.json --check privacy/policy.toml --audit audit-dp.json "
           "--audit empty.json --audit missing.json --audit failed.json --junit gate.xml --json", work)
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)["policy"]
    assert not d["passed"] and {e["file"] for e in d["audit_errors"]} == {"empty.json", "missing.json", "failed.json"}
    assert all(v["passed"] for v in d["verdicts"])  # every threshold met: the bad files alone fail it
    cases = junit_cases(work / "gate.xml")
    for name in ("empty.json", "missing.json", "failed.json"):
        err = cases[name].find("error")
        assert err is not None, name
    assert failed["message"] in (cases["failed.json"].find("error").get("message") or "")
    assert cases["max_lower_bound_ratio"].find("failure") is None
    r = sh("edgedp report --from privacy-report/report.json --check privacy/policy.toml --audit empty.json", work)
    assert r.returncode == 1 and "ERROR empty.json: empty" in r.stdout


def test_an_unreadable_policy_or_report_still_writes_junit(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text("max_lira_auc = 0.6\n")
    r = sh(f"edgedp report --from nothing.json --check {p} --junit gate.xml", tmp_path)
    assert r.returncode == 4 and "nothing.json" in r.stderr
    err = junit_cases(tmp_path / "gate.xml")["nothing.json"].find("error")
    assert err is not None and "no such report file" in (err.get("message") or "")
    p.write_text("max_lira_aucc = 0.6\n")
    r = sh(f"edgedp report --from nothing.json --check {p} --junit gate2.xml", tmp_path)
    assert r.returncode == 4 and "unknown thresholds" in (junit_cases(tmp_path / "gate2.xml")[str(p)]
                                                            .find("error").get("message") or "")
