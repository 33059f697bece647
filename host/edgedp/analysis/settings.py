"""Experiment sizes: the full settings and the small ``--quick`` ones (same pipeline)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from .mechanism import EPSILONS, MODES, QUICK_EPSILONS
from .models import ModelSpec

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
