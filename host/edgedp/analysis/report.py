"""The pre-release privacy audit of one configuration: ``DIR/report.md``, ``DIR/report.json``
and PNG plots, following a published privacy audit checklist with measured numbers (digits, models trained
here) and the accounting of the configured caps."""
from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .. import datasets as data
from ..train import model_file as models_io
from ..mech.lattice import DELTA_BITS, SLACK_BITS, to_micro
from ..mech.modes import MODE_BUCKET, MODE_FULL, MODE_LABEL, MODE_ROUND, MODE_SIMPLEX, MODE_TOPK, Mode
from . import accounting, extraction, mia, plots, populations, private_training, tradeoff
from .jsonable import finite_json
from .protected_api import SOFTMAX, ensemble, parse_modes
from .settings import Settings

SENSITIVITY_LEVELS = ("high", "medium", "low")


@dataclass(frozen=True)
class AuditConfig:
    """The device configuration under audit (what ``edgedp admin config`` sets) and context."""

    mode: str = "full"
    epsilon: float = 1.0
    daily_cap: float = 10.0
    lifetime_cap: float | None = None
    days: int = 365
    delta: float = accounting.DEFAULT_DELTA
    data_sensitivity: str = "high"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", str(Mode.parse(self.mode)))
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError("per-query epsilon must be finite and > 0")
        if not self.daily_cap >= self.epsilon:
            raise ValueError("the daily cap must allow at least one query (daily cap >= epsilon)")
        if self.lifetime_cap is not None and not self.lifetime_cap >= self.epsilon:
            raise ValueError("the lifetime cap must allow at least one query (or be omitted)")
        if self.days < 1:
            raise ValueError("days must be >= 1")
        if self.data_sensitivity not in SENSITIVITY_LEVELS:
            raise ValueError(f"data sensitivity must be one of {', '.join(SENSITIVITY_LEVELS)}")

    @property
    def eps_micro(self) -> int:
        return to_micro(self.epsilon)

    @property
    def daily_queries(self) -> int:
        """Answers per day the device allows (it charges micro-epsilon integers)."""
        return to_micro(self.daily_cap) // self.eps_micro

    @property
    def lifetime_queries(self) -> int | None:
        return None if self.lifetime_cap is None else to_micro(self.lifetime_cap) // self.eps_micro

    @property
    def horizon_queries(self) -> int:
        """Answers over ``days`` days, limited by the lifetime cap when there is one."""
        n = self.daily_queries * self.days
        return n if self.lifetime_queries is None else min(n, self.lifetime_queries)


def granularity(mode: Mode) -> tuple[str, str]:
    """The audit checklist's output-granularity class, and what the mode releases."""
    classes: dict[int, tuple[str, str]] = {
        MODE_LABEL: ("label-only", "the noisy top-1 label only"),
        MODE_BUCKET: ("label-only + confidence bucket", "the noisy label and a high/medium/low confidence level"),
        MODE_TOPK: ("top-k", f"indices and noisy values of the {mode.arg} largest classes"),
        MODE_FULL: ("full vector", "all k noisy values"),
        MODE_ROUND: ("full vector (rounded)", f"all k noisy values rounded to {mode.arg} decimals"),
        MODE_SIMPLEX: ("full vector (probabilities)", "all k noisy values projected to sum to 1"),
    }
    return classes[mode.kind]


def _pick(rows: list[dict], **kw) -> list[dict]:
    return [r for r in rows if all((r.get(k) == v) or (isinstance(v, float) and isinstance(r.get(k), float)
                                                       and math.isclose(r[k], v)) for k, v in kw.items())]


def _fmt_eps(e: float) -> str:
    return "∞" if math.isinf(e) else f"{e:g}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def best_attack(rows: list[dict], mechanism: str, mode: str, epsilon: float) -> dict:
    """The strongest attack (highest TPR at 1% FPR, then AUC) in one cell."""
    sel = _pick(rows, mechanism=mechanism, mode=mode, epsilon=epsilon)
    return max(sel, key=lambda r: (r["tpr_at_1pct_fpr"], r["auc"]))


def meaning(cfg: AuditConfig, day: accounting.Composition, life: accounting.Composition | None,
            measured: dict, extract: dict | None) -> str:
    """The audit checklist's advice: say what epsilon covers for this configuration, in words and numbers."""
    e = cfg.epsilon
    s = (f"ε = {e:g} per answer means: whatever else an attacker knows — even every other training record — "
         f"one answer can raise their odds that a given record was in the training set by at most a factor "
         f"e^{e:g} ≈ {math.exp(e):.3g}; a membership test run at 1% false positives catches at most "
         f"{_pct(accounting.tpr_bound(e, 0.01))} of members (measured with the best attack here: "
         f"{_pct(measured['tpr_at_1pct_fpr'])}, AUC {measured['auc']:.3f}). ")
    day_tpr = accounting.tpr_bound(day.best, 0.01, cfg.delta)
    s += (f"The daily cap of {cfg.daily_cap:g} allows {cfg.daily_queries} answers a day, which together are "
          f"(ε = {day.best:.4g}, δ = {day.total_delta:g})-DP: " +
          (f"a test on a whole day of answers catches at most {_pct(day_tpr)} of members at 1% false positives. "
           if day_tpr < 0.995 else "over a whole day of answers that no longer limits a membership test at all. "))
    if life is not None:
        s += (f"Over {cfg.days} days ({life.queries} answers"
              f"{', the lifetime cap' if cfg.lifetime_cap is not None else ''}) the total is ε = {life.best:.4g} "
              f"(δ = {life.total_delta:g})" + (", which bounds nothing in practice" if life.best > 10 else "") + ". ")
    if cfg.lifetime_cap is None:
        s += "There is no lifetime cap: the guarantee weakens every day the device keeps answering. "
    s += ("This ε is about training records (with the single-model softmax and Δ = 2 it covers the whole "
          "training set at once); it does not stop the model from being copied")
    if extract:
        s += (f": a surrogate trained on {extract['queries']} answers at this setting agrees with the model on "
              f"{_pct(extract['agreement'])} of held-out inputs.")
    else:
        s += "."
    return s


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def split_sentence(td: dict) -> str:
    """How the report's models use the data: the held-out third, and the random half of the rest
    each model trains on (the other half are the non-members the membership attack needs)."""
    total = td["pool"] + td["test"]
    return (f"of its {total} records, {td['test']} are held out for testing and each model trains on a random "
            f"half of the other {td['pool']}: the rest are the non-members the membership attack needs")


def trained_model(path: str | Path, split: data.Split, allow_non_private: bool = False) -> dict:
    """A model written by ``edgedp train``: its manifest, checked against the file's hash (raises
    ``ModelFileError`` on a mismatch, and for a model that is not private unless allowed), and its
    accuracy on this report's test set when it fits."""
    model, man = models_io.load_checked(path)
    reason = models_io.private_or_refuse(path, man, allow_non_private)
    doc = {"path": str(path), "hash_matches_manifest": True, "manifest": man.as_dict(), "kind": model.kind,
           "non_private": reason}
    if model.n_features == split.X_test.shape[1] and man.data.get("name") == split.name:
        doc["test_accuracy_here"] = float(np.mean(model.predict(split.X_test) == split.y_test))
    return doc


@dataclass
class _Results:
    """Everything the pipeline computes for one report."""

    split: data.Split
    pop: populations.Population
    trade: list[dict]
    mia: mia.MiaResult
    averaging: list[dict]
    budgets: list[int]
    extraction: list[dict]
    compositions: dict[str, accounting.Composition | None]
    chance: float
    dp: private_training.DpsgdPopulation | None = None   # the DP-SGD deployment
    choice: list[dict] | None = None                      # which deployment wins per budget and volume
    model_doc: dict | None = None                         # a trained model's checked manifest


class _Stopwatch:
    """Wall time of each phase, and the total since creation."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - t

    def stop(self) -> dict[str, float]:
        self.seconds["total"] = time.perf_counter() - self.t0
        return self.seconds


def build(cfg: AuditConfig, settings: Settings, out: Path, jobs: int = 1, progress: bool = True,
          command: str = "", data_spec: str = "digits", dpsgd: bool = True,
          model_path: str | Path | None = None, allow_non_private: bool = False,
          describe_model: Callable[[np.ndarray, np.ndarray], dict] | None = None) -> dict:
    """Run the whole pipeline (digits or an X, y .npz) and write the report; returns the JSON document."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = _settings_for(cfg, settings)
    clock = _Stopwatch()
    res = _compute(cfg, settings, clock, jobs, progress, data_spec, dpsgd, model_path, allow_non_private,
                   describe_model)
    with clock.phase("plots"):
        figs = _plots(res, cfg.mode, out)
    doc = _document(cfg, settings, res, figs, command, clock)
    (out / "report.json").write_text(json.dumps(finite_json(doc), indent=1))
    (out / "report.md").write_text(render(doc))
    return doc


def _settings_for(cfg: AuditConfig, settings: Settings) -> Settings:
    """The settings with the audited mode and epsilon among those evaluated."""
    settings = settings.with_mode(cfg.mode)
    if not any(math.isclose(e, cfg.epsilon) for e in settings.epsilons):
        settings = replace(settings, epsilons=tuple(sorted((*settings.epsilons, cfg.epsilon))))
    return settings


def _compute(cfg: AuditConfig, settings: Settings, clock: _Stopwatch, jobs: int, progress: bool,
             data_spec: str = "digits", dpsgd: bool = True, model_path: str | Path | None = None,
             allow_non_private: bool = False,
             describe_model: Callable[[np.ndarray, np.ndarray], dict] | None = None) -> _Results:
    """Train the models, then measure the trade-off, the attacks and the accounting."""
    modes = parse_modes(list(settings.modes))
    eps_list = list(settings.epsilons)
    seed = settings.seed
    with clock.phase("train"):
        split = data.load_split(data_spec, seed)
        model_doc = (describe_model(split.X_test, split.y_test) if describe_model else
                     trained_model(model_path, split, allow_non_private) if model_path else None)
        pop = populations.build_population(split, settings.shadows + 1, seed, settings.model, ensemble=True,
                                      jobs=jobs, progress=progress)
        dp = private_training.build(split, pop.masks, eps_list, seed, progress) if dpsgd else None
    with clock.phase("tradeoff"):
        trade = tradeoff.run(pop.test_probs[0], split.y_test, modes, eps_list, settings.repeats, seed,
                             pop.ensemble_test_votes[0], pop.teachers, progress=progress)
        choice = None
        if dp is not None:
            trade += private_training.tradeoff_rows(dp, split.y_test, pop.test_probs[0].argmax(1), modes)
            choice = private_training.choice(dp, pop.test_probs[0], pop.ensemble_test_votes[0], pop.teachers,
                                             split.y_test,
                                             Mode.parse(cfg.mode), seed)
    with clock.phase("mia"):
        mres = mia.run(pop, split.y_pool, modes, eps_list, seed, jobs=jobs, progress=progress)
        if dp is not None:
            drows, drocs = private_training.mia_rows(dp, pop.masks, split.y_pool, modes, seed)
            mres.rows += drows
            mres.rocs.update(drocs)
        avg_x = pop.test_probs[0][: settings.averaging_inputs]
        avg_v = pop.ensemble_test_votes[0][: settings.averaging_inputs]
        averaging = (mia.averaging(avg_x, SOFTMAX, eps_list, cfg.daily_cap, seed, delta=cfg.delta)
                     + mia.averaging(avg_v, ensemble(pop.teachers), eps_list, cfg.daily_cap, seed, delta=cfg.delta))
    with clock.phase("extraction"):
        budgets = extraction.budgets_for(len(split.y_pool), settings.quick)
        ext = extraction.run(split, pop, modes, eps_list, budgets, seed, jobs=jobs, progress=progress)
    with clock.phase("accounting"):
        compositions = {
            "per_query": accounting.compose(cfg.epsilon, 1, cfg.delta),
            "daily": accounting.compose(cfg.epsilon, cfg.daily_queries, cfg.delta),
            "horizon": accounting.compose(cfg.epsilon, cfg.horizon_queries, cfg.delta),
            "lifetime": (accounting.compose(cfg.epsilon, cfg.lifetime_queries, cfg.delta)
                         if cfg.lifetime_queries is not None else None),
        }
    return _Results(split, pop, trade, mres, averaging, budgets, ext, compositions,
                    tradeoff.chance(split.y_test, split.classes), dp, choice, model_doc)


def _plots(res: _Results, cmode: str, out: Path) -> dict[str, Path]:
    return {
        "tradeoff": plots.tradeoff(res.trade, cmode, res.chance, out / "tradeoff.png"),
        "mia_auc": plots.auc(res.mia.rows, cmode, out / "mia_auc.png"),
        "mia_roc_softmax": plots.roc(res.mia.rocs, "softmax", "lira_online", cmode, out / "mia_roc_softmax.png"),
        "mia_roc_ensemble": plots.roc(res.mia.rocs, "ensemble", "lira_online", cmode, out / "mia_roc_ensemble.png"),
        **({"mia_roc_dpsgd": plots.roc(res.mia.rocs, "dpsgd", "lira_online", cmode, out / "mia_roc_dpsgd.png")}
           if res.dp is not None else {}),
        "extraction_softmax": plots.extraction(res.extraction, "softmax", cmode, out / "extraction_softmax.png"),
        "extraction_ensemble": plots.extraction(res.extraction, "ensemble", cmode, out / "extraction_ensemble.png"),
    }


def _document(cfg: AuditConfig, settings: Settings, res: _Results, figs: dict[str, Path], command: str,
              clock: _Stopwatch) -> dict:
    """The JSON document of the report (report.md is rendered from it)."""
    cmode = cfg.mode
    split, pop, comp = res.split, res.pop, res.compositions
    measured = best_attack(res.mia.rows, "softmax", cmode, cfg.epsilon)
    ext_cfg = max(_pick(res.extraction, mechanism="softmax", mode=cmode, epsilon=cfg.epsilon),
                  key=lambda r: r["queries"])
    gran, releases = granularity(Mode.parse(cmode))
    members = split.X_pool[pop.masks[0]]
    daily = comp["daily"]
    assert daily is not None  # only the lifetime composition is optional
    sentence = meaning(cfg, daily, comp["horizon"], measured, ext_cfg)
    timing = clock.stop()
    return {
        "config": {**asdict(cfg), "daily_queries": cfg.daily_queries, "lifetime_queries": cfg.lifetime_queries,
                   "horizon_queries": cfg.horizon_queries, "mechanism": "single-model softmax, range [0, 1], Δ = 2",
                   "admin_command": (f"edgedp admin config --epsilon {cfg.epsilon:g} --daily-cap {cfg.daily_cap:g}"
                                     + (f" --lifetime-cap {cfg.lifetime_cap:g}" if cfg.lifetime_cap else ""))},
        "meaning": sentence,
        "training_data": {
            "declared_sensitivity": cfg.data_sensitivity,
            "dataset": "scikit-learn digits" if split.name == "digits" else split.name,
            "records": int(len(members)), "duplicates": data.duplicate_count(members),
            "smallest_class": int(np.bincount(split.y_pool[pop.masks[0]], minlength=split.classes).min()),
            "classes": split.classes, "pool": int(len(split.y_pool)), "test": int(len(split.y_test)),
            "model": "MLPClassifier" + str(settings.model.hidden), "train_accuracy": pop.train_accuracy,
            "test_accuracy": pop.test_accuracy, "teachers": pop.teachers,
            "ensemble_test_accuracy": pop.ensemble_test_accuracy, "chance": res.chance},
        "output_granularity": {"mode": cmode, "class": gran, "releases": releases},
        "accounting": {name: c.as_dict() if c else None for name, c in comp.items()},
        "membership_inference": {"configured": measured, "rows": res.mia.rows},
        "averaging": res.averaging,
        "extraction": {"configured": ext_cfg, "budgets": res.budgets, "rows": res.extraction},
        "tradeoff": res.trade,
        "deployments": {"choice": res.choice, "dpsgd": None if res.dp is None else {
            "delta": res.dp.delta, "steps": res.dp.steps, "sampling_rate": res.dp.sampling_rate,
            "n_train": res.dp.n_train, "epsilons": res.dp.epsilons, "noise_multipliers": res.dp.noise_multipliers,
            "test_accuracy": res.dp.test_accuracy,
            "model": "logistic regression, DP-SGD (edgedp.train defaults), PLD accounting"}},
        "trained_model": res.model_doc,
        "logged_and_kept": {
            "device": ["UTC day index of the last spend", "daily spend and lifetime spend (micro-ε)",
                       "per-query ε, daily and lifetime caps, range, Δ, lattice exponent",
                       "admin counter", "record sequence number and CRC"],
            "not_kept": ["query inputs", "answers", "timestamps of queries", "requester identity"],
            "host": "nothing unless asked: this report (--out) only",
        },
        "plots": {k: p.name for k, p in figs.items()},
        "settings": settings.as_dict(),
        "timing_seconds": timing,
        "command": command,
    }


def render(doc: dict) -> str:
    """report.md from the JSON document (every number in it comes from the document)."""
    return "\n".join(line for section in SECTIONS for line in section(doc))


def _header(doc: dict) -> list[str]:
    cfg = doc["config"]
    return ["# edgedp pre-release privacy audit\n",
            f"Configuration: output mode **{cfg['mode']}**, per-query **ε = {cfg['epsilon']:g}**, daily cap "
            f"**{cfg['daily_cap']:g}** ({cfg['daily_queries']} answers/day), lifetime cap **"
            + (f"{cfg['lifetime_cap']:g}** ({cfg['lifetime_queries']} answers)" if cfg["lifetime_cap"] else "none**")
            + f", horizon {cfg['days']} days, δ = {cfg['delta']:g}; {cfg['mechanism']}. "
            f"Device command: `{cfg['admin_command']}`.\n",
            "## What this ε means\n",
            doc["meaning"] + "\n"]


def _checklist(doc: dict) -> list[str]:
    cfg, td, acc = doc["config"], doc["training_data"], doc["accounting"]
    m, e = doc["membership_inference"]["configured"], doc["extraction"]["configured"]
    day, hor, life = acc["daily"], acc["horizon"], acc["lifetime"]
    dup = td["duplicates"]
    return ["## Privacy audit checklist\n", _table(["item", "answer"], [
        ["Training-data sensitivity", f"declared **{td['declared_sensitivity']}**; {td['records']} training records "
         f"({td['dataset']}: {split_sentence(td)}), {dup} exact duplicate{'s' if dup != 1 else ''}, smallest class {td['smallest_class']} records"],
        ["Output granularity", f"**{doc['output_granularity']['class']}**: {doc['output_granularity']['releases']}"],
        ["Per-query ε", f"{cfg['epsilon']:g} (implementation: (ε + k·2^-{SLACK_BITS}, k·2^-{DELTA_BITS})-DP per answer, "
         "docs/privacy.md §2)"],
        ["Daily cap", f"{cfg['daily_cap']:g} = {day['queries']} answers → basic {day['basic']:.4g}, advanced "
         f"{day['advanced']:.4g}, PLD {day['pld']:.4g} (δ = {day['delta']:g})"],
        ["Lifetime cap", (f"{cfg['lifetime_cap']:g} = {life['queries']} answers → basic {life['basic']:.4g}, PLD "
                          f"{life['pld']:.4g}" if life else "**none** — over the horizon: "
                          f"{hor['queries']} answers → basic {hor['basic']:.4g}, PLD {hor['pld']:.4g}")],
        ["MIA (best attack, this mode and ε)", f"{m['attack']}: AUC {m['auc']:.3f}, TPR {_pct(m['tpr_at_1pct_fpr'])} "
         f"at 1% FPR, {_pct(m['tpr_at_0_1pct_fpr'])} at 0.1% FPR (ε-DP bound at 1% FPR: "
         f"{_pct(m['tpr_bound_at_1pct_fpr'])})"],
        ["Extraction", f"surrogate agreement {_pct(e['agreement'])} (accuracy {_pct(e['accuracy'])}) after "
         f"{e['queries']} answers"],
        ["Logged and kept", "device: " + "; ".join(doc["logged_and_kept"]["device"]) + ". Not kept: "
         + ", ".join(doc["logged_and_kept"]["not_kept"]) + ". Per-requester rate limits and request logs "
         "belong to the gateway in front of the device."],
    ]) + "\n"]


def _tradeoff(doc: dict) -> list[str]:
    td, cmode = doc["training_data"], doc["config"]["mode"]
    trows = []
    for r in sorted(_pick(doc["tradeoff"], mode=cmode), key=lambda r: (r["mechanism"] != "softmax", _epskey(r))):
        trows.append([r["mechanism"], _fmt_eps(r["epsilon"]), _pct(r["accuracy"]), _pct(r["agreement"])])
    return ["## Cost: accuracy against ε\n",
            f"Target: {td['model']} trained on {td['records']} records of {td['dataset']} ({split_sentence(td)}); "
            f"non-private test accuracy "
            f"{_pct(td['test_accuracy'])} (train {_pct(td['train_accuracy'])}); teacher ensemble of {td['teachers']} "
            f"logistic regressions on disjoint parts of the same records: {_pct(td['ensemble_test_accuracy'])}. "
            f"Chance (majority class) {_pct(td['chance'])}. Mode {cmode}: the label a client reads from it "
            f"(label, topk, bucket: the device's noisy argmax; full, round, simplex: the argmax of the clamped "
            f"values). All modes are in report.json.\n",
            _table(["mechanism", "ε", "accuracy", "agreement with non-private"], trows) + "\n",
            f"![accuracy against epsilon]({doc['plots']['tradeoff']})\n"]


def _membership(doc: dict) -> list[str]:
    mi, cmode = doc["membership_inference"], doc["config"]["mode"]
    mrows = []
    for r in sorted(_pick(mi["rows"], mode=cmode), key=lambda r: (r["mechanism"] != "softmax", _epskey(r), r["attack"])):
        mrows.append([r["mechanism"], _fmt_eps(r["epsilon"]), r["attack"], f"{r['auc']:.3f}",
                      _pct(r["tpr_at_1pct_fpr"]), _pct(r["tpr_at_0_1pct_fpr"]), f"{r['auc_bound']:.3f}"])
    return ["## Membership inference\n",
            f"One answer per record, leave-one-out over {mi['rows'][0]['targets']} models (each in turn the "
            f"target, the other {mi['rows'][0]['shadows']} its shadows), {mi['rows'][0]['members']} member and "
            f"{mi['rows'][0]['nonmembers']} non-member answers per cell. Mode {cmode}.\n",
            _table(["mechanism", "ε", "attack", "AUC", "TPR @1% FPR", "TPR @0.1% FPR", "ε-DP AUC bound"], mrows) + "\n",
            f"![MIA AUC]({doc['plots']['mia_auc']}) ![ROC softmax]({doc['plots']['mia_roc_softmax']}) "
            f"![ROC ensemble]({doc['plots']['mia_roc_ensemble']})"
            + (f" ![ROC DP-SGD]({doc['plots']['mia_roc_dpsgd']})" if "mia_roc_dpsgd" in doc["plots"] else "")
            + "\n"]


def _averaging(doc: dict) -> list[str]:
    arows = [[r["mechanism"], _fmt_eps(r["epsilon"]), str(r["queries"]), f"{r['mae_naive']:.3f}",
              f"{r['mae_debiased']:.3f}", _pct(r["agreement_debiased"]), f"{r['epsilon_pld']:.3g}"]
             for r in doc["averaging"]]
    return ["### Averaging: many answers about one input\n",
            f"Within one day's cap of {doc['config']['daily_cap']:g}, an attacker can ask about the same input "
            f"⌊cap/ε⌋ times and average (naive mean, and the mean corrected for the clamping). Error is the mean "
            f"absolute error per class as a fraction of the range; agreement is argmax agreement with the raw output.\n",
            _table(["mechanism", "ε", "answers", "error (mean)", "error (debiased)", "agreement", "day's ε (PLD)"],
                   arows) + "\n"]


def _extraction(doc: dict) -> list[str]:
    ex, cmode = doc["extraction"], doc["config"]["mode"]
    budgets = ex["budgets"]
    erows = []
    for mech in ("softmax", "ensemble"):
        for eps in sorted({r["epsilon"] for r in ex["rows"]}, key=lambda x: (math.isinf(x), x)):
            sel = {r["queries"]: r for r in _pick(ex["rows"], mechanism=mech, mode=cmode, epsilon=eps)}
            if sel:
                erows.append([mech, _fmt_eps(eps)] + [_pct(sel[q]["agreement"]) for q in budgets])
    return ["## Model extraction\n",
            f"A logistic-regression surrogate trained on the API's answers (mode {cmode}); agreement with the "
            f"victim's non-private prediction on held-out inputs.\n",
            _table(["mechanism", "ε"] + [f"{q} queries" for q in budgets], erows) + "\n",
            f"![extraction softmax]({doc['plots']['extraction_softmax']}) "
            f"![extraction ensemble]({doc['plots']['extraction_ensemble']})\n"]


def _accounting(doc: dict) -> list[str]:
    cfg, acc = doc["config"], doc["accounting"]
    arows = []
    for name, c in (("one answer", acc["per_query"]), ("one day", acc["daily"]),
                    (f"horizon ({cfg['days']} days)", acc["horizon"]), ("lifetime cap", acc["lifetime"])):
        if c:
            arows.append([name, str(c["queries"]), f"{c['basic']:.4g}", f"{c['advanced']:.4g}", f"{c['pld']:.4g}",
                          f"{c['total_delta']:.3g}", f"{c['advanced_composition_first_term']:.4g}"])
    return ["## Accounting\n",
            _table(["span", "answers", "basic", "advanced (DRV)", "PLD", "total δ", "published formula (invalid)"],
                   arows) + "\n",
            "Basic composition is what the device charges. Every total includes the per-answer terms of "
            f"docs/privacy.md (§2: ε + k·2^-{SLACK_BITS} per answer for the tables' rounding, k·2^-{DELTA_BITS} of δ "
            "for the tail cap; "
            "§6: 2^-40 of δ per answer for the timing) and holds at the total δ (the stated δ plus those); "
            "`edgedp account` shows each term. The published ε·√(2N ln(1/δ)) omits the Nε(e^ε−1) term and is "
            "not a bound.\n"]


def _method(doc: dict) -> list[str]:
    s = doc["settings"]
    return ["## Method\n",
            f"Seed {s['seed']}{' (quick settings)' if s['quick'] else ''}; {s['shadows']} shadow models; "
            f"ε ∈ {{{', '.join(_fmt_eps(x) for x in s['epsilons'])}}}; modes {', '.join(s['modes'])}; "
            f"noise from `edgedp.mech.fast` (the device's lattice, discrete Laplace and modes, NumPy's generator). "
            f"Wall time {doc['timing_seconds']['total']:.0f} s. Command: `{doc['command']}`. "
            "All rows for every mode are in report.json.\n"]


def _deployments(doc: dict) -> list[str]:
    """Which of the three deployments wins per lifetime budget and query volume, and the checked
    manifest of a trained model."""
    L: list[str] = []
    dep = doc.get("deployments") or {}
    cmode = doc["config"]["mode"]
    if dep.get("choice"):
        dd = dep["dpsgd"]
        L.append("## Three deployments: which one wins\n")
        L.append(f"For a per-record lifetime budget E and N answers: the single model and the ensemble answer with "
                 f"output noise at the largest per-answer ε whose N-fold composition stays within E (optimal "
                 f"composition of ε-DP answers, δ = {dd['delta']:g}); the DP-SGD model ({dd['model']}, "
                 f"{dd['n_train']} records, {dd['steps']} steps at q = {dd['sampling_rate']:g}) spends E once in "
                 f"training and answers for free. Accuracy on the test set, mode {cmode}; n/a: the device refuses "
                 f"so small a per-answer ε.\n")
        crows = [[f"{r['total_epsilon']:g}", str(r["queries"]), f"{r['per_query_epsilon']:.3g}",
                  "n/a" if r["softmax"] is None else _pct(r["softmax"]),
                  "n/a" if r.get("ensemble") is None else _pct(r["ensemble"]), _pct(r["dpsgd"]), r["winner"]]
                 for r in dep["choice"]]
        L.append(_table(["E", "answers N", "ε per answer", "single model", "ensemble", "DP-SGD", "winner"], crows)
                 + "\n")
    tm = doc.get("trained_model")
    if tm and "manifest" not in tm:
        L.append("## Your model\n")
        L.append(f"`{tm['path']}` ({tm['name']}, {tm['kind']}, weights sha256 {tm['sha256'][:16]}…): no privacy "
                 "manifest (not trained with DP here), so its answers are private only through the output noise. "
                 + (f"Its device outputs on this report's test set: accuracy {_pct(tm['test_accuracy_here'])}. "
                    if "test_accuracy_here" in tm else f"Not scored here: {tm['not_scored']}. ")
                 + "The attack figures above are measured on models trained here on the same data, since a "
                   "membership attack needs to know which records were members.\n")
    elif tm:
        mt = tm["manifest"]["training"]
        L.append("## Trained model and its privacy manifest\n")
        if tm.get("non_private"):
            L.append(f"**Not a private model** (reported with `--allow-non-private`): {tm['non_private']}. "
                     f"It has no (ε, δ).\n")
        claim = (f"(ε = {mt['epsilon']:.4g}, δ = {mt['delta']:g}) by {mt['accountant'].upper()}"
                 if isinstance(mt["epsilon"], (int, float)) else "not private")
        L.append(f"`{tm['path']}` ({tm['kind']}): SHA-256 matches its manifest. Trained with DP-SGD: "
                 f"{claim}, noise multiplier "
                 f"{mt['noise_multiplier']:.4g}, C = {mt['clip_norm']:g}, {mt['sampling']} sampling at q = "
                 f"{mt['sampling_rate']:g}, {mt['steps']} steps, {mt['n_train']} records"
                 + (f"; neighbouring relation: {mt['neighbouring']}, replace-one ε = "
                    f"{mt['epsilon_replace_one']:.4g}" if isinstance(mt.get("epsilon_replace_one"), (int, float))
                    else "")
                 + (f"; test accuracy here {_pct(tm['test_accuracy_here'])}" if "test_accuracy_here" in tm else "")
                 + (f"; deployment: {tm['manifest']['deployment']}" if tm["manifest"].get("deployment") else "")
                 + ".\n")
    return L


SECTIONS = (_header, _checklist, _tradeoff, _membership, _averaging, _extraction, _deployments, _accounting,
            _method)
"""The sections of report.md, in order: each turns the JSON document into lines."""


def _epskey(r: dict) -> tuple:
    return (math.isinf(r["epsilon"]), r["epsilon"])
