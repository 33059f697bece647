"""Experiment sizes: the full settings and the small ``--quick`` ones (same pipeline)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from .protected_api import EPSILONS, MODES, QUICK_EPSILONS
from .populations import ModelSpec

QUICK_MODES: tuple[str, ...] = ("full", "label")


@dataclass(frozen=True)
class Settings:
    epsilons: tuple[float, ...] = EPSILONS
    modes: tuple[str, ...] = MODES
    shadows: int = 16
    repeats: int = 5          # noise repetitions over the test set (trade-off)
    averaging_inputs: int = 200
    model: ModelSpec = ModelSpec()
    quick: bool = False
    seed: int = 0

    @classmethod
    def make(cls, quick: bool = False, seed: int = 0, epsilons: tuple[float, ...] | None = None,
             modes: tuple[str, ...] | None = None, shadows: int | None = None,
             teachers: int | None = None) -> "Settings":
        s = cls(epsilons=QUICK_EPSILONS, modes=QUICK_MODES, shadows=6, repeats=2, averaging_inputs=100,
                quick=True, seed=seed) if quick else cls(seed=seed)
        if epsilons:
            s = replace(s, epsilons=tuple(epsilons))
        if modes:
            s = replace(s, modes=tuple(modes))
        if shadows is not None:
            if shadows < 2:
                raise ValueError("LiRA needs at least 2 shadow models")
            s = replace(s, shadows=shadows)
        if teachers is not None:
            if teachers < 1:
                raise ValueError("teachers must be >= 1")
            s = replace(s, model=replace(s.model, teachers=teachers))
        return s

    def with_mode(self, mode: str) -> "Settings":
        """Make sure ``mode`` is among the modes evaluated."""
        return self if mode in self.modes else replace(self, modes=(*self.modes, mode))

    def as_dict(self) -> dict:
        d = asdict(self)
        d["model"] = {**asdict(self.model), "kind": "MLPClassifier", "teacher_kind": "LogisticRegression"}
        return d


# Seconds per unit of work with --jobs 2, measured on the 2-core development machine under load
# (load average ~10) from `attack mia --quick` and `report --quick` stage times: a rough model
# for the estimate printed before a long run, not a benchmark.
COST = {"model": 2.5,          # one target/shadow model with its T = 30 teachers (scales with T + 1)
        "dpsgd_model": 0.9,    # one DP-SGD model at one finite ε
        "attack_cell": 0.025,  # membership inference: one model × mode × ε
        "tradeoff_cell": 0.7,  # trade-off: one repeat × mode × ε
        "extraction_cell": 1.6,  # extraction: one mode × ε over all budgets
        "fixed": 8.0}          # data, imports, accounting, plots


def estimate_seconds(s: Settings, command: str, jobs: int, dpsgd: bool = True) -> float:
    """Rough wall time of ``attack mia`` or ``report`` at settings ``s`` (see COST)."""
    models = s.shadows + 1
    finite = sum(1 for e in s.epsilons if e != float("inf"))
    grid = len(s.modes) * len(s.epsilons)
    t = COST["fixed"] + COST["model"] * models * (s.model.teachers + 1) / 31 * 2 / max(1, min(jobs, models))
    t += COST["attack_cell"] * models * grid + (COST["dpsgd_model"] * models * finite if dpsgd else 0.0)
    if command == "report":
        t += COST["tradeoff_cell"] * s.repeats * grid + COST["extraction_cell"] * grid
    return t
