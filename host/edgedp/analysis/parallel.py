"""Seeds, progress bars and the worker pool shared by the long analysis steps."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
from joblib import Parallel, delayed
from tqdm import tqdm

T = TypeVar("T")


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def child_seed(seed: int, *path: int | str) -> np.random.SeedSequence:
    """A reproducible, independent seed for one piece of work, named by a path of ints/strings."""
    words = [seed] + [p if isinstance(p, int) else _word(p) for p in path]
    return np.random.SeedSequence(words)


def rng_for(seed: int, *path: int | str) -> np.random.Generator:
    return np.random.default_rng(child_seed(seed, *path))


def int_seed(seed: int, *path: int | str) -> int:
    """A 31-bit integer seed (scikit-learn's random_state) for one piece of work."""
    return int(child_seed(seed, *path).generate_state(1)[0] & 0x7FFFFFFF)


def _word(s: str) -> int:
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def pmap(fn: Callable[..., T], items: Sequence[Any], jobs: int = 1, desc: str = "",
         progress: bool = True, star: bool = False) -> list[T]:
    """[fn(item) for item in items] on ``jobs`` worker processes, in order, with a progress bar
    on stderr. Results do not depend on ``jobs`` (every item carries its own seed)."""
    bar = tqdm(total=len(items), desc=desc, disable=not progress, leave=False, unit="task")
    try:
        if jobs <= 1 or len(items) <= 1:
            out = []
            for it in items:
                out.append(fn(*it) if star else fn(it))
                bar.update()
            return out
        calls: Iterable = (delayed(fn)(*it) if star else delayed(fn)(it) for it in items)
        out = []
        for r in Parallel(n_jobs=jobs, return_as="generator")(calls):
            out.append(r)
            bar.update()
        return out
    finally:
        bar.close()
