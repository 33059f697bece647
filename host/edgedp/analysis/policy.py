"""``edgedp report --check POLICY.toml``: a team's privacy thresholds checked against a report
(``report.json``) and the empirical audits (``audit-dp`` / ``audit-train`` JSON), one verdict per
threshold, as text lines and as JUnit XML for CI systems.

Thresholds (a TOML file: the keys at the top level or in a [policy] table; omit what you do not
gate on):

* ``max_epsilon_per_day``: the day's answers composed (the tightest of basic, advanced, PLD);
* ``max_epsilon_lifetime``: the lifetime cap's answers composed; violated when there is no cap;
* ``max_lira_auc``: the best LiRA attack's AUC on the configured mode and ε (single model);
* ``max_tpr_at_0_1pct_fpr``: the best attack's true-positive rate at 0.1% false positives, same cell;
* ``max_lower_bound_ratio``: the largest empirical lower bound / stated ε over the audit files;
* ``min_accuracy``: top-1 test accuracy of the single model's answers at the configured mode and ε.

A threshold whose measurement is missing (no audit file given, say) is violated: a gate that
cannot be checked does not pass. An audit file that is missing, empty, not JSON, holds a failed
run's error (``{"error": …, "message": …}``) or lacks the bound is an ``AuditError``: it fails
the gate and is a JUnit ``<error>`` case carrying the audit's own message."""
from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

from .jsonable import epsilon_value

THRESHOLDS = ("max_epsilon_per_day", "max_epsilon_lifetime", "max_lira_auc", "max_tpr_at_0_1pct_fpr",
              "max_lower_bound_ratio", "min_accuracy")


def read_policy(path: str | Path) -> dict[str, float]:
    p = Path(path)
    try:
        d = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: cannot parse ({exc})") from None
    d = d.get("policy", d)
    unknown = sorted(set(d) - set(THRESHOLDS))
    if unknown:
        raise ValueError(f"{p}: unknown thresholds {', '.join(unknown)} (known: {', '.join(THRESHOLDS)})")
    if not d:
        raise ValueError(f"{p}: no thresholds (known: {', '.join(THRESHOLDS)})")
    out = {}
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{p}: {k} must be a finite number >= 0, got {v!r}")
        out[k] = float(v)
    return out


def read_json(path: str | Path, what: str) -> dict:
    try:
        d = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no such {what} file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON {what} ({exc.msg})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a JSON {what}")
    return d


@dataclass(frozen=True)
class AuditError:
    """An input of the gate that cannot be used — an audit result (the audit's own message if it
    left one), or the policy or report file itself — and why."""
    path: str
    message: str

    def line(self) -> str:
        return f"ERROR {self.path}: {self.message}"

    def as_dict(self) -> dict:
        return {"file": self.path, "message": self.message}


def read_audit(path: str | Path) -> tuple[str, dict] | AuditError:
    """An audit-dp / audit-train --json result, or why it is not one (never raises for a bad file)."""
    name = str(path)
    try:
        if Path(path).is_file() and not Path(path).read_text().strip():
            return AuditError(name, "empty: the audit printed no result (it failed before its JSON; see its log)")
        d = read_json(path, "audit result")
    except (ValueError, OSError) as exc:
        return AuditError(name, str(exc).removeprefix(f"{name}: "))
    if "error" in d:
        return AuditError(name, f"the audit failed: {d.get('message') or d['error']}")
    try:
        float(d["epsilon_lower_bound"]), float(d["epsilon_stated"])
    except (KeyError, TypeError, ValueError):
        return AuditError(name, "not an audit-dp / audit-train JSON (needs epsilon_lower_bound and epsilon_stated)")
    return name, d


@dataclass(frozen=True)
class Measured:
    value: float | None   # None: not measured
    source: str           # what it is, in words


def _cell(rows: list[dict], mode: str, eps: float, mechanism: str = "softmax") -> list[dict]:
    return [r for r in rows if r.get("mechanism") == mechanism and r.get("mode") == mode
            and math.isclose(epsilon_value(r.get("epsilon")), eps)]


def measurements(report: dict, audits: list[tuple[str, dict]]) -> dict[str, Measured]:
    """Each threshold's measured value from a report document and audit documents."""
    cfg, acc = report["config"], report["accounting"]
    mode, eps = cfg["mode"], float(cfg["epsilon"])
    cell = f"single model, mode {mode}, ε = {eps:g}"
    out: dict[str, Measured] = {}
    day = acc["daily"]
    out["max_epsilon_per_day"] = Measured(day["best"], f"{day['queries']} answers a day, composed (δ = {day['delta']:g})")
    life = acc.get("lifetime")
    out["max_epsilon_lifetime"] = (Measured(life["best"], f"lifetime cap: {life['queries']} answers, composed")
                                   if life else Measured(math.inf, "no lifetime cap: ε grows without bound"))
    mia_rows = _cell(report["membership_inference"]["rows"], mode, eps)
    lira = [r for r in mia_rows if r["attack"].startswith("lira")]
    out["max_lira_auc"] = (Measured(max(r["auc"] for r in lira), f"best LiRA AUC, {cell}") if lira
                           else Measured(None, f"no LiRA result for {cell}"))
    out["max_tpr_at_0_1pct_fpr"] = (Measured(max(r["tpr_at_0_1pct_fpr"] for r in mia_rows),
                                             f"best attack's TPR at 0.1% FPR, {cell}") if mia_rows
                                    else Measured(None, f"no membership-inference result for {cell}"))
    trade = _cell(report["tradeoff"], mode, eps)
    out["min_accuracy"] = (Measured(trade[0]["accuracy"], f"test accuracy, {cell}") if trade
                           else Measured(None, f"no accuracy for {cell}"))
    if audits:
        ratios = [(float(a["epsilon_lower_bound"]) / float(a["epsilon_stated"]), name,
                   float(a["epsilon_lower_bound"]), float(a["epsilon_stated"])) for name, a in audits]
        r, name, lb, st = max(ratios)
        out["max_lower_bound_ratio"] = Measured(r, f"empirical ε lower bound {lb:.4g} / stated {st:g} ({name})")
    else:
        out["max_lower_bound_ratio"] = Measured(None, "no audit result given (--audit FILE from audit-dp or "
                                                      "audit-train)")
    return out


@dataclass(frozen=True)
class Verdict:
    threshold: str
    limit: float
    measured: Measured

    @property
    def passed(self) -> bool:
        v = self.measured.value
        if v is None or math.isnan(v):
            return False
        return v >= self.limit if self.threshold.startswith("min_") else v <= self.limit

    def line(self) -> str:
        v = self.measured.value
        op = ">=" if self.threshold.startswith("min_") else "<="
        got = "not measured" if v is None else f"{v:.4g}"
        return (f"{'ok' if self.passed else 'FAIL'} {self.threshold}: {got} (limit {op} {self.limit:g}; "
                f"{self.measured.source})")

    def as_dict(self) -> dict:
        return {"threshold": self.threshold, "limit": self.limit, "measured": self.measured.value,
                "source": self.measured.source, "passed": self.passed}


def check(policy: dict[str, float], report: dict, audits: list[tuple[str, dict]]) -> list[Verdict]:
    m = measurements(report, audits)
    return [Verdict(k, policy[k], m[k]) for k in THRESHOLDS if k in policy]


def junit(verdicts: Sequence[Verdict], errors: Sequence[AuditError] = (), suite: str = "edgedp privacy policy") -> str:
    """JUnit XML: one test case per threshold, a <failure> for each violated one, and one test case
    with an <error> per audit file that could not be used (``errors``)."""
    fails = [v for v in verdicts if not v.passed]
    n = len(verdicts) + len(errors)
    ts = ET.Element("testsuite", name=suite, tests=str(n), failures=str(len(fails)), errors=str(len(errors)),
                    skipped="0")
    for v in verdicts:
        tc = ET.SubElement(ts, "testcase", classname="edgedp.policy", name=v.threshold)
        if not v.passed:
            ET.SubElement(tc, "failure", message=v.line(), type="PolicyViolation").text = v.line()
        else:
            ET.SubElement(tc, "system-out").text = v.line()
    for e in errors:
        tc = ET.SubElement(ts, "testcase", classname="edgedp.policy.audit", name=e.path)
        ET.SubElement(tc, "error", message=e.message, type="AuditError").text = e.line()
    root = ET.Element("testsuites", tests=str(n), failures=str(len(fails)), errors=str(len(errors)))
    root.append(ts)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
